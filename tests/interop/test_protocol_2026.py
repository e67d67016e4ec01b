"""Clients on protocol 2026-07-28 lose nothing through loom (SPEC §5.1, §5.8–§5.11, §22).

The official Python SDK 2.x in its three modes — `auto` (server/discover first: 2026-07-28 with
loom), `"2026-07-28"` (that revision only) and `legacy` (the initialize handshake) — over stdio and
over loom's Streamable HTTP face, against a 2025 server (server-everything) and a server that
speaks both eras (servers/python_server.py). Every step is compared with the same client connected
to the server directly (server-everything speaks no 2026-07-28, so its direct connection is the
SDK's `auto` falling back to the handshake, as a user would have it).

A 2026-07-28 client cannot receive a server's requests: loom turns them into `input_required`
(§5.11). Those tests count the callbacks the client ran and compare what they were given and what
the call answered with the direct connection; the bad-input tests drive the SDK's own retry API by
hand.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from conftest import EVERYTHING, PATIENCE, PY, Setup, connect, connect_direct, connect_loom
from dataplane_clients import DataSetup
from test_http_serve import connect_http, serve_http

pytestmark = pytest.mark.anyio

MODES = ["auto", "2026-07-28", "legacy"]
# servers/python_server.py behind loom a second time, spoken to in 2026-07-28 (`protocol`, SPEC
# §4.6): its questions come as input_required results, not as requests.
PY26 = "py26"
TRANSPORTS = ["stdio", "http"]
TOKENS = {"alice": "alice-token-5b21e0", "bob": "bob-token-9f3c7a"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture
def web(setup: Setup) -> DataSetup:
    """server-everything and the Python server behind loom, with two HTTP credentials."""
    servers = dict(setup.servers)
    servers[PY26] = {**servers[PY], "protocol": "2026-07-28"}
    return DataSetup(
        tmp=setup.tmp,
        fs_root=setup.fs_root,
        servers=servers,
        enabled=[EVERYTHING, PY],
        env=dict(setup.env),
        options={"http": {"tokens": list(TOKENS.values())}},
    )


@asynccontextmanager
async def through_loom(web: DataSetup, transport: str, mode: str, who: str = "alice", **kwargs: Any) -> AsyncIterator[Client]:
    """The SDK to loom over stdio, or over a fresh `loom serve --http` as `who`."""
    if transport == "stdio":
        async with connect_loom(web, mode, **kwargs) as client:
            yield client
        return
    with serve_http(web) as loom:
        async with connect_http(loom.url, mode, headers={"Authorization": f"Bearer {TOKENS[who]}"}, **kwargs) as client:
            yield client


class Callbacks:
    """The client's answers to a server's questions, and what each question was."""

    def __init__(self) -> None:
        self.elicited: list[dict[str, Any]] = []
        self.sampled: list[dict[str, Any]] = []
        self.rooted = 0

    async def elicit(self, context: Any, params: Any) -> types.ElicitResult:
        asked = params.model_dump(by_alias=True, exclude_none=True)
        asked.pop("_meta", None)
        asked.pop("elicitationId", None)
        # A 2026-07-28 server's requestedSchema has no `title` (that revision's shape); asked in
        # the handshake era, the same server sends one. The rest is compared.
        if isinstance(asked.get("requestedSchema"), dict):
            asked["requestedSchema"].pop("title", None)
        self.elicited.append(asked)
        if asked.get("mode") == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content={"name": "Ada", "check": True, "email": "ada@example.com"})

    async def sample(self, context: Any, params: Any) -> types.CreateMessageResult:
        asked = params.model_dump(by_alias=True, exclude_none=True)
        asked.pop("_meta", None)
        self.sampled.append(asked)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="lyrical"), model="m", stop_reason="endTurn")

    async def roots(self, context: Any) -> types.ListRootsResult:
        self.rooted += 1
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project", name="project")])

    def kwargs(self) -> dict[str, Any]:
        return {"elicitation_callback": self.elicit, "sampling_callback": self.sample, "list_roots_callback": self.roots}


def _texts(result: types.CallToolResult) -> list[str]:
    return [UUID.sub("<uuid>", block.text) for block in result.content if block.type == "text"]


# server-everything's tools that ask their client, with arguments.
ASKING = {
    "elicitation": ("trigger-elicitation-request", {}),
    "sampling": ("trigger-sampling-request", {"prompt": "a word", "maxTokens": 10}),
    "url": ("trigger-url-elicitation", {"url": "https://example.com/consent"}),
}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(ASKING))
async def test_a_server_s_questions_reach_the_client(web, transport, mode, case):
    tool, arguments = ASKING[case]
    direct_asked = Callbacks()
    async with connect_direct(web, EVERYTHING, **direct_asked.kwargs()) as direct:
        await direct.list_tools()  # server-everything registers these tools after the first listing
        own = await direct.call_tool(tool, arguments)
    asked = Callbacks()
    async with through_loom(web, transport, mode, **asked.kwargs()) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert f"{EVERYTHING}_{tool}" in names, names
        through = await client.call_tool(f"{EVERYTHING}_{tool}", arguments)
    assert not through.is_error, _texts(through)
    assert _texts(through) == _texts(own)
    assert asked.elicited == direct_asked.elicited
    assert asked.sampled == direct_asked.sampled
    assert asked.elicited or asked.sampled, "the client was asked nothing"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_roots_reach_the_client(web, transport, mode):
    asked = Callbacks()
    async with through_loom(web, transport, mode, **asked.kwargs()) as client:
        await client.list_tools()
        result = await client.call_tool(f"{EVERYTHING}_get-roots-list", {})
    assert "file:///srv/project" in " ".join(_texts(result)), _texts(result)
    assert asked.rooted >= 1


@pytest.mark.parametrize("server", [PY, PY26])
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_a_server_of_both_eras_asks_as_it_does_directly(web, transport, mode, server):
    """servers/python_server.py asks with input_required on a 2026-07-28 connection and with
    requests on a handshake one. Behind loom as `py` (opened with the handshake) its requests
    reach a 2026-07-28 client as input_required; as `py26` (opened with server/discover) its
    input_required reaches a 2026-07-28 client as it came and a handshake client as requests.
    Either way the client sees what it sees directly in the same mode."""
    web.use(EVERYTHING, server)
    calls = [("whoami", {}), ("survey", {"topic": "rivers"})]
    direct_asked = Callbacks()
    params = StdioServerParameters(command=web.servers[PY]["command"], args=web.servers[PY]["args"])
    async with connect(params, mode=mode, **direct_asked.kwargs()) as direct:
        own = [_texts(await direct.call_tool(name, args)) for name, args in calls]
    asked = Callbacks()
    async with through_loom(web, transport, mode, **asked.kwargs()) as client:
        through = [_texts(await client.call_tool(f"{server}_{name}", args)) for name, args in calls]
    assert through == own
    assert own[1] == ["Ada|lyrical|file:///srv/project"], own
    assert asked.elicited == direct_asked.elicited
    assert asked.sampled == direct_asked.sampled
    assert asked.rooted == direct_asked.rooted == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_bad_retries_are_refused_and_the_call_still_finishes(web, transport):
    tool = f"{EVERYTHING}_trigger-elicitation-request"
    async with through_loom(web, transport, "2026-07-28", **Callbacks().kwargs()) as client:
        await client.list_tools()
        session = client.session
        first = await session.call_tool(tool, {}, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        assert first.request_state and first.input_requests, first
        (key,) = first.input_requests
        answer = {key: types.ElicitResult(action="accept", content={"name": "Ada", "check": True, "email": "ada@example.com"})}

        async def refused(**kwargs: Any) -> str:
            with pytest.raises(MCPError) as caught:
                await session.call_tool(tool, {}, allow_input_required=True, **kwargs)
            assert caught.value.code == -32602, caught.value.error
            return caught.value.error.message

        assert "unknown or expired" in await refused(request_state="f" * 32, input_responses=answer)
        stray = {"sampling-999": types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="x"), model="m")}
        assert "`sampling-999`" in await refused(request_state=first.request_state, input_responses=stray)
        assert "without `requestState`" in await refused(input_responses=answer)
        done = await session.call_tool(tool, {}, request_state=first.request_state, input_responses=answer, allow_input_required=True)
        assert isinstance(done, types.CallToolResult) and not done.is_error, done
        assert "Ada" in " ".join(_texts(done))
        # One round, one use.
        assert "unknown or expired" in await refused(request_state=first.request_state, input_responses=answer)


async def test_credentials_never_see_each_other_s_data(web):
    """Two stateless HTTP clients with different tokens: datasets, refs (guessed ones too) and
    requestStates live in their credential's scope; they survive between connections."""
    with serve_http(web) as loom:

        def as_(who: str):
            return connect_http(loom.url, "2026-07-28", headers={"Authorization": f"Bearer {TOKENS[who]}"}, **Callbacks().kwargs())

        async with as_("alice") as alice:
            envelope = (await alice.call_tool(f"{PY}_inventory", {"count": 500})).structured_content
            assert envelope["kind"] == "loom_dataset_ref", envelope
            ref = envelope["ref"]
            await alice.list_tools()
            pending = await alice.session.call_tool(f"{EVERYTHING}_trigger-elicitation-request", {}, allow_input_required=True)
            assert isinstance(pending, types.InputRequiredResult), pending
        async with as_("bob") as bob:
            listed = (await bob.call_tool("loom_list_datasets", {})).structured_content
            assert listed["datasets"] == [], listed
            # A ref of the same name is guessable: it does not exist in bob's scope.
            guessed = await bob.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
            assert guessed.is_error, guessed
            await bob.list_tools()
            (key,) = pending.input_requests
            with pytest.raises(MCPError) as caught:
                await bob.session.call_tool(
                    f"{EVERYTHING}_trigger-elicitation-request",
                    {},
                    request_state=pending.request_state,
                    input_responses={key: types.ElicitResult(action="decline")},
                    allow_input_required=True,
                )
            assert caught.value.code == -32602 and "unknown or expired" in caught.value.error.message
        # A new connection with alice's token: her dataset is still there.
        async with as_("alice") as again:
            counted = (await again.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})).structured_content
            assert counted["rows"] == [{"n": 500}], counted


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_large_results_become_envelopes_and_are_queryable(web, transport, mode):
    async with through_loom(web, transport, mode) as client:
        result = await client.call_tool(f"{PY}_inventory", {"count": 400})
        envelope = result.structured_content
        assert envelope["kind"] == "loom_dataset_ref", envelope
        totals = await client.call_tool("loom_query", {"sql": f"SELECT sum(quantity) AS q FROM {envelope['ref']}"})
    assert totals.structured_content["rows"] == [{"q": sum((i * 7) % 100 for i in range(400))}]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_task_only_tools_are_offered_and_run_for_every_client(web, transport, mode):
    """server-everything's simulate-research-query only runs as a task: a client that cannot take
    one (2026-07-28 without the tasks extension) gets it run by loom; its question for the task
    reaches the client (as input_required for 2026-07-28)."""
    asked = Callbacks()

    async def clarify(context: Any, params: Any) -> types.ElicitResult:
        asked.elicited.append({"message": params.message})
        return types.ElicitResult(action="accept", content={"interpretation": "technical"})

    async with through_loom(web, transport, mode, elicitation_callback=clarify) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        research = tools[f"{EVERYTHING}_simulate-research-query"]
        if mode == "legacy":
            # 2025-11-25 clients see `execution` and call it as a task themselves (test_tasks.py).
            assert research.execution is not None and research.execution.task_support == "required"
            return
        assert research.execution is None, research
        result = await client.call_tool(f"{EVERYTHING}_simulate-research-query", {"topic": "rust", "ambiguous": True})
    assert not result.is_error, _texts(result)
    assert _texts(result)[0].startswith("# Research Report: rust (technical)"), _texts(result)[0][:200]
    assert len(asked.elicited) == 1 and "rust" in asked.elicited[0]["message"]


