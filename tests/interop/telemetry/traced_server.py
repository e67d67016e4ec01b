"""An MCP server (official Python SDK 2.x) that traces its own handling with OpenTelemetry and
exports every span over OTLP/HTTP as soon as it ends, so a test behind loom sees the server's
span, and whether its parent is loom's.

    traced_server.py                    stdio
    traced_server.py --http PORT        Streamable HTTP at http://127.0.0.1:PORT/mcp
    --otlp URL                          the OTLP/HTTP endpoint (default: the environment's
                                        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT)
    --service-name NAME                 service.name of its spans (default: OTEL_SERVICE_NAME, else
                                        "traced-server")

loom starts its servers with a cleared environment (only a few base variables and the server's
configured `env` reach them), so a test sets the endpoint in the server's `env` or with --otlp;
loom's own OTEL_* variables do not leak into it. Without any endpoint the server runs untraced.

Where the spans come from: the SDK itself. The Python SDK 2.x low-level server installs
`mcp.server._otel.OpenTelemetryMiddleware` by default, which wraps every inbound request in a
SERVER span named per the MCP semantic conventions (`tools/call echo`, `tools/list`, …, with
`mcp.method.name`, `mcp.protocol.version`, `jsonrpc.request.id`, `gen_ai.tool.name`,
`gen_ai.operation.name`, and `error.type` = `tool_error` for an isError result or the JSON-RPC
code for an error response), whose parent is the W3C trace context in the request's
`params._meta` (`traceparent`/`tracestate`; a missing or malformed one gives a new trace). It is a
no-op until a tracer provider is set, which is all this file does.

Why not PyPI `opentelemetry-instrumentation-mcp` (0.62.4, the package issue 39 names): it is
written against the 1.x SDK and cannot even be installed into a 2.x process:
`McpInstrumentor().instrument()` raises `wrapt.PathResolutionError` because it wraps
`mcp.client.streamable_http.streamablehttp_client` (2.x spells it `streamable_http_client`), and
it also wraps `mcp.shared.session.BaseSession.send_request` and imports `mcp.types`, neither of
which exists in 2.x. Even on 1.x its server side makes no span per request: it only attaches the
`_meta` context while the stdio stream is read, and makes spans for tools of the separate
`fastmcp` package and a `ResponseStreamWriter` span per response. The SDK's own middleware does
what the tests need (a SERVER span per request, parented by `_meta.traceparent`) and names it by
the conventions loom follows too.

Tools:
  echo(text)          text back
  table(rows)         a JSON array of `rows` objects {"id": i, "name": "n<i>", "score": i * 1.5}
                      as one text block (large ones are what loom turns into a dataset)
  log(lines)          `lines` lines of a service log as one text block
  fail(reason)        an isError result whose text is `reason`
  boom()              raises RuntimeError: the SDK turns any exception a tool raises into an
                      isError result ("Error executing tool boom", the exception's own text kept
                      on the server), not a JSON-RPC error; its span says error.type=tool_error
  rpc_error(code)     raises MCPError: a JSON-RPC error response with `code` (default -32603),
                      its span says error.type=<code>
  meta()              the request's `_meta` as the server got it, as JSON (traceparent,
                      tracestate, baggage, …; the progress token and the 2026-07-28 envelope
                      left out), to see what loom forwards
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer

# The servers' shared helpers (a sibling folder: this file runs as a script).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "servers"))
from meta_seen import meta_seen  # noqa: E402
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent


def set_up_tracing(endpoint: str | None, service_name: str | None) -> bool:
    """Installs a global SDK tracer provider exporting over OTLP/HTTP, if an endpoint is known.
    A SimpleSpanProcessor exports each span when it ends (no batching delay), so a test sees the
    server's span by the time the client has its answer, give or take one local HTTP request."""
    if endpoint:
        # --otlp takes the base URL, as OTEL_EXPORTER_OTLP_ENDPOINT does, or the full one.
        endpoint = endpoint.rstrip("/")
        traces_endpoint: str | None = endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"
    elif os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"):
        traces_endpoint = None  # the exporter reads them itself
    else:
        return False

    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; an explicit
    # service.name given here would win over them, so it is only given when asked for or unset.
    name = service_name or (None if os.environ.get("OTEL_SERVICE_NAME") else "traced-server")
    provider = TracerProvider(resource=Resource.create({"service.name": name} if name else {}))
    # Without an endpoint argument the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else
    # OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces; it reads _HEADERS, _TIMEOUT, _COMPRESSION too.
    exporter = OTLPSpanExporter(endpoint=traces_endpoint)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


