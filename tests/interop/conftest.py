"""Shared helpers for the interop suite: the official MCP Python SDK (2.x) as a client of loom.

loom runs in front of real npm MCP servers (installed into .ci/node/node_modules by
.ci/setup-interop). Most tests connect the SDK twice, once straight to the npm server and once
through loom, and compare what the two connections see.

Run from the repository root: `.ci/venv/bin/python -m pytest tests/interop` (tests/interop.rs
does this under `cargo test`; .ci/setup-interop installs the venv and the servers).

Environment:
  LOOM_BIN            the loom binary to test (default: <repo>/target/debug/loom)
  LOOM_LOG            loom's log level in the tests (default: info; shown for failing tests)
  LOOM_STRICT_TESTS   1: a test that skips fails instead (see `strict_tests`); CI does the same
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Generator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import mcp.client.stdio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.session import ClientSession

REPO_ROOT = Path(__file__).resolve().parents[2]
# A relative LOOM_BIN is read from where pytest started: some tests start loom from another
# working directory (the conformance suite's bridge runs it in its own).
LOOM_BIN = Path(os.environ.get("LOOM_BIN") or REPO_ROOT / "target" / "debug" / "loom").absolute()
NODE_MODULES = REPO_ROOT / ".ci" / "node" / "node_modules"
MCP_PACKAGES = NODE_MODULES / "@modelcontextprotocol"
EVERYTHING_JS = MCP_PACKAGES / "server-everything" / "dist" / "index.js"
FILESYSTEM_JS = MCP_PACKAGES / "server-filesystem" / "dist" / "index.js"
MEMORY_JS = MCP_PACKAGES / "server-memory" / "dist" / "index.js"
PYTHON_SERVER = Path(__file__).resolve().parent / "servers" / "python_server.py"

# Generous bound on any single exchange, so a hang fails the test instead of stalling CI. The
# tests never assert on speed.
PATIENCE = 30.0

# loom connects with the SDK's default negotiation ("auto": `server/discover` first, then the
# `initialize` handshake if that fails) and with the plain handshake ("legacy"); loom serves both.
MODES = ["auto", "legacy"]

# What loom declares to its downstream servers (src/downstream/handler.rs: roots, sampling and
# elicitation in form and URL mode). server-everything registers some tools only for clients that
# declare these, so the direct connection that loom is compared against declares the same.
LOOM_DOWNSTREAM_CAPABILITIES = types.ClientCapabilities(
    roots=types.RootsCapability(),
    sampling=types.SamplingCapability(),
    elicitation=types.ElicitationCapability(form=types.FormElicitationCapability(), url=types.UrlElicitationCapability()),
)

# Servers in the standard loom config, with the prefix loom gives their tools and prompts.
EVERYTHING = "everything"
FS = "fs"
MEMORY = "memory"
PY = "py"


# Both connect modes of the SDK: `auto` (server/discover first, so 2026-07-28 with loom) and
# `legacy` (the initialize handshake).
PASSTHROUGH_MODES = ["auto", "legacy"]


def strict_tests() -> bool:
    """Whether a test that cannot run must fail rather than skip: under .ci/test
    (LOOM_STRICT_TESTS=1) or CI, either set to anything but "", "0" or "false" (as tests/interop.rs
    and tests/common read them). A skip there would let a run pass with part of the suite never
    run (missing tooling, a scenario the comparison could not use), which is what they must catch."""
    return any(os.environ.get(name, "") not in ("", "0", "false") for name in ("LOOM_STRICT_TESTS", "CI"))


STRICT_NOTE = "a skip is a failure under LOOM_STRICT_TESTS=1 or CI: every interop test must run there"


def _skips_fail_when_strict() -> Generator[None, Any, Any]:
    """The body of the hook wrappers below: a skip raised by the wrapped phase (pytest.skip in a
    test or fixture, a skip or skipif mark, an empty parametrization) becomes a failure that
    still says why it skipped. Done here once, so no test needs code of its own for it."""
    try:
        return (yield)
    except pytest.skip.Exception as skipped:
        if not strict_tests():
            raise
        reason = skipped.msg
    # Outside the except block, so the report shows the reason once, not the skip chained to it.
    pytest.fail(f"{reason}\n(this test skipped; {STRICT_NOTE})", pytrace=False)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _skips_fail_when_strict())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _skips_fail_when_strict())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    return (yield from _skips_fail_when_strict())


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, pytest.CollectReport]:
    """A whole module skipped while it is collected (`pytest.skip(allow_module_level=True)`) is
    an error under strict mode, for the same reason as a skipped test."""
    report = yield
    if report.skipped and strict_tests():
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"{reason}\n(this module skipped; {STRICT_NOTE})"
    return report


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, for a server a test starts."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [
        f"  {path}  ({why})"
        for path, why in [
            (LOOM_BIN, "build it with `cargo build`, or set LOOM_BIN"),
            (EVERYTHING_JS, "run .ci/setup-interop"),
            (FILESYSTEM_JS, "run .ci/setup-interop"),
            (MEMORY_JS, "run .ci/setup-interop"),
        ]
        if not path.is_file()
    ]
    if missing:
        raise pytest.UsageError("interop tests need files that are missing:\n" + "\n".join(missing))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    """The SDK's connect mode for connections to loom."""
    return request.param


