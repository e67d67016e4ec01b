"""MCP Apps behind loom, through the official client in each of its modes over stdio and HTTP,
each step compared with the same client connected straight to the server (SPEC §8.5, §5.4):
server-cohort-heatmap (ext-apps' example server) keeps its view — the tool's `_meta.ui`, its
`outputSchema`, the `ui://` page — and its large result reaches the host with the server's
`structuredContent` (what the heatmap draws) while the model reads the envelope, whose dataset
answers SQL.

The server draws its numbers with Math.random; servers/seeded_random.mjs makes them the same in
every process, so a fresh server behind loom and a fresh one connected directly answer the same
first call alike (`generatedAt`, the server's clock, aside).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import MCP_PACKAGES, PY, connect
from dataplane_clients import DataSetup, open_client
from test_protocol_2026 import MODES, TOKENS, TRANSPORTS, through_loom

pytestmark = pytest.mark.anyio

COHORT = "cohort"
HEATMAP_JS = MCP_PACKAGES / "server-cohort-heatmap" / "dist" / "index.js"
SEEDED_RANDOM = Path(__file__).resolve().parent / "servers" / "seeded_random.mjs"
TOOL = "get-cohort-data"
PAGE = "ui://get-cohort-data/mcp-app.html"
ARGUMENTS = {"cohortCount": 24, "maxPeriods": 24}


@pytest.fixture
def apps(setup) -> DataSetup:
    servers = dict(setup.servers)
    servers[COHORT] = {"command": "node", "args": ["--import", SEEDED_RANDOM.as_uri(), str(HEATMAP_JS), "--stdio"], "env": {}}
    return DataSetup(
        tmp=setup.tmp,
        fs_root=setup.fs_root,
        servers=servers,
        enabled=[COHORT, PY],
        env=dict(setup.env),
        options={"http": {"tokens": list(TOKENS.values())}},
    )


def _tool(tools: list[Any], name: str) -> dict[str, Any]:
    found = [t for t in tools if t.name == name]
    assert found, f"no tool {name} in {[t.name for t in tools]}"
    return found[0].model_dump(by_alias=True, exclude_none=True)


async def _seen(client: Any, prefix: str) -> dict[str, Any]:
    """What a host sees of the app: the tool, its page, and the first call's result."""
    tool = _tool((await client.list_tools()).tools, f"{prefix}{TOOL}")
    page = (await client.read_resource(PAGE)).model_dump(by_alias=True, exclude_none=True)
    result = (await client.call_tool(f"{prefix}{TOOL}", ARGUMENTS)).model_dump(by_alias=True, exclude_none=True)
    return {"tool": tool, "page": page, "result": result}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_an_app_shows_through_loom_what_it_shows_directly(apps, transport, mode):
    direct_mode = "auto" if mode == "2026-07-28" else mode
    async with connect(apps.direct(COHORT), mode=direct_mode, loom_like=True, quick_stop=True) as direct:
        own = await _seen(direct, "")
    async with through_loom(apps, transport, mode) as client:
        via = await _seen(client, f"{COHORT}_")
        envelope = json.loads(via["result"]["content"][0]["text"])
        assert envelope["kind"] == "loom_dataset_ref", envelope
        counted = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {envelope['ref']}"})

    # The tool as the host finds it: its view and its schema where they were.
    for key in ("_meta", "outputSchema", "inputSchema", "description", "title"):
        assert via["tool"].get(key) == own["tool"].get(key), (key, via["tool"].get(key), own["tool"].get(key))
    assert via["tool"]["_meta"]["ui"]["resourceUri"] == PAGE
    # The page, whole.
    assert via["page"]["contents"] == own["page"]["contents"]
    assert via["page"]["contents"][0]["mimeType"] == "text/html;profile=mcp-app"
    # The view's data as the server sent it; the model's text is the envelope.
    mine, theirs = dict(via["result"]["structuredContent"]), dict(own["result"]["structuredContent"])
    assert mine.pop("generatedAt") and theirs.pop("generatedAt")
    if mine != theirs:
        import difflib
        a = json.dumps(mine, indent=1, sort_keys=True).splitlines()
        b = json.dumps(theirs, indent=1, sort_keys=True).splitlines()
        print("\n".join(list(difflib.unified_diff(b, a, lineterm=""))[:60]))
    assert mine == theirs
    assert len(mine["cohorts"]) == ARGUMENTS["cohortCount"]
    assert own["result"]["content"][0]["text"] != via["result"]["content"][0]["text"]
    assert counted.structured_content["rows"] == [{"n": ARGUMENTS["cohortCount"]}], counted.structured_content


async def test_the_1x_client_gets_the_app_s_structured_content_as_directly(apps):
    """The Python SDK 1.x (a client of loom over stdio, tests/interop/clients): the tool keeps
    its view and the server's structuredContent reaches it unchanged."""
    async with connect(apps.direct(COHORT), mode="legacy", loom_like=True, quick_stop=True) as direct:
        own = (await direct.call_tool(TOOL, ARGUMENTS)).model_dump(by_alias=True, exclude_none=True)
    async with open_client("sdk1", apps) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        via = await client.call(f"{COHORT}_{TOOL}", ARGUMENTS)
    assert tools[f"{COHORT}_{TOOL}"]["_meta"]["ui"]["resourceUri"] == PAGE
    mine, theirs = dict(via["structuredContent"]), dict(own["structuredContent"])
    assert mine.pop("generatedAt") and theirs.pop("generatedAt")
    assert mine == theirs
    assert json.loads(via["content"][0]["text"])["kind"] == "loom_dataset_ref"
