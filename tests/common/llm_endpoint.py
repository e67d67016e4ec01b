#!/usr/bin/env python3
"""An OpenAI-compatible chat completions endpoint that can be told, per request, how to fail.

The model summary stage sends over-budget tool output to a model and puts the model's answer
in its place. Its tests need a model that answers the same way every time, and one that fails
in each way a real provider or the network between can: error statuses, a hang, JSON cut off,
an HTML error page, a body too large to accept, a reset connection, an empty or missing
answer, an answer over budget, an answer cut off at the token limit, no choices at all.
Standard library only, so it runs wherever python3 does.

    python3 llm_endpoint.py [--port P] [--record PATH] [--key KEY]

Serves `POST /v1/chat/completions` (and `POST /chat/completions`, for base URLs given without
`/v1`). The request body's `model` picks the behaviour, so one endpoint serves every test:

    summary       200, a deterministic summary of the last user message (also any unknown model)
    status-503    503 with an OpenAI-style JSON error body
    status-400    400 with an OpenAI-style JSON error body
    slow          waits 30 s, then answers like `summary`
    malformed     200 application/json, JSON cut off in the middle
    html          200 text/html, an error page
    huge          200, a 50 MiB chat.completion streamed in chunks, with Content-Length
    huge-chunked  the same without Content-Length (Transfer-Encoding: chunked)
    echo-key      200, a summary that repeats the request's Authorization header
    echo-key-error 400 whose error message repeats it, straddling character 200
    reset         reads the request, then resets the TCP connection without answering
    empty         200, content ""
    null-content  200, content null
    long          200, content of 100,000 characters
    cutoff        200, like `summary` but finish_reason "length"
    no-choices    200, {"object":"chat.completion","choices":[]}
    reasoning     as OpenAI's reasoning models: 400 to `max_tokens` (OpenAI's own error body);
                  `max_completion_tokens` counts 3,000 tokens of reasoning before the summary,
                  and a limit too small for both answers content "" with finish_reason "length"
    legacy-limit  as servers that predate `max_completion_tokens`: 400 to it (Azure's error
                  text), a summary otherwise
    small-output  as OpenAI's older models, which write at most 4,096 tokens: 400 to a larger
                  `max_tokens` or `max_completion_tokens` (OpenAI's "too large" error)
    refuses-both  400 to either member, named as OpenAI names an unsupported parameter

`--port 0` (the default) picks a free port on 127.0.0.1. `--record PATH` appends one JSON line
per request to PATH — {"method", "path", "authorization", "contentType", "body"}, the body
parsed as JSON or else kept as text — flushed at once so a test can read it while the server
runs. `--key KEY` answers 401 to any request whose Authorization is not exactly `Bearer KEY`.
Other paths get 404, other methods 405.

Prints `listening on PORT` on stdout once it accepts connections. Each request is logged to
stderr as one line, `METHOD path model=…`; the Authorization header is never printed.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMPLETION_PATHS = {"/v1/chat/completions", "/chat/completions"}

SLOW_SECONDS = 30
# How many `slow` requests are waiting for their answer now (a list: mutable from the handlers).
SLOW_IN_FLIGHT = [0]
SLOW_LOCK = threading.Lock()
HUGE_CONTENT_BYTES = 50 * 1024 * 1024
HUGE_CHUNK_BYTES = 64 * 1024
LONG_CONTENT_CHARS = 100_000
# Summary lines are cut to this many characters, so a summary stays short whatever the input.
LINE_LIMIT = 120
MAX_ERROR_LINES = 3

# What a client sees when the peer went away mid-answer. Expected in the `slow`, `huge` and
# `reset` modes, and whenever a test gives up on a request; never worth a traceback.
DISCONNECTED = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)

HTML_ERROR_PAGE = (
    b"<!doctype html>\n<html><head><title>502 Bad Gateway</title></head>\n"
    b"<body><h1>502 Bad Gateway</h1><p>The upstream model server did not answer.</p></body></html>\n"
)

# A chat.completion cut off inside its first choice: the status and headers promise JSON, the
# bytes are not.
MALFORMED_BODY = b'{"choices": [ {"message": '

# What the `reasoning` model spends thinking before it writes its summary.
REASONING_TOKENS = 3000
# The most the `small-output` model writes.
SMALL_OUTPUT_TOKENS = 4096
TOKEN_LIMITS = ("max_tokens", "max_completion_tokens")


def openai_error(message: str, error_type: str, code: str | None = None, param: str | None = None) -> bytes:
    """An error body in the shape OpenAI uses, which clients parse for `error.message`."""
    error: dict[str, Any] = {"message": message, "type": error_type, "param": param}
    if code is not None:
        error["code"] = code
    return json.dumps({"error": error}).encode()


def content_text(content: Any) -> str:
    """A message's content as text. The summary stage sends a string; the list-of-parts form
    (`[{"type":"text","text":…}]`) is read too, so a change of form shows up as a wrong
    summary rather than a crash in the fixture."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content
                       if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def clip(line: str) -> str:
    return line[:LINE_LIMIT]


