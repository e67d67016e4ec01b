"""Connecting to loom with the SDK, and what happens to loom when the SDK disconnects."""

from __future__ import annotations

import os
from pathlib import Path

import mcp.client.stdio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from conftest import EVERYTHING, connect_loom

pytestmark = pytest.mark.anyio


async def test_handshake_negotiates_a_version_and_names_loom(setup, mode):
    async with connect_loom(setup, mode) as client:
        # "auto" asks server/discover first; loom answers it, so the SDK adopts the modern
        # protocol. "legacy" is the initialize handshake.
        expected = MODERN_PROTOCOL_VERSIONS if mode == "auto" else HANDSHAKE_PROTOCOL_VERSIONS
        assert client.protocol_version in expected
        assert client.server_info is not None
        assert client.server_info.name == "loom"
        capabilities = client.server_capabilities
        assert capabilities.tools is not None
        assert capabilities.resources is not None
        assert capabilities.prompts is not None
        # The session is usable, not just open.
        listed = await client.list_tools()
        assert any(tool.name == f"{EVERYTHING}_echo" for tool in listed.tools)


def _state(pid: int) -> str | None:
    """The process state letter of `pid`, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _alive(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def sdk_kills(monkeypatch) -> list[int]:
    """The pids the SDK had to kill when a connection closed. It closes the server's stdin, waits
    2 s, then kills the whole process group: a kill would hide a loom that does not exit by
    itself, so tests record whether the SDK had to use it."""
    kills: list[int] = []
    terminate = mcp.client.stdio._terminate_process_tree

    async def record_kill(process):
        kills.append(process.pid)
        await terminate(process)

    monkeypatch.setattr(mcp.client.stdio, "_terminate_process_tree", record_kill)
    return kills


async def test_closing_the_client_ends_loom_and_its_servers(setup, mode, monkeypatch):
    kills = sdk_kills(monkeypatch)

    async with connect_loom(setup, mode) as client:
        await client.list_tools()
        pid = setup.loom_pid()
        assert _alive(pid), "loom is not running while connected"
        servers = _children(pid)
        assert len(servers) == len(setup.enabled), f"expected one child per server, found {servers}"

    assert kills == [], "loom did not exit within the SDK's grace period after stdin closed"
    assert not _alive(pid), f"loom (pid {pid}) is still running after the client closed"
    # The downstream servers go with it (checked after loom is gone, so they had their chance).
    left = [child for child in servers if _alive(child)]
    assert left == [], f"downstream servers still running after loom exited: {left}"

