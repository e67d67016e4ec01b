"""Remote downstream servers over Streamable HTTP: loom (still reached over stdio) in front of real
HTTP servers the test starts on free ports — server-everything in its `streamableHttp` mode, and
servers/python_server.py run by the Python SDK 2.x's own Streamable HTTP app (`--http PORT`,
optionally `--bearer TOKEN`).

What loom shows of a remote server is compared with what the SDK sees connecting to the same
server directly over HTTP (`mcp.client.streamable_http`, the handshake era, declaring what loom
declares): tool definitions, results, resources, prompts, progress. Every client mode runs:
the SDK 2.x (`auto`, `legacy`), the SDK 1.x driver, and the Inspector CLI. Small results are the
server's bytes (raw JSON-RPC on both sides); large tables become envelopes that loom_query reads.
A server that wants `Authorization: Bearer …` works with the header from `${VAR}`; without it
(or with a wrong one) it is reported failed, in words that name the fix, and loom serves the rest.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import StdioServerParameters

from conftest import (
    EVERYTHING_JS,
    LOOM_BIN,
    LOOM_OUTPUT_SCHEMA_META,
    PATIENCE,
    PY,
    PYTHON_SERVER,
    Setup,
    as_the_server_listed_it,
    connect,
    connect_loom,
    dump,
    free_port,
    without_loom_stamp,
)
from dataplane_clients import (
    assert_envelope,
    assert_ok,
    columns,
    open_client,
    text_of,
)
from test_tools import _as_offered, _comparable, _long_running, _without_clock

pytestmark = pytest.mark.anyio

# The remote server-everything in loom's config (the Python server is `py`, as on stdio).
EV = "ev"

# The SDK 2.x in both modes and the SDK 1.x driver (dataplane_clients.open_client).
CLIENT_KINDS = ["sdk2-auto", "sdk2-legacy", "sdk1"]
INSPECTOR_ERAS = ["legacy", "auto", "modern"]

# What the Python server behind `--bearer` accepts; it must never show in loom's log or answers.
TOKEN = "interop-token-7f3a9c"
TOKEN_VAR = "LOOM_INTEROP_BEARER"

# server-everything calls compared with a direct connection.
EV_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"message": "héllo, wörld \u2603 \"quoted\"\nnext line"}),
    ("get-sum", {"a": 17, "b": 25.5}),
    ("get-structured-content", {"location": "New York"}),
]


# --------------------------------------------------------------------------------------------
# The HTTP servers


@contextmanager
def _http_server(argv: list[str], port: int, log: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """Runs `argv` (a server that listens on 127.0.0.1:`port`) until the block ends; its MCP URL.
    Its output goes to `log`, shown when it does not come up."""
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            if process.poll() is not None:
                pytest.fail(f"{argv[1]} exited with {process.returncode} before listening:\n{log.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{argv[1]} is not listening on port {port} after {PATIENCE} s:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def everything_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("everything-http") / "server.log"
    with _http_server(["node", str(EVERYTHING_JS), "streamableHttp"], port, log, env={"PORT": str(port)}) as url:
        yield url


@pytest.fixture(scope="module")
def python_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = tmp_path_factory.mktemp("python-http") / "server.log"
    with _http_server([sys.executable, str(PYTHON_SERVER), "--http", str(port)], port, log) as url:
        yield url


@pytest.fixture(scope="module")
def guarded_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The Python server answering 401 to any request without `Authorization: Bearer TOKEN`."""
    port = free_port()
    log = tmp_path_factory.mktemp("python-http-bearer") / "server.log"
    with _http_server([sys.executable, str(PYTHON_SERVER), "--http", str(port), "--bearer", TOKEN], port, log) as url:
        yield url


@pytest.fixture
def remote(setup: Setup, everything_url: str, python_url: str) -> Setup:
    """loom's config (loom's own `servers` layout) lists the remote server-everything as `ev` and
    the remote Python server as `py`; tests pick with `use`."""
    servers = {
        EV: {"type": "http", "url": everything_url},
        PY: {"type": "http", "url": python_url},
    }
    return replace(setup, servers=servers, enabled=[EV])


