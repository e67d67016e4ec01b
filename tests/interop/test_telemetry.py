"""What loom tells operators (SPEC §24): OpenTelemetry traces per the MCP semantic conventions,
Prometheus metrics and the audit log — through the official Python SDK 2.x in both eras, over
stdio and HTTP, against a real OTLP receiver, a real traced MCP server and Debian's Prometheus.

    direct:  SDK 2.x --stdio--> telemetry/traced_server.py --OTLP--> receiver
    loom:    SDK 2.x --stdio or HTTP--> loom --stdio--> traced_server.py
                                         \\--OTLP--> receiver <--OTLP--/

The client puts a `traceparent` in `_meta` (what an instrumented client does); the test reads
back one trace: the client's span, loom's SERVER span, loom's CLIENT span to the server and its
work on the result, and the server's own SERVER span as the CLIENT span's child.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import StdioServerParameters
from mcp.shared.exceptions import MCPError

from conftest import LOOM_BIN, PATIENCE, connect, free_port
from test_http_serve import connect_http, serve_http

sys.path.insert(0, str(Path(__file__).resolve().parent / "telemetry"))
import traced_server  # noqa: E402
from otlp_receiver import OtlpReceiver  # noqa: E402
from prometheus import Prometheus, fetch_metrics, parse_metrics  # noqa: E402

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy", "2026-07-28"]
FACES = ["stdio", "http"]
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
META = {"traceparent": TRACEPARENT, "tracestate": "vendor=value"}
# Revisions each client mode is served under, through loom.
SERVED = {"auto": "2026-07-28", "legacy": "2025-11-25", "2026-07-28": "2026-07-28"}


class Rig:
    """A loom config with the traced server as `tr`, loom's environment and its arguments."""

    def __init__(self, tmp: Path, otlp: str | None) -> None:
        self.tmp = tmp
        command = traced_server.argv(otlp)
        self.server = {"name": "tr", "command": command[0], "args": command[1:], "env": {}}
        self.config: dict[str, Any] = {}
        self.env: dict[str, str] = {"LOOM_LOG": os.environ.get("LOOM_LOG", "info")}
        if otlp:
            self.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp
        self.args: list[str] = []
        self.config_path = tmp / "loom.config.json"

    def write_config(self) -> Path:
        self.config_path.write_text(json.dumps({"servers": [self.server], **self.config}, indent=2))
        return self.config_path

    def stdio(self) -> StdioServerParameters:
        self.write_config()
        return StdioServerParameters(
            command=str(LOOM_BIN), args=["--config", str(self.config_path), *self.args], env=self.env
        )

    def direct(self) -> StdioServerParameters:
        return StdioServerParameters(command=self.server["command"], args=self.server["args"], env={})


@asynccontextmanager
async def through_loom(rig: Rig, face: str, mode: str, *, headers: dict[str, str] | None = None):
    """The SDK connected to loom over `face`."""
    if face == "stdio":
        async with connect(rig.stdio(), mode=mode) as client:
            yield client
        return
    with serve_http(rig, *rig.args) as loom:
        async with connect_http(loom.url, mode, headers=headers) as client:
            yield client


def loom_spans(receiver: OtlpReceiver, trace_id: str | None = None) -> list[dict[str, Any]]:
    return [s for s in receiver.spans(trace_id) if s["resource"].get("service.name") == "loom"]


def server_spans(receiver: OtlpReceiver, trace_id: str | None = None) -> list[dict[str, Any]]:
    return [s for s in receiver.spans(trace_id) if s["resource"].get("service.name") != "loom"]


def one(spans: list[dict[str, Any]], **where: Any) -> dict[str, Any]:
    found = [s for s in spans if all(s.get(k) == v for k, v in where.items())]
    assert len(found) == 1, f"{len(found)} spans with {where}: {[(s['name'], s['kind']) for s in spans]}"
    return found[0]


def wait_trace(receiver: OtlpReceiver, trace_id: str, names: set[tuple[str, str, str]]) -> list[dict[str, Any]]:
    """Every span of `trace_id`, once spans (service, kind, name) in `names` all arrived."""

    def complete(spans: list[dict[str, Any]]) -> bool:
        seen = {("loom" if s["resource"].get("service.name") == "loom" else "server", s["kind"], s["name"]) for s in spans if s["trace_id"] == trace_id}
        return names <= seen

    receiver.wait_until(complete, timeout=PATIENCE)
    return receiver.spans(trace_id)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("face", FACES)
