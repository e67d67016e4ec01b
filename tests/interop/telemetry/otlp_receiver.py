"""An in-process OTLP trace receiver for the telemetry tests: what a collector sees of loom's
traces, decoded with the OpenTelemetry project's own protobuf definitions (PyPI
`opentelemetry-proto`).

It serves both OTLP transports at once, each on a port of its own chosen by the OS:

  OTLP/HTTP  POST {endpoint_http}/v1/traces, body an `ExportTraceServiceRequest` in protobuf
             (`Content-Type: application/x-protobuf`, optionally `Content-Encoding: gzip`)
  OTLP/gRPC  `opentelemetry.proto.collector.trace.v1.TraceService/Export` at {endpoint_grpc}

Both endpoints are `http://127.0.0.1:PORT`, the form `OTEL_EXPORTER_OTLP_ENDPOINT` takes (an
`http` scheme is what tells a gRPC exporter to go without TLS).

    with OtlpReceiver() as receiver:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint_http}
        ...
        [server_span] = receiver.wait_for(lambda s: s["name"] == "tools/call echo")

Hostile modes, for "a collector that is slow or down never slows or fails a call":
  slow=SECONDS  every export is answered only after SECONDS (the spans are kept then, as from a
                collector that accepted them late; a client that gave up before does not see it)
  fail=True     every export is answered with HTTP 503 / gRPC UNAVAILABLE and its spans are
                dropped (the request is still counted and its headers recorded)
Both are plain attributes and may be changed while the receiver runs.

OTLP/JSON (`Content-Type: application/json`) is refused with 415: its ids are hex, not the
base64 protobuf's JSON mapping expects, and loom's exporters default to protobuf anyway.
"""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

Span = dict[str, Any]

# How long `wait_for` waits by default: generous, since a hang must fail, not stall, and the tests
# never assert on speed. Exporters that batch (loom's default) send within a few seconds.
DEFAULT_WAIT = 15.0


@dataclass
class Export:
    """One export request as it arrived, accepted or not."""

    transport: str  # "http" or "grpc"
    path: str  # the HTTP path, or the gRPC method
    headers: dict[str, str]  # HTTP headers / gRPC metadata, names lower-cased
    spans: int  # spans in the request (0 when it could not be decoded)
    status: int  # HTTP status answered; gRPC: 200 for OK, 503 for UNAVAILABLE
    received_at: float = field(default_factory=time.monotonic)