@pytest.mark.parametrize("server", [PY, PY26])
@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("mode", MODES)
async def test_log_levels_progress_and_trace_context_are_as_direct(web, transport, mode, server):
    """A 2026-07-28 client asks for log messages per request (`log_level`): through loom it gets
    the lines it gets directly, no more; progress and the trace context of `_meta` travel as
    directly."""
    meta = {
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "tracestate": "congo=t61rcWkgMzE",
        "baggage": "userId=alice",
        "x-custom": {"k": [1, 2]},
    }

    def collector(into: list[str]):
        async def callback(params: Any) -> None:
            into.append(params.data)

        return callback

    async def run(client: Client, prefix: str) -> tuple[str, list[float]]:
        progress: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append(done)

        chatty = await client.call_tool(f"{prefix}chatty", {}, progress_callback=on_progress)
        assert _texts(chatty) == ["ok"]
        echoed = _texts(await client.call_tool(f"{prefix}echo_meta", {}, meta=meta))[0]
        return echoed, progress

    params = StdioServerParameters(command=web.servers[PY]["command"], args=web.servers[PY]["args"])
    direct_logs: list[str] = []
    loom_logs: list[str] = []
    async with connect(params, mode=mode, log_level="info", logging_callback=collector(direct_logs)) as direct:
        own_meta, own_progress = await run(direct, "")
        await anyio.sleep(0.3)
    web.use(EVERYTHING, server)
    async with through_loom(web, transport, mode, log_level="info", logging_callback=collector(loom_logs)) as client:
        through_meta, through_progress = await run(client, f"{server}_")
        await anyio.sleep(0.3)
    assert json.loads(through_meta) == json.loads(own_meta) == meta
    assert through_progress == own_progress == [1.0]
    assert loom_logs == direct_logs, (loom_logs, direct_logs)
    if mode != "legacy":
        assert loom_logs == ["info-line"], loom_logs


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_results_carry_what_2026_07_28_requires(web, transport):
    async with through_loom(web, transport, "auto") as client:
        listed = await client.session.list_tools()
        again = await client.session.list_tools()
        assert [t.name for t in listed.tools] == [t.name for t in again.tools], "tools/list order changed"
        assert listed.cache_scope == "private" and listed.ttl_ms == 0, (listed.cache_scope, listed.ttl_ms)
        echoed = await client.call_tool(f"{EVERYTHING}_echo", {"message": "hi"})
        assert (echoed.meta or {}).get("io.modelcontextprotocol/serverInfo", {}).get("name") == "loom", echoed.meta
        assert client.server_info is not None and client.server_info.name == "loom"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_listen_streams_carry_the_scope_s_list_changes(web, transport):
    """In search mode the tools loom_find_tools finds join tools/list: a listen stream of a
    2026-07-28 client hears of it."""
    web.options["tools"] = {"mode": "search"}
    async with through_loom(web, transport, "2026-07-28") as client:
        async with client.listen(tools_list_changed=True) as subscription:
            assert subscription.honored.tools_list_changed
            found = await client.call_tool("loom_find_tools", {"query": "echo a message"})
            assert not found.is_error, _texts(found)
            with anyio.fail_after(PATIENCE):
                async for event in subscription:
                    break
        listed = [t.name for t in (await client.list_tools()).tools]
    assert f"{EVERYTHING}_echo" in listed, listed