def summarize(text: str) -> str:
    """The fixture's deterministic stand-in for a model's summary: enough facts about the input
    (size, ends, error lines) for a test to check that the right text reached the model."""
    lines = text.splitlines()
    first_line = clip(lines[0]) if lines else ""
    non_empty = [line for line in lines if line.strip()]
    last_line = clip(non_empty[-1]) if non_empty else ""
    error_lines = [clip(line) for line in lines if "ERROR" in line][:MAX_ERROR_LINES]
    errors = " | ".join(error_lines) if error_lines else "none"
    return (
        f"Summary (fixture): {len(lines)} lines, {len(text)} chars. "
        f"First line: {first_line}. Last line: {last_line}. Errors: {errors}."
    )


def last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return content_text(message.get("content"))
    return ""


def prompt_tokens(messages: list[Any]) -> int:
    # A rough four characters per token, as providers' own estimates go; only needs to be
    # stable so tests can predict it.
    return sum(len(content_text(m.get("content"))) for m in messages if isinstance(m, dict)) // 4


def chat_completion(model: str, content: str | None, messages: list[Any], finish_reason: str = "stop") -> dict[str, Any]:
    completion_tokens = len(content or "") // 4
    prompt = prompt_tokens(messages)
    return {
        "id": "chatcmpl-fixture-1",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
        },
    }


