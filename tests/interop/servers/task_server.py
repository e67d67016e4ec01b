"""A small MCP stdio server that runs tool calls as tasks (MCP 2025-11-25), written without any
SDK: newline-delimited JSON-RPC on stdin/stdout, standard library only.

It speaks tasks the way server-everything does (capability `tasks: {list, cancel,
requests.tools.call}`, `CreateTaskResult`, `tasks/get`, `tasks/result`, `tasks/list`,
`tasks/cancel`, `notifications/tasks/status`), but with tools whose behaviour the tests can
rely on:

- `table_report` (taskSupport "required"): the task completes about COMPLETE_AFTER seconds after
  it was created, and its result is a large tabular text block: a compact JSON array of `rows`
  (default 3,000) rows × 6 columns, see `report_rows` (the tests import it to know the data).
- `slow_task` (taskSupport "optional"): as a task it stays `working` until `tasks/cancel`; called
  without a task it answers at once.
- `hello` (no `execution`, i.e. taskSupport "forbidden"): a plain tool.
- `held_report` (taskSupport "required"): the task stays `working` until `tasks/cancel`.

Differences from server-everything on purpose: the `working` status notification follows the
`CreateTaskResult` (server-everything sends it before), and ids start with `ts-`.

Environment: TASK_SERVER_TRACE, when set, is a file to which every line the server writes is
appended (the tests compare loom's bytes with the server's).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from datetime import datetime, timezone
from typing import Any

PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
COMPLETE_AFTER = 0.3  # seconds from creation to completion of a table_report task
DEFAULT_TTL = 60_000
POLL_INTERVAL = 100
RELATED_TASK = "io.modelcontextprotocol/related-task"
TERMINAL = ("completed", "failed", "cancelled")

REGIONS = ["north", "south", "east", "west"]


def report_rows(count: int) -> list[dict[str, Any]]:
    """The rows of `table_report {"rows": count}`."""
    return [
        {
            "id": i,
            "region": REGIONS[i % len(REGIONS)],
            "product": f"P-{i % 25:03d}",
            "units": (i * 7) % 100,
            "price": 1.5 + (i % 40) * 0.25,
            "day": f"2025-{1 + i % 12:02d}-{1 + i % 28:02d}",
        }
        for i in range(count)
    ]


TOOLS = [
    {
        "name": "table_report",
        "title": "Table report",
        "description": "A large sales table, built as a task (it must be called as a task).",
        "inputSchema": {
            "type": "object",
            "properties": {"rows": {"type": "integer", "minimum": 1, "maximum": 100000, "default": 3000}},
        },
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "slow_task",
        "description": "As a task: works until cancelled. Without a task: answers at once.",
        "inputSchema": {"type": "object", "properties": {"label": {"type": "string"}}},
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "hello",
        "description": "Says hello.",
        "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
    {
        "name": "held_report",
        "description": "A task that works until it is cancelled (it must be called as a task).",
        "inputSchema": {"type": "object", "properties": {}},
        "execution": {"taskSupport": "required"},
    },
]
TASK_SUPPORT = {tool["name"]: tool.get("execution", {}).get("taskSupport", "forbidden") for tool in TOOLS}

_write_lock = threading.Lock()
_trace = os.environ.get("TASK_SERVER_TRACE")


def _send(message: dict[str, Any]) -> None:
    line = json.dumps(message, ensure_ascii=False) + "\n"
    with _write_lock:
        if _trace:
            # Traced first, so a line is in the trace before anyone can have read it.
            with open(_trace, "a", encoding="utf-8") as trace:
                trace.write(line)
        sys.stdout.write(line)
        sys.stdout.flush()


def _result(request_id: Any, result: dict[str, Any]) -> None:
    _send({"jsonrpc": "2.0", "id": request_id, "result": result})


def _error(request_id: Any, code: int, message: str) -> None:
    _send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Task:
    def __init__(self, ttl: int, message: str) -> None:
        self.task_id = f"ts-{uuid.uuid4().hex}"
        self.status = "working"
        self.status_message = message
        self.ttl = ttl
        self.created_at = self.updated_at = _now()
        self.result: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "status": self.status,
            "statusMessage": self.status_message,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttl": self.ttl,
            "pollInterval": POLL_INTERVAL,
        }


_tasks: dict[str, Task] = {}
_changed = threading.Condition()


def _set_status(task: Task, status: str, message: str, result: dict[str, Any] | None = None) -> bool:
    """Move a task to `status` (False if it already ended) and tell the client."""
    with _changed:
        if task.status in TERMINAL:
            return False
        task.status, task.status_message, task.updated_at = status, message, _now()
        task.result = result
        snapshot = task.as_json()
        _changed.notify_all()
    _send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": snapshot})
    return True


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _run_plain(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    if name == "hello":
        return _text(f"Hello, {arguments.get('name', 'world')}!")
    return _text(f"slow_task ran without a task: {arguments.get('label', '')}")


def _tools_call(request_id: Any, params: dict[str, Any]) -> None:
    name = params.get("name")
    arguments = params.get("arguments") or {}
    if name not in TASK_SUPPORT:
        _error(request_id, -32602, f"unknown tool: {name}")
        return
    support = TASK_SUPPORT[name]
    task_meta = params.get("task")
    if task_meta is None:
        if support == "required":
            _error(request_id, -32601, f"tool {name} requires task augmentation (taskSupport: 'required')")
        else:
            _result(request_id, _run_plain(name, arguments))
        return
    if support == "forbidden":
        _error(request_id, -32601, f"tool {name} does not support task augmentation")
        return
    ttl = task_meta.get("ttl") if isinstance(task_meta, dict) else None
    task = Task(ttl if isinstance(ttl, int) else DEFAULT_TTL, f"{name} started")
    with _changed:
        _tasks[task.task_id] = task
        created = task.as_json()
    _result(request_id, {"task": created})
    _send({"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": created})
    if name == "table_report":
        rows = arguments.get("rows", 3000)
        rows = rows if isinstance(rows, int) and 1 <= rows <= 100_000 else 3000

        def finish() -> None:
            text = json.dumps(report_rows(rows), separators=(",", ":"))
            result = _text(text)
            result["_meta"] = {RELATED_TASK: {"taskId": task.task_id}}
            _set_status(task, "completed", f"table_report: {rows} rows ready", result)

        timer = threading.Timer(COMPLETE_AFTER, finish)
        timer.daemon = True
        timer.start()
    # slow_task and held_report: stay working until tasks/cancel.


def _lookup(request_id: Any, params: dict[str, Any]) -> Task | None:
    task_id = params.get("taskId")
    with _changed:
        task = _tasks.get(task_id) if isinstance(task_id, str) else None
    if task is None:
        _error(request_id, -32602, f"unknown task id: {task_id}")
    return task


def _tasks_result(request_id: Any, task: Task) -> None:
    """Answer tasks/result once the task has ended (runs on its own thread)."""
    with _changed:
        _changed.wait_for(lambda: task.status in TERMINAL)
        status, result = task.status, task.result
    if status == "completed" and result is not None:
        _result(request_id, result)
    else:
        _error(request_id, -32603, f"task {task.task_id} was {status}; it has no result")


def _handle(message: dict[str, Any]) -> None:
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method is None or request_id is None:
        return  # a response (none expected) or a notification (initialized, cancelled): nothing to do
    if method == "initialize":
        asked = params.get("protocolVersion")
        _result(
            request_id,
            {
                "protocolVersion": asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
                "capabilities": {
                    "tools": {},
                    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                },
                "serverInfo": {"name": "interop-tasks", "version": "1.0.0"},
            },
        )
    elif method == "ping":
        _result(request_id, {})
    elif method == "tools/list":
        _result(request_id, {"tools": TOOLS})
    elif method == "tools/call":
        _tools_call(request_id, params)
    elif method == "tasks/list":
        with _changed:
            listed = [task.as_json() for task in _tasks.values()]
        _result(request_id, {"tasks": listed})
    elif method == "tasks/get":
        if task := _lookup(request_id, params):
            with _changed:
                snapshot = task.as_json()
            _result(request_id, snapshot)
    elif method == "tasks/result":
        if task := _lookup(request_id, params):
            threading.Thread(target=_tasks_result, args=(request_id, task), daemon=True).start()
    elif method == "tasks/cancel":
        if task := _lookup(request_id, params):
            if _set_status(task, "cancelled", "cancelled at the client's request"):
                with _changed:
                    snapshot = task.as_json()
                _result(request_id, snapshot)
            else:
                _error(request_id, -32602, f"cannot cancel task {task.task_id}: it is already {task.status}")
    else:
        _error(request_id, -32601, f"method not found: {method}")


def main() -> None:
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if isinstance(message, dict):
            _handle(message)
    os._exit(0)  # stdin closed: leave without waiting for timers or blocked tasks/result threads


if __name__ == "__main__":
    main()
