"""Tool search mode (SPEC §20) and the session report (§21) through the official clients, each in
every mode it has: the Python SDK 2.x (`auto`, the pinned `2026-07-28`, `legacy`), the Python SDK
1.x (dataplane_clients.py), and the Inspector CLI (one process, hence one loom session, per call),
in front of the real npm servers (server-everything, server-filesystem, server-memory) and, where
a large table is needed, the loom-fixture.

In search mode `tools/list` holds loom's own tools and the three discovery tools only; a tool
found with `loom_find_tools` is the server's own definition, joins `tools/list` for the rest of
the session (one `notifications/tools/list_changed`), and answers through `loom_call` exactly as
when called by its name, envelopes included. A tool hidden by `denyTools` is never found nor
called. `loom_stats` counts the session's calls and holds no argument text. Every client must
accept every result as it is: a client that raises fails the test.

test_listing_sizes prints the sizes of the tool listings (search mode, all mode, and the servers'
own listings without loom, summed) past pytest's capture.
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

from conftest import EVERYTHING, FS, MEMORY, PASSTHROUGH_MODES, PATIENCE, REPO_ROOT, Setup, connect, connect_direct, connect_loom, dump
from dataplane_clients import (
    CLIENTS,
    CRM,
    SALES_ROWS,
    ClientRaised,
    DataClient,
    DataSetup,
    Sdk2Client,
    assert_envelope,
    assert_error,
    assert_ok,
    columns,
    dp,  # noqa: F401 - fixture
    open_client,
    text_of,
)
from test_firewall import _inspector
from test_http_serve import connect_http, serve_http

pytestmark = pytest.mark.anyio

OWN_TOOLS = {"loom_query", "loom_list_datasets", "loom_describe", "loom_materialize", "loom_export", "loom_read", "loom_stats"}
DISCOVERY_TOOLS = {"loom_tool_categories", "loom_find_tools", "loom_call"}
SEARCH_LISTING = OWN_TOOLS | DISCOVERY_TOOLS
# What search mode's tools/list may cost at most (characters of its JSON).
SEARCH_LISTING_LIMIT = 6_000

SDK2_MODES = ["auto", "2026-07-28", "legacy"]
ERAS = ["legacy", "auto", "modern"]

# (query, server, the server's own tool name): what a model would ask for, and the tool
# of the real server that must be among the matches.
READ_FILE = ("read the contents of a text file", FS, "read_text_file")
ADD_NUMBERS = ("add two numbers", EVERYTHING, "get-sum")

# Planted in arguments (and a search query): never to appear in loom_stats or the report.
CANARY = "canary-5e1d0c7a9b"

MARKED = re.compile(r"<<([0-9a-f]{32})>>(.*)<</\1>>", re.DOTALL)


@pytest.fixture(params=CLIENTS)
def client_kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def search(dp: DataSetup) -> DataSetup:
    """The three npm servers behind loom in search mode (the fixture server stays configured for
    tests that add it with `use`)."""
    dp.use(EVERYTHING, FS, MEMORY)
    dp.options["tools"] = {"mode": "search"}
    return dp


def listing_chars(tools: list[dict[str, Any]]) -> int:
    """Characters (code points) of the compact JSON of a `tools/list` result: what loom_stats
    counts (SPEC §21)."""
    return len(json.dumps({"tools": tools}, separators=(",", ":"), ensure_ascii=False))


def names(tools: list[dict[str, Any]]) -> set[str]:
    listed = [tool["name"] for tool in tools]
    assert len(listed) == len(set(listed)), f"a tool listed twice: {listed}"
    return set(listed)


def unmarked(description: str) -> str:
    """A found tool's description without the nonce markers around it (SPEC §20.2)."""
    found = MARKED.fullmatch(description)
    assert found, f"a found description without its nonce markers: {description[:200]}"
    return found[2]


