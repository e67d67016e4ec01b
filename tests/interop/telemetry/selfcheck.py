"""Proves the telemetry rig works without loom:

  a. the OpenTelemetry Python SDK's own OTLP exporters (HTTP/protobuf, gzip too, and gRPC) send
     spans to otlp_receiver.py, which decodes them right (ids and parents, kinds, attribute
     types, status, events, resource, headers from OTEL_EXPORTER_OTLP_HEADERS); bad requests
     are refused;
  b. the official Python client (SDK 2.x) calls traced_server.py over stdio in both eras and
     over Streamable HTTP: the server's span continues the trace put in `_meta.traceparent`
     (trace id and parent span id as sent), carries the conventions' attributes and error.type,
     and a malformed traceparent starts a new trace; then with the client's own tracer
     provider, one trace runs from the client's span to the server's;
  c. Debian's Prometheus scrapes a small prometheus-client server: `up == 1`, a counter's value
     equal to what was served (and followed when it grows), a bearer token sent, a refused
     scrape seen as `up == 0`; fetch_metrics parses the page as text and as OpenMetrics;
  d. the receiver's slow and fail modes: exports fail or time out as a real collector's would,
     spans are dropped or kept late, and stop() does not wait out a slow answer.

    .ci/venv/bin/python tests/interop/telemetry/selfcheck.py      (after .ci/setup-interop)

Prints each check; exits 1 on the first failure.
"""

from __future__ import annotations

import http.server
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import choose_encoder

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from otlp_receiver import OtlpReceiver  # noqa: E402
import traced_server  # noqa: E402
from prometheus import Prometheus, fetch_metrics  # noqa: E402

PATIENCE = 30.0

# A caller's trace context, as a client would put it in `_meta`.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"


def ok(what: str) -> None:
    print(f"ok    {what}", flush=True)


def check(condition: Any, what: str, detail: Any = "") -> None:
    if not condition:
        print(f"FAIL  {what}" + (f"\n      {detail}" if detail != "" else ""), flush=True)
        sys.exit(1)
    ok(what)


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


# -- a. the SDK's exporters ------------------------------------------------------------------