def any_value(value: common_pb2.AnyValue) -> Any:
    """An OTLP `AnyValue` as the Python value it carries (arrays as lists, key-value lists as
    dicts, an empty value as None)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    return getattr(value, kind)


def attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: any_value(pair.value) for pair in pairs}


def _enum_suffix(enum: Any, number: int, prefix: str) -> str:
    # SPAN_KIND_SERVER -> SERVER, STATUS_CODE_ERROR -> ERROR; an unknown number stays visible.
    try:
        return enum.Name(number).removeprefix(prefix)
    except ValueError:
        return str(number)


def decode_request(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    """The spans of one export request as plain dicts (see `OtlpReceiver.spans`)."""
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    {
                        "trace_id": span.trace_id.hex(),
                        "span_id": span.span_id.hex(),
                        "parent_span_id": span.parent_span_id.hex(),
                        "trace_state": span.trace_state,
                        "name": span.name,
                        "kind": _enum_suffix(trace_pb2.Span.SpanKind, span.kind, "SPAN_KIND_"),
                        "attributes": attributes(span.attributes),
                        "status_code": _enum_suffix(trace_pb2.Status.StatusCode, span.status.code, "STATUS_CODE_"),
                        "status_message": span.status.message,
                        "events": [
                            {"name": event.name, "time_unix_nano": event.time_unix_nano, "attributes": attributes(event.attributes)}
                            for event in span.events
                        ],
                        "links": [
                            {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex(), "attributes": attributes(link.attributes)}
                            for link in span.links
                        ],
                        "start_time_unix_nano": span.start_time_unix_nano,
                        "end_time_unix_nano": span.end_time_unix_nano,
                        "resource": resource,
                        "scope": scope_spans.scope.name,
                    }
                )
    return spans


class OtlpReceiver:
    """Receives OTLP traces over HTTP and gRPC; see the module's docstring."""

    def __init__(self, *, slow: float = 0.0, fail: bool = False) -> None:
        self.slow = slow
        self.fail = fail
        self._lock = threading.Lock()
        self._spans: list[Span] = []
        self._exports: list[Export] = []
        # Set by stop(): a slow handler still sleeping answers at once, so stop() never waits
        # out the sleep.
        self._stopping = threading.Event()
        self._http: http.server.ThreadingHTTPServer | None = None
        self._grpc: grpc.Server | None = None
        self.endpoint_http = ""
        self.endpoint_grpc = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> OtlpReceiver:
        self._stopping.clear()
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._http_handler())
        self._http.daemon_threads = True
        threading.Thread(target=self._http.serve_forever, name="otlp-http", daemon=True).start()
        self.endpoint_http = f"http://127.0.0.1:{self._http.server_address[1]}"

        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-grpc"))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(self), self._grpc)
        port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._grpc.start()
        self.endpoint_grpc = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        if self._grpc is not None:
            self._grpc.stop(grace=None).wait(5)
            self._grpc = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what arrived ------------------------------------------------------------------------

    def spans(self, trace_id: str | None = None) -> list[Span]:
        """Every span accepted so far, in arrival order (optionally only one trace's). Each is a
        dict: trace_id, span_id, parent_span_id (lower-case hex, "" for a root), trace_state,
        name, kind ("SERVER", "CLIENT", "INTERNAL", "PRODUCER", "CONSUMER", "UNSPECIFIED"),
        attributes (dict of Python values), status_code ("UNSET", "OK", "ERROR"),
        status_message, events [{name, time_unix_nano, attributes}], links, start/end
        time_unix_nano, resource (its attributes: service.name, …), scope (instrumentation
        scope name)."""
        with self._lock:
            return [dict(span) for span in self._spans if trace_id is None or span["trace_id"] == trace_id]

    @property
    def exports(self) -> list[Export]:
        """Every export request, accepted or refused, in arrival order."""
        with self._lock:
            return list(self._exports)

    @property
    def requests(self) -> int:
        """How many export requests arrived (both transports, accepted or refused)."""
        with self._lock:
            return len(self._exports)

    @property
    def headers(self) -> list[dict[str, str]]:
        """The headers of each export request (HTTP headers, or gRPC metadata), names lower-cased."""
        with self._lock:
            return [export.headers for export in self._exports]

    def clear(self) -> None:
        """Forgets every span and request so far."""
        with self._lock:
            self._spans.clear()
            self._exports.clear()

    def wait_for(self, predicate: Callable[[Span], bool], timeout: float = DEFAULT_WAIT, count: int = 1) -> list[Span]:
        """The spans matching `predicate`, once at least `count` of them have arrived; an
        AssertionError naming what did arrive when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            matching = [span for span in self.spans() if predicate(span)]
            if len(matching) >= count:
                return matching
            if time.monotonic() >= deadline:
                seen = [f"{span['kind']} {span['name']!r}" for span in self.spans()]
                raise AssertionError(
                    f"{len(matching)} of {count} expected spans within {timeout} s; "
                    f"{self.requests} export requests brought {len(seen)} spans: {seen[:40]}"
                )
            time.sleep(0.05)

    def wait_until(self, condition: Callable[[list[Span]], bool], timeout: float = DEFAULT_WAIT) -> list[Span]:
        """All spans, once `condition(all spans)` holds; an AssertionError after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if condition(spans):
                return spans
            if time.monotonic() >= deadline:
                raise AssertionError(f"condition not met within {timeout} s; spans: {[s['name'] for s in spans][:40]}")
            time.sleep(0.05)

    # -- shared by both transports -----------------------------------------------------------

    def _receive(
        self, transport: str, path: str, headers: dict[str, str], request: trace_service_pb2.ExportTraceServiceRequest | None, error: str = ""
    ) -> tuple[int, str]:
        """Handles one export (`request` None when its body could not be decoded, `error` saying
        why): waits out `slow`, keeps the spans unless `fail`. Returns (HTTP status, error text)."""
        spans = decode_request(request) if request is not None else []
        status = 400 if request is None else 503 if self.fail else 200
        if status == 503:
            error = "receiver in fail mode"
        with self._lock:
            self._exports.append(Export(transport, path, headers, len(spans), status))
        if self.slow > 0:
            self._stopping.wait(self.slow)
        if status == 200:
            with self._lock:
                self._spans.extend(spans)
        return status, error

    def _http_handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as exporters expect

            def do_POST(self) -> None:  # noqa: N802
                raw = self._body()
                headers = {name.lower(): value for name, value in self.headers.items()}
                if self.path.split("?")[0] != "/v1/traces":
                    self._answer(404, b"only /v1/traces is served", "text/plain")
                    return
                if headers.get("content-type", "").split(";")[0].strip() == "application/json":
                    self._answer(415, b"OTLP/JSON is not served; use application/x-protobuf", "text/plain")
                    return
                request, error = None, ""
                try:
                    body = gzip.decompress(raw) if headers.get("content-encoding", "").lower() == "gzip" else raw
                    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                except Exception as exc:  # a malformed body is the sender's bug: answer 400, keep serving
                    error = f"undecodable ExportTraceServiceRequest: {exc}"
                status, error = receiver._receive("http", self.path, headers, request, error)
                if status == 200:
                    self._answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")
                else:
                    self._answer(status, error.encode(), "text/plain")

            def _body(self) -> bytes:
                # http.server does not undo chunked framing; an exporter streaming its body uses it.
                if self.headers.get("transfer-encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("content-length") or 0))
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return b"".join(chunks)

            def _answer(self, status: int, body: bytes, content_type: str) -> None:
                try:
                    self.send_response(status)
                    self.send_header("content-type", content_type)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the exporter gave up (slow mode): nothing to answer

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    """The gRPC face: grpcio has already decoded the request with the same generated classes."""

    def __init__(self, receiver: OtlpReceiver) -> None:
        self.receiver = receiver

    def Export(self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext) -> trace_service_pb2.ExportTraceServiceResponse:  # noqa: N802
        headers = {key.lower(): value if isinstance(value, str) else value.decode(errors="replace") for key, value in context.invocation_metadata()}
        status, error = self.receiver._receive("grpc", "/opentelemetry.proto.collector.trace.v1.TraceService/Export", headers, request)
        if status == 503:
            context.abort(grpc.StatusCode.UNAVAILABLE, error)
        return trace_service_pb2.ExportTraceServiceResponse()
