"""What the OAuth tests (test_oauth.py) and the rig's own check (selfcheck.py) share: starting a
rig server and reading its `…_URL=` line, a loopback redirect URI that records what arrives, and
an in-memory token storage for the official SDK's OAuth client."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

# How long a rig server may take to print its URL line.
READY_WITHIN = 30.0


@contextmanager
def started(argv: list[str], prefix: str, log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Runs argv (stderr to `log`) until the block ends; the value of the `PREFIX=` line it
    prints on stdout once it listens."""
    with log.open("wb") as errors:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors, env={**os.environ, **(env or {})})
        line: list[bytes] = []
        assert process.stdout is not None
        reader = threading.Thread(target=lambda: line.append(process.stdout.readline()), daemon=True)
        reader.start()
        reader.join(READY_WITHIN)
        try:
            text = line[0].decode().strip() if line else ""
            if not text.startswith(prefix):
                raise RuntimeError(f"{argv[1]} did not start (printed {text!r}): {log.read_text()[-2000:]}")
            yield text[len(prefix) :]
        finally:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()


class Callback:
    """A loopback redirect URI, http://127.0.0.1:PORT/callback: records each request's query."""

    def __init__(self) -> None:
        received: list[dict[str, str]] = []
        self.received = received

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                received.append(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query)))
                body = b"done, you can close this window"
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.uri = f"http://127.0.0.1:{self.port}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class MemoryStorage:
    """Token storage for the SDK's OAuthClientProvider; keeps every token set, in order."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None
        self.history: list[OAuthToken] = []

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.history.append(tokens)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info
