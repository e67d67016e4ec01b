"""What loom promises about servers that misbehave, and about plain cancellation, seen through
the official Python SDK 2.x in each mode and a real server built with that SDK
(servers/python_server.py), compared with the same client connected directly where that means
something (SPEC §4.3, §4.4, §5.5, §7):

- a call the client cancels is cancelled on the server, as directly;
- a server that ignores stdin EOF and SIGTERM is killed, and loom still exits within the SDK's
  own grace period when its client goes;
- a server that crashes again and again is delisted, its tools leave the list (the client is
  told) and calling one says why;
- a result of over 16 MiB (the stdio limit of common transports) arrives whole, as directly.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from conftest import PY, PYTHON_SERVER, Setup, connect_direct, connect_loom
from dataplane_clients import DataSetup
from test_lifecycle import _alive, _children, sdk_kills

pytestmark = pytest.mark.anyio


def _with_options(setup: Setup, enabled: list[str], **options) -> DataSetup:
    """`setup`'s servers, `enabled` of them listed, with top-level loom `options`."""
    return DataSetup(tmp=setup.tmp, fs_root=setup.fs_root, servers=dict(setup.servers), enabled=enabled, options=options)

# Runs python_server.py in-process while ignoring SIGTERM, and does not exit when its stdin ends:
# only SIGKILL stops it.
STUBBORN = """
import runpy, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
server = sys.argv[1]
sys.argv = [server]
try:
    runpy.run_path(server, run_name="__main__")
finally:
    while True:
        time.sleep(3600)
"""

# Runs python_server.py and exits with code 3 after 1.5 s, every time it is started: long enough
# to answer loom's handshake and listings, never long enough to count as recovered (10 s).
# python_server.py that records its pid, and exits at once (code 3) once the marker file exists:
# the test lets it be listed, then kills it and makes every restart fail, so the crash loop does
# not depend on how fast a loaded machine starts Python.
CRASHING = """
import os, runpy, sys
marker, pid_file, server = sys.argv[1:4]
if os.path.exists(marker):
    os._exit(3)
with open(pid_file, "w") as f:
    f.write(str(os.getpid()))
sys.argv = [server]
runpy.run_path(server, run_name="__main__")
"""


async def test_a_cancelled_call_is_cancelled_on_the_server_as_directly(setup, mode, tmp_path):
    seen: dict[str, str] = {}
    for side in ("direct", "loom"):
        record = tmp_path / f"{side}.cancelled"
        setup.servers[PY]["env"] = {"INTEROP_CANCELLED_FILE": str(record)}
        setup.use(PY)
        connecting = connect_direct(setup, PY) if side == "direct" else connect_loom(setup, mode)
        name = "sleepy" if side == "direct" else f"{PY}_sleepy"
        async with connecting as client:
            await client.list_tools()
            with anyio.move_on_after(1.0) as scope:
                await client.call_tool(name, {"seconds": 120})
            assert scope.cancelled_caught, f"{side}: the call ended by itself"
            # The server records the cancel when it gets it; a bound on a hang, not a speed.
            with anyio.fail_after(30):
                while not record.exists():
                    await anyio.sleep(0.05)
        seen[side] = record.read_text()
    assert seen["loom"] == seen["direct"] == "cancelled\n", seen


async def test_a_server_that_ignores_sigterm_is_killed_and_loom_still_exits(setup, mode, monkeypatch):
    kills = sdk_kills(monkeypatch)
    setup.servers[PY] = {"command": sys.executable, "args": ["-c", STUBBORN, str(PYTHON_SERVER)], "env": {}}
    setup.use(PY)
    async with connect_loom(setup, mode) as client:
        assert any(tool.name == f"{PY}_add" for tool in (await client.list_tools()).tools)
        pid = setup.loom_pid()
        (stubborn,) = _children(pid)
    # loom closed the server's stdin, sent SIGTERM, then SIGKILL, within the SDK's 2 s grace.
    assert kills == [], "loom did not exit within the SDK's grace period after stdin closed"
    assert not _alive(pid), f"loom (pid {pid}) still runs"
    assert not _alive(stubborn), f"the server that ignores SIGTERM (pid {stubborn}) still runs"


async def test_a_server_in_a_crash_loop_is_delisted_and_the_client_told(setup, mode, tmp_path):
    marker, pid_file = tmp_path / "crash-from-now-on", tmp_path / "crashy.pid"
    setup.servers["crashy"] = {
        "command": sys.executable,
        "args": ["-c", CRASHING, str(marker), str(pid_file), str(PYTHON_SERVER)],
        "env": {},
    }
    seen: list[str] = []

    async def on_message(message) -> None:
        # Whatever shape the SDK hands a notification in, its class names say what it was.
        seen.extend(type(part).__name__ for part in (message, getattr(message, "root", None)) if part is not None)

    looping = _with_options(setup, [PY, "crashy"], restart={"maxAttempts": 2, "baseDelayMs": 100})
    async with connect_loom(looping, mode, message_handler=on_message) as client:
        names = lambda tools: {tool.name for tool in tools.tools}  # noqa: E731
        # Hang guards, not timings: listed first, then killed, and every restart exits at once.
        with anyio.fail_after(60):
            while "crashy_add" not in names(await client.list_tools()):
                await anyio.sleep(0.2)
        marker.touch()
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        with anyio.fail_after(60):
            while "crashy_add" in names(await client.list_tools()):
                await anyio.sleep(0.2)
        listed = names(await client.list_tools())
        assert f"{PY}_add" in listed and "crashy_add" not in listed, listed
        # Its tools are gone: calling one is loom's unknown-tool error, naming the live ones.
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("crashy_add", {"a": 1, "b": 2})
        assert "unknown tool `crashy_add`" in unknown.value.message, unknown.value.message
    # A client of the handshake era is told at once; a 2026-07-28 client hears of list changes
    # only on a `subscriptions/listen` stream it opened (test_protocol_2026.py covers those).
    if mode == "legacy":
        assert "ToolListChangedNotification" in seen, seen


async def test_a_result_over_16_mib_arrives_whole_as_directly(setup, mode):
    size = 20 << 20
    setup.use(PY)
    async with connect_direct(setup, PY) as direct:
        own = await direct.call_tool("big_text", {"size": size})
    # Passed through whole (the firewall would reduce it): what is compared is the transport.
    whole = _with_options(setup, [PY], compression={"perTool": {"py/big_text": {"bypass": True}}})
    async with connect_loom(whole, mode) as client:
        through = await client.call_tool(f"{PY}_big_text", {"size": size})
    assert len(through.content[0].text) == len(own.content[0].text) == size
    assert through.content[0].text == own.content[0].text
