#!/usr/bin/env python3
"""A Streamable HTTP MCP server with exact control over its bytes and its failures.

The remote-server tests (tests/integration/remote.rs) need what a well-behaved SDK server will not do on
purpose: answer with byte strings chosen in advance (odd key order, `2.50`, unknown fields),
stop an SSE stream in the middle of an event, require a token, answer HTML, forget its
sessions. Standard library only, so it runs wherever python3 does.

    python3 http_fixture.py [--token T] [--html] [--forget-sessions-after N] [--port P]

Prints `listening on PORT` on stdout once it accepts connections. Every request is logged to
stderr as one line: `METHOD path session=… mcp-method=… headers=…`.
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Results whose bytes the tests compare: odd key order, a number written `2.50`, a field no
# SDK models. `exact` is answered as a JSON body, `exact_sse` inside an SSE stream after a
# progress notification.
EXACT_RESULT = (
    '{"structuredContent": {"z": 1, "a": 2.50},  "content":[{"type":"text","text":"exact \\u00e9"}],'
    '"isError":false,"vendorField":{"keep":[1,2.0,"x"]}}'
)

TOOLS = [
    {"name": "exact", "description": "A result with exact bytes, as JSON.", "inputSchema": {"type": "object"}},
    {"name": "exact_sse", "description": "A result with exact bytes, over SSE with progress.", "inputSchema": {"type": "object"}},
    {"name": "rows", "description": "A large table: n rows.", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    {"name": "cut", "description": "An SSE stream that stops in the middle of an event.", "inputSchema": {"type": "object"}},
    {"name": "slow", "description": "Answers after `ms` milliseconds (SSE).", "inputSchema": {"type": "object", "properties": {"ms": {"type": "integer"}}}},
    {"name": "fail", "description": "Answers HTTP 500.", "inputSchema": {"type": "object"}},
    {"name": "pretty", "description": "A pretty-printed JSON body.", "inputSchema": {"type": "object"}},
]

# Pretty-printed, as some HTTP servers write their bodies: line breaks between tokens.
PRETTY_RESULT = '{\n  "content": [\n    {"type": "text", "text": "line\\nbreak"}\n  ],\r\n  "isError": false\n}'



class State:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sessions: set[str] = set()
        self.calls = 0
        self.cancelled: list[str] = []
        self.lock = threading.Lock()


def rows_result(n: int) -> str:
    rows = [
        {"id": i, "region": ["north", "south", "east", "west"][i % 4], "amount": round(i * 1.25, 2), "note": f"row {i}"}
        for i in range(n)
    ]
    text = json.dumps(rows)
    return json.dumps({"content": [{"type": "text", "text": text}], "isError": False})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # peer's delayed ACK add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass

    def log_line(self, mcp_method: str) -> None:
        headers = ",".join(f"{k}" for k in self.headers.keys())
        print(
            f"{self.command} {self.path} session={self.headers.get('Mcp-Session-Id')} "
            f"mcp-method={mcp_method} auth={self.headers.get('Authorization')} "
            f"protocol={self.headers.get('MCP-Protocol-Version')} headers={headers}",
            file=sys.stderr,
            flush=True,
        )

    def send_body(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def send_json(self, text: str, extra: dict[str, str] | None = None) -> None:
        self.send_body(200, text.encode(), "application/json", extra)

    def start_sse(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        # No Content-Length: the stream ends when the connection closes.
        self.send_header("Connection", "close")
        self.end_headers()

    def sse_event(self, data: str) -> None:
        self.wfile.write(f"event: message\ndata: {data}\n\n".encode())
        self.wfile.flush()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.log_line("-")
        # No standing stream: the spec's answer for a server that offers none.
        self.send_body(405, b"", "text/plain", {"Allow": "POST, DELETE"})

    def do_DELETE(self) -> None:  # noqa: N802
        self.log_line("-")
        session = self.headers.get("Mcp-Session-Id")
        with self.state.lock:
            self.state.sessions.discard(session or "")
        self.send_body(200, b"", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        try:
            message = json.loads(body)
        except ValueError:
            self.log_line("?")
            self.send_body(400, b"not JSON", "text/plain")
            return
        method = message.get("method", "-")
        self.log_line(method)
        args = self.state.args
        if args.html:
            self.send_body(200, b"<!doctype html><html><body><h1>Welcome</h1></body></html>", "text/html; charset=utf-8")
            return
        if args.token and self.headers.get("Authorization") != f"Bearer {args.token}":
            self.send_body(401, b'{"error":"invalid_token"}', "application/json",
                           {"WWW-Authenticate": 'Bearer error="invalid_token"'})
            return
        request_id = message.get("id")
        if method == "initialize":
            session = uuid.uuid4().hex
            with self.state.lock:
                self.state.sessions.add(session)
            result = {
                "protocolVersion": message["params"].get("protocolVersion", "2025-11-25"),
                "capabilities": {"tools": {"listChanged": False}},
                "serverInfo": {"name": "http-fixture", "version": "1.0"},
            }
            self.send_json(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}),
                           {"Mcp-Session-Id": session})
            return
        session = self.headers.get("Mcp-Session-Id")
        with self.state.lock:
            known = session in self.state.sessions
        if not known:
            self.send_body(404, b"unknown session", "text/plain")
            return
        if request_id is None:
            if method == "notifications/cancelled":
                with self.state.lock:
                    self.state.cancelled.append(json.dumps(message.get("params")))
                print(f"cancelled {json.dumps(message.get('params'))}", file=sys.stderr, flush=True)
            self.send_body(202, b"", "text/plain")
            return
        if method == "tools/list":
            self.send_json(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"tools": TOOLS}}))
            return
        if method == "ping":
            self.send_json(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}}))
            return
        if method != "tools/call":
            self.send_json(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                       "error": {"code": -32601, "message": f"no method {method}"}}))
            return
        with self.state.lock:
            self.state.calls += 1
            calls = self.state.calls
            if args.forget_sessions_after and calls > args.forget_sessions_after and calls % 2 == 0:
                # Every other call after the first N finds its session gone, as after a
                # server restart.
                self.state.sessions.clear()
                forget = True
            else:
                forget = False
        if forget:
            self.send_body(404, b"session expired", "text/plain")
            return
        name = message["params"]["name"]
        arguments = message["params"].get("arguments") or {}
        head = f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"result":'
        if name == "exact":
            self.send_json(head + EXACT_RESULT + "}")
        elif name == "rows":
            self.send_json(head + rows_result(int(arguments.get("n", 1000))) + "}")
        elif name == "exact_sse":
            self.start_sse()
            token = (message["params"].get("_meta") or {}).get("progressToken")
            if token is not None:
                self.sse_event(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                                           "params": {"progressToken": token, "progress": 1, "total": 2}}))
            self.sse_event(head + EXACT_RESULT + "}")
            self.close_connection = True
        elif name == "cut":
            self.start_sse()
            self.wfile.write(('event: message\ndata: ' + head + '{"content":[{"type":"text","te').encode())
            self.wfile.flush()
            self.close_connection = True
        elif name == "slow":
            import time

            self.start_sse()
            time.sleep(int(arguments.get("ms", 1000)) / 1000)
            self.sse_event(head + '{"content":[{"type":"text","text":"slow done"}]}}')
            self.close_connection = True
        elif name == "pretty":
            self.send_json('{\n "jsonrpc": "2.0",\n "id": ' + json.dumps(request_id) + ',\n "result": ' + PRETTY_RESULT + "\n}")
        elif name == "fail":
            self.send_body(500, b"internal error", "text/plain")
        else:
            self.send_json(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                       "error": {"code": -32602, "message": f"no tool {name}"}}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--token")
    parser.add_argument("--html", action="store_true")
    parser.add_argument("--forget-sessions-after", type=int, default=0)
    args = parser.parse_args()
    Handler.state = State(args)
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