app = MCPServer("traced-server")


@app.tool(structured_output=False)
def echo(text: str) -> str:
    """Answers `text`."""
    return text


@app.tool(structured_output=False)
def table(rows: int) -> str:
    """`rows` objects {"id", "name", "score"} as one JSON array in one text block."""
    return json.dumps([{"id": i, "name": f"n{i}", "score": i * 1.5} for i in range(rows)])


@app.tool(structured_output=False)
def log(lines: int) -> str:
    """`lines` lines of a service log as one text block (not a table: loom reduces it)."""
    return "\n".join(
        f"2026-12-06T05:{i // 60 % 60:02}:{i % 60:02}Z INFO GET /api/items/{i} 200 {i % 97} ms" for i in range(lines)
    )


@app.tool()
def fail(reason: str = "failed on purpose") -> CallToolResult:
    """Fails: an isError result whose text is `reason`."""
    # Returned rather than raised (ToolError): the SDK would prefix the text with
    # "Error executing tool fail: ", and the tests look for exactly `reason`.
    return CallToolResult(content=[TextContent(type="text", text=reason)], is_error=True)


@app.tool(structured_output=False)
def boom() -> str:
    """Crashes (RuntimeError): the SDK answers an isError result that hides the exception's text."""
    raise RuntimeError("boom: the server's own secret text")


@app.tool(structured_output=False)
def rpc_error(code: int = -32603) -> str:
    """Answers a JSON-RPC error with `code`."""
    raise MCPError(code=code, message=f"rpc_error asked for code {code}")


@app.tool(structured_output=False)
async def meta(ctx: Context) -> str:
    """The request's `_meta` as the server got it, as JSON."""
    return meta_seen(ctx.request_context.meta)


# -- for tests: how to run it -------------------------------------------------------------------


def argv(otlp: str | None = None, *, http_port: int | None = None, service_name: str | None = None) -> list[str]:
    """The command line that runs this server with the current interpreter (for a loom config's
    `command` + `args`, or subprocess). `otlp`: the receiver's base URL (`--otlp`)."""
    command = [sys.executable, str(Path(__file__).resolve())]
    if http_port is not None:
        command += ["--http", str(http_port)]
    if otlp:
        command += ["--otlp", otlp]
    if service_name:
        command += ["--service-name", service_name]
    return command


@contextmanager
def serving_http(otlp: str | None = None, *, service_name: str | None = None, within: float = 30.0) -> Iterator[str]:
    """Runs this server over Streamable HTTP on a free port until the block ends; its /mcp URL
    once it accepts connections."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(argv(otlp, http_port=port, service_name=service_name), stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + within
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"traced_server.py --http {port} did not start (exit status {process.poll()})") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", type=int, metavar="PORT", help="serve Streamable HTTP on 127.0.0.1:PORT")
    parser.add_argument("--otlp", metavar="URL", help="OTLP/HTTP endpoint (base URL, or the full …/v1/traces)")
    parser.add_argument("--service-name", metavar="NAME", help="service.name of the spans")
    options = parser.parse_args()
    if not set_up_tracing(options.otlp, options.service_name):
        print("traced_server: no OTLP endpoint given, spans are not exported", file=sys.stderr)
    if options.http is None:
        app.run()
    else:
        import uvicorn

        uvicorn.run(app.streamable_http_app(host="127.0.0.1"), host="127.0.0.1", port=options.http, log_level="warning")


if __name__ == "__main__":
    main()