async def test_one_trace_runs_from_the_client_through_loom_to_the_server(tmp_path, face, mode):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        async with connect(rig.direct(), mode=mode) as direct:
            expected = await direct.call_tool("echo", {"text": "hello"}, meta=META)
        [direct_span] = receiver.wait_for(lambda s: s["name"] == "tools/call echo")
        # Directly, the server's span is the client's span's child.
        assert (direct_span["trace_id"], direct_span["parent_span_id"]) == (TRACE_ID, CLIENT_SPAN)
        receiver.clear()
        async with through_loom(rig, face, mode) as client:
            result = await client.call_tool("tr_echo", {"text": "hello"}, meta=META)
        assert text_of(result) == text_of(expected) and result.is_error == expected.is_error
        spans = wait_trace(
            receiver,
            TRACE_ID,
            {
                ("loom", "SERVER", "tools/call tr_echo"),
                ("loom", "CLIENT", "tools/call echo"),
                ("server", "SERVER", "tools/call echo"),
            },
        )
        ours = [s for s in spans if s["resource"].get("service.name") == "loom"]
        served = one(ours, kind="SERVER")
        downstream = one(ours, kind="CLIENT")
        # A small result is decided at once: its figures are on the request's span, with no
        # span of work of its own.
        assert not [s for s in ours if s["kind"] == "INTERNAL"]
        theirs = one([s for s in spans if s not in ours], kind="SERVER")
        # The client's span → loom's SERVER span → loom's CLIENT span → the server's span.
        assert served["parent_span_id"] == CLIENT_SPAN
        assert downstream["parent_span_id"] == served["span_id"]
        assert theirs["parent_span_id"] == downstream["span_id"]
        attributes = served["attributes"]
        assert attributes["mcp.method.name"] == "tools/call"
        assert attributes["gen_ai.tool.name"] == "tr_echo"
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["mcp.protocol.version"] == SERVED[mode]
        assert attributes["network.transport"] == ("pipe" if face == "stdio" else "tcp")
        assert "jsonrpc.request.id" in attributes and "error.type" not in attributes
        # A 2025 HTTP session has an id; stdio and 2026-07-28 requests have none.
        assert ("mcp.session.id" in attributes) == (face == "http" and SERVED[mode] != "2026-07-28")
        assert downstream["attributes"]["loom.server"] == "tr"
        assert downstream["attributes"]["gen_ai.tool.name"] == "echo"
        # The CLIENT span names the revision loom and the server speak, as the server's own span
        # does, and loom's id of the request when loom wrote the request itself (the direct
        # lane; rmcp numbers the requests of its own path as it sends them).
        assert downstream["attributes"]["mcp.protocol.version"] == theirs["attributes"]["mcp.protocol.version"]
        if (face, mode) == ("stdio", "legacy"):  # these calls take the direct lane
            assert downstream["attributes"]["jsonrpc.request.id"] == theirs["attributes"]["jsonrpc.request.id"]
        assert attributes["loom.decision"] == "passthrough" and attributes["loom.server"] == "tr"
        assert attributes["loom.bytes_in"] > 0 and attributes["loom.chars_out"] > 0 and attributes["loom.tokens_saved"] == 0
        # No argument or result in any span of loom's.
        assert "hello" not in json.dumps(ours)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_large_result_s_decision_sizes_and_its_query_are_in_the_trace_and_the_metrics(tmp_path, mode):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        port = free_port()
        rig.args = ["--metrics", f"127.0.0.1:{port}"]
        async with connect(rig.direct(), mode=mode) as direct:
            raw = await direct.call_tool("table", {"rows": 5000})
        server_text = text_of(raw)
        async with through_loom(rig, "stdio", mode) as client:
            envelope = await client.call_tool("tr_table", {"rows": 5000}, meta=META)
            ref = envelope.structured_content["ref"]
            answer = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
            assert answer.structured_content["rows"] == [{"n": 5000}]
            samples = fetch_metrics(f"http://127.0.0.1:{port}/metrics")
        spans = wait_trace(receiver, TRACE_ID, {("loom", "INTERNAL", "loom.result")})
        work_span = one(loom_spans(receiver, TRACE_ID), kind="INTERNAL", name="loom.result")
        served = one(loom_spans(receiver, TRACE_ID), kind="SERVER")
        assert work_span["parent_span_id"] == served["span_id"]
        assert served["attributes"]["loom.decision"] == "envelope" and served["attributes"]["loom.rows"] == 5000
        work = work_span["attributes"]
        assert work["loom.decision"] == "envelope"
        assert work["loom.rows"] == 5000
        # Bytes of the result JSON received: the server's text plus its JSON around it.
        # (SDK 2.x sends the table twice: as text and as structured content.)
        assert len(server_text) < work["loom.bytes_in"] < 2 * len(server_text) + 1000
        assert work["loom.chars_out"] < work["loom.bytes_in"] / 20
        assert work["loom.tokens_saved"] > 10_000
        [query] = receiver.wait_for(lambda s: s["name"] == "loom.query")
        [query_request] = receiver.wait_for(lambda s: s["name"] == "tools/call loom_query")
        assert query["parent_span_id"] == query_request["span_id"]
        assert query["attributes"]["loom.rows"] == 1 and query["attributes"]["loom.bytes_out"] > 0
        assert query["end_time_unix_nano"] > query["start_time_unix_nano"]
        assert samples.value("loom_tool_calls_total", server="tr", tool="table", outcome="ok", decision="envelope") == 1
        assert samples.value("loom_tool_calls_total", server="loom", tool="loom_query", outcome="ok", decision="none") == 1
        assert samples.value("loom_bytes_received_total", server="tr", tool="table") == work["loom.bytes_in"]
        assert samples.value("loom_chars_answered_total", server="tr", tool="table") == work["loom.chars_out"]
        assert samples.value("loom_datasets_held") >= 1 and samples.value("loom_bytes_held") > 0
        assert samples.value("loom_downstream_up", server="tr") == 1
        assert spans  # the trace arrived whole


