"""Every result shape loom produces, validated against the official MCP JSON schema of each
protocol version loom answers (issue 11).

A real loom process (LOOM_BIN) runs in front of loom-fixture servers (and server-everything for
completions); the test speaks raw newline-delimited JSON-RPC to it over stdio, once per protocol
version — the `initialize` handshake for 2024-11-05 … 2025-11-25, `server/discover` with the
per-request `_meta` envelope for 2026-07-28 — and validates

  * every `result` against the schema definition of its method (InitializeResult / DiscoverResult,
    ListToolsResult, CallToolResult, ReadResourceResult, GetPromptResult, CompleteResult, …) and
    the whole response against JSONRPCResultResponse;
  * every JSON-RPC error against JSONRPCErrorResponse;
  * every request the test sends against the request definition of its method (so the shapes are
    driven with requests that are themselves valid for that version).

Where the schemas come from: the official Python SDK's sdist on PyPI (`mcp`, the version pinned
in tests/interop/constraints.txt) ships `schema/<version>.json` for the versions it has types for
(2025-11-25 and 2026-07-28), copied from the specification repository at the commits recorded in
its `schema/PINNED.json`; the wheel does not, so .ci/setup-interop unpacks them into
.ci/venv/mcp-schema/<mcp version>/. No registry package ships the schemas of 2024-11-05,
2025-03-26 and 2025-06-18, so those are kept unchanged in tests/interop/schemas/<version>.json
(copied from the specification repository; its README names the commit). Every version is
validated against its own schema: a missing one fails, it never falls back to another version's.

Environment: LOOM_BIN (default target/debug/loom), LOOM_FIXTURE_BIN (default: loom-fixture next
to LOOM_BIN), LOOM_MCP_SCHEMA_DIR (a directory of `<version>.json` and PINNED.json, instead of
the shipped one), LOOM_MCP_EXTRA_SCHEMA_DIR (instead of tests/interop/schemas).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import queue
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions
import jsonschema.validators
import pytest

from conftest import EVERYTHING_JS, LOOM_BIN, PATIENCE, REPO_ROOT

# Absolute: loom runs with a temp dir as its working directory.
LOOM = LOOM_BIN.absolute()
FIXTURE_BIN = Path(os.environ.get("LOOM_FIXTURE_BIN") or LOOM.parent / "loom-fixture").absolute()

# The protocol versions loom answers (SPEC §5.1), oldest first.
INITIALIZE_VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
DISCOVER_VERSIONS = ["2026-07-28"]
VERSIONS = INITIALIZE_VERSIONS + DISCOVER_VERSIONS

# 2026-07-28's per-request envelope (`_meta` keys, SEP-2575), sent on every request of that era.
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO = {"name": "loom-schema-test", "version": "1"}

# The schema definition a successful result of each method must match.
RESULT_DEFINITIONS = {
    "initialize": "InitializeResult",
    "server/discover": "DiscoverResult",
    "ping": "EmptyResult",
    "logging/setLevel": "EmptyResult",
    "tools/list": "ListToolsResult",
    "tools/call": "CallToolResult",
    "resources/list": "ListResourcesResult",
    "resources/templates/list": "ListResourceTemplatesResult",
    "resources/read": "ReadResourceResult",
    "resources/subscribe": "EmptyResult",
    "resources/unsubscribe": "EmptyResult",
    "prompts/list": "ListPromptsResult",
    "prompts/get": "GetPromptResult",
    "completion/complete": "CompleteResult",
}


# --------------------------------------------------------------------------------------------
# Schemas


def shipped_schema_dir() -> Path:
    if os.environ.get("LOOM_MCP_SCHEMA_DIR"):
        return Path(os.environ["LOOM_MCP_SCHEMA_DIR"])
    return REPO_ROOT / ".ci" / "venv" / "mcp-schema" / importlib.metadata.version("mcp")


# Schemas of versions no package ships, if someone puts them here (`<version>.json`).
VENDORED_SCHEMA_DIR = Path(
    os.environ.get("LOOM_MCP_EXTRA_SCHEMA_DIR") or Path(__file__).resolve().parent / "schemas"
)


@dataclass
class Schema:
    """One protocol version's schema.json and validators for its definitions."""

    version: str
    path: Path
    doc: dict[str, Any]

    @property
    def defs_key(self) -> str:
        # 2025-11-25 and later are JSON Schema 2020-12 (`$defs`); older ones draft-07 (`definitions`).
        return "$defs" if "$defs" in self.doc else "definitions"

    @property
    def defs(self) -> dict[str, Any]:
        return self.doc[self.defs_key]

    def first_defined(self, *names: str) -> str:
        """The first of `names` this version defines (definitions were renamed over time)."""
        for name in names:
            if name in self.defs:
                return name
        raise KeyError(f"schema {self.version} defines none of {names}")

    def validator(self, definition: str) -> jsonschema.protocols.Validator:
        return _validator(self.path, definition)

    def request_definition(self, method: str) -> str | None:
        """The request definition whose `method` is `method`, if this version has that method."""
        for name, definition in self.defs.items():
            if name.endswith("Request") and (
                definition.get("properties", {}).get("method", {}).get("const") == method
            ):
                return name
        return None

    def has_method(self, method: str) -> bool:
        return self.request_definition(method) is not None