def _direct(url: str):
    """The SDK straight to a remote server over Streamable HTTP: the handshake era, declaring what
    loom declares (server-everything lists some tools only for such clients)."""
    return connect(url, mode="legacy", loom_like=True)


def _outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What a tool result says, whatever the protocol version added (`resultType`) and whichever
    client parsed it (the SDK 2.x's models write `isError: false` where the wire has none; the
    exact bytes are compared in test_small_results_are_the_remote_servers_bytes)."""
    out = {key: value for key, value in without_loom_stamp(result).items() if key != "resultType"}
    out["isError"] = bool(out.get("isError"))
    return out


async def _own_tools(url: str) -> list[Any]:
    async with _direct(url) as direct:
        own = (await direct.list_tools()).tools
    assert own, f"{url} lists no tools; the comparison would prove nothing"
    return own


def _assert_listed_as_their_own(exposed: list[Any], own: list[Any], server: str, mode: str) -> None:
    """loom lists every tool of `server` under its prefix with the server's definition (SDK 2.x
    models; an outputSchema may sit under loom's `_meta` key, task-only tools only for
    handshake-era clients)."""
    names = [tool.name for tool in exposed]
    assert len(names) == len(set(names)), f"loom lists a tool twice: {names}"
    mine = {tool.name.removeprefix(f"{server}_"): tool for tool in exposed if tool.name.startswith(f"{server}_")}
    offered = own  # every tool, in every era (SPEC §5.3)
    assert sorted(mine) == sorted(tool.name for tool in offered)
    for tool in offered:
        assert _comparable(as_the_server_listed_it(mine[tool.name])) == _comparable(_as_offered(dump(tool), mode)), (
            f"tool {tool.name} differs through loom"
        )


# --------------------------------------------------------------------------------------------
# 1. server-everything over Streamable HTTP


async def test_everything_tools_list_matches_a_direct_http_connection(remote, mode):
    own = await _own_tools(remote.servers[EV]["url"])
    async with connect_loom(remote, mode) as client:
        exposed = (await client.list_tools()).tools
    assert all(tool.name.startswith((f"{EV}_", "loom_")) for tool in exposed), [tool.name for tool in exposed]
    _assert_listed_as_their_own(exposed, own, EV, mode)


@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_everything_calls_match_a_direct_http_connection(remote, kind):
    url = remote.servers[EV]["url"]
    async with _direct(url) as direct:
        own_tools = {tool["name"]: tool for tool in dump((await direct.list_tools()).tools)}
        answers = [dump(await direct.call_tool(name, arguments)) for name, arguments in EV_CALLS]
    assert answers[0]["content"][0]["text"] == f"Echo: {EV_CALLS[0][1]['message']}"
    assert answers[2]["structuredContent"] == {"temperature": 33, "conditions": "Cloudy", "humidity": 82}

    async with open_client(kind, remote) as client:
        listed = {tool["name"]: tool for tool in await client.list_tools()}
        mine = {name.removeprefix(f"{EV}_"): tool for name, tool in listed.items() if name.startswith(f"{EV}_")}
        assert {"echo", "get-sum", "get-structured-content", "trigger-long-running-operation"} <= mine.keys(), sorted(listed)
        for name, tool in mine.items():
            assert tool["inputSchema"] == own_tools[name]["inputSchema"], name
        schema = (mine["get-structured-content"].get("_meta") or {}).get(LOOM_OUTPUT_SCHEMA_META) or mine["get-structured-content"].get(
            "outputSchema"
        )
        assert schema == own_tools["get-structured-content"]["outputSchema"]

        for (name, arguments), own in zip(EV_CALLS, answers, strict=True):
            through = await client.call(f"{EV}_{name}", arguments)
            assert _outcome(through) == _outcome(own), f"{name} {arguments}:\n  direct: {own}\n  loom:   {through}"
        jsonschema.validate(through["structuredContent"], schema)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_everything_resources_prompts_and_progress_through_loom(remote, mode):
    url = remote.servers[EV]["url"]
    async with _direct(url) as direct, connect_loom(remote, mode) as client:
        # Resources keep their URIs; a listed one and one from a template read as on the server.
        own_resources = (await direct.list_resources()).resources
        assert own_resources, "server-everything lists no resources over HTTP"
        exposed = {str(resource.uri) for resource in (await client.list_resources()).resources}
        assert {str(resource.uri) for resource in own_resources} <= exposed
        for uri in [str(own_resources[0].uri), str(own_resources[1].uri), "demo://resource/dynamic/text/7"]:
            own = _without_clock(dump(await direct.read_resource(uri)))
            assert _without_clock(dump(await client.read_resource(uri))) == own, uri

        # Prompts get the prefix and answer as on the server.
        own_prompts = {prompt.name for prompt in (await direct.list_prompts()).prompts}
        exposed_prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        assert exposed_prompts == {f"{EV}_{name}" for name in own_prompts}
        for name, arguments in [("simple-prompt", None), ("args-prompt", {"city": "Austin", "state": "TX"})]:
            own = dump(await direct.get_prompt(name, arguments))
            assert dump(await client.get_prompt(f"{EV}_{name}", arguments)) == own, name

        # Progress travels from the remote server through loom to the client's callback.
        seen = await _long_running(client, f"{EV}_trigger-long-running-operation", steps=4)
        assert seen[:3] == [1, 2, 3] and seen in ([1, 2, 3], [1, 2, 3, 4]), seen
        arguments = {"duration": 0.4, "steps": 2}
        own = dump(await direct.call_tool("trigger-long-running-operation", arguments))
        through = dump(await client.call_tool(f"{EV}_trigger-long-running-operation", arguments))
        assert _outcome(through) == _outcome(own)


@pytest.mark.parametrize("era", INSPECTOR_ERAS)
async def test_everything_through_the_inspector(remote, era):
    from test_firewall import _inspector

    own = {tool.name: dump(tool) for tool in await _own_tools(remote.servers[EV]["url"])}
    async with _direct(remote.servers[EV]["url"]) as direct:
        answer = dump(await direct.call_tool("get-sum", {"a": 2, "b": 40}))
    inspector = _inspector(remote, era)
    listed = {tool["name"]: tool for tool in await anyio.to_thread.run_sync(inspector.list_tools)}
    mine = {name.removeprefix(f"{EV}_"): tool for name, tool in listed.items() if name.startswith(f"{EV}_")}
    assert mine.keys() == set(own), (sorted(mine), sorted(own))
    for name, tool in mine.items():
        assert tool["inputSchema"] == own[name]["inputSchema"], name
    result = await anyio.to_thread.run_sync(inspector.call, f"{EV}_get-sum", {"a": 2, "b": 40})
    assert _outcome(result) == _outcome(answer)
    assert text_of(result) == "The sum of 2 and 40 is 42."


# The same remote entry in each layout loom reads (SPEC §3.2) and each way of marking it remote.
LAYOUTS = {
    "servers-type-http": lambda url: {"servers": [{"name": EV, "type": "http", "url": url}]},
    "mcpServers-type-http": lambda url: {"mcpServers": {EV: {"type": "http", "url": url}}},
    "mcpServers-url-only": lambda url: {"mcpServers": {EV: {"url": url}}},
    "downstreams-streamable-http": lambda url: {"downstreams": {EV: {"transport": "streamable-http", "url": url}}},
}


@pytest.mark.parametrize("layout", LAYOUTS)
async def test_every_config_layout_reaches_the_remote_server(tmp_path, everything_url, layout):
    config = tmp_path / "loom.json"
    config.write_text(json.dumps(LAYOUTS[layout](everything_url)))
    params = StdioServerParameters(
        command=str(LOOM_BIN), args=["--config", str(config)], env={"LOOM_LOG": os.environ.get("LOOM_LOG", "info")}
    )
    async with connect(params, mode="legacy") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {f"{EV}_echo", f"{EV}_get-sum"} <= names, sorted(names)
        result = await client.call_tool(f"{EV}_echo", {"message": layout})
        assert dump(result)["content"] == [{"type": "text", "text": f"Echo: {layout}"}]


# --------------------------------------------------------------------------------------------
# 2. The Python SDK's own server over Streamable HTTP


async def test_python_server_tools_calls_prompts_resources_match_a_direct_http_connection(remote, mode):
    remote.use(PY)
    url = remote.servers[PY]["url"]
    own = await _own_tools(url)
    async with _direct(url) as direct, connect_loom(remote, mode) as client:
        _assert_listed_as_their_own((await client.list_tools()).tools, own, PY, mode)
        for name, arguments in [("add", {"a": 2, "b": 40}), ("weather", {"city": "Oslo"}), ("fail", {"reason": "on purpose"})]:
            mine = dump(await direct.call_tool(name, arguments))
            through = dump(await client.call_tool(f"{PY}_{name}", arguments))
            assert _outcome(through) == _outcome(mine), name
        assert (await client.call_tool(f"{PY}_add", {"a": 2, "b": 40})).structured_content == {"result": 42}
        assert (await client.call_tool(f"{PY}_fail", {"reason": "on purpose"})).is_error
        own_prompt = dump(await direct.get_prompt("greet", {"name": "loom"}))
        assert dump(await client.get_prompt(f"{PY}_greet", {"name": "loom"})) == own_prompt
        own_resource = dump(await direct.read_resource("interop://python/info"))
        assert dump(await client.read_resource("interop://python/info")) == own_resource


@pytest.mark.parametrize("kind", CLIENT_KINDS)
async def test_python_server_large_tables_become_envelopes(remote, kind):
    remote.use(PY)
    url = remote.servers[PY]["url"]
    async with _direct(url) as direct:
        small_own = dump(await direct.call_tool("inventory", {"count": 3}))
    async with open_client(kind, remote) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        schema = (tools[f"{PY}_inventory"].get("_meta") or {}).get(LOOM_OUTPUT_SCHEMA_META)
        assert schema is not None and "outputSchema" not in tools[f"{PY}_inventory"], tools[f"{PY}_inventory"]

        # A large table in structuredContent: an envelope, and loom_query over it.
        envelope = assert_envelope(await client.call(f"{PY}_inventory", {"count": 2000}), "inventory 2000")
        assert envelope["provenance"]["server"] == PY and envelope["provenance"]["source"] == "structuredContent"
        assert envelope["rows"] == 2000
        assert columns(envelope) == {"sku": "Utf8", "name": "Utf8", "quantity": "Int64", "price": "Float64", "warehouse": "Utf8"}
        sql = f"SELECT warehouse, sum(quantity) AS q FROM {envelope['ref']} GROUP BY warehouse ORDER BY warehouse"
        stock = assert_ok(await client.call("loom_query", {"sql": sql}), "loom_query")
        want = {w: sum((i * 7) % 100 for i in range(2000) if i % 4 == k) for k, w in enumerate(["north", "south", "east", "west"])}
        assert stock["rows"] == [{"warehouse": w, "q": want[w]} for w in sorted(want)]

        # A markdown table in text: an envelope too.
        report = assert_envelope(await client.call(f"{PY}_sales_report", {"weeks": 300}), "sales_report")
        assert report["rows"] == 300 and report["provenance"]["source"] == "markdown"
        total = assert_ok(await client.call("loom_query", {"sql": f"SELECT max(week) AS weeks FROM {report['ref']}"}), "loom_query")
        assert total["rows"] == [{"weeks": 300}]

        # A small result of the same tool passes through as the server sent it.
        small = await client.call(f"{PY}_inventory", {"count": 3})
        assert _outcome(small) == _outcome(small_own)
        jsonschema.validate(small["structuredContent"], schema)


# --------------------------------------------------------------------------------------------
# Byte identity: raw JSON-RPC to loom over stdio, raw HTTP to the server.


def _top_level_spans(text: str) -> dict[str, str]:
    """The members of the JSON object `text`, each as the exact text of its value."""
    decoder = json.JSONDecoder()
    spans: dict[str, str] = {}
    at = text.index("{") + 1
    while True:
        while text[at] in " \t\r\n,":
            at += 1
        if text[at] == "}":
            return spans
        key, at = decoder.raw_decode(text, at)
        while text[at] in " \t\r\n:":
            at += 1
        _, end = decoder.raw_decode(text, at)
        spans[key] = text[at:end]
        at = end


def _post(url: str, message: dict[str, Any], session: str | None) -> tuple[str | None, list[str]]:
    """One POST to a Streamable HTTP server; its session id and the JSON-RPC messages of the answer
    as the exact text the server sent (a JSON body, or the `data` of each SSE event)."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if session is not None:
        headers |= {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=PATIENCE) as response:
        body = response.read().decode()
        kind = response.headers.get("content-type", "")
        session = response.headers.get("mcp-session-id") or session
    if kind.startswith("application/json"):
        return session, [body]
    messages = []
    for event in body.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].removeprefix(" ") for line in event.split("\n") if line.startswith("data:")]
        if data and "".join(data).strip():
            messages.append("\n".join(data))
    return session, messages