async def test_a_warning_logged_during_a_request_is_an_event_of_its_span(tmp_path):
    """A model summary that fails (nothing listens at the model's URL) is logged as a warning
    while the call is handled: the call's SERVER span carries it as an event (SPEC §24.1), and
    the call is answered with the deterministic result."""
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        rig.env["LOOM_TEST_MODEL_KEY"] = "not-a-real-key"
        rig.config = {
            "llm": {
                "baseUrl": f"http://127.0.0.1:{free_port()}/v1",
                "apiKey": "${LOOM_TEST_MODEL_KEY}",
                "model": "nobody",
                "timeoutMs": 5000,
            },
            "compression": {"default": {"llmSummary": True}},
        }
        async with through_loom(rig, "stdio", "legacy") as client:
            result = await client.call_tool("tr_log", {"lines": 4000}, meta=META)
            assert not result.is_error and "GET /api/items/" in text_of(result)
        wait_trace(receiver, TRACE_ID, {("loom", "SERVER", "tools/call tr_log")})
        served = one(loom_spans(receiver, TRACE_ID), kind="SERVER")
        events = [e for e in served["events"] if "model summary failed" in e["name"]]
        assert len(events) == 1, served["events"]
        assert events[0]["attributes"]["level"] == "WARN"
        # No other request's span got it.
        others = [s for s in loom_spans(receiver) if s["span_id"] != served["span_id"]]
        assert not any("model summary failed" in e["name"] for s in others for e in s["events"])


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_failures_carry_their_error_type(tmp_path, mode):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        rig.config["audit"] = {"path": str(tmp_path / "audit.jsonl")}
        async with connect(rig.direct(), mode=mode) as direct:
            with pytest.raises(MCPError) as direct_error:
                await direct.call_tool("rpc_error", {"code": -32001}, meta=META)
        async with through_loom(rig, "stdio", mode) as client:
            failed = await client.call_tool("tr_fail", {"reason": "no such file"}, meta=META)
            assert failed.is_error
            with pytest.raises(MCPError) as error:
                await client.call_tool("tr_rpc_error", {"code": -32001}, meta=META)
            assert error.value.code == direct_error.value.code == -32001
        receiver.wait_for(lambda s: s["name"] == "tools/call tr_rpc_error")
        receiver.wait_for(lambda s: s["name"] == "tools/call tr_fail")
        ours = loom_spans(receiver)
        for exposed, own, error_type in (("tr_fail", "fail", "tool_error"), ("tr_rpc_error", "rpc_error", "-32001")):
            served = one(ours, name=f"tools/call {exposed}")
            downstream = one(ours, name=f"tools/call {own}", kind="CLIENT")
            assert served["attributes"]["error.type"] == error_type, served
            assert downstream["attributes"]["error.type"] == error_type, downstream
            assert served["status_code"] == "ERROR"
        lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        outcomes = {line["tool"]: line["outcome"] for line in lines if line["method"] == "tools/call"}
        assert outcomes == {"fail": "tool_error", "rpc_error": "error"}