@cache
def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


@cache
def _validator(path: Path, definition: str) -> jsonschema.protocols.Validator:
    doc = _load(path)
    defs_key = "$defs" if "$defs" in doc else "definitions"
    if definition not in doc[defs_key]:
        raise KeyError(f"{path.name} has no definition {definition}")
    root = {**doc, "$ref": f"#/{defs_key}/{definition}"}
    cls = jsonschema.validators.validator_for(doc)
    cls.check_schema(root)
    return cls(root, format_checker=cls.FORMAT_CHECKER)


def shipped_schema_files() -> dict[str, Path]:
    directory = shipped_schema_dir()
    return {p.stem: p for p in sorted(directory.glob("*.json")) if p.stem[:4].isdigit()}


def schema_for(version: str) -> Schema:
    """The schema a session on `version` is validated against (see the module docstring)."""
    shipped = shipped_schema_files()
    if version in shipped:
        path = shipped[version]
    elif (VENDORED_SCHEMA_DIR / f"{version}.json").is_file():
        path = VENDORED_SCHEMA_DIR / f"{version}.json"
    else:
        raise FileNotFoundError(
            f"no schema for {version} in {shipped_schema_dir()} nor in {VENDORED_SCHEMA_DIR}: "
            "copy schema/<version>/schema.json from the specification repository there "
            "(tests/interop/schemas/README.md)"
        )
    return Schema(version=path.stem, path=path, doc=_load(path))


def _version_params() -> list[Any]:
    params = []
    for version in VERSIONS:
        try:
            used = schema_for(version).version
        except (FileNotFoundError, importlib.metadata.PackageNotFoundError):
            used = "missing"
        label = version if used == version else f"{version}-vs-{used}"
        params.append(pytest.param(version, id=label))
    return params


VERSION_PARAMS = _version_params()


def test_schemas_are_the_pinned_official_files() -> None:
    """The shipped schema files are there and are the bytes the SDK pinned (sha256 in
    PINNED.json), and the validators reject what the schemas forbid — so the tests below can
    fail."""
    directory = shipped_schema_dir()
    pinned_file = directory / "PINNED.json"
    assert pinned_file.is_file(), (
        f"{pinned_file} is missing: run .ci/setup-interop (it unpacks schema/ from the mcp sdist)"
    )
    pinned = {entry["protocol_version"]: entry["sha256"] for entry in json.loads(pinned_file.read_text())}
    shipped = shipped_schema_files()
    assert {"2025-11-25", "2026-07-28"} <= set(shipped), sorted(shipped)
    for version, path in shipped.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == pinned[version], path

    modern = schema_for("2026-07-28")
    legacy = schema_for("2025-11-25")
    good = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert not list(legacy.validator("CallToolResult").iter_errors(good))
    # 2026-07-28 requires `resultType` on every result; 2025-11-25 does not know it.
    missing = [e.message for e in modern.validator("CallToolResult").iter_errors(good)]
    assert missing == ["'resultType' is a required property"], missing
    assert not list(modern.validator("CallToolResult").iter_errors({"resultType": "complete", **good}))
    # A content block must be a known kind.
    assert list(legacy.validator("CallToolResult").iter_errors({"content": [{"text": "no type"}]}))
    # An error needs an integer code and a message.
    bad_error = {"jsonrpc": "2.0", "id": 1, "error": {"code": "x"}}
    for schema in (legacy, modern):
        assert list(schema.validator("JSONRPCErrorResponse").iter_errors(bad_error))
    # The older versions have schemas of their own (draft-07), and those reject too.
    for version in INITIALIZE_VERSIONS:
        own = schema_for(version)
        assert own.version == version, (version, own.path)
        assert not list(own.validator("CallToolResult").iter_errors(good)), version
        assert list(own.validator("CallToolResult").iter_errors({"content": [{"text": "no type"}]})), version
        assert list(own.validator(own.first_defined("JSONRPCErrorResponse", "JSONRPCError")).iter_errors(bad_error)), version
    # Cacheable results of 2026-07-28 need their cache hints.
    listed = {"resultType": "complete", "tools": []}
    messages = sorted(e.message for e in modern.validator("ListToolsResult").iter_errors(listed))
    assert messages == ["'cacheScope' is a required property", "'ttlMs' is a required property"], messages


# --------------------------------------------------------------------------------------------
# A raw JSON-RPC client of loom


