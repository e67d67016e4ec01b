"""MCP tasks (protocol 2025-11-25) through loom.

loom offers a server's task tools to handshake-era clients with their `execution` as the server
wrote it, declares the `tasks` capability, forwards a task-augmented `tools/call` (its
CreateTaskResult byte-identical), routes `tasks/get`, `tasks/result` and `tasks/cancel` by task id
to the server that created the task, merges `tasks/list`, forwards `notifications/tasks/status`,
and turns a large tabular `tasks/result` into an envelope like any tool result. Clients on
2026-07-28 (no tasks in that revision) see no task-only tool.

Servers: server-everything (`simulate-research-query` requires a task; with `ambiguous` it asks
for input through elicitation) and servers/task_server.py (no SDK; `table_report` returns 3,000
rows, `slow_task` runs until cancelled).

The Python SDK 2.3 has no task API of its own: tasks are created with a raw `tools/call` through
the session's dispatcher and read with the typed requests of `mcp_types`, in `legacy` mode (the
2025-11-25 handshake). The SDK drops `notifications/tasks/status`, so those are checked with a
raw JSON-RPC client over loom's stdio.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import MCPError
from mcp_types.jsonrpc import REQUEST_TIMEOUT
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from conftest import EVERYTHING, LOOM_BIN, PATIENCE, Setup, connect_loom, dump

pytestmark = pytest.mark.anyio

TASKS = "tasks"
TASK_SERVER = Path(__file__).resolve().parent / "servers" / "task_server.py"
RELATED_TASK = "io.modelcontextprotocol/related-task"
RESEARCH = f"{EVERYTHING}_simulate-research-query"
TABLE_REPORT = f"{TASKS}_table_report"
SLOW_TASK = f"{TASKS}_slow_task"
REPORT_COLUMNS = ["id", "region", "product", "units", "price", "day"]
TERMINAL = ("completed", "failed", "cancelled")


def _load_task_server():
    spec = importlib.util.spec_from_file_location("interop_task_server", TASK_SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


task_server = _load_task_server()


@pytest.fixture
def tasks(setup: Setup) -> Setup:
    """`setup` with servers/task_server.py as `tasks` (its written lines traced to a file)."""
    setup.servers[TASKS] = {
        "command": sys.executable,
        "args": [str(TASK_SERVER)],
        "env": {"TASK_SERVER_TRACE": str(_trace_path(setup))},
    }
    return setup


def _trace_path(setup: Setup) -> Path:
    return setup.tmp / "task_server.trace"


# --- the task requests, through the SDK -------------------------------------------------------


async def create_task(client, tool: str, arguments: dict[str, Any], ttl: int = 60_000) -> types.Task:
    """A task-augmented tools/call; the task the server created."""
    raw = await client.session._dispatcher.send_raw_request(
        "tools/call", {"name": tool, "arguments": arguments, "task": {"ttl": ttl}}, {"timeout": PATIENCE}
    )
    assert "task" in raw, f"{tool} with a task did not answer with a CreateTaskResult: {str(raw)[:500]}"
    return types.CreateTaskResult.model_validate(raw, by_name=False).task


async def get_task(client, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.GetTaskResult)


async def task_result(client, task_id: str) -> types.CallToolResult:
    """tasks/result: waits (at most PATIENCE) until the task ends, then its CallToolResult."""
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CallToolResult)


async def cancel_task(client, task_id: str) -> types.CancelTaskResult:
    request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.CancelTaskResult)


async def list_tasks(client) -> list[types.Task]:
    found: list[types.Task] = []
    cursor = None
    for _ in range(50):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.session.send_request(types.ListTasksRequest(params=params), types.ListTasksResult)
        found.extend(page.tasks)
        cursor = page.next_cursor
        if not cursor:
            return found
    raise AssertionError("tasks/list through loom did not stop paginating after 50 pages")


async def wait_for_status(client, task_id: str, wanted: tuple[str, ...]) -> types.GetTaskResult:
    """Poll tasks/get (at the task's pollInterval, at most PATIENCE in all) until its status is
    one of `wanted` or final."""
    with anyio.fail_after(PATIENCE):
        while True:
            task = await get_task(client, task_id)
            if task.status in wanted or task.status in TERMINAL:
                return task
            await anyio.sleep(min((task.poll_interval or 500) / 1000, 1.0))


def _text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


# --- (a) a task of server-everything ----------------------------------------------------------


async def test_research_task_runs_through_loom(tasks):
    tasks.use(EVERYTHING)
    async with connect_loom(tasks, "legacy") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert RESEARCH in listed, f"{RESEARCH} is not offered to a 2025-11-25 client"
        assert listed[RESEARCH].execution is not None
        assert listed[RESEARCH].execution.task_support == "required"
        capability = client.server_capabilities.tasks
        assert capability is not None and capability.requests is not None, "no tasks capability"
        assert capability.requests.tools is not None and capability.requests.tools.call is not None

        task = await create_task(client, RESEARCH, {"topic": "rust"})
        assert task.status == "working", dump(task)
        result = await task_result(client, task.task_id)
        assert not result.is_error, dump(result)
        assert _text(result).startswith("# Research Report: rust"), _text(result)[:200]
        assert (result.meta or {}).get(RELATED_TASK) == {"taskId": task.task_id}, result.meta

        final = await get_task(client, task.task_id)
        assert final.task_id == task.task_id
        assert final.status == "completed", dump(final)


# --- (b) tasks/list across servers ------------------------------------------------------------


async def test_tasks_list_holds_the_tasks_of_every_server(tasks):
    tasks.use(EVERYTHING, TASKS)
    async with connect_loom(tasks, "legacy") as client:
        research = await create_task(client, RESEARCH, {"topic": "listing"})
        slow = await create_task(client, SLOW_TASK, {"label": "listed"})
        listed = await list_tasks(client)
        ids = Counter(task.task_id for task in listed)
        assert ids[research.task_id] == 1, f"server-everything's task is not listed once: {dump(listed)}"
        assert ids[slow.task_id] == 1, f"the task server's task is not listed once: {dump(listed)}"
        by_id = {task.task_id: task for task in listed}
        assert by_id[slow.task_id].status == "working"
        # Each id is still routed to its own server after the merge.
        assert (await get_task(client, slow.task_id)).task_id == slow.task_id
        assert (await get_task(client, research.task_id)).task_id == research.task_id


# --- (c) cancelling ---------------------------------------------------------------------------


async def test_cancelling_a_task_through_loom(tasks):
    tasks.use(TASKS)
    async with connect_loom(tasks, "legacy") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed[SLOW_TASK].execution is not None and listed[SLOW_TASK].execution.task_support == "optional"

        task = await create_task(client, SLOW_TASK, {"label": "to cancel"})
        assert (await get_task(client, task.task_id)).status == "working"

        outcome: dict[str, Any] = {}

        async def wait_for_the_result() -> None:
            try:
                outcome["result"] = await task_result(client, task.task_id)
            except MCPError as error:
                outcome["error"] = error

        async with anyio.create_task_group() as group:
            # A tasks/result waiting on the task (sent before or after the cancel: either way
            # the task ends without a result, and the waiting request must get an answer).
            group.start_soon(wait_for_the_result)
            cancelled = await cancel_task(client, task.task_id)
        assert cancelled.task_id == task.task_id
        assert cancelled.status == "cancelled", dump(cancelled)
        assert (await get_task(client, task.task_id)).status == "cancelled"
        assert "error" in outcome, f"tasks/result of a cancelled task answered {outcome}"
        assert outcome["error"].code != REQUEST_TIMEOUT, "tasks/result of a cancelled task got no answer"

        # The server's own error for a second cancel comes back as an error naming the task.
        with pytest.raises(MCPError) as again:
            await cancel_task(client, task.task_id)
        assert task.task_id in again.value.message

        # Without a task, the optional tool still runs as a plain call.
        plain = await client.call_tool(SLOW_TASK, {"label": "plain"})
        assert _text(plain) == "slow_task ran without a task: plain"


# --- (d) a large tabular task result becomes an envelope --------------------------------------


async def _table_report_through_loom(client) -> tuple[types.Task, types.CallToolResult]:
    listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert TABLE_REPORT in listed, f"{TABLE_REPORT} is not offered: {sorted(listed)}"
    assert listed[TABLE_REPORT].execution is not None
    assert listed[TABLE_REPORT].execution.task_support == "required"
    task = await create_task(client, TABLE_REPORT, {"rows": 3000})
    assert task.task_id.startswith("ts-"), f"not the task server's own id: {task.task_id}"
    return task, await task_result(client, task.task_id)


async def test_large_tabular_task_result_becomes_an_envelope(tasks):
    tasks.use(TASKS)
    rows = task_server.report_rows(3000)
    async with connect_loom(tasks, "legacy") as client:
        task, result = await _table_report_through_loom(client)
        assert not result.is_error, _text(result)[:500]
        envelope = result.structured_content
        assert envelope is not None and envelope.get("kind") == "loom_dataset_ref", (
            f"tasks/result of 3,000 rows is not an envelope: {_text(result)[:300]}"
        )
        assert json.loads(_text(result)) == envelope, "the envelope's text and structuredContent differ"
        assert envelope["rows"] == 3000
        names = [column["name"] if isinstance(column, dict) else column.split(":")[0] for column in envelope["schema"]]
        assert sorted(names) == sorted(REPORT_COLUMNS), envelope["schema"]
        assert envelope["provenance"]["server"] == TASKS, envelope["provenance"]
        assert envelope["provenance"]["tool"] == "table_report", envelope["provenance"]

        ref = envelope["ref"]
        sql = f"SELECT region, count(*) AS n, sum(units) AS units FROM {ref} GROUP BY region ORDER BY region"
        answer = await client.call_tool("loom_query", {"sql": sql})
        assert not answer.is_error, _text(answer)
        expected = [
            {"region": region, "n": sum(1 for row in rows if row["region"] == region),
             "units": sum(row["units"] for row in rows if row["region"] == region)}
            for region in sorted({row["region"] for row in rows})
        ]
        assert answer.structured_content["rows"] == expected

        # The dataset is listed like any tool's.
        held = (await client.call_tool("loom_list_datasets", {})).structured_content["datasets"]
        assert [dataset["rows"] for dataset in held if dataset["ref"] == ref] == [3000], held
        # And the task is still the server's, completed.
        assert (await get_task(client, task.task_id)).status == "completed"


async def test_envelope_of_a_task_result_names_its_task(tasks):
    """tasks/result must carry `_meta["io.modelcontextprotocol/related-task"]` (2025-11-25: the
    result itself does not say which task it is); an envelope built from it keeps that."""
    tasks.use(TASKS)
    async with connect_loom(tasks, "legacy") as client:
        task, result = await _table_report_through_loom(client)
        assert (result.structured_content or {}).get("kind") == "loom_dataset_ref", _text(result)[:300]
        assert (result.meta or {}).get(RELATED_TASK) == {"taskId": task.task_id}, (
            f"the envelope lost the related-task _meta: {result.meta}"
        )


# --- (e) unknown task ids ---------------------------------------------------------------------


@pytest.mark.parametrize("method", ["tasks/get", "tasks/result", "tasks/cancel"])
async def test_unknown_task_id_is_an_error_naming_it(tasks, method):
    tasks.use(TASKS)
    unknown = "no-such-task-4711"
    async with connect_loom(tasks, "legacy") as client:
        with pytest.raises(MCPError) as caught:
            await client.session._dispatcher.send_raw_request(method, {"taskId": unknown}, {"timeout": PATIENCE})
        assert caught.value.code == -32602, caught.value.error
        assert unknown in caught.value.message, caught.value.message
        # loom is still fine afterwards.
        assert (await client.list_tools()).tools


# --- (f) status notifications, seen by a raw JSON-RPC client ----------------------------------


class RawLoom:
    """A JSON-RPC client of loom over its stdio, one JSON message per line, no SDK."""

    def __init__(self, process: anyio.abc.Process) -> None:
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.next_id = 0
        self.notifications: list[dict[str, Any]] = []

    async def send(self, message: dict[str, Any]) -> None:
        await self.process.stdin.send((json.dumps(message) + "\n").encode())

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, **({"params": params} if params is not None else {})})

    async def _read(self) -> tuple[str, dict[str, Any]]:
        line = (await self.stdout.receive_until(b"\n", 256 * 2**20)).decode()
        message = json.loads(line)
        if "method" in message and "id" in message:
            # loom asking its client something: this client declared no capabilities.
            await self.send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
        elif "method" in message:
            self.notifications.append(message)
        return line, message

    async def request(self, method: str, params: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Send a request; its response, as the line loom wrote and decoded."""
        self.next_id += 1
        await self.send(
            {"jsonrpc": "2.0", "id": self.next_id, "method": method, **({"params": params} if params is not None else {})}
        )
        with anyio.fail_after(PATIENCE):
            while True:
                line, message = await self._read()
                if message.get("id") == self.next_id and "method" not in message:
                    return line, message

    async def wait_for(self, found: Callable[[list[dict[str, Any]]], bool], what: str) -> None:
        """Read (at most PATIENCE) until `found(notifications so far)`."""
        with anyio.move_on_after(PATIENCE):
            while not found(self.notifications):
                await self._read()
        if not found(self.notifications):
            raise AssertionError(f"no {what} within {PATIENCE} s; notifications seen: {self.notifications}")


@asynccontextmanager
async def raw_loom(setup: Setup) -> AsyncIterator[RawLoom]:
    config = setup.write_config()
    log = setup.tmp / "loom.stderr"
    env = {**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "info")}
    with log.open("wb") as stderr:
        process = await anyio.open_process(
            [str(LOOM_BIN), "--config", str(config)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env
        )
        try:
            yield RawLoom(process)
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await process.stdin.aclose()
                except (OSError, anyio.BrokenResourceError):
                    pass
                with anyio.move_on_after(5):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            print(f"loom's log:\n{log.read_text(errors='replace')[-20000:]}")


def _statuses(notifications: list[dict[str, Any]], task_id: str) -> list[dict[str, Any]]:
    return [
        note["params"]
        for note in notifications
        if note["method"] == "notifications/tasks/status" and note.get("params", {}).get("taskId") == task_id
    ]


def _without_empty_meta(params: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if not (key == "_meta" and value == {})}


def _server_lines(setup: Setup) -> list[str]:
    return _trace_path(setup).read_text().splitlines()


async def _handshake(loom: RawLoom) -> dict[str, Any]:
    """initialize (2025-11-25, no client capabilities) + initialized; the initialize result."""
    _, init = await loom.request(
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw-interop", "version": "0"}},
    )
    assert init["result"]["protocolVersion"] == "2025-11-25", init
    await loom.notify("notifications/initialized")
    return init["result"]


async def test_status_notifications_reach_a_raw_client(tasks):
    tasks.use(TASKS)
    async with raw_loom(tasks) as loom:
        init = await _handshake(loom)
        capability = init["capabilities"].get("tasks")
        assert capability is not None, f"no tasks capability: {init['capabilities']}"
        assert "list" in capability and "cancel" in capability, capability
        assert "call" in capability.get("requests", {}).get("tools", {}), capability

        _, listed = await loom.request("tools/list")
        tools = {tool["name"]: tool for tool in listed["result"]["tools"]}
        assert tools[TABLE_REPORT].get("execution") == {"taskSupport": "required"}, tools.get(TABLE_REPORT)
        assert tools[SLOW_TASK].get("execution") == {"taskSupport": "optional"}, tools.get(SLOW_TASK)

        line, created = await loom.request(
            "tools/call", {"name": TABLE_REPORT, "arguments": {"rows": 3000}, "task": {"ttl": 60000}}
        )
        task_id = created["result"]["task"]["taskId"]
        # The CreateTaskResult is the server's, byte for byte.
        own = [
            server_line
            for server_line in _server_lines(tasks)
            if f'"taskId": "{task_id}"' in server_line and '"result": {"task": ' in server_line
        ]
        assert len(own) == 1, own
        raw_result = own[0][own[0].index('"result": ') + len('"result": ') : own[0].rindex("}")]
        assert raw_result in line, f"CreateTaskResult changed on its way:\n server: {raw_result}\n loom:   {line}"

        _, payload = await loom.request("tasks/result", {"taskId": task_id})
        assert "result" in payload, payload
        # Every status change the server announced reaches the client, in order: `working` (sent
        # right after the CreateTaskResult), then `completed` (so once `completed` is here,
        # `working` is late for good).
        await loom.wait_for(
            lambda notes: "completed" in {p["status"] for p in _statuses(notes, task_id)},
            f"completed notification for {task_id}",
        )
        statuses = [params["status"] for params in _statuses(loom.notifications, task_id)]
        assert statuses == ["working", "completed"], f"status notifications for {task_id}: {statuses}"
        sent = [
            json.loads(server_line)["params"]
            for server_line in _server_lines(tasks)
            if '"method": "notifications/tasks/status"' in server_line and task_id in server_line
        ]
        # As the server sent them (rmcp's typed notifications may add an empty `_meta`).
        forwarded = [_without_empty_meta(params) for params in _statuses(loom.notifications, task_id)]
        assert forwarded == sent, "status notifications changed on their way"

        # A cancelled task is announced too.
        _, slow = await loom.request("tools/call", {"name": SLOW_TASK, "arguments": {}, "task": {"ttl": 60000}})
        slow_id = slow["result"]["task"]["taskId"]
        _, cancelled = await loom.request("tasks/cancel", {"taskId": slow_id})
        assert cancelled["result"]["status"] == "cancelled", cancelled
        await loom.wait_for(
            lambda notes: "cancelled" in {p["status"] for p in _statuses(notes, slow_id)},
            f"cancelled notification for {slow_id}",
        )


async def test_status_sent_before_the_create_task_result_reaches_a_raw_client(tasks):
    """server-everything announces a task (`working`, "Gathering sources...") before it answers
    the tools/call with the CreateTaskResult; a client of loom gets that one too, and the rest in
    order."""
    tasks.use(EVERYTHING)
    async with raw_loom(tasks) as loom:
        await _handshake(loom)
        _, created = await loom.request(
            "tools/call", {"name": RESEARCH, "arguments": {"topic": "notifications"}, "task": {"ttl": 60000}}
        )
        task_id = created["result"]["task"]["taskId"]
        _, payload = await loom.request("tasks/result", {"taskId": task_id})
        assert "result" in payload, payload
        await loom.wait_for(
            lambda notes: "completed" in {p["status"] for p in _statuses(notes, task_id)},
            f"completed notification for {task_id}",
        )
        seen = [(params["status"], params.get("statusMessage")) for params in _statuses(loom.notifications, task_id)]
        assert seen[0] == ("working", created["result"]["task"].get("statusMessage")), (
            f"the status sent before the CreateTaskResult did not reach the client: {seen}"
        )
        assert seen[-1][0] == "completed", seen
        assert len(seen) >= 3, seen


# --- (g) 2026-07-28 clients -------------------------------------------------------------------


async def test_modern_clients_get_task_only_tools_run_by_loom(tasks):
    """A 2026-07-28 client that does not declare the tasks extension (the Python SDK 2.x has none)
    is offered every tool without `execution`; loom runs a task-only tool as a task and answers
    the call plainly (SPEC §5.10), and the 2025-11-25 task methods are not served to it."""
    tasks.use(EVERYTHING, TASKS)
    async with connect_loom(tasks, "auto") as client:
        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert RESEARCH in listed and TABLE_REPORT in listed, sorted(listed)
        assert SLOW_TASK in listed and f"{TASKS}_hello" in listed, sorted(listed)
        with_execution = [name for name, tool in listed.items() if tool.execution is not None]
        assert not with_execution, f"`execution` listed to a 2026-07-28 client: {with_execution}"
        assert client.server_capabilities.tasks is None, "loom declares 2025-11-25 tasks to a 2026-07-28 client"
        # The optional one runs as a plain call.
        assert _text(await client.call_tool(SLOW_TASK, {"label": "modern"})) == "slow_task ran without a task: modern"
        # The required one is run as a task by loom: 3,000 rows, an envelope.
        report = await client.call_tool(TABLE_REPORT, {"rows": 3000})
        assert not report.is_error, _text(report)
        assert report.structured_content["kind"] == "loom_dataset_ref", report.structured_content
        assert report.structured_content["rows"] == 3000
        # And 2025-11-25 task requests are not served on this version (SPEC §5.10).
        with pytest.raises(MCPError) as caught:
            await get_task(client, "ts-any")
        assert caught.value.code in (-32021, -32602), caught.value.error


# --- (h) a task that needs input --------------------------------------------------------------


async def test_elicitation_of_a_task_reaches_the_client(tasks):
    tasks.use(EVERYTHING)
    asked: list[dict[str, Any]] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params.model_dump(by_alias=True, exclude_none=True))
        return types.ElicitResult(action="accept", content={"interpretation": "programming"})

    async with connect_loom(tasks, "legacy", elicitation_callback=elicit) as client:
        task = await create_task(client, RESEARCH, {"topic": "python", "ambiguous": True})
        waiting = await wait_for_status(client, task.task_id, ("input_required",))
        assert waiting.status == "input_required", dump(waiting)
        # The server asks its question while a tasks/result is waiting for the task.
        result = await task_result(client, task.task_id)
        assert len(asked) == 1, asked
        assert "python" in asked[0]["message"], asked[0]
        assert not result.is_error, dump(result)
        assert _text(result).startswith("# Research Report: python (programming)"), _text(result)[:200]
        assert (await get_task(client, task.task_id)).status == "completed"
        # The server tied its question to the task (2025-11-25: a request a task depends on MUST
        # carry the related-task `_meta`); the client must see that to know which task asks.
        assert (asked[0].get("_meta") or {}).get(RELATED_TASK) == {"taskId": task.task_id}, (
            f"elicitation/create reached the client without the server's related-task _meta: {asked[0].get('_meta')}"
        )