def _direct_raw_results(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The exact text of each call's `result`, straight from the server (handshake era)."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {}, "sampling": {}, "elicitation": {}},
            "clientInfo": {"name": "interop-raw", "version": "0"},
        },
    }
    session, _ = _post(url, initialize, None)
    _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
    results = []
    for number, (name, arguments) in enumerate(calls, start=2):
        call = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
        _, messages = _post(url, call, session)
        answer = [text for text in messages if json.loads(text).get("id") == number]
        assert len(answer) == 1, f"{name}: {messages}"
        results.append(_top_level_spans(answer[0])["result"])
    return results


async def _loom_raw_results(setup: Setup, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The exact text of each call's `result` from loom's stdout (the initialize handshake)."""
    process = await anyio.open_process(
        [str(LOOM_BIN), "--config", str(setup.write_config())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        env={**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "info")},
    )
    stdout = BufferedByteReceiveStream(process.stdout)

    async def send(message: dict[str, Any]) -> None:
        await process.stdin.send((json.dumps(message) + "\n").encode())

    async def answer(number: int) -> str:
        with anyio.fail_after(PATIENCE):
            while True:
                line = (await stdout.receive_until(b"\n", 64 * 1024 * 1024)).decode()
                message = json.loads(line)
                if message.get("id") == number and "method" not in message:
                    return line
                if "method" in message and "id" in message:  # a request from loom: declined
                    await send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "not supported"}})

    try:
        await send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "interop-raw", "version": "0"}},
            }
        )
        assert "result" in json.loads(await answer(1))
        await send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        results = []
        for number, (name, arguments) in enumerate(calls, start=2):
            await send({"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
            results.append(_top_level_spans(await answer(number))["result"])
        return results
    finally:
        await process.stdin.aclose()
        with anyio.move_on_after(PATIENCE) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()


async def test_small_results_are_the_remote_servers_bytes(remote):
    remote.use(EV, PY)
    calls = {
        EV: [("echo", {"message": "héllo \u2603 \"q\" \\ </tag>\n\u00e9\U0001f600"}), ("get-sum", {"a": 0.1, "b": 0.2})],
        PY: [("weather", {"city": "Zürich \u2603"}), ("add", {"a": 2, "b": 40}), ("inventory", {"count": 2})],
    }
    own: list[str] = []
    for server, server_calls in calls.items():
        own += await anyio.to_thread.run_sync(_direct_raw_results, remote.servers[server]["url"], server_calls)
    through = await _loom_raw_results(remote, [(f"{server}_{name}", args) for server, server_calls in calls.items() for name, args in server_calls])
    for (name, _), mine, theirs in zip([c for server_calls in calls.values() for c in server_calls], own, through, strict=True):
        assert theirs == mine, f"{name}: loom changed the bytes\n  server: {mine}\n  loom:   {theirs}"


# --------------------------------------------------------------------------------------------
# 3. Headers: a bearer token from `${VAR}`; a missing or wrong one


def _loom_with_stderr(config: Path, log: Path, env: dict[str, str]) -> StdioServerParameters:
    """loom over `config`, its stderr written to `log`."""
    return StdioServerParameters(
        command="/bin/sh",
        args=["-c", 'exec "$@" 2>"$0"', str(log), str(LOOM_BIN), "--config", str(config)],
        env={"LOOM_LOG": os.environ.get("LOOM_LOG", "info"), **env},
    )


async def test_bearer_header_from_the_environment_and_a_missing_or_wrong_one(tmp_path, guarded_url, mode):
    config = tmp_path / "loom.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "good": {"type": "http", "url": guarded_url, "headers": {"Authorization": f"Bearer ${{{TOKEN_VAR}}}"}},
                    "x": {"type": "http", "url": guarded_url},
                    "bad": {"type": "http", "url": guarded_url, "headers": {"Authorization": "Bearer not-the-token"}},
                },
                # One failed start delists a server: its state is final when the test looks.
                "restart": {"maxAttempts": 1},
            }
        )
    )
    log = tmp_path / "loom.stderr"
    async with connect(_loom_with_stderr(config, log, {TOKEN_VAR: TOKEN}), mode=mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "good_add" in names, sorted(names)
        assert not {name for name in names if name.startswith(("x_", "bad_"))}, sorted(names)
        assert (await client.call_tool("good_add", {"a": 2, "b": 40})).structured_content == {"result": 42}

        # loom_tool_categories (answers in every tools mode) reports each server's state.
        categories = await client.call_tool("loom_tool_categories", {})
        states = {entry["server"]: entry["state"] for entry in categories.structured_content["servers"]}
        assert states["good"] == "healthy", states
        for server in ("x", "bad"):
            assert states[server].startswith("failed") and "401" in states[server], states
        assert "token is missing" in states["x"] and "`headers`" in states["x"], states["x"]
        assert "header `Authorization`" in states["bad"], states["bad"]

        # loom stays up, and its own tools answer.
        answer = await client.call_tool("loom_query", {"sql": "SELECT 40 + 2 AS n"})
        assert not answer.is_error and answer.structured_content["rows"] == [{"n": 42}], dump(answer)
        assert (await client.call_tool("good_add", {"a": 1, "b": 1})).structured_content == {"result": 2}
        shown = json.dumps(dump(categories))

    stderr = log.read_text()
    x_lines = [line for line in stderr.splitlines() if "401" in line and "token is missing" in line]
    assert x_lines and all("headers" in line for line in x_lines), stderr[-3000:]
    assert any("credentials in header `Authorization` were refused" in line for line in stderr.splitlines()), stderr[-3000:]
    assert TOKEN not in stderr and TOKEN not in shown, "the bearer token shows in loom's log or answers"


@pytest.mark.parametrize("protocol", ["2026-07-28", "auto"])
async def test_a_remote_server_spoken_to_in_2026_07_28(tmp_path, python_url, mode, protocol):
    """`protocol` on a remote entry (SPEC §4.6): loom opens the Python server's endpoint with
    `server/discover` and speaks 2026-07-28 to it (each request with its envelope); calls,
    structured results and envelopes come back as over the handshake."""
    config = tmp_path / "loom.json"
    config.write_text(json.dumps({"mcpServers": {PY: {"type": "http", "url": python_url, "protocol": protocol}}}))
    log = tmp_path / "loom.stderr"
    async with connect(_loom_with_stderr(config, log, {}), mode=mode) as client:
        assert (await client.call_tool(f"{PY}_add", {"a": 2, "b": 40})).structured_content == {"result": 42}
        failed = await client.call_tool(f"{PY}_fail", {"reason": "on purpose"})
        assert failed.is_error
        envelope = json.loads((await client.call_tool(f"{PY}_inventory", {"count": 2000})).content[0].text)
        assert envelope["rows"] == 2000 and envelope["provenance"]["server"] == PY
        counted = await client.call_tool("loom_query", {"sql": f"SELECT COUNT(*) AS n FROM {envelope['ref']}"})
        assert counted.structured_content["rows"] == [{"n": 2000}]
    stderr = log.read_text()
    assert 'Service initialized as client peer_info=Some(ServerPeerInfo { protocol_version: ProtocolVersion("2026-07-28")' in stderr, stderr[-3000:]