def make_spans(service: str) -> list[ReadableSpan]:
    """A SERVER span with a child INTERNAL span, an event, typed attributes and an error status."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("selfcheck")
    with tracer.start_as_current_span("tools/call echo", kind=SpanKind.SERVER) as outer:
        outer.set_attributes({"mcp.method.name": "tools/call", "loom.rows": 42, "loom.ratio": 0.5, "loom.cached": True, "loom.list": ["a", "b"]})
        outer.add_event("decided", {"loom.decision": "envelope"})
        with tracer.start_as_current_span("loom.shape"):
            pass
        outer.set_status(StatusCode.ERROR, "tool failed")
    provider.shutdown()
    return list(memory.get_finished_spans())


def check_decoded(receiver: OtlpReceiver, service: str, transport: str) -> None:
    spans = receiver.wait_for(lambda s: s["resource"].get("service.name") == service, count=2, timeout=10)
    by_name = {span["name"]: span for span in spans}
    outer, inner = by_name.get("tools/call echo"), by_name.get("loom.shape")
    check(outer and inner, f"{transport}: both spans arrived", spans)
    assert outer and inner
    check(len(outer["trace_id"]) == 32 and outer["trace_id"] == inner["trace_id"], f"{transport}: one trace, 32 hex digits")
    check(outer["parent_span_id"] == "" and inner["parent_span_id"] == outer["span_id"], f"{transport}: root has no parent, child's parent is the root")
    check(outer["kind"] == "SERVER" and inner["kind"] == "INTERNAL", f"{transport}: kinds SERVER / INTERNAL")
    check(
        outer["attributes"] == {"mcp.method.name": "tools/call", "loom.rows": 42, "loom.ratio": 0.5, "loom.cached": True, "loom.list": ["a", "b"]},
        f"{transport}: attributes decoded with their types",
        outer["attributes"],
    )
    check(outer["status_code"] == "ERROR" and outer["status_message"] == "tool failed" and inner["status_code"] == "UNSET", f"{transport}: status ERROR with message, UNSET")
    check(outer["events"][0]["name"] == "decided" and outer["events"][0]["attributes"] == {"loom.decision": "envelope"}, f"{transport}: event with attributes")
    check(outer["scope"] == "selfcheck" and outer["end_time_unix_nano"] >= outer["start_time_unix_nano"] > 0, f"{transport}: scope and times")


def part_a() -> None:
    section("a. OTLP receiver with the OpenTelemetry SDK's own exporters")
    with OtlpReceiver() as receiver:
        check(receiver.endpoint_http.startswith("http://127.0.0.1:") and receiver.endpoint_grpc.startswith("http://127.0.0.1:"), "endpoints are http://127.0.0.1:PORT")

        # Headers the way loom gets them: OTEL_EXPORTER_OTLP_HEADERS, read when the exporter is made.
        os.environ["OTEL_EXPORTER_OTLP_HEADERS"] = "x-tenant=acme,authorization=Bearer%20collector-token"
        try:
            http_exporter = HttpSpanExporter(endpoint=f"{receiver.endpoint_http}/v1/traces", timeout=5)
            grpc_exporter = GrpcSpanExporter(endpoint=receiver.endpoint_grpc, insecure=True, timeout=5)
        finally:
            del os.environ["OTEL_EXPORTER_OTLP_HEADERS"]

        check(http_exporter.export(make_spans("svc-http")) == SpanExportResult.SUCCESS, "http/protobuf export succeeds")
        check_decoded(receiver, "svc-http", "http")
        http_headers = receiver.exports[-1].headers
        check(
            http_headers.get("x-tenant") == "acme" and http_headers.get("authorization") == "Bearer collector-token",
            "http: OTEL_EXPORTER_OTLP_HEADERS reached the receiver (percent-decoded)",
            http_headers,
        )
        check(http_headers.get("content-type") == "application/x-protobuf", "http: content-type application/x-protobuf")

        gzip_exporter = HttpSpanExporter(endpoint=f"{receiver.endpoint_http}/v1/traces", compression=Compression.Gzip, timeout=5)
        check(gzip_exporter.export(make_spans("svc-gzip")) == SpanExportResult.SUCCESS, "http/protobuf gzip export succeeds")
        check_decoded(receiver, "svc-gzip", "http+gzip")
        check(receiver.exports[-1].headers.get("content-encoding") == "gzip", "http+gzip: body was gzip-encoded")

        check(grpc_exporter.export(make_spans("svc-grpc")) == SpanExportResult.SUCCESS, "grpc export succeeds")
        check_decoded(receiver, "svc-grpc", "grpc")
        grpc_export = receiver.exports[-1]
        check(grpc_export.transport == "grpc" and grpc_export.headers.get("x-tenant") == "acme", "grpc: headers arrive as metadata", grpc_export.headers)
        for exporter in (http_exporter, gzip_exporter, grpc_exporter):
            exporter.shutdown()

        check(receiver.requests == 3 and [e.spans for e in receiver.exports] == [2, 2, 2], "three requests of two spans counted")

        def post(path: str, body: bytes, content_type: str) -> int:
            request = urllib.request.Request(receiver.endpoint_http + path, data=body, headers={"content-type": content_type})
            try:
                with urllib.request.urlopen(request, timeout=5) as answer:
                    return answer.status
            except urllib.error.HTTPError as error:
                return error.code

        check(post("/v1/traces", b"\xff\xff not protobuf", "application/x-protobuf") == 400, "garbage body: 400")
        check(post("/v1/traces", b"{}", "application/json") == 415, "OTLP/JSON: 415")
        check(post("/v1/metrics", b"", "application/x-protobuf") == 404, "another signal's path: 404")
        check(len(receiver.spans()) == 6, "refused requests added no spans")
        receiver.clear()
        check(receiver.spans() == [] and receiver.requests == 0, "clear() forgets spans and requests")


# -- b. traced_server.py ---------------------------------------------------------------------


def server_span(receiver: OtlpReceiver, tool: str, trace_id: str | None = None) -> dict[str, Any]:
    spans = receiver.wait_for(lambda s: s["name"] == f"tools/call {tool}" and (trace_id is None or s["trace_id"] == trace_id), timeout=10)
    return spans[-1]


async def exercise_server(client: Client, receiver: OtlpReceiver, label: str) -> None:
    meta = {"traceparent": TRACEPARENT, "tracestate": "vendor=value"}
    result = await client.call_tool("echo", {"text": "hello"}, meta=meta)
    check(not result.is_error and result.content[0].text == "hello", f"{label}: echo answers")
    span = server_span(receiver, "echo", TRACE_ID)
    check(span["kind"] == "SERVER" and span["parent_span_id"] == PARENT_ID, f"{label}: server span continues the trace (trace id and parent span id as sent)", span)
    check(span["trace_state"] == "vendor=value", f"{label}: tracestate kept", span["trace_state"])
    attributes = span["attributes"]
    check(
        attributes.get("mcp.method.name") == "tools/call"
        and attributes.get("gen_ai.tool.name") == "echo"
        and attributes.get("gen_ai.operation.name") == "execute_tool"
        and "jsonrpc.request.id" in attributes
        and attributes.get("mcp.protocol.version") == client.protocol_version,
        f"{label}: conventions' attributes (protocol {client.protocol_version})",
        attributes,
    )
    check(span["resource"].get("service.name") == "traced-server", f"{label}: service.name traced-server")

    result = await client.call_tool("table", {"rows": 3}, meta=meta)
    rows = json.loads(result.content[0].text)
    check(rows == [{"id": i, "name": f"n{i}", "score": i * 1.5} for i in range(3)] and len(result.content) == 1, f"{label}: table(3) is one JSON text block")

    result = await client.call_tool("fail", {"reason": "no such file"}, meta=meta)
    check(result.is_error and result.content[0].text == "no such file", f"{label}: fail is an isError result with the reason as text")
    span = server_span(receiver, "fail", TRACE_ID)
    check(span["status_code"] == "ERROR" and span["attributes"].get("error.type") == "tool_error", f"{label}: fail's span error.type=tool_error")

    result = await client.call_tool("boom", {}, meta=meta)
    check(result.is_error and "secret" not in result.content[0].text, f"{label}: boom is an isError result without the exception's text", result.content[0].text)
    check(server_span(receiver, "boom", TRACE_ID)["attributes"].get("error.type") == "tool_error", f"{label}: boom's span error.type=tool_error")

    try:
        await client.call_tool("rpc_error", {"code": -32001}, meta=meta)
        check(False, f"{label}: rpc_error raises")
    except MCPError as error:
        check(error.error.code == -32001, f"{label}: rpc_error is a JSON-RPC error with the code asked")
    span = server_span(receiver, "rpc_error", TRACE_ID)
    check(span["attributes"].get("error.type") == "-32001", f"{label}: rpc_error's span error.type=-32001", span["attributes"])

    result = await client.call_tool("meta", {}, meta={**meta, "baggage": "k=v"})
    seen = json.loads(result.content[0].text)
    check(seen == {**meta, "baggage": "k=v"}, f"{label}: meta shows the _meta members the server got", seen)

    await client.call_tool("echo", {"text": "x"}, meta={"traceparent": "00-not-a-trace-01"})
    spans = receiver.wait_for(lambda s: s["name"] == "tools/call echo" and s["trace_id"] != TRACE_ID, timeout=10)
    check(spans[-1]["parent_span_id"] == "", f"{label}: a malformed traceparent starts a new trace (no parent)")


def stdio_params(receiver: OtlpReceiver) -> StdioServerParameters:
    command = traced_server.argv()
    return StdioServerParameters(
        command=command[0],
        args=command[1:],
        # Only the endpoint: a real loom config passes it the same way (its `env`).
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint_http, "PATH": os.environ.get("PATH", "")},
    )


async def part_b_async(receiver: OtlpReceiver) -> None:
    for mode in ("auto", "legacy"):
        receiver.clear()
        async with Client(stdio_params(receiver), mode=mode, read_timeout_seconds=PATIENCE) as client:
            await exercise_server(client, receiver, f"stdio {mode}")

    receiver.clear()
    with traced_server.serving_http(receiver.endpoint_http, service_name="traced-http") as url:
        async with httpx2.AsyncClient() as http, Client(streamable_http_client(url, http_client=http), mode="auto", read_timeout_seconds=PATIENCE) as client:
            await client.call_tool("echo", {"text": "over http"}, meta={"traceparent": TRACEPARENT})
            span = server_span(receiver, "echo", TRACE_ID)
            check(span["parent_span_id"] == PARENT_ID, "http: server span continues the trace from _meta")
            check(span["resource"].get("service.name") == "traced-http", "http: --service-name sets service.name")

    # Last, because it installs a global tracer provider in this process: the client SDK's own
    # tracing, which makes a CLIENT span per request and injects it as `_meta.traceparent`.
    from opentelemetry import trace

    provider = TracerProvider(resource=Resource.create({"service.name": "selfcheck-client"}))
    provider.add_span_processor(SimpleSpanProcessor(HttpSpanExporter(endpoint=f"{receiver.endpoint_http}/v1/traces", timeout=5)))
    trace.set_tracer_provider(provider)
    receiver.clear()
    async with Client(stdio_params(receiver), mode="auto", read_timeout_seconds=PATIENCE) as client:
        with trace.get_tracer("selfcheck").start_as_current_span("agent step") as root:
            await client.call_tool("echo", {"text": "traced"})
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.force_flush()
    server = server_span(receiver, "echo", trace_id)
    sent = receiver.wait_for(lambda s: s["kind"] == "CLIENT" and s["trace_id"] == trace_id and "tools/call" in s["name"])[-1]
    check(sent["parent_span_id"] == format(root.get_span_context().span_id, "016x"), f"client SDK span {sent['name']!r} is a child of the caller's span")
    check(server["parent_span_id"] == sent["span_id"], "server span's parent is the client SDK's span: one trace client → server")


def part_b() -> None:
    section("b. traced_server.py with the official Python client")
    with OtlpReceiver() as receiver:
        anyio.run(part_b_async, receiver)


# -- c. Prometheus -----------------------------------------------------------------------------


class MetricsServer:
    """A small /metrics target: a prometheus-client registry with a counter and a histogram,
    served in the format the scraper's Accept header asks for; optionally behind a bearer token."""

    def __init__(self, token: str | None = None) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter("selfcheck_calls", "Calls made.", ["tool"], registry=self.registry)
        self.latency = Histogram("selfcheck_latency_seconds", "Latency.", registry=self.registry, buckets=(0.1, 1.0))
        self.scrapes: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                server.scrapes.append(self.headers.get("accept", ""))
                if token and self.headers.get("authorization") != f"Bearer {token}":
                    self.send_response(401)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                encode, content_type = choose_encoder(self.headers.get("accept", ""))
                body = encode(server.registry)
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.target = f"127.0.0.1:{self.http.server_address[1]}"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