@pytest.mark.parametrize("face", FACES)
async def test_the_audit_log_has_a_line_per_request_and_no_content(tmp_path, face):
    secret_argument = "argument-9f1c3e"
    token = "tok-5b8e2a7d41c6"
    rig = Rig(tmp_path, None)
    audit = tmp_path / "audit.jsonl"
    rig.config["audit"] = {"path": str(audit)}
    headers = None
    if face == "http":
        rig.config["http"] = {"token": token}
        headers = {"Authorization": f"Bearer {token}"}
    calls = 0
    async with through_loom(rig, face, "legacy", headers=headers) as client:
        await client.list_tools()
        for _ in range(3):
            result = await client.call_tool("tr_echo", {"text": secret_argument})
            assert secret_argument in text_of(result)
            calls += 1
        await client.send_ping()
    text = audit.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    methods = [line["method"] for line in lines]
    assert methods.count("initialize") == 1 and methods.count("ping") == 1
    assert methods.count("tools/call") == calls and "tools/list" in methods
    for line in lines:
        assert set(line) >= {"time", "subject", "era", "method", "server", "tool", "decision", "bytesIn", "bytesOut", "durationMs", "outcome"}
        assert "traceId" not in line  # tracing is off
    call = next(line for line in lines if line["method"] == "tools/call")
    assert (call["server"], call["tool"], call["decision"], call["outcome"]) == ("tr", "echo", "passthrough", "ok")
    assert call["bytesIn"] > 0 and call["bytesOut"] > 0 and call["era"] == "2025-11-25"
    # Neither the arguments, the result text nor the token; the subject is the token's digest.
    assert secret_argument not in text and token not in text
    subjects = {line["subject"] for line in lines}
    assert subjects == ({"stdio"} if face == "stdio" else {next(iter(subjects))})
    if face == "http":
        assert len(next(iter(subjects))) >= 32


async def test_the_audit_log_rotates_and_a_write_failure_never_fails_a_call(tmp_path):
    rig = Rig(tmp_path, None)
    audit = tmp_path / "audit.jsonl"
    rig.config["audit"] = {"path": str(audit), "maxBytes": 4096}
    async with through_loom(rig, "stdio", "legacy") as client:
        for _ in range(60):
            await client.send_ping()
    rotated = Path(f"{audit}.1")
    assert rotated.exists() and audit.stat().st_size <= 4096 and rotated.stat().st_size <= 4096
    for path in (audit, rotated):
        for line in path.read_text().splitlines():
            assert json.loads(line)["method"] in {"initialize", "ping"}
    assert not Path(f"{audit}.2").exists()
    # A file every write to fails (ENOSPC): calls are answered, one warning says so.
    rig.config["audit"] = {"path": "/dev/full"}
    log = tmp_path / "stderr.log"
    params = rig.stdio()
    # loom's stderr to a file of the test's.
    params = StdioServerParameters(command="/bin/sh", args=["-c", 'exec "$@" 2>"$0"', str(log), params.command, *params.args], env=params.env)
    async with connect(params, mode="legacy") as client:
        for _ in range(3):
            result = await client.call_tool("tr_echo", {"text": "x"})
            assert not result.is_error
    warnings = [line for line in log.read_text().splitlines() if "cannot write the audit log /dev/full" in line]
    assert len(warnings) == 1, log.read_text()[-3000:]


