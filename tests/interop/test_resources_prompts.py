"""Resources keep their URIs through loom; prompts get the server prefix."""

from __future__ import annotations

import pytest
from mcp import MCPError
from mcp_types import PromptReference

from conftest import EVERYTHING, MEMORY, PASSTHROUGH_MODES, connect_direct, connect_loom, dump

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _servers(setup):
    # server-everything has resources, templates and prompts; server-memory has one resource.
    setup.use(EVERYTHING, MEMORY)


async def _all_resources(client):
    resources, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        resources.extend(page.resources)
        cursor = page.next_cursor
        if cursor is None:
            return resources


async def test_resources_list_has_each_servers_resources_under_their_own_uris(setup, mode):
    own = {}
    for server in (EVERYTHING, MEMORY):
        async with connect_direct(setup, server) as direct:
            own[server] = await _all_resources(direct)
            own[f"{server} templates"] = (await direct.list_resource_templates()).resource_templates
    assert own[EVERYTHING], "server-everything lists no resources; the comparison would prove nothing"

    async with connect_loom(setup, mode) as client:
        exposed = await _all_resources(client)
        templates = (await client.list_resource_templates()).resource_templates

    # Every server's resources, and last loom's own view of a dataset (SPEC §12.1).
    assert str(exposed[-1].uri) == "ui://loom/dataset.html", exposed[-1]
    assert exposed[-1].mime_type == "text/html;profile=mcp-app"
    exposed = exposed[:-1]
    expected = own[EVERYTHING] + own[MEMORY]
    assert sorted((r.uri for r in exposed), key=str) == sorted((r.uri for r in expected), key=str)
    by_uri = {str(r.uri): dump(r) for r in exposed}
    for resource in expected:
        assert by_uri[str(resource.uri)] == dump(resource)
    expected_templates = own[f"{EVERYTHING} templates"] + own[f"{MEMORY} templates"]
    assert sorted(map(str, dump(templates))) == sorted(map(str, dump(expected_templates)))


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_resources_read_matches_a_direct_read(setup, mode):
    async with connect_direct(setup, EVERYTHING) as direct, connect_loom(setup, mode) as client:
        listed = await _all_resources(direct)
        static = [r.uri for r in listed]
        assert static
        for uri in static:
            assert dump(await client.read_resource(uri)) == dump(await direct.read_resource(uri)), uri
        # A URI from a resource template, not from resources/list.
        text = await client.read_resource("demo://resource/dynamic/text/7")
        assert text.contents[0].uri == "demo://resource/dynamic/text/7"
        assert "Resource 7" in text.contents[0].text
        blob = await client.read_resource("demo://resource/dynamic/blob/7")
        assert blob.contents[0].blob


async def test_reading_an_unknown_resource_is_an_error(setup, mode):
    async with connect_loom(setup, mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource("nowhere://no/such/resource")
    assert "nowhere://no/such/resource" in raised.value.message


async def test_prompts_list_is_the_servers_own_with_a_prefix(setup, mode):
    async with connect_direct(setup, EVERYTHING) as direct:
        own = (await direct.list_prompts()).prompts
    async with connect_loom(setup, mode) as client:
        exposed = (await client.list_prompts()).prompts
    assert own
    assert sorted(p.name for p in exposed) == sorted(f"{EVERYTHING}_{p.name}" for p in own)
    by_name = {p.name: dump(p) for p in exposed}
    for prompt in own:
        through = by_name[f"{EVERYTHING}_{prompt.name}"]
        assert {**through, "name": prompt.name} == dump(prompt)


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_prompts_get_matches_a_direct_get(setup, mode):
    gets = [
        ("simple-prompt", None),
        ("args-prompt", {"city": "Lisbon"}),
        ("args-prompt", {"city": "Austin", "state": "TX"}),
        ("resource-prompt", {"resourceType": "Text", "resourceId": "4"}),
    ]
    async with connect_direct(setup, EVERYTHING) as direct, connect_loom(setup, mode) as client:
        for name, arguments in gets:
            own = await direct.get_prompt(name, arguments)
            through = await client.get_prompt(f"{EVERYTHING}_{name}", arguments)
            # resource-prompt embeds a dynamic resource stamped with the time of day.
            if name == "resource-prompt":
                assert through.messages[1].content.resource.uri == own.messages[1].content.resource.uri
                through.messages, own.messages = through.messages[:1], own.messages[:1]
            assert dump(through) == dump(own), (name, arguments)


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_prompt_argument_completion(setup, mode):
    async with connect_direct(setup, EVERYTHING) as direct, connect_loom(setup, mode) as client:
        own = await direct.complete(
            PromptReference(type="ref/prompt", name="completable-prompt"), {"name": "department", "value": "E"}
        )
        through = await client.complete(
            PromptReference(type="ref/prompt", name=f"{EVERYTHING}_completable-prompt"),
            {"name": "department", "value": "E"},
        )
    assert own.completion.values, "the server completed nothing; the comparison would prove nothing"
    assert dump(through) == dump(own)


async def test_unknown_prompt_is_an_error_that_names_it(setup, mode):
    async with connect_loom(setup, mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.get_prompt(f"{EVERYTHING}_no-such-prompt")
    assert f"{EVERYTHING}_no-such-prompt" in raised.value.message
