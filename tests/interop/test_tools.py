"""Tools through loom look and behave exactly as they do on the server itself."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

import anyio
import pytest
from mcp import MCPError

from conftest import (
    EVERYTHING,
    FS,
    MEMORY,
    PASSTHROUGH_MODES,
    PY,
    as_the_server_listed_it,
    assert_matches_output_schema,
    connect_direct,
    connect_loom,
    dump,
    output_schema,
)

pytestmark = pytest.mark.anyio

# Fields of a listed tool that loom does not carry over: the name gets its prefix.
NOT_COMPARED = {"name"}


def _comparable(listed: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in listed.items() if key not in NOT_COMPARED}


def _task_required(tool) -> bool:
    return bool(tool.execution and tool.execution.task_support == "required")


def _as_offered(own: dict[str, Any], mode: str) -> dict[str, Any]:
    """A server's own tool as loom should list it in `mode`: as it is for handshake-era clients
    (tasks exist there, so `execution` stays), without `execution` for 2026-07-28 clients (`auto`
    negotiates it with loom), whose tasks are an extension without it (see
    test_task_tools_follow_the_clients_era)."""
    if mode == "auto":
        own = {key: value for key, value in own.items() if key != "execution"}
    return own


@pytest.mark.parametrize("server", [EVERYTHING, FS, MEMORY, PY])
async def test_tools_list_matches_the_servers_own(setup, mode, server):
    async with connect_direct(setup, server) as direct:
        own = (await direct.list_tools()).tools
    async with connect_loom(setup, mode) as client:
        exposed = (await client.list_tools()).tools

    assert own, f"{server} lists no tools; the comparison would prove nothing"
    names = [tool.name for tool in exposed]
    assert len(names) == len(set(names)), f"loom lists a tool twice: {names}"
    # Every tool is a server's, under its prefix, or one of loom's own (`loom_*`).
    prefixes = tuple(f"{name}_" for name in [*setup.enabled, "loom"])
    assert all(name.startswith(prefixes) for name in names), names

    mine = {tool.name.removeprefix(f"{server}_"): tool for tool in exposed if tool.name.startswith(f"{server}_")}
    # Every tool is offered in every era: one that only runs as a task is run as one by loom for
    # a client that cannot take a task (SPEC §5.3, §5.10).
    offered = own
    assert sorted(mine) == sorted(tool.name for tool in offered)
    for tool in offered:
        through = mine[tool.name]
        # Title, description, inputSchema, outputSchema, annotations, icons, execution, _meta: all
        # of it (an outputSchema may sit under loom's `_meta` key instead, SPEC §5.3).
        assert _comparable(as_the_server_listed_it(through)) == _comparable(_as_offered(dump(tool), mode)), (
            f"tool {tool.name} differs through loom"
        )


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_task_tools_follow_the_clients_era(setup, mode):
    """Handshake-era clients (2025-11-25 has tasks) get the task tools with their `execution`
    as the server wrote it, and loom declares the tasks capability; 2026-07-28 clients (tasks are
    an extension there, without `execution`) get every tool without `execution`, and the tasks
    extension declared in server/discover (tests/interop/test_tasks.py and
    test_protocol_2026.py run the tasks themselves)."""
    setup.use(EVERYTHING)
    async with connect_direct(setup, EVERYTHING) as direct:
        own = {tool.name: tool for tool in (await direct.list_tools()).tools}
    required = [name for name, tool in own.items() if _task_required(tool)]
    assert required, "the pinned server-everything has no task-only tool any more; pick another check"
    async with connect_loom(setup, mode) as client:
        exposed = {tool.name: tool for tool in (await client.list_tools()).tools}
        capabilities = client.server_capabilities
    if mode == "legacy":
        for name in required:
            through = exposed.get(f"{EVERYTHING}_{name}")
            assert through is not None, f"task-only tool {name} is not offered to a 2025-11-25 client"
            assert dump(through).get("execution") == dump(own[name])["execution"], (
                f"{name} is offered without the server's execution {dump(own[name])['execution']}"
            )
        tasks = capabilities.tasks
        assert tasks is not None, "loom offers task tools but declares no tasks capability"
        assert tasks.requests is not None and tasks.requests.tools is not None and tasks.requests.tools.call is not None
        assert tasks.list is not None and tasks.cancel is not None
    else:
        missing = [name for name in required if f"{EVERYTHING}_{name}" not in exposed]
        assert not missing, f"task-only tools not offered to a 2026-07-28 client: {missing}"
        with_execution = [name for name, tool in exposed.items() if tool.execution is not None]
        assert not with_execution, f"tools listed with `execution` to a 2026-07-28 client: {with_execution}"
        assert capabilities.tasks is None, "loom declares 2025-11-25 tasks to a 2026-07-28 client"
        assert "io.modelcontextprotocol/tasks" in (capabilities.extensions or {}), capabilities


# Calls whose results must come through loom exactly as the server gives them.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo, wörld \u2603 \"quoted\"\nnext line"}),
    ("get-sum", {"a": 17, "b": 25.5}),
    ("get-tiny-image", {}),  # image content
    ("get-annotated-message", {"messageType": "error", "includeImage": True}),  # annotations
    ("get-resource-links", {"count": 4}),  # resource_link content
    ("get-resource-reference", {"resourceType": "Text", "resourceId": 3}),  # embedded text resource
    ("get-resource-reference", {"resourceType": "Blob", "resourceId": 2}),  # embedded blob resource
    ("get-structured-content", {"location": "Los Angeles"}),  # structuredContent + outputSchema
    ("get-sum", {"a": "not a number"}),  # the server's isError result for bad arguments
]

# server-everything stamps the current time into dynamic resources; two calls a second apart
# differ there and nowhere else.
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}:\d{2}\s?[AP]M\b")


def _without_clock(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key == "blob" and isinstance(item, str):
                try:
                    item = base64.b64decode(item, validate=True).decode()
                except (binascii.Error, UnicodeDecodeError):
                    pass
            out[key] = _without_clock(item)
        return out
    if isinstance(value, list):
        return [_without_clock(item) for item in value]
    if isinstance(value, str):
        return _CLOCK.sub("<time>", value)
    return value


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_tool_results_match_a_direct_call(setup, mode):
    setup.use(EVERYTHING)
    async with connect_direct(setup, EVERYTHING) as direct, connect_loom(setup, mode) as client:
        mismatches = []
        kinds = set()
        for name, arguments in CALLS:
            own = await direct.call_tool(name, arguments)
            through = await client.call_tool(f"{EVERYTHING}_{name}", arguments)
            kinds.update(block.type for block in own.content)
            if own.is_error:
                kinds.add("isError")
            if own.structured_content is not None:
                kinds.add("structuredContent")
            if _without_clock(dump(through)) != _without_clock(dump(own)):
                mismatches.append(f"{name} {arguments}:\n  direct: {dump(own)}\n  loom:   {dump(through)}")
        assert not mismatches, "results differ through loom:\n" + "\n".join(mismatches)
        # The calls above are meant to cover these; a server update that drops one shows here.
        assert kinds >= {"text", "image", "resource_link", "resource", "isError", "structuredContent"}, kinds


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_structured_content_is_validated_against_the_output_schema(setup, mode):
    setup.use(EVERYTHING)
    async with connect_loom(setup, mode) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        tool = listed[f"{EVERYTHING}_get-structured-content"]
        schema = output_schema(tool)
        assert schema is not None
        result = await client.call_tool(tool.name, {"location": "New York"})
        assert not result.is_error
        assert result.structured_content == {"temperature": 33, "conditions": "Cloudy", "humidity": 82}
        assert_matches_output_schema(result, schema)
        if tool.output_schema is not None:
            # Listed as outputSchema, so the SDK validated the result: it refuses a broken one.
            broken = result.model_copy(update={"structured_content": {"temperature": "hot"}})
            with pytest.raises(RuntimeError, match="Invalid structured content"):
                await client.session.validate_tool_result(tool.name, broken)


async def _long_running(client, tool: str, steps: int) -> list[float]:
    """Call trigger-long-running-operation with a progress callback; the progress values seen."""
    seen: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        assert total == steps
        seen.append(progress)

    result = await client.call_tool(tool, {"duration": 0.2 * steps, "steps": steps}, progress_callback=on_progress)
    assert not result.is_error
    assert "Long running operation completed" in result.content[0].text
    return seen


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_progress_notifications_arrive_through_loom(setup, mode):
    setup.use(EVERYTHING)
    async with connect_loom(setup, mode) as client:
        seen = await _long_running(client, f"{EVERYTHING}_trigger-long-running-operation", steps=4)
    # In order, and all but possibly the last: the last one races the result inside loom
    # (test_final_progress_notification_comes_before_the_result).
    assert seen[:3] == [1, 2, 3]
    assert seen in ([1, 2, 3], [1, 2, 3, 4])


# One call loses its final notification now and then; twenty at once lose at least one reliably.
CONCURRENT_CALLS = 20


@pytest.mark.parametrize(
    "through_loom",
    [
        pytest.param(False, id="direct"),
        pytest.param(True, id="loom"),
    ],
)
async def test_final_progress_notification_comes_before_the_result(setup, through_loom):
    setup.use(EVERYTHING)
    steps = 4
    if through_loom:
        connection, tool = connect_loom(setup, "legacy"), f"{EVERYTHING}_trigger-long-running-operation"
    else:
        connection, tool = connect_direct(setup, EVERYTHING), "trigger-long-running-operation"
    seen: dict[int, list[float]] = {}
    async with connection as client:

        async def one(index: int) -> None:
            seen[index] = await _long_running(client, tool, steps)

        async with anyio.create_task_group() as group:
            for index in range(CONCURRENT_CALLS):
                group.start_soon(one, index)
    assert len(seen) == CONCURRENT_CALLS
    incomplete = {index: got for index, got in seen.items() if got != [1, 2, 3, 4]}
    assert not incomplete, f"calls that missed progress notifications: {incomplete}"


@pytest.mark.parametrize("name", [f"{EVERYTHING}_no-such-tool", "nosuchserver_echo", "echo"])
async def test_unknown_tool_is_an_error_that_names_it(setup, mode, name):
    setup.use(EVERYTHING)
    async with connect_loom(setup, mode) as client:
        await client.list_tools()
        try:
            result = await client.call_tool(name, {})
        except MCPError as error:
            message = error.message
        else:
            # MCP allows an isError result for this too.
            assert result.is_error, f"calling unknown tool {name} succeeded: {dump(result)}"
            message = " ".join(block.text for block in result.content if block.type == "text")
        assert name in message
        # loom is still fine afterwards.
        assert (await client.list_tools()).tools


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_child_environment_is_default_deny(setup, mode):
    """get-env shows the environment loom gave server-everything: only the fixed allowlist,
    envPassthrough and env, never the rest of loom's own environment."""
    setup.use(EVERYTHING)
    config = setup.servers[EVERYTHING]
    config["envPassthrough"] = ["LOOM_INTEROP_PASSED"]
    config["env"] = {"LOOM_INTEROP_SET": "set-in-config"}
    setup.env.update(
        LOOM_INTEROP_PASSED="passed-through",
        LOOM_INTEROP_SECRET="must-not-leak",
        LANG="C.UTF-8",
    )
    async with connect_loom(setup, mode) as client:
        result = await client.call_tool(f"{EVERYTHING}_get-env", {})
    text = result.content[0].text
    assert "LOOM_INTEROP_SECRET" not in text and "must-not-leak" not in text
    assert "passed-through" in text
    assert "set-in-config" in text
    assert "C.UTF-8" in text  # LANG is on the allowlist
    allowed = {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM"}
    allowed |= {"LOOM_INTEROP_PASSED", "LOOM_INTEROP_SET"}
    names = set(json.loads(text))
    assert names <= allowed, f"unexpected variables in the child: {sorted(names - allowed)}"
