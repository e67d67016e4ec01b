"""An S3-compatible server (moto) on loopback for the snapshot tests.

Prints the port it listens on as its first line, then serves until its stdin closes: the test
process that started it holds the other end, so the server ends with it, however that ends.

With `--locked`, requests are authenticated (moto's IAM): the server makes a bucket `locked` and
a user without any permission, and prints `PORT ACCESS_KEY SECRET_KEY` for that user instead.
"""

import os
import sys


def main() -> None:
    locked = "--locked" in sys.argv
    if locked:
        # The first three requests (bucket, user, key) are let through; every later one is
        # checked against IAM. Must be set before moto reads its settings.
        os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server.get_host_and_port()[1]
    if locked:
        import boto3

        setup = dict(
            endpoint_url=f"http://127.0.0.1:{port}",
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
            region_name="us-east-1",
        )
        boto3.client("s3", **setup).create_bucket(Bucket="locked")
        iam = boto3.client("iam", **setup)
        iam.create_user(UserName="nobody")
        key = iam.create_access_key(UserName="nobody")["AccessKey"]
        print(port, key["AccessKeyId"], key["SecretAccessKey"], flush=True)
    else:
        print(port, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