# 2026-07-28 results name their server in `_meta`: through loom that is loom (SPEC §5.1, §5.7), a
# stamp a direct connection to the server never has. Comparisons leave it out.
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def without_loom_stamp(out: Any) -> Any:
    """A result dumped to JSON, without the serverInfo stamp loom puts on 2026-07-28 results."""
    if isinstance(out, dict) and isinstance(out.get("_meta"), dict):
        meta = out["_meta"]
        if (meta.get(SERVER_INFO) or {}).get("name") == "loom":
            meta = {key: value for key, value in meta.items() if key != SERVER_INFO}
            out = {key: value for key, value in out.items() if key != "_meta"}
            if meta:
                out["_meta"] = meta
    return out


def dump(model: Any) -> Any:
    """A model (or list of models) as the JSON it stands for, for comparisons (without loom's
    serverInfo stamp on 2026-07-28 results)."""
    if isinstance(model, list):
        return [dump(item) for item in model]
    return without_loom_stamp(model.model_dump(mode="json", by_alias=True, exclude_none=True))


# SPEC §5.3: where loom may replace a tool's results, it lists the tool without `outputSchema` and
# keeps the server's schema under this `_meta` key instead; otherwise the schema stays in place.
LOOM_OUTPUT_SCHEMA_META = "io.loom/outputSchema"


def output_schema(tool: types.Tool) -> dict[str, Any] | None:
    """The server's outputSchema of a tool listed by loom, wherever loom keeps it."""
    if tool.output_schema is not None:
        return tool.output_schema
    return (tool.meta or {}).get(LOOM_OUTPUT_SCHEMA_META)


def as_the_server_listed_it(tool: types.Tool) -> dict[str, Any]:
    """A tool listed by loom, dumped, with an outputSchema loom moved to `_meta` put back."""
    out = dump(tool)
    meta = dict(out.get("_meta") or {})
    if LOOM_OUTPUT_SCHEMA_META in meta:
        assert "outputSchema" not in out, "loom lists the outputSchema twice"
        out["outputSchema"] = meta.pop(LOOM_OUTPUT_SCHEMA_META)
        if meta:
            out["_meta"] = meta
        else:
            del out["_meta"]
    return out


def assert_matches_output_schema(result: types.CallToolResult, schema: dict[str, Any]) -> None:
    """The result's structuredContent conforms to `schema` (checked here as well, since the SDK
    only checks when loom lists the schema as `outputSchema`)."""
    assert result.structured_content is not None, "no structuredContent for a tool with an outputSchema"
    jsonschema.validate(result.structured_content, schema)


def node_server(script: Path, *args: str | Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "command": "node",
        "args": [str(script), *map(str, args)],
        "env": env or {},
    }