@pytest.mark.parametrize("face", FACES)
async def test_prometheus_scrapes_loom_s_metrics(tmp_path, face):
    rig = Rig(tmp_path, None)
    port = free_port()
    rig.args = ["--metrics", f"127.0.0.1:{port}"]
    async with through_loom(rig, face, "auto") as client:
        for n in range(3):
            await client.call_tool("tr_echo", {"text": f"call {n}"})
        with Prometheus(f"127.0.0.1:{port}") as prometheus:
            prometheus.wait_until("up", lambda value: value == 1)
            prometheus.wait_until('sum(loom_tool_calls_total{server="tr",tool="echo"})', lambda value: value == 3)
            assert prometheus.value('loom_downstream_up{server="tr"}') == 1
            assert prometheus.value('sum(mcp_server_operation_duration_seconds_count{mcp_method_name="tools/call"})') == 3
        samples = fetch_metrics(f"http://127.0.0.1:{port}/metrics")
        assert samples.value("loom_tool_calls_total", server="tr", tool="echo", outcome="ok", decision="passthrough") == 3
        assert samples.total("loom_requests_total", method="tools/call") == 3
        transport = "pipe" if face == "stdio" else "tcp"
        assert samples.total("mcp_server_operation_duration_seconds_count", mcp_method_name="tools/call", network_transport=transport) == 3
        assert samples.value("loom_otlp_spans_dropped_total") == 0
        # What the metrics endpoint refuses.
        for path, status in (("/nope", 404),):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=PATIENCE)
            assert refused.value.code == status


@pytest.mark.parametrize("face", FACES)
async def test_with_tracing_off_the_client_s_trace_context_reaches_the_server_unchanged(tmp_path, face):
    rig = Rig(tmp_path, None)
    meta = {**META, "baggage": "k=v"}
    async with connect(rig.direct(), mode="legacy") as direct:
        expected = json.loads(text_of(await direct.call_tool("meta", {}, meta=meta)))
    async with through_loom(rig, face, "legacy") as client:
        seen = json.loads(text_of(await client.call_tool("tr_meta", {}, meta=meta)))
    for key in ("traceparent", "tracestate", "baggage"):
        assert seen[key] == expected[key] == meta[key]


async def test_with_tracing_on_the_server_sees_loom_s_span_as_parent(tmp_path):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        async with through_loom(rig, "stdio", "legacy") as client:
            seen = json.loads(text_of(await client.call_tool("tr_meta", {}, meta={**META, "baggage": "k=v"})))
        version, trace_id, parent, flags = seen["traceparent"].split("-")
        assert (version, trace_id, flags) == ("00", TRACE_ID, "01") and parent != CLIENT_SPAN
        assert seen["tracestate"] == "vendor=value" and seen["baggage"] == "k=v"
        [downstream] = receiver.wait_for(lambda s: s["kind"] == "CLIENT" and s["name"] == "tools/call meta")
        assert downstream["span_id"] == parent


async def test_a_malformed_traceparent_starts_a_new_trace(tmp_path):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        async with through_loom(rig, "stdio", "auto") as client:
            result = await client.call_tool("tr_echo", {"text": "x"}, meta={"traceparent": "00-not-a-trace-01"})
            assert not result.is_error
        [served] = receiver.wait_for(lambda s: s["name"] == "tools/call tr_echo")
        assert served["parent_span_id"] == "" and served["trace_id"] != TRACE_ID
        [theirs] = receiver.wait_for(lambda s: s["name"] == "tools/call echo" and s["kind"] == "SERVER")
        assert theirs["trace_id"] == served["trace_id"]


@pytest.mark.parametrize("collector", ["unreachable", "slow"])
async def test_a_broken_collector_never_fails_a_call_and_its_drops_are_counted(tmp_path, collector):
    # The server reports to a healthy receiver of its own; only loom's collector is broken.
    with OtlpReceiver() as healthy, OtlpReceiver(slow=5.0) as slow:
        rig = Rig(tmp_path, healthy.endpoint_http)
        rig.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{free_port()}" if collector == "unreachable" else slow.endpoint_http
        rig.env["OTEL_EXPORTER_OTLP_TIMEOUT"] = "500"
        port = free_port()
        rig.args = ["--metrics", f"127.0.0.1:{port}"]
        async with through_loom(rig, "stdio", "auto") as client:
            for n in range(20):
                result = await client.call_tool("tr_echo", {"text": f"call {n}"}, meta=META)
                assert text_of(result).endswith(f"call {n}") and not result.is_error
            deadline = time.monotonic() + PATIENCE
            dropped = 0.0
            while time.monotonic() < deadline:
                dropped = fetch_metrics(f"http://127.0.0.1:{port}/metrics").value("loom_otlp_spans_dropped_total")
                if dropped > 0:
                    break
                time.sleep(0.2)
            assert dropped > 0
        assert not loom_spans(healthy)