def part_c() -> None:
    section("c. Debian's Prometheus and the /metrics parser")
    target = MetricsServer()
    try:
        for _ in range(7):
            target.calls.labels(tool="echo").inc()
        target.calls.labels(tool="table").inc(2)
        target.latency.observe(0.05)
        target.latency.observe(0.5)

        text = fetch_metrics(f"http://{target.target}/metrics")
        check(text.content_type.startswith("text/plain"), "fetch_metrics: plain text without an Accept header", text.content_type)
        check(text.value("selfcheck_calls_total", tool="echo") == 7 and text.total("selfcheck_calls_total") == 9, "text: counter samples by name and labels")
        check(
            text.value("selfcheck_latency_seconds_bucket", le="0.1") == 1 and text.value("selfcheck_latency_seconds_count") == 2,
            "text: histogram buckets and count",
        )
        om = fetch_metrics(f"http://{target.target}/metrics", accept="application/openmetrics-text;version=1.0.0")
        check(om.content_type.startswith("application/openmetrics-text"), "fetch_metrics: OpenMetrics when asked", om.content_type)
        check(om.value("selfcheck_calls_total", tool="echo") == 7 and "selfcheck_calls_created" in om.names(), "openmetrics: same counter, plus _created")

        started = time.monotonic()
        with Prometheus(target.target) as prom:
            ok(f"prometheus ready at {prom.url} in {time.monotonic() - started:.1f} s")
            check(prom.wait_until("up", lambda v: v == 1) == 1, "up == 1")
            check(prom.value('selfcheck_calls_total{tool="echo"}') == 7, "counter value equals what was served")
            check(prom.value("sum(selfcheck_calls_total)") == 9, "sum over labels")
            check(any(a.startswith("application/openmetrics-text") for a in target.scrapes), "Prometheus asked for OpenMetrics", target.scrapes[:1])
            for _ in range(3):
                target.calls.labels(tool="echo").inc()
            check(prom.wait_until('selfcheck_calls_total{tool="echo"}', lambda v: v == 10) == 10, "the counter's growth is scraped")
            check(prom.value("selfcheck_latency_seconds_count") == 2, "histogram count scraped")
            check(prom.value("nothing_like_this") is None, "an absent series is None")
            try:
                prom.value("sum(")
                check(False, "a bad query raises")
            except RuntimeError as error:
                check("bad_data" in str(error), "a bad query raises with Prometheus's error", error)
    finally:
        target.close()

    guarded = MetricsServer(token="scrape-secret")
    try:
        with Prometheus(guarded.target, bearer_token="scrape-secret") as prom:
            check(prom.wait_until("up", lambda v: v == 1) == 1, "bearer_token: scrape with the token, up == 1")
        with Prometheus(guarded.target) as prom:
            check(prom.wait_until("up", lambda v: v == 0) == 0, "without the token: up == 0")
            errors = [t["lastError"] for t in prom.targets()]
            check(any("401" in e for e in errors), "targets() says why (401)", errors)
    finally:
        guarded.close()


