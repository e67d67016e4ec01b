"""Official MCP clients, each in every mode it has, behind one small interface, so that the data
plane tests (test_dataplane.py) run the same scenario through all of them.

Every client hands results back as the JSON they stand for on the wire (camelCase members:
`structuredContent`, `isError`, `_meta`), whatever its own models look like:

  sdk2-auto    Python SDK 2.x (.ci/venv), mode "auto": `server/discover` first, so protocol
               2026-07-28 with loom (every result must carry `resultType`)
  sdk2-2026-07-28  Python SDK 2.x with the version pinned (mode "2026-07-28"): `server/discover`
               and no fallback to the handshake
  sdk2-legacy  Python SDK 2.x, mode "legacy": the `initialize` handshake
  sdk1         Python SDK 1.x (.ci/venv1, run as clients/sdk1_driver.py in a subprocess,
               JSON lines both ways): the `initialize` handshake, its own models and its own
               outputSchema validation

The Inspector CLI is one process (one loom session) per call; test_dataplane_inspector.py drives it.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from conftest import FS, PATIENCE, PY, REPO_ROOT, Setup, connect, dump

VENV1_PYTHON = REPO_ROOT / ".ci" / "venv1" / "bin" / "python"
SDK1_DRIVER = Path(__file__).resolve().parent / "clients" / "sdk1_driver.py"
# The fixture server (tests/interop.rs passes the one cargo built alongside LOOM_BIN); a relative
# path is read from where pytest started, as LOOM_BIN is (conftest.py).
FIXTURE_BIN = Path(os.environ.get("LOOM_FIXTURE_BIN") or REPO_ROOT / "target" / "debug" / "loom-fixture").absolute()

CLIENTS = ["sdk2-auto", "sdk2-2026-07-28", "sdk2-legacy", "sdk1"]

# The loom-fixture server (src/bin/loom-fixture.rs): `rows`, `orders`, `fail`, `rpc_error`, ...
CRM = "crm"

# loom's default tokenThreshold; the tests make results well above or below it.
TOKEN_THRESHOLD = 2000
ENVELOPE_KIND = "loom_dataset_ref"


@dataclass
class DataSetup(Setup):
    """`Setup` plus top-level loom options (exportDir, ...) in the written config."""

    options: dict[str, Any] = field(default_factory=dict)

    def write_config(self) -> Path:
        config = {"servers": [{"name": name, **self.servers[name]} for name in self.enabled], **self.options}
        self.config_path.write_text(json.dumps(config, indent=2))
        return self.config_path

    @property
    def export_dir(self) -> Path:
        return Path(self.options["exportDir"])


# sales.csv in the filesystem server's root: a CSV export as a user would have it, with a quoted
# field holding the delimiter. SALES_ROWS rows.
SALES_ROWS = 1500
REGIONS = ["north", "south", "east", "west"]


def sales_rows() -> list[dict[str, Any]]:
    return [
        {
            "order_id": 5000 + i,
            "customer": f"Smith, Jane {i}" if i % 10 == 0 else f"customer {i}",
            "region": REGIONS[i % 4],
            "amount": f"{(i * 37) % 1000}.{i % 100:02d}",
            "placed_on": f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
        }
        for i in range(SALES_ROWS)
    ]


def sales_csv() -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(sales_rows()[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(sales_rows())
    return out.getvalue()


def make_setup(setup: Setup) -> DataSetup:
    """The interop `setup`, with the loom-fixture as `crm`, and loom writing exports to a temp dir;
    loom lists crm, py (servers/python_server.py) and fs (server-filesystem)."""
    (setup.fs_root / "sales.csv").write_text(sales_csv())
    servers = dict(setup.servers)
    servers[CRM] = {"command": str(FIXTURE_BIN), "args": ["--name", CRM], "env": {}}
    return DataSetup(
        tmp=setup.tmp,
        fs_root=setup.fs_root,
        servers=servers,
        enabled=[CRM, PY, FS],
        env=dict(setup.env),
        options={"exportDir": str(setup.tmp / "exports")},
    )


@pytest.fixture
def dp(setup: Setup) -> DataSetup:
    if not FIXTURE_BIN.is_file():
        raise pytest.UsageError(f"{FIXTURE_BIN} is missing: build it with `cargo build --bins`")
    return make_setup(setup)


def text_of(result: dict[str, Any]) -> str:
    return "".join(block["text"] for block in result.get("content", []) if block.get("type") == "text")


def assert_ok(result: dict[str, Any], what: str) -> dict[str, Any]:
    """A successful result of one of loom's own tools: the same JSON as text and as
    structuredContent (SPEC §12); that JSON."""
    assert not result.get("isError"), f"{what} failed: {text_of(result)}"
    structured = result.get("structuredContent")
    assert isinstance(structured, dict), f"{what}: no structuredContent: {result}"
    assert json.loads(text_of(result)) == structured, f"{what}: text and structuredContent differ"
    return structured


def assert_envelope(result: dict[str, Any], what: str) -> dict[str, Any]:
    """The result is an envelope (SPEC §11), in both channels; the envelope."""
    envelope = assert_ok(result, what)
    assert envelope.get("kind") == ENVELOPE_KIND, f"{what}: not an envelope: {text_of(result)[:500]}"
    assert len(result["content"]) == 1, f"{what}: envelope with extra blocks: {result['content']}"
    assert len(text_of(result)) <= 2000, f"{what}: envelope of {len(text_of(result))} characters"
    return envelope


def assert_error(result: dict[str, Any], what: str, *needles: str) -> str:
    """An isError result whose text contains every needle; the text."""
    text = text_of(result)
    assert result.get("isError") is True, f"{what}: not an error result: {result}"
    for needle in needles:
        assert needle in text, f"{what}: {needle!r} not in {text!r}"
    return text


def _column(entry: dict[str, Any] | str) -> tuple[str, str]:
    # A compact envelope writes a column as "name: Type" (SPEC §11).
    if isinstance(entry, str):
        name, _, type_ = entry.partition(": ")
        return name, type_
    return entry["name"], entry["type"]


def columns(envelope: dict[str, Any]) -> dict[str, str]:
    """Column name -> Arrow type, from an envelope's (or a description's) schema."""
    return dict(_column(entry) for entry in envelope["schema"])


def sample(envelope: dict[str, Any]) -> list[dict[str, Any]]:
    """An envelope's sample rows as objects (a compact envelope writes them as arrays in schema
    order, SPEC §11). Every envelope has at least 3 (or all the table's rows)."""
    names = list(columns(envelope))
    rows = [row if isinstance(row, dict) else dict(zip(names, row, strict=True)) for row in envelope["sample"]]
    assert len(rows) >= min(3, envelope["rows"]), f"an envelope with {len(rows)} sample rows: {envelope}"
    return rows

# The longest line the 1.x driver may answer with (a tools/list or a passed-through result).
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class ClientRaised(AssertionError):
    """The client raised (or, for the 1.x driver, reported that it raised) on a request."""


def model_name(block: Any) -> str:
    """The client's own model class of a content block, with an embedded resource's contents
    class after a slash (`EmbeddedResource/BlobResourceContents`)."""
    inner = getattr(block, "resource", None)
    return type(block).__name__ + (f"/{type(inner).__name__}" if inner is not None else "")


class DataClient:
    """One connected client. `label` names it in assertion messages."""

    label: str
    protocol_version: str
    content_types: list[str]
    """The client's model class of each content block of the last tools/call result (`model_name`):
    the wire JSON alone does not show whether the client parsed an image as an image."""

    async def list_tools(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """The CallToolResult of a tools/call, as wire JSON. Raises ClientRaised if the client did."""
        raise NotImplementedError


class Sdk2Client(DataClient):
    def __init__(self, client: Any, mode: str) -> None:
        self._client = client
        self.label = f"sdk2-{mode}"
        self.protocol_version = client.protocol_version

    async def list_tools(self) -> list[dict[str, Any]]:
        try:
            return dump((await self._client.list_tools()).tools)
        except Exception as exc:
            raise ClientRaised(f"{self.label} raised on tools/list: {type(exc).__name__}: {exc}") from exc

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            result = await self._client.call_tool(name, arguments or {})
            self.content_types = [model_name(block) for block in result.content]
            return dump(result)
        except Exception as exc:
            raise ClientRaised(f"{self.label} raised on tools/call {name}: {type(exc).__name__}: {exc}") from exc


class Sdk1Client(DataClient):
    """The 1.x SDK in clients/sdk1_driver.py, one request at a time over its stdin/stdout."""

    label = "sdk1"

    def __init__(self, process: anyio.abc.Process) -> None:
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin = process.stdin
        self._stdout = BufferedByteReceiveStream(process.stdout)

    async def answer(self, what: str) -> Any:
        answer = await self.answer_line(what)
        return answer["result"]

    async def answer_line(self, what: str) -> dict[str, Any]:
        """The driver's whole answer line ({"ok", "result", ...})."""
        with anyio.fail_after(PATIENCE):
            try:
                line = await self._stdout.receive_until(b"\n", MAX_ANSWER_BYTES)
            except anyio.EndOfStream:
                raise ClientRaised(f"sdk1 driver exited before answering {what} (its stderr is above)") from None
        answer = json.loads(line)
        if not answer["ok"]:
            error = answer["error"]
            raise ClientRaised(f"sdk1 raised on {what}: {error['type']}: {error['message']}\n{error['traceback']}")
        return answer

    async def request(self, what: str, **request: Any) -> Any:
        await self._stdin.send((json.dumps(request) + "\n").encode())
        return await self.answer(what)

    async def list_tools(self) -> list[dict[str, Any]]:
        return await self.request("tools/list", op="list_tools")

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        request = {"op": "call_tool", "name": name, "arguments": arguments or {}}
        await self._stdin.send((json.dumps(request) + "\n").encode())
        answer = await self.answer_line(f"tools/call {name}")
        self.content_types = answer["contentTypes"]
        return answer["result"]


@asynccontextmanager
async def _sdk1(setup: Setup) -> AsyncIterator[Sdk1Client]:
    params = setup.loom()
    async with sdk1_client({"command": params.command, "args": params.args, "env": params.env}) as client:
        yield client


@asynccontextmanager
async def sdk1_client(spec: dict[str, Any]) -> AsyncIterator[Sdk1Client]:
    """The 1.x driver connected as `spec` says (clients/sdk1_driver.py: a stdio `command`, or a
    Streamable HTTP `url` with optional `headers`)."""
    if not VENV1_PYTHON.is_file():
        raise pytest.UsageError(f"{VENV1_PYTHON} is missing: run .ci/setup-interop")
    spec = {"patience": PATIENCE, **spec}
    # stderr is inherited: loom's log and the driver's tracebacks land in pytest's capture.
    process = await anyio.open_process(
        [str(VENV1_PYTHON), str(SDK1_DRIVER), json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
    )
    try:
        client = Sdk1Client(process)
        ready = await client.answer("the initialize handshake")
        client.protocol_version = ready["protocolVersion"]
        assert ready["serverInfo"]["name"] == "loom", ready
        yield client
    finally:
        # EOF on its stdin ends the driver, which closes loom's stdin (ending loom), or ends its
        # HTTP session.
        await process.stdin.aclose()
        with anyio.move_on_after(PATIENCE) as waited:
            await process.wait()
        if waited.cancelled_caught:
            process.kill()
            await process.wait()
            raise AssertionError("the sdk1 driver did not exit after its stdin closed")


@asynccontextmanager
async def open_client(kind: str, setup: Setup) -> AsyncIterator[DataClient]:
    """A client of loom over `setup`'s config: one of CLIENTS."""
    if kind == "sdk1":
        async with _sdk1(setup) as client:
            yield client
        return
    mode = kind.removeprefix("sdk2-")
    async with connect(setup.loom(), mode=mode) as client:
        yield Sdk2Client(client, mode)