async def test_grpc_headers_service_name_and_the_config_s_endpoint(tmp_path):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        # gRPC, a service name of the operator's.
        rig.env.update(
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint_grpc,
            OTEL_EXPORTER_OTLP_PROTOCOL="grpc",
            OTEL_SERVICE_NAME="gateway-a",
        )
        async with through_loom(rig, "stdio", "auto") as client:
            await client.call_tool("tr_echo", {"text": "x"}, meta=META)
        [served] = receiver.wait_for(lambda s: s["resource"].get("service.name") == "gateway-a" and s["kind"] == "SERVER" and s["name"] == "tools/call tr_echo")
        assert any(export.transport == "grpc" for export in receiver.exports)
        # http/protobuf with headers; the endpoint from `telemetry.otlpEndpoint`.
        receiver.clear()
        rig = Rig(tmp_path, receiver.endpoint_http)
        del rig.env["OTEL_EXPORTER_OTLP_ENDPOINT"]
        rig.config["telemetry"] = {"otlpEndpoint": receiver.endpoint_http}
        rig.env["OTEL_EXPORTER_OTLP_HEADERS"] = "x-team=loom-tests"
        async with through_loom(rig, "stdio", "auto") as client:
            await client.call_tool("tr_echo", {"text": "x"}, meta=META)
        receiver.wait_for(lambda s: s["resource"].get("service.name") == "loom" and s["name"] == "tools/call tr_echo")
        assert any(h.get("x-team") == "loom-tests" for h in receiver.headers)


@pytest.mark.parametrize("off", ["OTEL_SDK_DISABLED", "OTEL_TRACES_SAMPLER"])
async def test_tracing_turned_off_or_sampled_out_sends_no_span(tmp_path, off):
    with OtlpReceiver() as receiver:
        rig = Rig(tmp_path, receiver.endpoint_http)
        rig.env[off] = "true" if off == "OTEL_SDK_DISABLED" else "always_off"
        async with through_loom(rig, "stdio", "auto") as client:
            seen = json.loads(text_of(await client.call_tool("tr_meta", {}, meta=META)))
            await client.call_tool("tr_echo", {"text": "x"}, meta=META)
        if off == "OTEL_SDK_DISABLED":
            # (Sampled out, the server's span is not sampled either: its parent says so.)
            receiver.wait_for(lambda s: s["name"] == "tools/call echo" and s["kind"] == "SERVER")
        time.sleep(1.5)  # loom exports every 0.5 s and at exit: nothing of its own came
        assert not loom_spans(receiver)
        if off == "OTEL_SDK_DISABLED":
            assert seen["traceparent"] == TRACEPARENT
        else:
            # Sampled out: the same trace, loom's span (unsampled) as the parent.
            assert seen["traceparent"].split("-")[1] == TRACE_ID and seen["traceparent"].endswith("-00")