class Recorder:
    """Appends one JSON line per request to a file, flushed at once: tests read the file while
    the server is still running."""

    def __init__(self, path: str | None) -> None:
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.lock = threading.Lock()

    def record(self, entry: dict[str, Any]) -> None:
        if self.file is None:
            return
        line = json.dumps(entry, ensure_ascii=False)
        with self.lock:
            self.file.write(line + "\n")
            self.file.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hung up (a timed-out test, a refused huge body) is part of the tests,
        # not a fault in the fixture: stay quiet. Anything else keeps the default traceback.
        if isinstance(sys.exc_info()[1], DISCONNECTED):
            return
        super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    recorder: Recorder
    api_key: str | None

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without this, Nagle's algorithm and the
        # peer's delayed ACK add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        # http.server's own access log would repeat every request; log_request_line says what
        # the tests need.
        pass

    def log_request_line(self, model: str) -> None:
        print(f"{self.command} {self.path} model={model}", file=sys.stderr, flush=True)

    # --- reading ---------------------------------------------------------------------------

    def read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self.read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def read_chunked_body(self) -> bytes:
        body = bytearray()
        while True:
            size_line = self.rfile.readline()
            size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                # Trailers, if any, end with an empty line.
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline()  # the CRLF after each chunk

    def record(self, raw_body: bytes, parsed: Any, in_flight: int = 0) -> None:
        self.recorder.record({
            "method": self.command,
            "path": self.path,
            "authorization": self.headers.get("Authorization"),
            "contentType": self.headers.get("Content-Type"),
            "body": parsed if parsed is not None else raw_body.decode("utf-8", errors="replace"),
            # `slow` requests whose client was still waiting when this one arrived, this one
            # included: what a bound on requests in flight is tested against.
            "inFlight": in_flight,
        })

    # --- writing ---------------------------------------------------------------------------

    def send_body(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def send_json(self, status: int, value: Any) -> None:
        self.send_body(status, json.dumps(value).encode(), "application/json")

    def send_huge(self, model: str, messages: list[Any], chunked: bool = False) -> None:
        """A valid chat.completion whose content is 50 MiB of `x`, written in chunks so the
        fixture never holds it in memory: tests check that loom stops reading at its limit —
        announced by Content-Length, or (`chunked`) only found out while reading."""
        marker = "@@CONTENT@@"
        template = json.dumps(chat_completion(model, marker, messages))
        prefix, suffix = (part.encode() for part in template.split(marker, 1))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(prefix) + HUGE_CONTENT_BYTES + len(suffix)))
        self.end_headers()

        def write(data: bytes) -> None:
            if chunked:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            else:
                self.wfile.write(data)

        write(prefix)
        chunk = b"x" * HUGE_CHUNK_BYTES
        remaining = HUGE_CONTENT_BYTES
        while remaining > 0:
            piece = chunk if remaining >= len(chunk) else chunk[:remaining]
            write(piece)
            remaining -= len(piece)
        write(suffix)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    def reset_connection(self) -> None:
        """Close with a TCP RST instead of a FIN: SO_LINGER on with a zero timeout makes the
        kernel drop the connection at close, so the client sees `connection reset`, with no
        status line at all."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The socket's file descriptor stays open while rfile (a makefile of it) does; close
        # both now so the reset goes out at once rather than when the handler unwinds.
        self.rfile.close()
        self.connection.close()
        self.close_connection = True

    # --- dispatch --------------------------------------------------------------------------

    def route_path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def not_post(self) -> None:
        self.record(self.read_body(), None)
        self.log_request_line("-")
        if self.route_path() not in COMPLETION_PATHS:
            self.send_body(404, openai_error(f"no route {self.path}", "invalid_request_error"), "application/json")
        else:
            self.send_body(405, openai_error(f"method {self.command} not allowed", "invalid_request_error"),
                           "application/json")

    do_GET = do_HEAD = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = not_post  # noqa: N815 - http.server's naming

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        raw_body = self.read_body()
        try:
            parsed: Any = json.loads(raw_body)
        except ValueError:
            parsed = None
        request = parsed if isinstance(parsed, dict) else {}
        model_field = request.get("model")
        in_flight = 0
        if model_field == "slow":
            with SLOW_LOCK:
                SLOW_IN_FLIGHT[0] += 1
                in_flight = SLOW_IN_FLIGHT[0]
        try:
            self.record(raw_body, parsed, in_flight)
            self.route(parsed, request, model_field)
        finally:
            if model_field == "slow":
                with SLOW_LOCK:
                    SLOW_IN_FLIGHT[0] -= 1

    def route(self, parsed: Any, request: dict[str, Any], model_field: Any) -> None:
        self.log_request_line(model_field if isinstance(model_field, str) else "-")
        # A request without a model is answered like `summary`, named so in the answer.
        model = model_field if isinstance(model_field, str) else "summary"

        if self.route_path() not in COMPLETION_PATHS:
            self.send_body(404, openai_error(f"no route {self.path}", "invalid_request_error"), "application/json")
            return
        if self.api_key is not None and self.headers.get("Authorization") != f"Bearer {self.api_key}":
            self.send_body(401, openai_error("invalid api key", "invalid_request_error"), "application/json")
            return
        if not isinstance(parsed, dict):
            self.send_body(400, openai_error("request body is not a JSON object", "invalid_request_error"),
                           "application/json")
            return
        messages = request.get("messages") if isinstance(request.get("messages"), list) else []
        try:
            self.answer(model, messages, request)
        except DISCONNECTED:
            # The client gave up (a test's timeout, or loom refusing a body over its limit).
            self.close_connection = True

    def wait_unless_gone(self, seconds: float) -> bool:
        """Sleep `seconds`, or less if the client closes the connection first (then False): a
        request the client gave up on no longer counts as in flight."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    if self.connection.recv(1, socket.MSG_PEEK) == b"":
                        self.close_connection = True
                        return False
                except OSError:
                    self.close_connection = True
                    return False
        return True

    def answer(self, model: str, messages: list[Any], request: dict[str, Any]) -> None:
        if model == "status-503":
            self.send_body(503, openai_error("the model is overloaded, try again later", "server_error", "overloaded"),
                           "application/json")
        elif model == "status-400":
            self.send_body(400, openai_error("this model's maximum context length is exceeded",
                                             "invalid_request_error", "context_length_exceeded"), "application/json")
        elif model == "malformed":
            self.send_body(200, MALFORMED_BODY, "application/json")
        elif model == "html":
            self.send_body(200, HTML_ERROR_PAGE, "text/html; charset=utf-8")
        elif model == "huge":
            self.send_huge(model, messages)
        elif model == "huge-chunked":
            self.send_huge(model, messages, chunked=True)
        elif model == "echo-key":
            heard = self.headers.get("Authorization") or ""
            self.send_json(200, chat_completion(model, f"Summary. Request headers: Authorization: {heard}", messages))
        elif model == "echo-key-error":
            # The key starts at character 190 of the message, so a cut at 200 would split it.
            heard = self.headers.get("Authorization") or ""
            message = "e" * (190 - len("Bearer ")) + heard + " was not accepted"
            self.send_body(400, openai_error(message, "invalid_request_error"), "application/json")
        elif model == "reset":
            self.reset_connection()
        elif model == "empty":
            self.send_json(200, chat_completion(model, "", messages))
        elif model == "null-content":
            self.send_json(200, chat_completion(model, None, messages))
        elif model == "long":
            self.send_json(200, chat_completion(model, "y" * LONG_CONTENT_CHARS, messages))
        elif model == "cutoff":
            self.send_json(200, chat_completion(model, summarize(last_user_text(messages)), messages, "length"))
        elif model == "no-choices":
            self.send_json(200, {"object": "chat.completion", "choices": []})
        elif model == "reasoning":
            self.answer_reasoning(model, messages, request)
        elif model == "small-output" and any(
                isinstance(request.get(m), int) and request[m] > SMALL_OUTPUT_TOKENS for m in TOKEN_LIMITS):
            asked = max(request.get(m) or 0 for m in TOKEN_LIMITS)
            self.send_body(400, openai_error(
                f"max_tokens is too large: {asked}. This model supports at most {SMALL_OUTPUT_TOKENS} "
                f"completion tokens, whereas you provided {asked}.", "invalid_request_error", None, "max_tokens"),
                "application/json")
        elif model == "refuses-both" and any(m in request for m in TOKEN_LIMITS):
            member = next(m for m in TOKEN_LIMITS if m in request)
            self.send_body(400, openai_error(
                f"Unsupported parameter: '{member}' is not supported with this model.",
                "invalid_request_error", "unsupported_parameter", member), "application/json")
        elif model == "legacy-limit" and "max_completion_tokens" in request:
            self.send_body(400, openai_error("Unrecognized request argument supplied: max_completion_tokens",
                                             "invalid_request_error"), "application/json")
        else:
            if model == "slow" and not self.wait_unless_gone(SLOW_SECONDS):
                return
            # `summary`, and any model this fixture does not know, as a real provider would
            # answer a model name it serves.
            self.send_json(200, chat_completion(model, summarize(last_user_text(messages)), messages))

    def answer_reasoning(self, model: str, messages: list[Any], request: dict[str, Any]) -> None:
        if "max_tokens" in request:
            self.send_body(400, openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "invalid_request_error", "unsupported_parameter", "max_tokens"), "application/json")
            return
        content = summarize(last_user_text(messages))
        limit = request.get("max_completion_tokens")
        if isinstance(limit, int) and limit < REASONING_TOKENS + len(content) // 4:
            # The whole limit went to reasoning: nothing written, as such a model answers.
            answer = chat_completion(model, "", messages, "length")
            spent = min(limit, REASONING_TOKENS)
        else:
            answer = chat_completion(model, content, messages)
            spent = REASONING_TOKENS
        usage = answer["usage"]
        usage["completion_tokens"] += spent
        usage["total_tokens"] += spent
        usage["completion_tokens_details"] = {"reasoning_tokens": spent}
        self.send_json(200, answer)


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible chat completions fixture")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("--record", metavar="PATH", help="append one JSON line per request to PATH")
    parser.add_argument("--key", metavar="KEY", help="require `Authorization: Bearer KEY`")
    args = parser.parse_args()
    Handler.recorder = Recorder(args.record)
    Handler.api_key = args.key
    server = Server(("127.0.0.1", args.port), Handler)
    print(f"listening on {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