class Loom:
    """A real loom process driven with newline-delimited JSON-RPC on its stdin/stdout."""

    def __init__(self, config: Path, cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [str(LOOM), "--config", str(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "info")},
        )
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.stashed: list[dict[str, Any]] = []
        self.bad_lines: list[str] = []
        self.stderr: list[str] = []
        self.next_id = 1
        self.meta: dict[str, Any] | None = None
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                message = json.loads(raw)
                assert isinstance(message, dict) and message.get("jsonrpc") == "2.0"
            except (ValueError, AssertionError):
                self.bad_lines.append(raw[:300].decode("utf-8", "replace"))
                continue
            self.inbox.put(message)
        self.inbox.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr[-lines:])

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def stamp(self, params: dict[str, Any] | None) -> dict[str, Any]:
        """`params` with the 2026-07-28 per-request `_meta` envelope, when this session has one."""
        params = dict(params or {})
        if self.meta is not None:
            params["_meta"] = {**params.get("_meta", {}), **self.meta}
        return params

    def request_message(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": self.stamp(params)}
        self.next_id += 1
        return message

    def exchange(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait (bounded) for its response."""
        self.send(message)
        return self.response(message["id"])

    def response(self, request_id: int) -> dict[str, Any]:
        def matches(m: dict[str, Any]) -> bool:
            return m.get("id") == request_id and ("result" in m or "error" in m)

        for i, message in enumerate(self.stashed):
            if matches(message):
                return self.stashed.pop(i)
        deadline = time.monotonic() + PATIENCE
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no response to request {request_id} within {PATIENCE} s\n{self.log_tail()}"
                )
            try:
                message = self.inbox.get(timeout=left)
            except queue.Empty:
                continue
            if message is None:
                raise AssertionError(
                    f"loom closed stdout before answering request {request_id}\n{self.log_tail()}"
                )
            if matches(message):
                return message
            if "method" in message and "id" in message:
                # A request from loom (the test declares no client capabilities): refuse it.
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {"code": -32601, "message": "not supported"},
                    }
                )
            elif "method" not in message:
                self.stashed.append(message)
            # Notifications are not what this test checks.

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    def close(self) -> None:
        try:
            if self.proc.stdin:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=PATIENCE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------------------------
# Validation


@dataclass
class Problem:
    version: str
    label: str
    method: str
    what: str
    detail: str
    raw: str

    def __str__(self) -> str:
        head = f"[{self.version}] {self.label} ({self.method}) — {self.what}"
        return f"{head}\n    {self.detail}\n    raw: {self.raw}"


def _describe(error: jsonschema.exceptions.ValidationError) -> str:
    best = jsonschema.exceptions.best_match([error])
    return f"at {best.json_path}: {best.message[:400]}"


@dataclass
class Session:
    """One loom process on one protocol version, and what was validated on it."""

    version: str
    schema: Schema
    loom: Loom
    tmp: Path
    results: int = 0
    errors: int = 0
    problems: list[Problem] = field(default_factory=list)

    def has(self, method: str) -> bool:
        return self.schema.has_method(method)

    def _validate(self, label: str, method: str, instance: Any, definition: str, raw: Any) -> bool:
        errors = list(self.schema.validator(definition).iter_errors(instance))
        for error in errors:
            self.problems.append(
                Problem(
                    self.version, label, method, f"does not match {definition}", _describe(error), _short(raw)
                )
            )
        return not errors

    def call(
        self,
        label: str,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        expect: str = "result",
        valid_request: bool = True,
    ) -> dict[str, Any]:
        """Send `method` and validate the answer. `expect` is "result", "error", "isError" (a
        tools/call result with isError true) or "any"."""
        message = self.loom.request_message(method, params)
        if valid_request:
            request_definition = self.schema.request_definition(method)
            assert request_definition, f"{method} is not a {self.schema.version} method"
            request_errors = list(self.schema.validator(request_definition).iter_errors(message))
            assert not request_errors, (
                f"the test's own {label} request is invalid: {_describe(request_errors[0])}"
            )
        response = self.loom.exchange(message)
        if "result" in response:
            self.results += 1
            self._validate(
                label,
                method,
                response,
                self.schema.first_defined("JSONRPCResultResponse", "JSONRPCResponse"),
                response,
            )
            self._validate(label, method, response["result"], RESULT_DEFINITIONS[method], response)
        else:
            self.errors += 1
            self._validate(
                label,
                method,
                response,
                self.schema.first_defined("JSONRPCErrorResponse", "JSONRPCError"),
                response,
            )
        got = "error" if "error" in response else "result"
        if got == "result" and response["result"].get("isError") is True:
            got = "isError"
        wanted = {
            "result": {"result"},
            "error": {"error"},
            "isError": {"isError"},
            "any": {"result", "error", "isError"},
        }
        if got not in wanted[expect]:
            self.problems.append(
                Problem(self.version, label, method, f"expected {expect}, got {got}", "", _short(response))
            )
        return response

    def tool(
        self, label: str, name: str, arguments: dict[str, Any] | None = None, *, expect: str = "result"
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return self.call(label, "tools/call", params, expect=expect)

    def expect_that(self, label: str, ok: bool, detail: str, response: dict[str, Any]) -> None:
        """A check that the shape driven is the one intended (not a schema check)."""
        if not ok:
            self.problems.append(
                Problem(self.version, label, "tools/call", "unexpected shape", detail, _short(response))
            )


def _short(value: Any, limit: int = 700) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} chars)"


def structured(response: dict[str, Any]) -> dict[str, Any]:
    return (response.get("result") or {}).get("structuredContent") or {}


def fixture_server(name: str, *args: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "command": str(FIXTURE_BIN), "args": ["--name", name, *args], **extra}


def open_session(version: str, tmp: Path, servers: list[dict[str, Any]], **config: Any) -> Session:
    for path, why in [(LOOM, "LOOM_BIN"), (FIXTURE_BIN, "LOOM_FIXTURE_BIN")]:
        if not path.is_file():
            pytest.fail(f"{path} is missing: build with `cargo build --bins`, or set {why}")
    config_path = tmp / "loom.config.json"
    config_path.write_text(json.dumps({"servers": servers, **config}, indent=2))
    loom = Loom(config_path, tmp)
    session = Session(version=version, schema=schema_for(version), loom=loom, tmp=tmp)
    if version in DISCOVER_VERSIONS:
        loom.meta = {
            META_PROTOCOL_VERSION: version,
            META_CLIENT_INFO: CLIENT_INFO,
            META_CLIENT_CAPABILITIES: {},
        }
        discovered = session.call("server/discover", "server/discover")
        supported = (discovered.get("result") or {}).get("supportedVersions") or []
        assert version in supported, f"loom does not offer {version}: {discovered}"
    else:
        initialized = session.call(
            "initialize",
            "initialize",
            {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT_INFO},
        )
        negotiated = (initialized.get("result") or {}).get("protocolVersion")
        assert negotiated == version, f"asked for {version}, loom answered {negotiated}"
        loom.notify("notifications/initialized")
    return session


def finish(session: Session, *, at_least: int) -> None:
    """Stop loom and fail with every problem found (all of them, not just the first)."""
    session.loom.close()
    assert not session.loom.bad_lines, (
        f"loom wrote non-JSON-RPC lines to stdout: {session.loom.bad_lines[:3]}"
    )
    if session.problems:
        report = "\n".join(str(p) for p in session.problems)
        pytest.fail(
            f"{len(session.problems)} problem(s) on {session.version} (schema {session.schema.version}, "
            f"{session.schema.path}):\n{report}",
            pytrace=False,
        )
    # An empty or cut-short run must not pass.
    total = session.results + session.errors
    assert total >= at_least, f"only {total} responses validated on {session.version}, expected >= {at_least}"


# --------------------------------------------------------------------------------------------
# The shapes


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_lists_and_passthrough_results(version: str, tmp_path: Path) -> None:
    """tools/list (server tools with outputSchema moved to `_meta`, loom's own tools), ping,
    logging/setLevel, and downstream tool results that pass through untouched: text, small
    tabular JSON, structuredContent, image, resource_link, a server's own isError result, a
    long non-tabular text."""
    s = open_session(version, tmp_path, [fixture_server("fx")])
    listed = s.call("tools/list", "tools/list")
    names = [t.get("name") for t in (listed.get("result") or {}).get("tools", [])]
    for name in ["fx_echo", "fx_rows", "fx_structured", "loom_query", "loom_export"]:
        assert name in names, names
    if s.has("ping"):
        s.call("ping", "ping")
    if s.has("logging/setLevel"):
        s.call("logging/setLevel", "logging/setLevel", {"level": "warning"})

    s.tool("echo", "fx_echo", {"text": "hello"})
    small = s.tool("rows small (passthrough)", "fx_rows", {"count": 5})
    s.expect_that("rows small", "kind" not in structured(small), "5 rows should pass through", small)
    s.tool("structuredContent", "fx_structured", {})
    s.tool("image block", "fx_image", {})
    s.tool("resource_link block", "fx_resource_link", {})
    s.tool("server's own isError", "fx_fail", {"message": "broken on purpose"}, expect="isError")
    s.tool("long non-tabular text", "fx_big_text", {"bytes": 50000})
    s.tool("request _meta echoed", "fx_meta_echo", {})
    s.tool("no arguments member", "fx_structured")
    finish(s, at_least=11)


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_envelopes_and_loom_tools(version: str, tmp_path: Path) -> None:
    """Envelopes (one table, several tables), loom_query inline and as an envelope, loom_describe,
    loom_list_datasets, loom_materialize, loom_export (csv and json)."""
    exports = tmp_path / "exports"
    s = open_session(version, tmp_path, [fixture_server("fx")], exportDir=str(exports))

    one = s.tool("envelope, one table", "fx_rows", {"count": 3000})
    env = structured(one)
    s.expect_that(
        "envelope, one table", env.get("kind") == "loom_dataset_ref" and "ref" in env, "no envelope", one
    )
    ref = env.get("ref", "ds_fx_rows_1")

    report = "## Users\n\n| id | login |\n|---|---|\n"
    report += "".join(f"| {i} | user{i} |\n" for i in range(600))
    report += "\n## Orders\n\n| order | user | total |\n|---|---|---:|\n"
    report += "".join(f"| o{i} | {i % 600} | {i % 40}.50 |\n" for i in range(900))
    raw = json.dumps({"content": [{"type": "text", "text": report}]})
    several = s.tool("envelope, several tables", "fx_raw", {"json": raw})
    s.expect_that(
        "envelope, several tables",
        len(structured(several).get("datasets") or []) == 2,
        "expected a two-dataset envelope",
        several,
    )

    inline = s.tool(
        "loom_query inline", "loom_query", {"sql": f"SELECT count(*) AS n, min(id) AS lo FROM {ref}"}
    )
    s.expect_that("loom_query inline", "rows" in structured(inline), "expected inline rows", inline)
    big = s.tool("loom_query as envelope", "loom_query", {"sql": f"SELECT * FROM {ref}"})
    s.expect_that(
        "loom_query as envelope",
        structured(big).get("kind") == "loom_dataset_ref",
        "expected an envelope",
        big,
    )
    s.tool("loom_query empty result", "loom_query", {"sql": f"SELECT * FROM {ref} WHERE id < 0"})
    s.tool("loom_describe", "loom_describe", {"ref": ref})
    s.tool("loom_list_datasets", "loom_list_datasets", {})
    s.tool("loom_list_datasets without arguments", "loom_list_datasets")
    view = s.tool(
        "loom_materialize",
        "loom_materialize",
        {"sql": f"SELECT id, name FROM {ref} WHERE id < 100", "name": "first_hundred"},
    )
    s.expect_that(
        "loom_materialize", structured(view).get("kind") == "loom_dataset_ref", "expected an envelope", view
    )
    s.tool("loom_export csv", "loom_export", {"ref": ref, "format": "csv"})
    s.tool(
        "loom_export json",
        "loom_export",
        {"ref": "ds_view_first_hundred", "format": "json", "filename": "hundred"},
    )
    s.tool("loom_export overwrite", "loom_export", {"ref": ref, "format": "csv", "overwrite": True})
    s.expect_that(
        "loom_export files",
        (exports / f"{ref}.csv").is_file() and (exports / "hundred.json").is_file(),
        f"exports missing in {exports}: {sorted(p.name for p in exports.glob('*'))}",
        {},
    )
    finish(s, at_least=13)


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_loom_tool_errors(version: str, tmp_path: Path) -> None:
    """Every kind of loom_* error result (SPEC §12), and the JSON-RPC errors of tools/call."""
    s = open_session(version, tmp_path, [fixture_server("fx")], exportDir=str(tmp_path / "exports"))
    s.tool(
        "loom_query before any dataset", "loom_query", {"sql": "SELECT * FROM ds_nothing"}, expect="isError"
    )
    env = structured(s.tool("envelope", "fx_rows", {"count": 3000}))
    ref = env.get("ref", "ds_fx_rows_1")
    s.tool("loom_query missing sql", "loom_query", {}, expect="isError")
    s.tool("loom_query sql not a string", "loom_query", {"sql": 5}, expect="isError")
    s.tool("loom_query refused COPY", "loom_query", {"sql": "COPY (SELECT 1) TO '/tmp/x'"}, expect="isError")
    s.tool(
        "loom_query refused table function",
        "loom_query",
        {"sql": "SELECT * FROM range(10)"},
        expect="isError",
    )
    s.tool("loom_query refused DDL", "loom_query", {"sql": "DROP TABLE " + ref}, expect="isError")
    s.tool("loom_query engine error", "loom_query", {"sql": f"SELECT nope FROM {ref}"}, expect="isError")
    s.tool("loom_describe missing ref", "loom_describe", {}, expect="isError")
    s.tool("loom_describe unknown ref", "loom_describe", {"ref": "ds_nope"}, expect="isError")
    s.tool(
        "loom_materialize missing name",
        "loom_materialize",
        {"sql": f"SELECT 1 AS x FROM {ref}"},
        expect="isError",
    )
    s.tool("loom_materialize", "loom_materialize", {"sql": f"SELECT id FROM {ref}", "name": "ids"})
    s.tool(
        "loom_materialize name taken",
        "loom_materialize",
        {"sql": f"SELECT id FROM {ref}", "name": "ids"},
        expect="isError",
    )
    s.tool("loom_export unknown ref", "loom_export", {"ref": "ds_nope", "format": "csv"}, expect="isError")
    s.tool("loom_export unknown format", "loom_export", {"ref": ref, "format": "xml"}, expect="isError")
    s.tool(
        "loom_export path as filename",
        "loom_export",
        {"ref": ref, "format": "csv", "filename": "../x.csv"},
        expect="isError",
    )
    s.tool("loom_export", "loom_export", {"ref": ref, "format": "csv", "filename": "once"})
    s.tool(
        "loom_export file exists",
        "loom_export",
        {"ref": ref, "format": "csv", "filename": "once"},
        expect="isError",
    )
    s.tool(
        "loom_export overwrite not boolean",
        "loom_export",
        {"ref": ref, "format": "csv", "overwrite": "yes"},
        expect="isError",
    )
    s.tool("unknown tool", "fx_nope", {}, expect="error")
    s.call("tools/call without name", "tools/call", {"arguments": {}}, expect="error", valid_request=False)
    finish(s, at_least=20)


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_errors_as_results(version: str, tmp_path: Path) -> None:
    """SPEC §5.6: a server's JSON-RPC error passed on as that error (schema-checked as one), and
    a call past callTimeoutMs, a server that crashes while answering, and a call to a server that
    is down, each as an isError result."""
    servers = [
        fixture_server("fx"),
        fixture_server("lag", "--no-resources", callTimeoutMs=300),
        fixture_server("boom", "--no-resources"),
    ]
    # After a crash `boom` waits min(base, 30 s) before it restarts: it is down for the rest of
    # the test, whatever the machine's speed.
    s = open_session(version, tmp_path, servers, restart={"baseDelayMs": 600000, "maxAttempts": 5})
    for label, tool, arguments, says in [
        ("server JSON-RPC error", "fx_rpc_error", {"message": "no such thing"}, '"code": -32000'),
        ("server invalid-params error", "fx_rows", {"count": "many"}, '"code": -32602'),
    ]:
        response = s.tool(label, tool, arguments, expect="error")
        s.expect_that(label, says in json.dumps(response), f"the server's own error ({says})", response)
    cases = [
        (
            "callTimeoutMs passed",
            "lag_slow",
            {"ms": 20000, "steps": 40},
            "did not answer tool `slow` within 300 ms",
        ),
        (
            "server crashed before answering",
            "boom_crash",
            {"code": 1},
            "closed the connection before answering tool `crash`",
        ),
        # Right after the crash loom may not have seen the exit yet: the call then meets the
        # closed connection instead of the down state. Both are §5.6 errors as results.
        (
            "server down",
            "boom_echo",
            {"text": "anyone?"},
            ("tool `echo` cannot run now", "closed the connection before answering tool `echo`"),
        ),
    ]
    for label, tool, arguments, says in cases:
        response = s.tool(label, tool, arguments, expect="isError")
        texts = says if isinstance(says, tuple) else (says,)
        s.expect_that(
            label,
            any(text in json.dumps(response) for text in texts),
            f"the §5.6 text should contain one of {texts!r}",
            response,
        )
    finish(s, at_least=6)


def _texts(response: dict[str, Any]) -> list[str]:
    return [b.get("text", "") for b in (response.get("result") or {}).get("content", []) if b.get("type") == "text"]


def _raw_text(text: str, **members: Any) -> dict[str, str]:
    """fx_raw's arguments for a result of one text block (and `members`)."""
    return {"json": json.dumps({"content": [{"type": "text", "text": text}], **members})}


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_firewall_results(version: str, tmp_path: Path) -> None:
    """The context firewall's shapes (SPEC §19): a reduced log, a reduced JSON document, a text with
    base64 lifted out, a reduced text with its structuredContent copy, isError passed whole and
    cut at the hard limit, a bypassed tool; loom_read's pages (first and last), lines, pattern,
    blobs as an image and as an embedded resource, and its errors; documents in
    loom_list_datasets and loom_describe."""
    s = open_session(
        version,
        tmp_path,
        [fixture_server("fx"), fixture_server("raw")],
        compression={"perTool": {"raw/raw": {"bypass": True}}},
    )
    log = "\n".join(f"2026-12-01T00:00:{n % 60:02d}Z INFO request {n} served" for n in range(1, 6000))
    log += "\n2026-12-01T00:00:00Z ERROR the last request failed"
    reduced = s.tool("reduced log", "fx_raw", _raw_text(log))
    s.expect_that(
        "reduced log",
        (_texts(reduced) or [""])[0].startswith("[loom: text reduced") and "structuredContent" not in reduced["result"],
        "expected one reduced text block",
        reduced,
    )
    doc = next(iter(re.findall(r'full original: loom_read\("(doc_\d+)"\)', json.dumps(reduced))), "doc_1")

    npm = (REPO_ROOT / "testdata" / "json" / "npm_react.json").read_text()
    summary = s.tool("reduced JSON document", "fx_raw", _raw_text(npm))
    s.expect_that(
        "reduced JSON", "JSON summarised" in (_texts(summary) or [""])[0], "expected a JSON summary", summary
    )

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 24).decode()
    pdf = base64.b64encode(b"%PDF-1.7\n" + bytes(range(256)) * 12).decode()
    words = "The screenshot and the report of the run are attached here. " * 40
    lifted = s.tool(
        "base64 lifted out",
        "fx_raw",
        _raw_text(f"{words}\n![shot](data:image/png;base64,{png})\nreport: data:application/pdf;base64,{pdf}\n"),
    )
    blobs = re.findall(r"blob_\d+", json.dumps(lifted))
    s.expect_that("base64 lifted out", len(set(blobs)) == 2, "expected two blobs", lifted)

    copied = s.tool("reduced text and its structuredContent copy", "fx_raw", _raw_text(log, structuredContent={"result": log}))
    s.expect_that(
        "structuredContent copy",
        structured(copied).get("result", "").startswith("[loom: text reduced"),
        "expected the copy reduced with its text",
        copied,
    )
    trace = "Traceback (most recent call last):\n" + '  File "x.py", line 1, in <module>\n' * 600
    s.tool("isError passed whole", "fx_raw", _raw_text(trace, isError=True), expect="isError")
    cut = s.tool("isError cut at the hard limit", "fx_raw", _raw_text(trace * 4, isError=True), expect="isError")
    s.expect_that(
        "isError cut", "security-relevant output cut" in json.dumps(cut), "expected the hard-limit cut", cut
    )
    bypassed = s.tool("bypassed tool", "raw_raw", _raw_text(log))
    s.expect_that("bypass", _texts(bypassed) == [log], "expected the text as sent", bypassed)

    first = s.tool("loom_read first page", "loom_read", {"ref": doc, "offset": 0, "length": 1000})
    s.expect_that("first page", "nextOffset" in structured(first), "expected nextOffset", first)
    last = s.tool("loom_read last page", "loom_read", {"ref": doc, "offset": len(log) - 10})
    s.expect_that("last page", "nextOffset" not in structured(last), "expected no nextOffset", last)
    s.tool("loom_read default page", "loom_read", {"ref": doc})
    s.tool("loom_read lines", "loom_read", {"ref": doc, "lines": "10-20"})
    s.tool("loom_read open line range", "loom_read", {"ref": doc, "lines": "5990-"})
    found = s.tool("loom_read pattern", "loom_read", {"ref": doc, "pattern": "ERROR", "context": 1})
    s.expect_that("pattern", structured(found).get("lines") == [6000], "expected line 6000", found)
    s.tool("loom_read pattern, no match", "loom_read", {"ref": doc, "pattern": "nothing like this"})
    image = s.tool("loom_read blob as image", "loom_read", {"ref": blobs[0] if blobs else "blob_1"})
    s.expect_that(
        "blob as image",
        [b.get("type") for b in image["result"].get("content", [])] == ["image"],
        "expected one image block",
        image,
    )
    resource = s.tool("loom_read blob as resource", "loom_read", {"ref": blobs[-1] if blobs else "blob_2"})
    s.expect_that(
        "blob as resource",
        [b.get("type") for b in resource["result"].get("content", [])] == ["resource"],
        "expected one resource block",
        resource,
    )
    s.tool("loom_list_datasets with documents and blobs", "loom_list_datasets", {})
    s.tool("loom_describe a document", "loom_describe", {"ref": doc})
    s.tool("loom_query a document", "loom_query", {"sql": f"SELECT count(*) AS n FROM {doc} WHERE text LIKE '%ERROR%'"})

    for label, arguments in [
        ("unknown ref", {"ref": "doc_99"}),
        ("offset past the end", {"ref": doc, "offset": 10**7}),
        ("length too large", {"ref": doc, "length": 100001}),
        ("negative length", {"ref": doc, "length": -1}),
        ("lines past the end", {"ref": doc, "lines": "9000"}),
        ("lines malformed", {"ref": doc, "lines": "x-y"}),
        ("invalid pattern", {"ref": doc, "pattern": "("}),
        ("several modes", {"ref": doc, "lines": "1", "pattern": "x"}),
        ("missing ref", {}),
    ]:
        error = s.tool(f"loom_read error: {label}", "loom_read", arguments, expect="isError")
        s.expect_that(
            f"loom_read error: {label}",
            (_texts(error) or [""])[0].startswith("loom_read: "),
            "expected a text starting `loom_read: `",
            error,
        )
    finish(s, at_least=29)


def _everything_server() -> dict[str, Any]:
    return {"name": "ev", "command": "node", "args": [str(EVERYTHING_JS)], "env": {}}


@pytest.mark.parametrize("version", VERSION_PARAMS)
def test_resources_prompts_and_completions(version: str, tmp_path: Path) -> None:
    """resources/list, resources/templates/list, resources/read (text, JSON, template, blob,
    unknown), subscribe/unsubscribe, prompts/list, prompts/get (known, unknown),
    completion/complete (server-everything's completable prompt and template, a prompt whose
    server has no completions, an unknown prompt)."""
    s = open_session(version, tmp_path, [fixture_server("fx"), _everything_server()])
    resources = s.call("resources/list", "resources/list")
    s.call("resources/templates/list", "resources/templates/list")
    s.call("read text", "resources/read", {"uri": "fixture://greeting"})
    s.call("read json", "resources/read", {"uri": "fixture://data.json"})
    s.call("read through template", "resources/read", {"uri": "fixture://items/42"})
    s.call("read unknown", "resources/read", {"uri": "fixture://nope"}, expect="error")
    s.call("read no server lists", "resources/read", {"uri": "nowhere://x"}, expect="error")
    # server-everything's resources: text and blob contents.
    listed = (resources.get("result") or {}).get("resources") or []
    everything_uris = [r["uri"] for r in listed if str(r.get("uri", "")).startswith("demo://")][:2]
    for uri in everything_uris:
        s.call(f"read {uri}", "resources/read", {"uri": uri})
    blob = s.call("read blob through template", "resources/read", {"uri": "demo://resource/dynamic/blob/1"})
    s.expect_that(
        "read blob",
        any("blob" in c for c in (blob.get("result") or {}).get("contents", [])),
        "expected blob contents",
        blob,
    )
    if s.has("resources/subscribe"):
        s.call("subscribe", "resources/subscribe", {"uri": "fixture://greeting"})
        s.call("unsubscribe", "resources/unsubscribe", {"uri": "fixture://greeting"})

    prompts = s.call("prompts/list", "prompts/list")
    s.call("prompts/get", "prompts/get", {"name": "fx_greet", "arguments": {"name": "Ada"}})
    s.call("prompts/get unknown", "prompts/get", {"name": "fx_nope", "arguments": {}}, expect="error")
    s.call(
        "prompts/get missing argument",
        "prompts/get",
        {"name": "fx_greet", "arguments": {}},
        expect="error",
    )
    prompt_names = [p.get("name") for p in (prompts.get("result") or {}).get("prompts", [])]
    completable = "ev_completable-prompt"
    if completable in prompt_names:
        s.call(
            "complete a prompt argument",
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": completable},
                "argument": {"name": "department", "value": "E"},
            },
        )
        s.call(
            "complete with context",
            "completion/complete",
            {
                "ref": {"type": "ref/prompt", "name": completable},
                "argument": {"name": "name", "value": ""},
                "context": {"arguments": {"department": "Sales"}},
            },
        )
    else:
        s.problems.append(
            Problem(
                version,
                "completion",
                "prompts/list",
                "server-everything's completable prompt is not listed",
                str(prompt_names),
                "",
            )
        )
    templates = s.call("templates again", "resources/templates/list")
    everything_templates = [
        t["uriTemplate"]
        for t in (templates.get("result") or {}).get("resourceTemplates", [])
        if "{resourceId}" in str(t.get("uriTemplate"))
    ]
    if everything_templates:
        s.call(
            "complete a template variable",
            "completion/complete",
            {
                "ref": {"type": "ref/resource", "uri": everything_templates[0]},
                "argument": {"name": "resourceId", "value": "1"},
            },
        )
    s.call(
        "complete where the server has no completions",
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "fx_greet"}, "argument": {"name": "name", "value": "A"}},
        expect="any",
    )
    s.call(
        "complete an unknown prompt",
        "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "nobody_nothing"}, "argument": {"name": "x", "value": ""}},
        expect="error",
    )
    finish(s, at_least=19)


def test_methods_2026_07_28_dropped_still_get_valid_answers(tmp_path: Path) -> None:
    """2026-07-28 has no `ping`, `logging/setLevel` or `resources/subscribe`. A client that sends
    them anyway must get either a JSON-RPC error or a result that is valid for 2026-07-28 (every
    result of that revision carries `resultType`)."""
    s = open_session("2026-07-28", tmp_path, [fixture_server("fx")])
    # A first request with the full per-request `_meta` selects the 2026-07-28 lifecycle; a ping
    # before any such request is answered by rmcp's pre-lifecycle loop in the initialize era's
    # shape (SPEC §5.7).
    s.call("tools/list", "tools/list")
    for method, params in [
        ("ping", {}),
        ("logging/setLevel", {"level": "info"}),
        ("resources/subscribe", {"uri": "fixture://greeting"}),
        ("resources/unsubscribe", {"uri": "fixture://greeting"}),
    ]:
        assert not s.has(method), f"{method} is a 2026-07-28 method after all"
        s.call(method, method, params, expect="any", valid_request=False)
    finish(s, at_least=6)
