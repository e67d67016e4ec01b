"""Signed S3 calls for the snapshot tests (moto refuses anonymous reads of objects).

    s3_object.py get BUCKET KEY      prints the object
    s3_object.py delete BUCKET KEY   deletes it
    s3_object.py keys BUCKET PREFIX  prints every key under PREFIX, one per line

Endpoint and credentials come from the usual AWS environment variables.
"""

import os
import sys

import boto3


def main() -> None:
    action, bucket, name = sys.argv[1:4]
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    if action == "get":
        sys.stdout.write(s3.get_object(Bucket=bucket, Key=name)["Body"].read().decode())
    elif action == "delete":
        s3.delete_object(Bucket=bucket, Key=name)
    elif action == "keys":
        pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=name)
        for page in pages:
            for item in page.get("Contents", []):
                print(item["Key"])
    else:
        sys.exit(f"unknown action {action}")


if __name__ == "__main__":
    main()