def _loom(*args: str, env: dict[str, str] | None = None, config: dict[str, Any] | None = None, tmp: Path) -> subprocess.CompletedProcess:
    path = tmp / "bad.config.json"
    command = traced_server.argv()
    path.write_text(json.dumps({"servers": [{"name": "tr", "command": command[0], "args": command[1:]}], **(config or {})}))
    return subprocess.run(
        [str(LOOM_BIN), *args, "--config", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    "config, words",
    [
        ({"audit": {"path": "/nonexistent-dir/audit.jsonl"}}, "cannot open the audit log /nonexistent-dir/audit.jsonl"),
        ({"audit": {"maxBytes": 8192}}, "audit.path"),
        ({"audit": {"path": "a.jsonl", "maxBytes": 100}}, "audit.maxBytes"),
        ({"audit": {"path": "a.jsonl", "rotate": True}}, "audit.rotate"),
        ({"telemetry": {"otlpEndpoint": "collector:4318"}}, "telemetry.otlpEndpoint"),
    ],
)
def test_bad_telemetry_settings_are_named(tmp_path, config, words):
    started = _loom(config=config, tmp=tmp_path)
    # A setting that is wrong: 2; a file that cannot be opened: 1 (loom could not start).
    assert started.returncode == (1 if "nonexistent" in words else 2), started
    assert words in started.stderr, started.stderr
    if "nonexistent" not in words:
        checked = _loom("check", config=config, tmp=tmp_path)
        assert checked.returncode == 2 and words in checked.stdout + checked.stderr


def test_an_unknown_otlp_protocol_is_named(tmp_path):
    started = _loom(env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/xml"}, tmp=tmp_path)
    assert started.returncode == 1 and "OTEL_EXPORTER_OTLP_PROTOCOL" in started.stderr and "grpc" in started.stderr


async def test_metrics_off_loopback_want_a_token(tmp_path):
    refused = _loom("--metrics", f"0.0.0.0:{free_port()}", tmp=tmp_path)
    assert refused.returncode == 2 and "refusing to serve metrics" in refused.stderr
    rig = Rig(tmp_path, None)
    port = free_port()
    rig.config["http"] = {"token": "scrape-secret-1234"}
    rig.args = ["--metrics", f"0.0.0.0:{port}"]
    async with through_loom(rig, "stdio", "auto") as client:
        await client.call_tool("tr_echo", {"text": "x"})
        with pytest.raises(urllib.error.HTTPError) as unauthorized:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE)
        assert unauthorized.value.code == 401
        samples = fetch_metrics(f"http://127.0.0.1:{port}/metrics", headers={"Authorization": "Bearer scrape-secret-1234"})
        assert samples.value("loom_tool_calls_total", server="tr", tool="echo", outcome="ok", decision="passthrough") == 1
        with Prometheus(f"127.0.0.1:{port}", bearer_token="scrape-secret-1234") as prometheus:
            prometheus.wait_until("up", lambda value: value == 1)



async def test_made_up_tool_names_do_not_grow_the_metrics(tmp_path):
    # A client (or a confused model) calling many names nothing answers to: counted as
    # `unknown`, never one label set per name.
    rig = Rig(tmp_path, None)
    port = free_port()
    rig.args = ["--metrics", f"127.0.0.1:{port}"]
    async with through_loom(rig, "stdio", "legacy") as client:
        for n in range(200):
            with pytest.raises(MCPError):
                await client.call_tool(f"made_up_{n}_" + "x" * 200, {})
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE).read().decode()
    samples = parse_metrics(text, "text/plain; version=0.0.4")
    assert "made_up" not in text
    assert samples.value("loom_tool_calls_total", server="unknown", tool="unknown", outcome="error", decision="none") == 200


def _post(url: str, body: dict[str, Any], headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=PATIENCE) as answer:
            answer.read()
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


async def test_made_up_methods_and_revisions_do_not_grow_the_metrics(tmp_path):
    rig = Rig(tmp_path, None)
    port = free_port()
    rig.args = ["--metrics", f"127.0.0.1:{port}"]
    audit = tmp_path / "audit.jsonl"
    rig.config["audit"] = {"path": str(audit)}
    envelope = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    with serve_http(rig, *rig.args) as loom:
        for n in range(50):
            method = f"tools/zz{n}"
            _post(loom.url, {"jsonrpc": "2.0", "id": n, "method": method, "params": {"_meta": envelope}}, {"mcp-protocol-version": "2026-07-28", "mcp-method": method})
        # A handshake asking for a revision nobody has: answered (and logged) as the one loom speaks.
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2031-01-01", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
        assert _post(loom.url, initialize, {}) == 200
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=PATIENCE).read().decode()
    samples = parse_metrics(text, "text/plain; version=0.0.4")
    assert "zz" not in text and "2031" not in text
    assert samples.value("loom_requests_total", method="other", outcome="error") == 50
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert sum(1 for line in lines if line["method"].startswith("tools/zz") and line["outcome"] == "error") == 50
    [handshake] = [line for line in lines if line["method"] == "initialize"]
    assert handshake["era"] == "2025-11-25"
