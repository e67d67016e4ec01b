"""server-memory through loom: tools with structured output, its resource, and resource-updated
notifications for a subscription."""

from __future__ import annotations

import json
import warnings

import anyio
import mcp_types as types
import pytest

from conftest import MEMORY, PASSTHROUGH_MODES, PATIENCE, connect_loom

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _only_memory(setup):
    setup.use(MEMORY)

ENTITY = {"name": "loom", "entityType": "gateway", "observations": ["sits in front of MCP servers"]}
GRAPH_URI = "memory://knowledge-graph"


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_create_then_read_graph_and_resource(setup, mode):
    async with connect_loom(setup, mode) as client:
        created = await client.call_tool(f"{MEMORY}_create_entities", {"entities": [ENTITY]})
        assert not created.is_error
        assert created.structured_content == {"entities": [ENTITY]}

        graph = await client.call_tool(f"{MEMORY}_read_graph", {})
        assert graph.structured_content == {"entities": [ENTITY], "relations": []}

        resource = await client.read_resource(GRAPH_URI)
        assert json.loads(resource.contents[0].text) == {"entities": [ENTITY], "relations": []}


async def test_subscribed_resource_updates_arrive_through_loom(setup):
    # resources/subscribe exists up to 2025-11-25 only, so this uses the initialize handshake.
    updated = anyio.Event()
    uris: list[str] = []

    async def on_message(message) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            uris.append(str(message.params.uri))
            updated.set()

    async with connect_loom(setup, "legacy", message_handler=on_message) as client:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated in 2026-07-28, not in this session's version
            await client.subscribe_resource(GRAPH_URI)
        await client.call_tool(f"{MEMORY}_create_entities", {"entities": [ENTITY]})
        with anyio.fail_after(PATIENCE):
            await updated.wait()
    assert GRAPH_URI in uris
