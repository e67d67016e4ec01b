"""Drives one MCP server through the official Python SDK's 1.x line (`mcp==1.30.0`), for the
interop suite.

The 1.x and 2.x SDKs are both the `mcp` package, so they cannot share an interpreter: pytest runs
under .ci/venv (2.x) and starts this script under .ci/venv1 (1.x, tests/interop/requirements-1x.txt).

    .ci/venv1/bin/python sdk1_driver.py '{"command": ..., "args": [...], "env": {...}, "patience": 30}'

    .ci/venv1/bin/python sdk1_driver.py '{"url": "http://127.0.0.1:PORT/mcp", "headers": {...}, "patience": 30}'

With `command` it starts the server over stdio; with `url` it connects over Streamable HTTP
(`mcp.client.streamable_http.streamable_http_client`, with `headers` on every request). It then
runs the `initialize` handshake with `mcp.ClientSession` (the only lifecycle
1.x has), and then answers requests read from stdin, one JSON object per line, in order:

    {"op": "list_tools"}                                   -> result: [Tool, ...]
    {"op": "call_tool", "name": ..., "arguments": {...}}   -> result: CallToolResult, and
                                                              contentTypes: [model class, ...]

Every answer is one JSON line on stdout: {"ok": true, "result": ...} with the SDK's models dumped
as their wire JSON (camelCase), or {"ok": false, "error": {"type", "message", "traceback"}} when
the SDK raised (the session stays usable when it can). `contentTypes` names the SDK's own model
class of each content block (`ImageContent`, `EmbeddedResource/BlobResourceContents`, ...), which
the wire JSON does not show. The first line is the handshake's outcome:
{"ok": true, "result": {"protocolVersion", "serverInfo"}}. The script ends at EOF on stdin.
Nothing else is written to stdout; the server's stderr and this script's logs go to stderr.
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def _wire(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _failure(exc: BaseException) -> dict[str, Any]:
    return {
        "ok": False,
        "error": {
            "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc),
            "traceback": "".join(traceback.format_exception(exc)),
        },
    }


def _model_name(block: Any) -> str:
    inner = getattr(block, "resource", None)
    return type(block).__name__ + (f"/{type(inner).__name__}" if inner is not None else "")


def _say(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer) + "\n")
    sys.stdout.flush()


async def _serve(session: ClientSession) -> None:
    stdin = anyio.wrap_file(sys.stdin)
    while line := await stdin.readline():
        if not line.strip():
            continue
        extra: dict[str, Any] = {}
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "list_tools":
                answer = [_wire(tool) for tool in (await session.list_tools()).tools]
            elif op == "call_tool":
                called = await session.call_tool(request["name"], request.get("arguments") or {})
                answer = _wire(called)
                extra["contentTypes"] = [_model_name(block) for block in called.content]
            else:
                raise ValueError(f"unknown op {op!r}")
        except Exception as exc:  # every failure is reported; the test decides
            _say(_failure(exc))
        else:
            _say({"ok": True, "result": answer, **extra})


@asynccontextmanager
async def _transport(spec: dict[str, Any], patience: timedelta) -> AsyncIterator[tuple[Any, Any]]:
    """The read and write streams to the server: over Streamable HTTP for a `url`, else stdio."""
    if "url" in spec:
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        timeout = httpx.Timeout(patience.total_seconds(), read=300)
        async with httpx.AsyncClient(headers=spec.get("headers") or {}, timeout=timeout) as http:
            async with streamable_http_client(spec["url"], http_client=http) as (read, write, _):
                yield read, write
        return
    params = StdioServerParameters(command=spec["command"], args=spec.get("args", []), env=spec.get("env"))
    async with stdio_client(params) as (read, write):
        yield read, write


async def main(spec: dict[str, Any]) -> None:
    patience = timedelta(seconds=float(spec.get("patience", 30)))
    async with _transport(spec, patience) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=patience) as session:
            try:
                with anyio.fail_after(patience.total_seconds()):
                    init = await session.initialize()
            except BaseException as exc:
                _say(_failure(exc))
                raise
            _say({"ok": True, "result": {"protocolVersion": init.protocolVersion, "serverInfo": _wire(init.serverInfo)}})
            await _serve(session)


if __name__ == "__main__":
    try:
        anyio.run(main, json.loads(sys.argv[1]))
    except BaseException as exc:  # noqa: BLE001 - reported on stderr, exit status says it failed
        print(f"sdk1_driver: {type(exc).__name__}: {exc}", file=sys.stderr)
        traceback.print_exception(exc, file=sys.stderr)
        sys.exit(1)