# -- d. slow and failing collectors ------------------------------------------------------------


def part_d() -> None:
    section("d. the receiver as a slow or failing collector")
    with OtlpReceiver(fail=True) as receiver:
        exporter = HttpSpanExporter(endpoint=f"{receiver.endpoint_http}/v1/traces", timeout=2)
        started = time.monotonic()
        result = exporter.export(make_spans("svc-fail"))
        check(result == SpanExportResult.FAILURE, f"fail: http export fails ({time.monotonic() - started:.1f} s, the exporter retrying 503 within its timeout)")
        check(receiver.requests >= 1 and all(e.status == 503 for e in receiver.exports) and receiver.spans() == [], "fail: requests counted as 503, no spans kept")
        check(receiver.headers[0].get("content-type") == "application/x-protobuf", "fail: headers still recorded")
        grpc_exporter = GrpcSpanExporter(endpoint=receiver.endpoint_grpc, insecure=True, timeout=2)
        check(grpc_exporter.export(make_spans("svc-fail")) == SpanExportResult.FAILURE, "fail: grpc export fails (UNAVAILABLE)")
        check(any(e.transport == "grpc" for e in receiver.exports) and receiver.spans() == [], "fail: grpc request counted, no spans kept")
        receiver.fail = False
        check(exporter.export(make_spans("svc-recovered")) == SpanExportResult.SUCCESS, "fail switched off while running: the next export succeeds")
        check(len(receiver.spans()) == 2, "and its spans are kept")
        exporter.shutdown()
        grpc_exporter.shutdown()

    receiver = OtlpReceiver(slow=3.0).start()
    exporter = HttpSpanExporter(endpoint=f"{receiver.endpoint_http}/v1/traces", timeout=1)
    started = time.monotonic()
    result = exporter.export(make_spans("svc-slow"))
    took = time.monotonic() - started
    check(result == SpanExportResult.FAILURE and took < 2.9, f"slow: an exporter with a 1 s timeout gives up ({took:.1f} s)")
    check(receiver.requests >= 1 and receiver.spans() == [], "slow: request counted, spans not yet kept")
    receiver.wait_for(lambda s: s["resource"].get("service.name") == "svc-slow", timeout=5, count=2)
    ok("slow: the spans are kept once the slow answer is given")
    exporter.export(make_spans("svc-slow-2"))  # leaves a handler sleeping
    started = time.monotonic()
    receiver.stop()
    check(time.monotonic() - started < 2.0, f"slow: stop() does not wait out the sleep ({time.monotonic() - started:.1f} s)")
    exporter.shutdown()


def main() -> None:
    started = time.monotonic()
    part_a()
    part_b()
    part_c()
    part_d()
    print(f"\nselfcheck passed in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
