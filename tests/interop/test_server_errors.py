"""A server's JSON-RPC error to `tools/call` reaches the client as that JSON-RPC error — code,
message and data as the server sent them — exactly as it would connected directly (SPEC §5.6).
Clients act on the difference: fastmcp raises `ToolError` for an `isError` result but `MCPError`
for an error, the TypeScript SDKs throw only for the error, agent frameworks retry one and not the
other. Errors loom raises itself (server down, timeout, unknown tool) keep their own form.

    direct:  SDK 2.x --stdio or HTTP--> servers/python_server.py
    loom:    SDK 2.x --stdio or HTTP--> loom --stdio--> servers/python_server.py

The server's `query` tool raises the SDK's own `MCPError` (-32602 with `data`), which the SDK
sends as a JSON-RPC error, like a database server answering bad SQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from mcp.shared.exceptions import MCPError

from conftest import PY, PYTHON_SERVER, REPO_ROOT, connect, connect_loom, free_port
from dataplane_clients import DataSetup
from test_http_serve import connect_http, serve_http
from test_remote import _http_server

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy", "2026-07-28"]
SQL = "SELEC name FROM users"


def _error_of(exc: MCPError) -> dict[str, Any]:
    return {"code": exc.code, "message": exc.message, "data": exc.data}


async def _raised(client: Any, name: str) -> dict[str, Any]:
    with pytest.raises(MCPError) as caught:
        await client.call_tool(name, {"sql": SQL})
    return _error_of(caught.value)


@pytest.fixture(autouse=True)
def _only_py(setup):
    setup.use(PY)


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_error_over_stdio_is_the_error_direct(setup, mode):
    # Directly the server speaks the era the client asks for; through loom, loom's own.
    async with connect(setup.direct(PY), mode=mode, quick_stop=True) as direct:
        own = await _raised(direct, "query")
    async with connect_loom(setup, mode) as client:
        through = await _raised(client, f"{PY}_query")
        # loom's own errors keep their form: an unknown tool is loom's JSON-RPC error...
        with pytest.raises(MCPError) as unknown:
            await client.call_tool(f"{PY}_nope", {})
        # ... and the server's isError result is still a result.
        failed = await client.call_tool(f"{PY}_fail", {"reason": "on purpose"})
    assert own == {"code": -32602, "message": 'syntax error at or near "SELEC"', "data": {"sql": SQL, "position": 1}}
    assert through == own
    assert unknown.value.code == -32602 and "unknown tool" in unknown.value.message
    assert failed.is_error


@pytest.mark.parametrize("mode", MODES)
async def test_a_server_error_over_http_is_the_error_direct(setup, mode):
    port = free_port()
    with _http_server([sys.executable, str(PYTHON_SERVER), "--http", str(port)], port, setup.tmp / "py-http.log") as url:
        async with connect_http(url, mode) as direct:
            own = await _raised(direct, "query")
    behind = DataSetup(tmp=setup.tmp, fs_root=setup.fs_root, servers=dict(setup.servers), enabled=[PY])
    with serve_http(behind) as loom:
        async with connect_http(loom.url, mode) as client:
            through = await _raised(client, f"{PY}_query")
    assert own["code"] == -32602 and own["data"] == {"sql": SQL, "position": 1}
    assert through == own


@pytest.mark.parametrize("sdk_line", ["1", "2"])
def test_typescript_clients_get_the_server_s_error_as_directly(setup, sdk_line):
    """The TypeScript SDK (1.x `@modelcontextprotocol/sdk`, 2.x `@modelcontextprotocol/client`)
    throws for a JSON-RPC error and returns for an `isError` result: through loom it throws the
    same error, class, code, message and data, as connected directly."""
    script = REPO_ROOT / "tests" / "interop" / "clients" / "ts_call.mjs"

    def call(tool: str, command: list[str]) -> dict[str, Any]:
        done = subprocess.run(
            ["node", str(script), sdk_line, tool, json.dumps({"sql": SQL}), *command],
            capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    own = call("query", [sys.executable, str(PYTHON_SERVER)])
    loom = setup.loom()
    through = call(f"{PY}_query", [loom.command, *loom.args])
    assert "thrown" in own, own
    assert through == own, (through, own)
    assert own["thrown"]["code"] == -32602 and own["thrown"]["data"] == {"sql": SQL, "position": 1}, own