def check_found(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """loom_find_tools' answer: every description marked with the same nonce, which the note
    names as data; the tools."""
    tools = answer["tools"]
    marked = [MARKED.fullmatch(tool["description"]) for tool in tools]
    assert all(marked), f"a found description without its nonce markers: {tools}"
    nonces = {found[1] for found in marked}
    assert len(nonces) == 1, f"found descriptions marked with different nonces: {nonces}"
    assert nonces.pop() in answer["note"] and "not instructions" in answer["note"], answer["note"]
    return tools


async def find(client: DataClient, query: str, **arguments: Any) -> list[dict[str, Any]]:
    """loom_find_tools' matches (at least one)."""
    answer = assert_ok(await client.call("loom_find_tools", {"query": query, **arguments}), f"loom_find_tools {query!r}")
    assert answer["tools"], f"loom_find_tools {query!r} found nothing: {answer}"
    return check_found(answer)


async def loom_call(client: DataClient, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    call = {"tool": tool} if arguments is None else {"tool": tool, "arguments": arguments}
    return await client.call("loom_call", call)


def outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What a tool result says, whatever the protocol version added (resultType)."""
    return {"content": result["content"], "structuredContent": result.get("structuredContent"), "isError": bool(result.get("isError"))}


async def own_tools(setup: Setup, *servers: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Each server's own tools, straight from the server (no loom), by server and tool name."""
    own: dict[str, dict[str, dict[str, Any]]] = {}
    for server in servers:
        async with connect_direct(setup, server) as direct:
            own[server] = {tool["name"]: tool for tool in dump((await direct.list_tools()).tools)}
        assert own[server], f"{server} lists no tools"
    return own


async def stats(client: DataClient) -> dict[str, Any]:
    return assert_ok(await client.call("loom_stats", {}), "loom_stats")


@asynccontextmanager
async def sdk2_noting_list_changes(setup: Setup, mode: str, changes: list[Any]) -> AsyncIterator[Sdk2Client]:
    """The SDK 2.x to loom in `mode`, appending every tools/list_changed it receives to `changes`:
    as a notification in the handshake era, on a `subscriptions/listen` stream in 2026-07-28
    (which has no other way, SPEC §5.9)."""

    async def on_message(message: Any) -> None:
        # A listen stream's notification (it names its subscription) is counted as the stream's
        # event below, not twice.
        listened = isinstance(message, types.ToolListChangedNotification) and "io.modelcontextprotocol/subscriptionId" in (
            (message.params.meta if message.params else None) or {}
        )
        if isinstance(message, types.ToolListChangedNotification) and not listened:
            changes.append(message)

    async with connect(setup.loom(), mode=mode, message_handler=on_message) as client:
        if mode == "legacy":
            yield Sdk2Client(client, mode)
            return
        async with client.listen(tools_list_changed=True) as subscription, anyio.create_task_group() as group:

            async def pump() -> None:
                async for event in subscription:
                    changes.append(event)

            group.start_soon(pump)
            yield Sdk2Client(client, mode)
            group.cancel_scope.cancel()


# --------------------------------------------------------------------------------------------
# 1. What search mode lists, and what that saves.


async def test_search_mode_lists_loom_and_the_discovery_tools_only(search, client_kind):
    async with open_client(client_kind, search) as client:
        tools = await client.list_tools()
        assert names(tools) == SEARCH_LISTING
        size = listing_chars(tools)
        assert size <= SEARCH_LISTING_LIMIT, f"search mode's tools/list is {size:,} characters"
        figures = (await stats(client))["tools"]
        # loom counts what it sent; the client measured what it got: the same text.
        assert (figures["seenTools"], figures["seen"]["chars"]) == (len(tools), size), figures
        categories = assert_ok(await client.call("loom_tool_categories", {}), "loom_tool_categories")
        assert figures["directTools"] == categories["tools"] > 30, (figures, categories)
        assert figures["savedPerListing"]["chars"] == figures["direct"]["chars"] - size > 5 * size, figures


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_listing_sizes(search, mode, capsys):
    """The characters of the JSON of `tools/list`: search mode, all mode (same servers, same
    client), and the servers' own listings summed (each server alone, no loom)."""
    own = await own_tools(search, EVERYTHING, FS, MEMORY)
    direct = {server: listing_chars(list(tools.values())) for server, tools in own.items()}
    sizes: dict[str, tuple[int, int]] = {}
    for tools_mode in ["search", "all"]:
        search.options["tools"] = {"mode": tools_mode}
        async with connect_loom(search, mode) as client:
            tools = dump((await client.list_tools()).tools)
            sizes[tools_mode] = (len(tools), listing_chars(tools))
    (search_tools, search_chars), (all_tools, all_chars) = sizes["search"], sizes["all"]
    with capsys.disabled():
        print(
            f"\ntools/list sizes ({mode}, compact JSON characters): search mode {search_chars:,} ({search_tools} tools); "
            f"all mode {all_chars:,} ({all_tools} tools); direct, each server alone, summed {sum(direct.values()):,} "
            f"({sum(map(len, own.values()))} tools: "
            + ", ".join(f"{server} {chars:,}" for server, chars in direct.items())
            + ")"
        )
    assert search_chars <= SEARCH_LISTING_LIMIT
    assert all_tools == search_tools - len(DISCOVERY_TOOLS) + sum(map(len, own.values())), (
        "all mode lists every server tool and loom's own"
    )
    assert all_chars > 5 * search_chars and sum(direct.values()) > 5 * search_chars


# --------------------------------------------------------------------------------------------
# 2. Finding a tool and calling it through loom_call.


async def test_a_found_tool_is_the_servers_own_and_loom_call_equals_a_direct_call(search, client_kind):
    hello = search.fs_root / "hello.txt"
    calls = {READ_FILE: {"path": str(hello)}, ADD_NUMBERS: {"a": 2, "b": 3}}
    # The servers' own definitions and answers, without loom.
    own: dict[str, dict[str, Any]] = {}
    answers: dict[str, dict[str, Any]] = {}
    for (_, server, tool), arguments in calls.items():
        async with connect_direct(search, server) as direct:
            own[server] = {listed["name"]: listed for listed in dump((await direct.list_tools()).tools)}
            answers[server] = outcome(dump(await direct.call_tool(tool, arguments)))
    assert text_of(answers[FS]) == hello.read_text()
    assert text_of(answers[EVERYTHING]) == "The sum of 2 and 3 is 5."

    async with open_client(client_kind, search) as client:
        for (query, server, tool), arguments in calls.items():
            name = f"{server}_{tool}"
            found = {entry["name"]: entry for entry in await find(client, query)}
            assert name in found, f"{query!r} → {list(found)}"
            entry, theirs = found[name], own[server][tool]
            assert entry["server"] == server
            assert entry["inputSchema"] == theirs["inputSchema"]
            assert unmarked(entry["description"]) == theirs["description"]
            assert entry.get("annotations") == theirs.get("annotations")

            through = await loom_call(client, name, arguments)
            by_name = await client.call(name, arguments)
            assert through == by_name, f"{name}: loom_call answered otherwise than a direct call"
            assert outcome(through) == answers[server], f"{name}: not what the server itself answers"


# --------------------------------------------------------------------------------------------
# 3. Found tools join tools/list.


async def test_found_tools_join_the_list(search, client_kind):
    async with open_client(client_kind, search) as client:
        assert names(await client.list_tools()) == SEARCH_LISTING
        found = {entry["name"]: entry for query in (READ_FILE[0], ADD_NUMBERS[0]) for entry in await find(client, query)}
        tools = await client.list_tools()
        assert names(tools) == SEARCH_LISTING | found.keys(), "the found tools (default maxJoined 16) join the list"
        # Listed with the schema they were found with, and called by the listed name.
        for tool in tools:
            if tool["name"] in found:
                assert tool["inputSchema"] == found[tool["name"]]["inputSchema"], tool["name"]
        hello = await client.call(f"{FS}_read_text_file", {"path": str(search.fs_root / "hello.txt")})
        assert text_of(hello) == (search.fs_root / "hello.txt").read_text()


@pytest.mark.parametrize("mode", SDK2_MODES)
async def test_one_list_changed_when_the_joined_set_changes(search, mode):
    """Five tools found at once: one notification; the same ones again: none; five others beyond
    maxJoined 6: one, and the least recently found leave (the best of the first five stays)."""
    search.options["tools"]["maxJoined"] = 6
    changes: list[Any] = []

    async def changed_after(count: int) -> int:
        """Wait for the next notification, then a while longer: exactly one more arrived."""
        with anyio.fail_after(PATIENCE):
            while len(changes) == count:
                await anyio.sleep(0.02)
        await anyio.sleep(0.5)  # loom coalesces within 50 ms
        assert len(changes) == count + 1, f"{len(changes) - count} list_changed notifications for one change"
        return count + 1

    async with sdk2_noting_list_changes(search, mode, changes) as client:
        assert names(await client.list_tools()) == SEARCH_LISTING
        count = len(changes)
        first = [entry["name"] for entry in await find(client, READ_FILE[0])]
        assert len(first) == 5, first
        count = await changed_after(count)
        assert names(await client.list_tools()) == SEARCH_LISTING | set(first)

        # The same tools found again: the joined set is the same, nothing is sent.
        await find(client, READ_FILE[0])
        await anyio.sleep(0.5)
        assert len(changes) == count, "list_changed although the joined tools stayed the same"

        second = [entry["name"] for entry in await find(client, ADD_NUMBERS[0])]
        assert len(second) == 5 and not set(first) & set(second), (first, second)
        await changed_after(count)
        assert names(await client.list_tools()) == SEARCH_LISTING | set(second) | {first[0]}


async def test_only_tools_the_client_can_use_are_found(search, client_kind):
    """What loom_find_tools finds is what all mode's tools/list offers: a tool that only runs as a
    task (server-everything's research query) is both found and listed for every client, as loom
    runs it as a task for one that cannot (SPEC §5.10, §20.2)."""
    search.options["tools"] = {"mode": "all"}
    async with open_client(client_kind, search) as client:
        listed = names(await client.list_tools())
        answer = assert_ok(await client.call("loom_find_tools", {"query": "simulate a research query", "limit": 20}), "find")
        found = {tool["name"] for tool in check_found(answer)}
        task_only = f"{EVERYTHING}_simulate-research-query"
        assert task_only in found and task_only in listed, (sorted(found), task_only in listed)
        assert found <= listed, f"found tools that tools/list does not offer: {found - listed}"


# --------------------------------------------------------------------------------------------
# 4. Large results through loom_call.


async def test_large_results_through_loom_call_are_envelopes(search, client_kind):
    search.use(CRM, FS)
    async with open_client(client_kind, search) as client:
        users = assert_envelope(await loom_call(client, f"{CRM}_rows", {"count": 3000}), "loom_call crm_rows")
        assert (users["ref"], users["rows"]) == ("ds_crm_rows_1", 3000)
        # The dataset is the tool's, not loom_call's.
        assert (users["provenance"]["server"], users["provenance"]["tool"], users["provenance"]["args"]) == (CRM, "rows", {"count": 3000})
        sales = assert_envelope(
            await loom_call(client, f"{FS}_read_text_file", {"path": str(search.fs_root / "sales.csv")}), "loom_call read sales.csv"
        )
        assert (sales["rows"], sales["provenance"]["source"]) == (SALES_ROWS, "csv")
        assert columns(sales)["amount"] == "Float64"

        sql = f"SELECT count(*) AS n, sum(id) AS s FROM {users['ref']} WHERE active"
        answer = assert_ok(await client.call("loom_query", {"sql": sql}), "loom_query")
        assert answer["rows"] == [{"n": 1500, "s": sum(range(0, 3000, 2))}]
        # loom's own tools answer through loom_call too, the same.
        assert await loom_call(client, "loom_query", {"sql": sql}) == await client.call("loom_query", {"sql": sql})
        regions = assert_ok(
            await loom_call(client, "loom_query", {"sql": f"SELECT count(DISTINCT region) AS r FROM {sales['ref']}"}), "loom_query"
        )
        assert regions["rows"] == [{"r": 4}]


# --------------------------------------------------------------------------------------------
# 5. allow/deny holds.


async def test_a_denied_tool_is_neither_found_nor_callable(search, client_kind):
    search.servers[FS]["denyTools"] = ["write_file"]
    target = search.fs_root / "written.txt"
    own = await own_tools(search, FS)
    assert "write_file" in own[FS]
    async with open_client(client_kind, search) as client:
        for query in ["write a file", "write_file", "create a new file or overwrite a file with content"]:
            found = [entry["name"] for entry in await find(client, query, limit=20)]
            assert f"{FS}_write_file" not in found, f"{query!r} found the denied tool: {found}"
        assert f"{FS}_write_file" not in names(await client.list_tools())

        arguments = {"path": str(target), "content": CANARY}
        text = assert_error(await loom_call(client, f"{FS}_write_file", arguments), "loom_call a denied tool", "unknown tool `fs_write_file`")
        assert f"{FS}_write_file" not in text.partition("closest:")[2], text
        # By name: the JSON-RPC error of an unknown tool (SPEC §5.5).
        with pytest.raises(ClientRaised, match="unknown tool `fs_write_file`"):
            await client.call(f"{FS}_write_file", arguments)

        categories = assert_ok(await client.call("loom_tool_categories", {}), "loom_tool_categories")
        fs = next(entry for entry in categories["servers"] if entry["server"] == FS)
        assert fs["tools"] == len(own[FS]) - 1
    assert not target.exists(), "the denied tool reached the server"


# --------------------------------------------------------------------------------------------
# 6. Wrong names, bad arguments, categories.


async def test_unknown_names_bad_arguments_and_categories(search, client_kind):
    own = await own_tools(search, EVERYTHING, FS, MEMORY)
    async with open_client(client_kind, search) as client:
        text = assert_error(await loom_call(client, "fs_read_txt_file", {"path": "x"}), "a misspelt name", "unknown tool `fs_read_txt_file`")
        closest = text.partition("; closest: ")[2].partition(";")[0].split(", ")
        assert f"{FS}_read_text_file" in closest and len(closest) <= 3, text
        assert text.endswith("loom_find_tools finds tools by what they do"), text

        for arguments, says in [
            ({}, "missing argument `tool`"),
            ({"tool": "loom_call"}, "names loom_call itself"),
            ({"tool": f"{EVERYTHING}_get-sum", "arguments": [2, 3]}, "`arguments` must be an object"),
            ({"tool": f"{EVERYTHING}_get-sum", "args": {}}, "unknown argument `args`"),
        ]:
            assert_error(await client.call("loom_call", arguments), f"loom_call {arguments}", "loom_call: ", says)
        for arguments, says in [
            ({}, "missing argument `query`"),
            ({"query": "  "}, "non-empty string"),
            ({"query": "x" * 1001}, "longer than 1000"),
            ({"query": "file", "limit": 0}, "from 1 to 20"),
            ({"query": "file", "limit": 21}, "from 1 to 20"),
            ({"query": "file", "max": 3}, "unknown argument `max`"),
        ]:
            assert_error(await client.call("loom_find_tools", arguments), f"loom_find_tools {arguments}", "loom_find_tools: ", says)
        nothing = assert_ok(await client.call("loom_find_tools", {"query": "zymurgy quux"}), "a query that matches nothing")
        assert nothing["tools"] == [] and "loom_tool_categories" in nothing["note"], nothing

        categories = assert_ok(await client.call("loom_tool_categories", {}), "loom_tool_categories")
        assert [entry["server"] for entry in categories["servers"]] == [EVERYTHING, FS, MEMORY]
        for entry in categories["servers"]:
            server = entry["server"]
            assert entry["state"] == "healthy", entry
            assert entry["tools"] == len(own[server]), f"{server}: {entry['tools']} tools, the server lists {len(own[server])}"
            assert 1 <= len(entry["categories"]) <= 6, entry
            for category in entry["categories"]:
                word, count = re.fullmatch(r"([a-z0-9]+) \((\d+)\)", category).groups()
                assert word not in {server, "get", "list", "create"} and 1 <= int(count) <= entry["tools"], entry
        assert categories["tools"] == sum(map(len, own.values()))
        files = next(entry for entry in categories["servers"] if entry["server"] == FS)["categories"]
        assert files[0] == f"file ({sum('file' in name for name in own[FS])})", files


# --------------------------------------------------------------------------------------------
# 7. loom_stats and the report.


async def test_loom_stats_counts_the_calls_and_holds_no_argument(search, client_kind):
    search.use(EVERYTHING, FS, MEMORY, CRM)
    report = search.tmp / "reports" / "session.json"
    search.options["report"] = {"path": str(report)}
    entity = {"name": CANARY, "entityType": "secret", "observations": [f"the {CANARY} observation"]}
    async with open_client(client_kind, search) as client:
        # Five downstream calls: two by name, three through loom_call (one a table).
        echoed = await client.call(f"{EVERYTHING}_echo", {"message": CANARY})
        assert CANARY in text_of(echoed)
        assert not (await loom_call(client, f"{MEMORY}_create_entities", {"entities": [entity]})).get("isError")
        assert_envelope(await loom_call(client, f"{CRM}_rows", {"count": 2500}), "crm_rows")
        assert text_of(await client.call(f"{FS}_read_text_file", {"path": str(search.fs_root / "hello.txt")}))
        assert text_of(await loom_call(client, f"{EVERYTHING}_get-sum", {"a": 2, "b": 40})) == "The sum of 2 and 40 is 42."
        # Not downstream calls: loom's own tools, a failed loom_call, a refused call by name.
        await find(client, f"{CANARY} read a file")
        assert CANARY in text_of(await client.call("loom_query", {"sql": f"SELECT '{CANARY}' AS c"}))
        assert_error(await loom_call(client, f"{CANARY}_tool", {"x": CANARY}), "unknown tool", "unknown tool")
        with pytest.raises(ClientRaised, match="unknown tool"):
            await client.call(f"{EVERYTHING}_{CANARY}", {"message": CANARY})

        live = await stats(client)
        calls = live["calls"]
        assert (calls["total"], calls["tables"], calls["documents"], calls["passedThrough"]) == (5, 1, 0, 4), calls
        assert calls["after"]["chars"] < calls["before"]["chars"], calls
        assert [top["tool"] for top in live["topTools"]] == [f"{CRM}/rows"], live["topTools"]
        # Held: the envelope's table, and the small table create_entities answered with, which
        # passed through whole and is kept too (SPEC §8.4).
        assert live["loomTools"]["queries"] == 1 and live["held"]["datasets"] == 2, live
        assert CANARY not in json.dumps(live, ensure_ascii=False)
        again = await loom_call(client, "loom_stats")
        assert assert_ok(again, "loom_stats through loom_call")["calls"] == calls
        assert CANARY not in json.dumps(again, ensure_ascii=False)

    # The report loom wrote at shutdown: the same calls, no canary either.
    written = report.read_text()
    assert CANARY not in written
    assert json.loads(written)["calls"] == calls


# --------------------------------------------------------------------------------------------
# pinned mode and the description budget.


async def test_pinned_tools_are_listed_in_search_mode(search, client_kind):
    search.use(FS, MEMORY)
    # tools.pinned without a mode means "pinned": search mode plus these tools.
    search.options["tools"] = {"pinned": [f"{FS}/read_text_file", f"{MEMORY}_*"]}
    own = await own_tools(search, MEMORY)
    async with open_client(client_kind, search) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        assert tools.keys() == SEARCH_LISTING | {f"{FS}_read_text_file"} | {f"{MEMORY}_{name}" for name in own[MEMORY]}
        assert tools[f"{FS}_read_text_file"]["inputSchema"]["properties"]["path"]["type"] == "string"
        hello = await client.call(f"{FS}_read_text_file", {"path": str(search.fs_root / "hello.txt")})
        assert text_of(hello) == (search.fs_root / "hello.txt").read_text()
        graph = await client.call(f"{MEMORY}_read_graph", {})
        assert not graph.get("isError") and graph["structuredContent"] == {"entities": [], "relations": []}


async def test_descriptions_are_cut_and_found_whole(search, client_kind):
    search.use(FS, MEMORY)
    budget = 80
    search.options["tools"] = {"maxDescriptionChars": budget}  # all mode
    own = await own_tools(search, FS, MEMORY)
    async with open_client(client_kind, search) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        # All mode: every tool, loom_find_tools too (it has the full texts), not the other two.
        downstream = {f"{server}_{name}": theirs["description"] for server, by_name in own.items() for name, theirs in by_name.items()}
        assert tools.keys() == downstream.keys() | OWN_TOOLS | {"loom_find_tools"}
        cut = 0
        for name, whole in downstream.items():
            shown = tools[name]["description"]
            if len(whole) <= budget:
                assert shown == whole, name
            else:
                cut += 1
                assert len(shown) <= budget and shown.endswith("…") and whole.startswith(shown[:-1]), (name, shown)
        assert cut >= 10, f"only {cut} descriptions over {budget} characters: the test shows little"
        figures = (await stats(client))["tools"]
        assert figures["seen"]["chars"] == listing_chars(list(tools.values()))

        # loom_find_tools has every description whole, however long.
        found = await find(client, READ_FILE[0])
        assert {unmarked(entry["description"]) for entry in found} == {downstream[entry["name"]] for entry in found}
        assert max(len(downstream[entry["name"]]) for entry in found) > budget


# --------------------------------------------------------------------------------------------
# 8. Search by meaning (`tools.searchModel`, SPEC §20.3): all-MiniLM-L6-v2 as .ci/setup-model
# installs it.

SEARCH_MODEL = REPO_ROOT / ".ci" / "models" / "all-MiniLM-L6-v2"
# (query, server, the server's own tool name): asked in other words than the tool's, so that words
# alone rank another tool first or find nothing (test_words_alone_miss_what_meaning_finds).
IN_OTHER_WORDS = [
    ("repeat what I say", EVERYTHING, "echo"),
    ("make a new folder for the photos", FS, "create_directory"),
    ("remember that Alice likes tea", MEMORY, "add_observations"),
]


@pytest.fixture
def by_meaning(search: DataSetup) -> DataSetup:
    if not (SEARCH_MODEL / "model.safetensors").is_file():
        raise pytest.UsageError(f"{SEARCH_MODEL} is missing: run bash .ci/setup-model")
    search.options["tools"] = {"mode": "search", "searchModel": str(SEARCH_MODEL)}
    return search


async def first_found(client: DataClient, query: str) -> str:
    return (await find(client, query, limit=1))[0]["name"]


async def test_words_alone_miss_what_meaning_finds(search):
    """The queries of IN_OTHER_WORDS are ones words alone get wrong: without this, the tests below
    would pass with the model ignored."""
    async with open_client("sdk2-auto", search) as client:
        categories = assert_ok(await client.call("loom_tool_categories", {}), "loom_tool_categories")
        assert categories["searchBy"] == "words", categories
        for query, server, tool in IN_OTHER_WORDS:
            answer = assert_ok(await client.call("loom_find_tools", {"query": query, "limit": 1}), query)
            assert [entry["name"] for entry in answer["tools"]] != [f"{server}_{tool}"], (query, answer)


async def test_a_sentence_model_finds_tools_asked_for_in_other_words(by_meaning, client_kind):
    """Through every client, each query's tool comes first; found, it joins tools/list and answers
    through loom_call as when called by its name."""
    async with open_client(client_kind, by_meaning) as client:
        categories = assert_ok(await client.call("loom_tool_categories", {}), "loom_tool_categories")
        assert categories["searchBy"] == "words and meaning", categories
        for query, server, tool in IN_OTHER_WORDS:
            assert await first_found(client, query) == f"{server}_{tool}", query
        assert {f"{server}_{tool}" for _, server, tool in IN_OTHER_WORDS} <= names(await client.list_tools())
        echoed = await loom_call(client, f"{EVERYTHING}_echo", {"message": "tea"})
        assert text_of(echoed) == "Echo: tea", echoed


@pytest.mark.parametrize("mode", SDK2_MODES)
async def test_search_by_meaning_over_http(by_meaning, mode):
    """`loom serve --http`: the same answers as over stdio, for a client that asks at once."""
    by_meaning.options["http"] = {"tokens": ["meaning-token-4d1f"]}
    with serve_http(by_meaning) as loom:
        async with connect_http(loom.url, mode, headers={"Authorization": "Bearer meaning-token-4d1f"}) as session:
            client = Sdk2Client(session, mode)
            for query, server, tool in IN_OTHER_WORDS:
                assert await first_found(client, query) == f"{server}_{tool}", query


@pytest.mark.parametrize("era", ERAS)
def test_inspector_search_by_meaning(by_meaning, era):
    """One loom process per call: the first search of a fresh loom waits for the tools' vectors
    (SPEC §20.3) rather than ranking by words alone."""
    by_meaning.use(EVERYTHING)
    inspector = _inspector(by_meaning, era)
    found = check_found(assert_ok(inspector.call("loom_find_tools", {"query": "repeat what I say", "limit": 1}), "loom_find_tools"))
    assert [entry["name"] for entry in found] == [f"{EVERYTHING}_echo"], found


# --------------------------------------------------------------------------------------------
# The Inspector CLI: one process, hence one loom session, per call. Found tools cannot be seen
# joining (the next call is the next session), and the Inspector refuses to call a tool that
# tools/list did not show (it lists first): in search mode it reaches a downstream tool only
# through loom_call. The SDK tests above cover what needs more than one call.


@pytest.mark.parametrize("era", ERAS)
async def test_inspector_search_mode(search, era):
    search.use(EVERYTHING)
    own = await own_tools(search, EVERYTHING)
    inspector = _inspector(search, era)
    tools = inspector.list_tools()
    assert names(tools) == SEARCH_LISTING and listing_chars(tools) <= SEARCH_LISTING_LIMIT

    query, server, tool = ADD_NUMBERS
    found = check_found(assert_ok(inspector.call("loom_find_tools", {"query": query}), "loom_find_tools"))
    entry = next(entry for entry in found if entry["name"] == f"{server}_{tool}")
    assert entry["inputSchema"] == own[server][tool]["inputSchema"]
    # A new session: nothing found earlier is listed.
    assert names(inspector.list_tools()) == SEARCH_LISTING

    through = inspector.call("loom_call", {"tool": f"{server}_{tool}", "arguments": {"a": 2, "b": 3}})
    status, refused, _ = inspector.run("--method", "tools/call", "--tool-name", f"{server}_{tool}", "--tool-args-json", "{}")
    assert status != 0 and refused.get("error", {}).get("code") == "tool_not_found", refused
    # Listed (all mode), the tool called by its name answers the same.
    search.options["tools"] = {"mode": "all"}
    assert through == inspector.call(f"{server}_{tool}", {"a": 2, "b": 3})
    assert text_of(through) == "The sum of 2 and 3 is 5."


@pytest.mark.parametrize("era", ERAS)
def test_inspector_envelope_deny_and_wrong_names(search, era):
    search.use(CRM, FS)
    search.servers[FS]["denyTools"] = ["write_file"]
    inspector = _inspector(search, era)
    envelope = assert_envelope(inspector.call("loom_call", {"tool": f"{CRM}_rows", "arguments": {"count": 3000}}), "loom_call crm_rows")
    assert (envelope["ref"], envelope["rows"], envelope["provenance"]["tool"]) == ("ds_crm_rows_1", 3000, "rows")

    found = check_found(assert_ok(inspector.call("loom_find_tools", {"query": "write a file", "limit": 20}), "loom_find_tools"))
    assert f"{FS}_write_file" not in [entry["name"] for entry in found]
    target = search.fs_root / "written.txt"
    assert_error(
        inspector.call("loom_call", {"tool": f"{FS}_write_file", "arguments": {"path": str(target), "content": "x"}}),
        "loom_call a denied tool",
        "unknown tool `fs_write_file`",
    )
    assert not target.exists()
    text = assert_error(inspector.call("loom_call", {"tool": "fs_read_txt_file"}), "a misspelt name", "unknown tool `fs_read_txt_file`")
    assert f"{FS}_read_text_file" in text.partition("; closest: ")[2], text

    categories = assert_ok(inspector.call("loom_tool_categories", {}), "loom_tool_categories")
    assert [(entry["server"], entry["state"]) for entry in categories["servers"]] == [(CRM, "healthy"), (FS, "healthy")]
