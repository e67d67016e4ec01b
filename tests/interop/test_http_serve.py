"""`loom serve --http ADDR` (SPEC §22): loom's catalog over Streamable HTTP at `http://ADDR/mcp`,
used by the official clients connecting to loom over HTTP. loom fronts real servers as in the rest
of the suite: server-everything over stdio (.ci/node) as `everything`, servers/python_server.py as
`py`.

    client --HTTP--> loom serve --http 127.0.0.1:0 --stdio--> server-everything, python_server.py

- The Python SDK 2.x (`mcp.client.streamable_http`) in both connect modes: `auto` sends
  `server/discover` first, gets JSON-RPC error -32601 and falls back to `initialize` (so both modes
  land in the handshake era); tools and passthrough results are what loom over stdio gives a
  handshake-era client; a large table becomes an envelope that loom_query reads; progress arrives
  (on an SSE answer, the only way a notification can precede the result).
- The Python SDK 1.x (clients/sdk1_driver.py with a `url`).
- The Inspector CLI (`--transport http`), one process per call.
- Two SDK clients on one loom: each HTTP session is its own loom session (datasets, refs).
- Refusals: a bearer token from `${VAR}`, a foreign Origin, a foreign Host.
- A 13.9 MB passthrough result (a `bypass` tool): it only reaches the SDK whole because loom
  answers `application/json` (the SDK caps one SSE event at 1 MiB).
- Shutdown: SIGTERM with a session and its GET stream open ends loom and its servers quickly.
- The MCP conformance suite against loom's own HTTP face in front of the suite's reference server
  (conformance.py), compared with that server's own HTTP mode (test_conformance.py runs the same
  suite through a stdio bridge).

loom's stderr is printed when loom stops (pytest shows it for failing tests).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from conformance import (
    NAMING_ARTEFACTS,
    SUITE_JS,
    UNSCORED,
    Run,
    assert_naming_artefact,
    assert_passes_directly_and_through_loom,
    assert_scenarios_ran,
    assert_unscored,
    list_scenarios,
    reference_server_command,
    run_suite,
)
from conformance import SERVER_NAME as CONFORMANCE_SERVER_NAME
from conformance import tooling_missing as conformance_tooling_missing
from conftest import EVERYTHING, LOOM_BIN, PATIENCE, PY, PYTHON_SERVER, Setup, connect, connect_loom, dump, free_port
from dataplane_clients import (
    DataSetup,
    Sdk2Client,
    assert_envelope,
    assert_error,
    assert_ok,
    columns,
    open_client,
    sdk1_client,
    text_of,
)
from test_tools import CALLS, _long_running, _without_clock

pytestmark = pytest.mark.anyio

SERVING = re.compile(r"^loom: serving MCP at (http://\S+)$", re.MULTILINE)
JSON = "application/json"
SSE = "text/event-stream"
ACCEPT = {"Accept": f"{JSON}, {SSE}"}

# `http.token` comes from this variable of loom's environment; it must never show in loom's
# answers or log.
TOKEN = "http-face-token-4c1d9e27"
TOKEN_VAR = "LOOM_INTEROP_HTTP_TOKEN"

# The passthrough result of test_a_large_passthrough_result_arrives_whole: 13.9 MB of text.
BIG_TEXT = 13_900_000
MIB = 1024 * 1024

INVENTORY_COLUMNS = {"sku": "Utf8", "name": "Utf8", "quantity": "Int64", "price": "Float64", "warehouse": "Utf8"}
WAREHOUSES = ["north", "south", "east", "west"]


def _stock(count: int) -> list[dict[str, Any]]:
    """loom_query's rows for the sum of py_inventory's quantities by warehouse."""
    want = {w: sum((i * 7) % 100 for i in range(count) if i % 4 == k) for k, w in enumerate(WAREHOUSES)}
    return [{"warehouse": w, "q": want[w]} for w in sorted(want)]


def _stock_sql(ref: str) -> str:
    return f"SELECT warehouse, sum(quantity) AS q FROM {ref} GROUP BY warehouse ORDER BY warehouse"


# --------------------------------------------------------------------------------------------
# loom serve --http, and clients of it


@dataclass
class HttpLoom:
    url: str
    log: Path
    process: subprocess.Popen

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> float:
        """SIGTERM; the seconds loom took to exit (killed after PATIENCE)."""
        started = time.monotonic()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=PATIENCE)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return time.monotonic() - started


_served = 0


@contextmanager
def serve_http(setup: DataSetup, *extra: str) -> Iterator[HttpLoom]:
    """`loom serve --http 127.0.0.1:0` over `setup`'s config until the block ends (SIGTERM)."""
    global _served
    _served += 1
    config = setup.write_config()
    log = setup.tmp / f"loom-http-{_served}.stderr"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [str(LOOM_BIN), "serve", "--http", "127.0.0.1:0", *extra, "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=out,
            env={**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "info"), **setup.env},
        )
    loom = None
    try:
        deadline = time.monotonic() + PATIENCE
        while (found := SERVING.search(log.read_text(errors="replace"))) is None:
            if process.poll() is not None:
                pytest.fail(f"loom exited with {process.returncode} before serving:\n{log.read_text(errors='replace')[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"loom did not serve within {PATIENCE} s:\n{log.read_text(errors='replace')[-4000:]}")
            time.sleep(0.05)
        loom = HttpLoom(found[1], log, process)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", loom.url), loom.url
        yield loom
    finally:
        if loom is not None:
            loom.stop()
        else:
            process.kill()
            process.wait()
        print(f"--- loom serve --http stderr (last 6000 characters) ---\n{log.read_text(errors='replace')[-6000:]}", file=sys.stderr)


@pytest.fixture
def web(setup: Setup) -> DataSetup:
    """server-everything (`everything`) and the Python server (`py`) behind loom; `options` go
    into loom's config as top-level keys (`http`, `compression`)."""
    return DataSetup(tmp=setup.tmp, fs_root=setup.fs_root, servers=dict(setup.servers), enabled=[EVERYTHING, PY], env=dict(setup.env))


@dataclass
class Wire:
    """What an SDK client's HTTP connection carried: (the JSON-RPC method POSTed, or `response`
    for a POSTed answer, or the HTTP method; the HTTP status; the answer's content type)."""

    exchanges: list[tuple[str, int, str]] = field(default_factory=list)

    def of(self, method: str) -> list[tuple[int, str]]:
        return [(status, kind) for what, status, kind in self.exchanges if what == method]


@asynccontextmanager
async def connect_http(url: str, mode: str = "auto", *, headers: dict[str, str] | None = None, wire: Wire | None = None, **kwargs: Any) -> AsyncIterator[Any]:
    """The SDK 2.x over Streamable HTTP to `url`, with `headers` on every request; `wire` records
    every exchange."""
    wire = wire if wire is not None else Wire()

    async def record(response: httpx2.Response) -> None:
        request = response.request
        what = request.method
        if what == "POST":
            try:
                what = json.loads(request.content).get("method") or "response"
            except (ValueError, AttributeError):
                what = "POST ?"
        wire.exchanges.append((what, response.status_code, response.headers.get("content-type", "").partition(";")[0]))

    timeout = httpx2.Timeout(PATIENCE, read=300)
    async with httpx2.AsyncClient(headers=headers or {}, timeout=timeout, event_hooks={"response": [record]}) as http:
        async with connect(streamable_http_client(url, http_client=http), mode=mode, **kwargs) as client:
            yield client


def _initialize(number: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": number,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "interop-raw", "version": "0"}},
    }


def _assert_negotiated(wire: Wire, mode: str) -> None:
    """`auto` asked `server/discover` first and went on in 2026-07-28, without a handshake (SPEC
    §22, "Without a session"); `legacy` began with the handshake."""
    first = [what for what, _, _ in wire.exchanges[:2]]
    if mode == "auto":
        assert first[0] == "server/discover", wire.exchanges
        assert "initialize" not in [what for what, _, _ in wire.exchanges], wire.exchanges
        assert wire.exchanges[0][1:] == (200, JSON), wire.exchanges
    else:
        assert first[0] == "initialize", wire.exchanges


# --------------------------------------------------------------------------------------------
# 1. The Python SDK 2.x, both modes


async def test_sdk2_sees_over_http_what_loom_shows_over_stdio(web, mode):
    """Tools and passthrough results over HTTP are what loom over stdio gives the same mode (both
    faces serve 2026-07-28 to `auto`, SPEC §22)."""
    web.use(EVERYTHING)
    async with connect_loom(web, mode) as stdio:
        stdio_version = stdio.protocol_version
        stdio_tools = dump((await stdio.list_tools()).tools)
        stdio_results = [_without_clock(dump(await stdio.call_tool(f"{EVERYTHING}_{name}", arguments))) for name, arguments in CALLS]

    wire = Wire()
    with serve_http(web) as loom:
        async with connect_http(loom.url, mode, wire=wire) as client:
            assert client.protocol_version == stdio_version, client.protocol_version
            assert (client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS) == (mode == "legacy")
            assert client.server_capabilities.tools is not None
            tools = dump((await client.list_tools()).tools)
            assert [t["name"] for t in tools] == [t["name"] for t in stdio_tools]
            for mine, theirs in zip(tools, stdio_tools, strict=True):
                assert mine == theirs, f"{mine['name']} differs over HTTP"
            mismatches = []
            for (name, arguments), theirs in zip(CALLS, stdio_results, strict=True):
                mine = _without_clock(dump(await client.call_tool(f"{EVERYTHING}_{name}", arguments)))
                if mine != theirs:
                    mismatches.append(f"{name} {arguments}:\n  stdio: {theirs}\n  http:  {mine}")
            assert not mismatches, "results differ over HTTP:\n" + "\n".join(mismatches)
    _assert_negotiated(wire, mode)
    # Nothing else was sent for these requests: each answer is one JSON body (SPEC §22).
    for method in ("initialize" if mode == "legacy" else "server/discover", "tools/list", "tools/call"):
        assert wire.of(method) and all(x == (200, JSON) for x in wire.of(method)), (method, wire.exchanges)


async def test_sdk2_envelope_query_and_progress_over_http(web, mode):
    wire = Wire()
    with serve_http(web) as loom:
        async with connect_http(loom.url, mode, wire=wire) as sdk:
            client = Sdk2Client(sdk, mode)
            assert assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets") == {"datasets": [], "total": 0}
            envelope = assert_envelope(await client.call(f"{PY}_inventory", {"count": 2000}), "inventory 2000")
            assert envelope["ref"].startswith(f"ds_{PY}_inventory") and envelope["rows"] == 2000, envelope
            assert envelope["provenance"]["source"] == "structuredContent"
            assert columns(envelope) == INVENTORY_COLUMNS
            stock = assert_ok(await client.call("loom_query", {"sql": _stock_sql(envelope["ref"])}), "loom_query")
            assert stock["rows"] == _stock(2000)
            listed = assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets")
            assert [(d["ref"], d["rows"]) for d in listed["datasets"]] == [(envelope["ref"], 2000)]

            before = len(wire.exchanges)
            seen = await _long_running(sdk, f"{EVERYTHING}_trigger-long-running-operation", steps=4)
            assert seen[:3] == [1, 2, 3] and seen in ([1, 2, 3], [1, 2, 3, 4]), seen
            # Progress came before the answer, so the answer is an event stream.
            assert [x for x in wire.exchanges[before:] if x[0] == "tools/call"] == [("tools/call", 200, SSE)], wire.exchanges[before:]
    _assert_negotiated(wire, mode)


# --------------------------------------------------------------------------------------------
# 2. The Python SDK 1.x


async def test_sdk1_over_http(web):
    async with open_client("sdk1", web) as stdio:
        stdio_tools = await stdio.list_tools()
        stdio_echo = await stdio.call(f"{EVERYTHING}_echo", {"message": "héllo \u2603"})
    with serve_http(web) as loom:
        async with sdk1_client({"url": loom.url}) as client:
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            tools = await client.list_tools()
            assert tools == stdio_tools
            echo = await client.call(f"{EVERYTHING}_echo", {"message": "héllo \u2603"})
            assert echo == stdio_echo and text_of(echo) == "Echo: héllo \u2603"
            envelope = assert_envelope(await client.call(f"{PY}_inventory", {"count": 2000}), "inventory 2000 (sdk1)")
            assert columns(envelope) == INVENTORY_COLUMNS and envelope["rows"] == 2000
            stock = assert_ok(await client.call("loom_query", {"sql": _stock_sql(envelope["ref"])}), "loom_query (sdk1)")
            assert stock["rows"] == _stock(2000)


# --------------------------------------------------------------------------------------------
# 3. The Inspector CLI


def _inspector(url: str, era: str, home: Path, *args: str) -> tuple[int, dict[str, Any], str]:
    from test_dataplane_inspector import INSPECTOR_CLI, NODE22

    for path in (NODE22, INSPECTOR_CLI):
        if not path.is_file():
            raise pytest.UsageError(f"{path} is missing: run .ci/setup-interop")
    home.mkdir(exist_ok=True)
    command = [
        str(NODE22), str(INSPECTOR_CLI), "--format", "json", "--protocol-era", era,
        "--connect-timeout", str(int(PATIENCE * 1000)), "--transport", "http", "--server-url", url, *args,
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "HOME": str(home)}, timeout=2 * PATIENCE, check=False)
    lines = done.stdout.strip() or (done.stderr.strip().splitlines() or [""])[-1]
    try:
        return done.returncode, json.loads(lines), done.stderr
    except json.JSONDecodeError:
        pytest.fail(f"the Inspector ({era}) printed no JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_inspector_over_http(web, era):
    home = web.tmp / "inspector-home"
    with serve_http(web) as loom:
        async with connect_http(loom.url, "legacy") as sdk:
            own = {tool["name"]: tool for tool in dump((await sdk.list_tools()).tools)}

        status, listed, stderr = await anyio.to_thread.run_sync(_inspector, loom.url, era, home, "--method", "tools/list")
        assert status == 0 and "result" in listed, f"tools/list: exit {status}: {listed}\n{stderr[-3000:]}"
        tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
        assert tools.keys() == own.keys()
        for name, tool in tools.items():
            assert tool["inputSchema"] == own[name]["inputSchema"], name

        call = ("--method", "tools/call", "--tool-name", f"{EVERYTHING}_get-sum", "--tool-args-json", json.dumps({"a": 2, "b": 40}))
        status, called, stderr = await anyio.to_thread.run_sync(_inspector, loom.url, era, home, *call)
        assert status == 0 and "result" in called, f"tools/call: exit {status}: {called}\n{stderr[-3000:]}"
        assert text_of(called["result"]) == "The sum of 2 and 40 is 42."

        call = ("--method", "tools/call", "--tool-name", f"{PY}_inventory", "--tool-args-json", json.dumps({"count": 2000}))
        status, called, stderr = await anyio.to_thread.run_sync(_inspector, loom.url, era, home, *call)
        assert status == 0 and "result" in called, f"tools/call: exit {status}: {called}\n{stderr[-3000:]}"
        assert assert_envelope(called["result"], "inventory 2000 (Inspector)")["rows"] == 2000


async def test_inspector_pinned_to_2026_07_28_is_served(web):
    """The `modern` era pins 2026-07-28 and has no fallback: loom serves it without a session
    (SPEC §22), so it lists and calls as the other eras do."""
    web.use(EVERYTHING)
    home = web.tmp / "inspector-home"
    with serve_http(web) as loom:
        status, output, stderr = await anyio.to_thread.run_sync(_inspector, loom.url, "modern", home, "--method", "tools/list")
        assert status == 0 and "result" in output, f"exit {status}: {output}\n{stderr[-2000:]}"
        assert f"{EVERYTHING}_get-sum" in {tool["name"] for tool in output["result"]["tools"]}
        call = ("--method", "tools/call", "--tool-name", f"{EVERYTHING}_get-sum", "--tool-args-json", json.dumps({"a": 2, "b": 40}))
        status, called, stderr = await anyio.to_thread.run_sync(_inspector, loom.url, "modern", home, *call)
    assert status == 0 and "result" in called, f"exit {status}: {called}\n{stderr[-2000:]}"
    assert text_of(called["result"]) == "The sum of 2 and 40 is 42."


# --------------------------------------------------------------------------------------------
# 4. Two sessions at once


async def test_two_clients_hold_their_own_datasets(web):
    web.use(PY)
    with serve_http(web) as loom:
        async with connect_http(loom.url, "legacy") as a_sdk, connect_http(loom.url, "auto") as b_sdk:
            a, b = Sdk2Client(a_sdk, "legacy"), Sdk2Client(b_sdk, "auto")
            envelopes: dict[str, dict[str, Any]] = {}

            async def inventory(label: str, client: Sdk2Client, count: int) -> None:
                envelopes[label] = assert_envelope(await client.call(f"{PY}_inventory", {"count": count}), f"inventory {label}")

            # The same tool, at the same time, in both sessions.
            async with anyio.create_task_group() as group:
                group.start_soon(inventory, "a", a, 2000)
                group.start_soon(inventory, "b", b, 3000)
            # Each session numbers its own datasets; the same ref holds each session's own rows.
            assert envelopes["a"]["ref"] == envelopes["b"]["ref"], envelopes
            assert (envelopes["a"]["rows"], envelopes["b"]["rows"]) == (2000, 3000)
            ref = envelopes["a"]["ref"]
            assert assert_ok(await a.call("loom_query", {"sql": _stock_sql(ref)}), "a")["rows"] == _stock(2000)
            assert assert_ok(await b.call("loom_query", {"sql": _stock_sql(ref)}), "b")["rows"] == _stock(3000)

            # A's second dataset and a view: B can neither query, describe nor list them.
            second = assert_envelope(await a.call(f"{PY}_inventory", {"count": 1500}), "a's second inventory")
            view = assert_envelope(
                await a.call("loom_materialize", {"sql": f"SELECT warehouse, count(*) AS n FROM {ref} GROUP BY warehouse", "name": "only a"}),
                "a's view",
            )
            assert second["ref"] != ref and view["ref"] == "ds_view_only_a", (second["ref"], view["ref"])
            for theirs in (second["ref"], view["ref"]):
                assert_error(await b.call("loom_query", {"sql": f"SELECT count(*) AS n FROM {theirs}"}), f"b queries a's {theirs}", "loom_query")
                assert_error(await b.call("loom_describe", {"ref": theirs}), f"b describes a's {theirs}", "no dataset")
            listed_b = assert_ok(await b.call("loom_list_datasets", {}), "b's datasets")
            assert [(d["ref"], d["rows"]) for d in listed_b["datasets"]] == [(ref, 3000)]
            listed_a = assert_ok(await a.call("loom_list_datasets", {}), "a's datasets")
            assert {d["ref"]: d["rows"] for d in listed_a["datasets"]} == {ref: 2000, second["ref"]: 1500, view["ref"]: 4}


async def test_two_credentials_export_apart_and_keep_no_secrets(web):
    """Hostile use round 2 over HTTP with the official client (SPEC §15, §13): a session
    of one token and a 2026-07-28 scope of another each export `report.csv`; each file lands in
    a folder of its own, neither can replace or learn of the other's, secrets in arguments are
    not kept."""
    web.use(PY)
    web.options["exportDir"] = str(web.tmp / "exports")
    web.options["http"] = {"tokens": ["${LOOM_TOKEN_A}", "${LOOM_TOKEN_B}"]}
    web.env.update({"LOOM_TOKEN_A": "token-of-a-1f2e", "LOOM_TOKEN_B": "token-of-b-9c8d"})
    with serve_http(web) as loom:
        async with (
            connect_http(loom.url, "legacy", headers={"Authorization": "Bearer token-of-a-1f2e"}) as a_sdk,
            connect_http(loom.url, "2026-07-28", headers={"Authorization": "Bearer token-of-b-9c8d"}) as b_sdk,
        ):
            a, b = Sdk2Client(a_sdk, "legacy"), Sdk2Client(b_sdk, "2026-07-28")
            secret_args = {"count": 2000, "db_password": "hunter2-a", "dsn": "postgres://app:s3cr3t@db:5432/x"}
            a_env = assert_envelope(await a.call(f"{PY}_inventory", secret_args), "a's inventory")
            assert a_env["provenance"]["args"]["db_password"] == "[redacted]", a_env["provenance"]
            described = json.dumps(assert_ok(await a.call("loom_describe", {"ref": a_env["ref"]}), "describe"))
            assert "hunter2-a" not in described and "s3cr3t" not in described, described
            b_env = assert_envelope(await b.call(f"{PY}_inventory", {"count": 1000}), "b's inventory")
            paths = {}
            for label, client, env in (("a", a, a_env), ("b", b, b_env)):
                exported = assert_ok(
                    await client.call("loom_export", {"ref": env["ref"], "format": "csv", "filename": "report.csv"}),
                    f"{label} exports",
                )
                paths[label] = Path(exported["path"])
            assert paths["a"] != paths["b"], paths
            assert paths["a"].name == paths["b"].name == "report.csv"
            assert paths["a"].parent.parent == paths["b"].parent.parent == web.tmp / "exports", paths
            assert len(paths["a"].read_text().splitlines()) == 2001
            # B overwrites its own file; A's stays whole, and B's error texts never name A's folder.
            assert_ok(
                await b.call("loom_export", {"ref": b_env["ref"], "format": "csv", "filename": "report.csv", "overwrite": True}),
                "b overwrites its own",
            )
            assert len(paths["a"].read_text().splitlines()) == 2001
            again = assert_error(
                await b.call("loom_export", {"ref": b_env["ref"], "format": "csv", "filename": "report.csv"}),
                "b exports again without overwrite",
                "already exists",
            )
            assert paths["a"].parent.name not in again, again
            assert_error(
                await b.call("loom_export", {"ref": b_env["ref"], "format": "json", "filename": "conftest.py"}),
                "b exports python",
                "does not end in `.json`",
            )
    log = loom.stderr()
    assert "hunter2-a" not in log and "token-of-a-1f2e" not in log and "token-of-b-9c8d" not in log


async def test_log_lines_stay_with_the_credential_whose_call_made_them(web):
    """A server's log line names no request: behind loom, shared by sessions of two tokens, the
    line a call of one token caused reaches that token's sessions only (SPEC §5.4); directly,
    each client has a server of its own and hears only its own lines."""
    web.use(PY)
    web.options["http"] = {"tokens": ["${LOOM_TOKEN_A}", "${LOOM_TOKEN_B}"]}
    web.env.update({"LOOM_TOKEN_A": "token-of-a-5d1c", "LOOM_TOKEN_B": "token-of-b-77e0"})
    heard: dict[str, list[str]] = {"a": [], "b": [], "direct": []}

    def collector(who: str):
        async def callback(params: Any) -> None:
            heard[who].append(params.data)

        return callback

    params = StdioServerParameters(command=web.servers[PY]["command"], args=web.servers[PY]["args"])
    async with connect(params, mode="legacy", logging_callback=collector("direct")) as direct:
        await direct.call_tool("chatty", {})
        await anyio.sleep(0.5)
    own = sorted(heard.pop("direct"))
    assert own, "the server logs nothing directly"
    with serve_http(web) as loom:
        async with (
            connect_http(loom.url, "legacy", headers={"Authorization": "Bearer token-of-a-5d1c"}, logging_callback=collector("a")) as a,
            connect_http(loom.url, "legacy", headers={"Authorization": "Bearer token-of-b-77e0"}, logging_callback=collector("b")) as b,
        ):
            chatty = await b.call_tool(f"{PY}_chatty", {})
            assert [c.text for c in chatty.content] == ["ok"], chatty
            await anyio.sleep(0.5)
            assert heard["a"] == [] and sorted(heard["b"]) == own, (heard, own)
            await a.call_tool(f"{PY}_chatty", {})
            await anyio.sleep(0.5)
            assert sorted(heard["a"]) == own and sorted(heard["b"]) == own, (heard, own)


# --------------------------------------------------------------------------------------------
# 5. Refusals


async def test_bearer_token_from_the_environment(web, mode):
    web.use(PY)
    web.options["http"] = {"token": f"${{{TOKEN_VAR}}}"}
    web.env[TOKEN_VAR] = TOKEN
    with serve_http(web) as loom:
        async with connect_http(loom.url, mode, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            assert (await client.call_tool(f"{PY}_add", {"a": 2, "b": 40})).structured_content == {"result": 42}

        for label, headers in [("no token", {}), ("a wrong token", {"Authorization": "Bearer not-the-token"})]:
            wire = Wire()
            # The SDK reports any non-JSON 4xx as "Server returned an error response".
            with pytest.raises(MCPError) as refused:
                async with connect_http(loom.url, mode, headers=headers, wire=wire) as client:
                    await client.list_tools()
            assert wire.exchanges and {status for _, status, _ in wire.exchanges} == {401}, (label, wire.exchanges)
            assert TOKEN not in str(refused.value)

        async with httpx2.AsyncClient(timeout=PATIENCE) as http:
            missing = await http.post(loom.url, json=_initialize(), headers=ACCEPT)
            assert missing.status_code == 401, missing.text
            assert missing.headers.get("www-authenticate") == 'Bearer realm="loom"'
            # The two texts tell a missing token from a refused one.
            assert "Authorization: Bearer" in missing.text and "refused" not in missing.text, missing.text
            wrong = await http.post(loom.url, json=_initialize(), headers={**ACCEPT, "Authorization": "Bearer nope"})
            assert wrong.status_code == 401 and "refused" in wrong.text, wrong.text
            assert wrong.headers.get("www-authenticate") == 'Bearer realm="loom"'
            assert "mcp-session-id" not in missing.headers and "mcp-session-id" not in wrong.headers
    assert TOKEN not in loom.stderr(), "the token shows in loom's log"


async def test_foreign_origin_and_host_are_refused(web):
    web.use(PY)
    web.options["http"] = {"allowedOrigins": ["https://app.example.com"]}
    with serve_http(web) as loom:
        port = loom.url.split(":")[2].split("/")[0]
        async with httpx2.AsyncClient(timeout=PATIENCE) as http:

            async def post(**headers: str) -> httpx2.Response:
                return await http.post(loom.url, json=_initialize(), headers={**ACCEPT, **headers})

            foreign = await post(Origin="https://evil.example")
            assert foreign.status_code == 403 and "https://evil.example" in foreign.text, (foreign.status_code, foreign.text)
            assert "mcp-session-id" not in foreign.headers
            for origin in ("https://app.example.com", f"http://localhost:{port}", "http://127.0.0.1:5173"):
                allowed = await post(Origin=origin)
                assert allowed.status_code == 200 and allowed.headers.get("mcp-session-id"), (origin, allowed.status_code, allowed.text)
            # A page on another host that resolves to 127.0.0.1 (DNS rebinding) sends its own Host.
            rebound = await post(Host=f"evil.example:{port}")
            assert rebound.status_code == 403, (rebound.status_code, rebound.text)
            for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
                assert (await post(Host=host)).status_code == 200, host

        # And the SDK, sending a foreign Origin on every request, cannot connect.
        wire = Wire()
        with pytest.raises(MCPError):
            async with connect_http(loom.url, "legacy", headers={"Origin": "https://evil.example"}, wire=wire) as client:
                await client.list_tools()
        assert wire.exchanges and {status for _, status, _ in wire.exchanges} == {403}, wire.exchanges


# --------------------------------------------------------------------------------------------
# 6. A 13.9 MB passthrough result


def _big_text_of(size: int) -> str:
    spec = importlib.util.spec_from_file_location("interop_python_server", PYTHON_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.big_text_of(size)


async def test_a_large_passthrough_result_arrives_whole(web, mode):
    web.use(PY)
    web.options["compression"] = {"perTool": {f"{PY}/big_text": {"bypass": True}}}
    wire = Wire()
    with serve_http(web) as loom:
        async with connect_http(loom.url, mode, wire=wire) as client:
            result = await client.call_tool(f"{PY}_big_text", {"size": BIG_TEXT})
            assert not result.is_error, dump(result)
            assert [block.type for block in result.content] == ["text"]
            text = result.content[0].text
            assert len(text) == BIG_TEXT, f"{len(text)} of {BIG_TEXT} characters arrived"
            assert text == _big_text_of(BIG_TEXT)
            # Still usable afterwards.
            assert (await client.call_tool(f"{PY}_add", {"a": 1, "b": 1})).structured_content == {"result": 2}
    # One JSON body, far above the SDK's 1 MiB SSE event cap.
    assert wire.of("tools/call")[0] == (200, JSON), wire.exchanges
    assert BIG_TEXT > 13 * MIB


# --------------------------------------------------------------------------------------------
# The health check for balancers


async def test_healthz_answers_a_balancer_without_a_token(web):
    """SPEC §22 Health check: 200 with each server's state, no token (the face wants one), no
    Host check, nothing but names and kinds of state; other methods 405."""
    web.use(PY)
    web.servers["gone"] = {"command": str(web.tmp / "no-such-server"), "args": []}
    web.enabled.append("gone")
    web.options["http"] = {"token": f"${{{TOKEN_VAR}}}"}
    web.env[TOKEN_VAR] = TOKEN
    with serve_http(web) as loom:
        health = loom.url.removesuffix("/mcp") + "/healthz"
        async with httpx2.AsyncClient(timeout=PATIENCE) as http:
            # The face itself still wants the token.
            assert (await http.post(loom.url, json=_initialize(), headers=ACCEPT)).status_code == 401
            answer = await http.get(health, headers={"Host": "10.1.2.3:8808"})
            assert answer.status_code == 200, answer.text
            assert answer.headers["content-type"] == "application/json"
            assert answer.headers["cache-control"] == "no-store"
            body = answer.json()
            assert body["status"] == "serving"
            assert body["servers"][PY] == "healthy"
            assert body["servers"]["gone"] in {"restarting", "failed"}, body
            # Kinds of state only: no reason, no path of the server that did not start.
            assert "no-such-server" not in answer.text
            head = await http.head(health)
            assert head.status_code == 200 and head.content == b""
            post = await http.post(health, json={})
            assert post.status_code == 405 and post.headers["allow"] == "GET, HEAD"


# --------------------------------------------------------------------------------------------
# Shutdown


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


async def test_sigterm_ends_sessions_and_servers(web):
    """SPEC §22 Shutdown: with a session open (and its GET stream), SIGTERM ends loom quickly and
    its downstream servers with it."""
    with serve_http(web) as loom:
        children = _children(loom.process.pid)
        assert len(children) >= 2, children
        async with httpx2.AsyncClient(timeout=PATIENCE) as http:
            opened = await http.post(loom.url, json=_initialize(), headers=ACCEPT)
            session = opened.headers["mcp-session-id"]
            headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
            sent = await http.post(loom.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**ACCEPT, **headers})
            assert sent.status_code == 202
            async with http.stream("GET", loom.url, headers={"Accept": SSE, **headers}) as stream:
                assert stream.status_code == 200 and stream.headers["content-type"].startswith(SSE)
                await anyio.to_thread.run_sync(loom.stop)
            # 0, not -9: loom ended by itself before PATIENCE ran out (benches/bounds.rs measures
            # how long it takes: 11-14 ms).
            assert loom.process.returncode == 0, loom.process.returncode
        time.sleep(0.5)
        alive = [pid for pid in children if Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]]
        assert not alive, f"downstream servers {alive} outlived loom"


# --------------------------------------------------------------------------------------------
# 7. The MCP conformance suite against loom's own HTTP face

# The suite's server scenarios (0.1.16, its "all" suite), the same as test_conformance.py's.
CONFORMANCE_LISTING = list_scenarios(SUITE_JS)
CONFORMANCE_COMPARED = [s for s in CONFORMANCE_LISTING.params if s not in NAMING_ARTEFACTS and s not in UNSCORED]


@pytest.fixture(scope="module")
def http_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """The suite's server scenarios against the reference server's own Streamable HTTP, and
    against `loom serve --http` in front of the reference server over stdio."""
    from test_remote import _http_server

    CONFORMANCE_LISTING.require()
    if (why := conformance_tooling_missing(SUITE_JS)) is not None:
        pytest.skip(why)  # a failure under CI or LOOM_STRICT_TESTS=1 (conftest.py)
    base = tmp_path_factory.mktemp("conformance-http")
    runs: dict[str, Run] = {}

    (base / "direct").mkdir()
    port = free_port()
    log = base / "reference-server.log"
    with _http_server(reference_server_command("--http", str(port)), port, log) as url:
        runs["direct"] = run_suite(SUITE_JS, url, base / "direct", "--suite", "all", label="against the reference server's own HTTP", timeout=300.0, log=log)

    command, *args = reference_server_command()
    servers = {CONFORMANCE_SERVER_NAME: {"command": command, "args": args, "env": {}}}
    setup = DataSetup(tmp=base, fs_root=base, servers=servers, enabled=[CONFORMANCE_SERVER_NAME])
    (base / "loom").mkdir()
    with serve_http(setup) as loom:
        runs["loom"] = run_suite(SUITE_JS, loom.url, base / "loom", "--suite", "all", label="through loom serve --http", timeout=300.0, log=loom.log)
    return runs


def _score(run: Run) -> str:
    return f"{sum(v.passed for v in run.verdicts.values())}/{len(run.verdicts)}"


def test_conformance_scores(http_runs: dict[str, Run], capsys: pytest.CaptureFixture[str]) -> None:
    direct, through = http_runs["direct"], http_runs["loom"]
    with capsys.disabled():
        print(
            f"\nconformance (server scenarios, suite `all`): reference server's own HTTP {_score(direct)}, "
            f"loom serve --http {_score(through)}"
        )
        for scenario in CONFORMANCE_LISTING.scenarios:
            d, t = direct.verdicts.get(scenario), through.verdicts.get(scenario)
            print(f"  {scenario:40} direct {d!r:.60}  loom {t!r:.200}")
    assert_scenarios_ran(http_runs, CONFORMANCE_LISTING)


@pytest.mark.parametrize("scenario", CONFORMANCE_COMPARED)
def test_conformance_scenario_passes_directly_and_through_loom_http(http_runs: dict[str, Run], scenario: str) -> None:
    CONFORMANCE_LISTING.require()
    through = http_runs["loom"]
    assert_passes_directly_and_through_loom(http_runs["direct"], through, scenario, detail=through.log_tail())


@pytest.mark.parametrize("scenario", sorted(NAMING_ARTEFACTS))
def test_conformance_naming_artefact_is_what_it_claims(http_runs: dict[str, Run], scenario: str) -> None:
    assert_naming_artefact(http_runs["direct"], http_runs["loom"], scenario)


@pytest.mark.parametrize("scenario", sorted(UNSCORED))
def test_conformance_unscored_scenario_is_what_it_claims(http_runs: dict[str, Run], scenario: str) -> None:
    assert_unscored(http_runs["direct"], http_runs["loom"], scenario)