@dataclass
class Setup:
    """The downstream servers a test can use, and the loom config that lists them."""

    tmp: Path
    fs_root: Path
    servers: dict[str, dict[str, Any]]
    """Every server's config entry (without its name); tests may change them before connecting."""
    enabled: list[str]
    """The servers loom's config lists (see `use`)."""
    env: dict[str, str] = field(default_factory=dict)
    """Extra environment for loom itself."""

    @property
    def config_path(self) -> Path:
        return self.tmp / "loom.config.json"

    @property
    def pid_file(self) -> Path:
        return self.tmp / "loom.pid"

    def use(self, *names: str) -> Setup:
        """List only these servers in loom's config (fewer node processes to start)."""
        self.enabled = list(names)
        return self

    def write_config(self) -> Path:
        config = {"servers": [{"name": name, **self.servers[name]} for name in self.enabled]}
        self.config_path.write_text(json.dumps(config, indent=2))
        return self.config_path

    def direct(self, name: str) -> StdioServerParameters:
        """Parameters that start server `name` on its own, as loom would start it."""
        server = self.servers[name]
        return StdioServerParameters(command=server["command"], args=server["args"], env=server["env"])

    def loom(self) -> StdioServerParameters:
        """Parameters that start loom over a freshly written config, through a shell that records
        loom's pid (`exec` keeps the pid, so the recorded pid is loom's own)."""
        self.write_config()
        script = 'echo $$ > "$0" && exec "$@"'
        return StdioServerParameters(
            command="/bin/sh",
            args=["-c", script, str(self.pid_file), str(LOOM_BIN), "--config", str(self.config_path)],
            env={"LOOM_LOG": os.environ.get("LOOM_LOG", "info"), **self.env},
        )

    def loom_pid(self) -> int:
        return int(self.pid_file.read_text().strip())


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    """server-everything as `everything`, server-filesystem rooted at a fresh temp dir as `fs`,
    server-memory with its graph file in the temp dir as `memory`, servers/python_server.py as
    `py`; loom lists them all unless the test calls `setup.use(...)`."""
    fs_root = tmp_path / "fsroot"
    (fs_root / "docs").mkdir(parents=True)
    (fs_root / "hello.txt").write_text("Hello from the interop suite.\nSecond line.\n")
    (fs_root / "docs" / "note.md").write_text("# Note\n")
    servers = {
        EVERYTHING: node_server(EVERYTHING_JS),
        FS: node_server(FILESYSTEM_JS, fs_root),
        MEMORY: node_server(MEMORY_JS, env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}),
        # The interpreter running pytest has the SDK the server needs.
        PY: {"command": sys.executable, "args": [str(PYTHON_SERVER)], "env": {}},
    }
    return Setup(tmp=tmp_path, fs_root=fs_root, servers=servers, enabled=list(servers))


class _LoomLikeClient(Client):
    """A Client that declares exactly the capabilities loom declares downstream."""

    async def _build_session(self, exit_stack: Any) -> ClientSession:
        session = await super()._build_session(exit_stack)
        session._build_capabilities = lambda version: LOOM_DOWNSTREAM_CAPABILITIES.model_copy()  # type: ignore[method-assign]
        return session


@asynccontextmanager
async def connect(
    params: StdioServerParameters,
    *,
    mode: str = "auto",
    loom_like: bool = False,
    quick_stop: bool = False,
    **kwargs: Any,
) -> AsyncIterator[Client]:
    """Connect the SDK to the server `params` starts.

    `loom_like` makes the client declare what loom declares to its own downstream servers.
    `quick_stop` kills the server right away when the connection closes, instead of giving it the
    SDK's 2 s to exit by itself (server-everything ignores the end of its stdin and exits on
    SIGINT only, so every direct connection to it would cost 2 s).
    """
    cls = _LoomLikeClient if loom_like else Client
    grace = mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT
    try:
        # read_timeout_seconds bounds every request, the handshake's included. No response
        # cache: every request in these tests must reach the server.
        async with cls(params, mode=mode, read_timeout_seconds=PATIENCE, cache=None, **kwargs) as client:
            try:
                yield client
            finally:
                if quick_stop:
                    # Read by the SDK when it stops the server, which comes next; restored below.
                    mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = 0.05
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap whatever the test body raised; hand the test (and
        # pytest.raises / xfail(raises=...)) the one real exception when there is just one.
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    finally:
        mcp.client.stdio.PROCESS_TERMINATION_TIMEOUT = grace


def _leaves(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def connect_direct(setup: Setup, name: str, **kwargs: Any):
    """The SDK straight to downstream server `name`, declaring what loom declares to it."""
    return connect(setup.direct(name), loom_like=True, quick_stop=True, **kwargs)


def connect_loom(setup: Setup, mode: str = "auto", **kwargs: Any):
    """The SDK to loom over `setup`'s config."""
    return connect(setup.loom(), mode=mode, **kwargs)