async def test_a_task_only_tool_called_by_its_own_name_is_run_as_a_task(web):
    """An MCP Apps view calls its server's tools by their own names (SPEC §8.5); one that only
    runs as a task is run as one by loom then too, for a client without the tasks extension."""
    async with through_loom(web, "stdio", "2026-07-28") as client:
        result = await client.call_tool("simulate-research-query", {"topic": "rust"})
    assert not result.is_error, _texts(result)
    assert _texts(result)[0].startswith("# Research Report: rust"), _texts(result)[0][:200]


@pytest.mark.parametrize("next_caller", ["alice", "bob"])
async def test_a_question_nobody_answers_does_not_hold_the_next_call(web, next_caller):
    """A 2026-07-28 client whose user never answers an elicitation leaves its call waiting in
    loom (its server blocked on the answer). The next call that asks — of the same credential or
    another — gets its own question at once and finishes, as directly: before, the server's new
    question went to the waiting call, and the next call hung until the client's timeout (or,
    from another token, the server was told loom could not tell whose question it was)."""
    tool = f"{EVERYTHING}_trigger-elicitation-request"
    with serve_http(web) as loom:

        def as_(who: str, asked: Callbacks):
            return connect_http(loom.url, "2026-07-28", headers={"Authorization": f"Bearer {TOKENS[who]}"}, **asked.kwargs())

        async with as_("alice", Callbacks()) as alice:
            await alice.list_tools()
            unanswered = await alice.session.call_tool(tool, {}, allow_input_required=True)
            assert isinstance(unanswered, types.InputRequiredResult), unanswered
        asked = Callbacks()
        async with as_(next_caller, asked) as client:
            await client.list_tools()
            # A bound on a hang, not a speed: the server answers in milliseconds once asked.
            with anyio.fail_after(60):
                done = await client.call_tool(tool, {})
        assert not done.is_error, _texts(done)
        assert "Ada" in " ".join(_texts(done)), _texts(done)
        assert len(asked.elicited) == 1, asked.elicited
