"""An S3-compatible server (moto) on loopback for the snapshot tests.

Prints the port it listens on as its first line, then serves until its stdin closes: the test
process that started it holds the other end, so the server ends with it, however that ends.
"""

import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    print(server.get_host_and_port()[1], flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
