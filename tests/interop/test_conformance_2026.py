"""The MCP conformance suite's scenarios of protocol 2026-07-28 (`conformance-2026`, the
suite's first release that has them: `--requirements 2026-07-28`) against the Python SDK's own
conformance server, once directly and once through `loom serve --http`: every scenario that
passes directly must pass through loom.

    direct:   suite --HTTP 2026-07-28--> conformance server (Python SDK 2.x, its HTTP mode)
    loom:     suite --HTTP 2026-07-28--> loom --stdio, 2026-07-28--> conformance server

The server is `examples/servers/everything-server` of the `mcp` sdist (.ci/setup-interop
unpacks it), which has every tool, prompt and resource the suite calls — among them the tools
that answer `input_required` (which loom passes on, §4.6, §5.11) and the one that refuses a
client without sampling (-32021). loom exposes tools as `<server>_<tool>`, so behind loom the
server runs as `test` with its `test_` names shortened (servers/conformance_server.py): the suite
calls the names it knows. One tool has no `test_` name (`json_schema_2020_12_tool`): its scenario
cannot find it through loom, and a test checks that it fails for exactly that reason.

The scenarios test loom's own 2026-07-28 face too: no sessions (`server-stateless`), the standard
headers (`http-header-validation`, `http-custom-header-server-validation`), caching hints, the
removed methods, resource-not-found codes. The tasks extension's scenarios fail against the
server directly (it has no tasks) and prove nothing here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import LOOM_BIN, REPO_ROOT
from test_conformance import NODE22, Verdict, _free_port, _in_ci

SUITE_JS = REPO_ROOT / ".ci" / "conformance" / "node_modules" / "conformance-2026" / "dist" / "index.js"
VENV_PYTHON = REPO_ROOT / ".ci" / "venv" / "bin" / "python"
CONFORMANCE_SERVER = Path(__file__).resolve().parent / "servers" / "conformance_server.py"
SUITE_TIMEOUT = 600.0

# The one scenario whose tool has no `test_` name: through loom it is `test_json_schema_...`.
NAMING_ARTEFACTS = {"json-schema-2020-12": "json_schema_2020_12_tool"}


def _example() -> Path | None:
    found = sorted((REPO_ROOT / ".ci" / "venv" / "mcp-examples").glob("*/everything-server"))
    return found[-1] if found else None


def _tooling_missing() -> str | None:
    missing = [str(p.relative_to(REPO_ROOT)) for p in (NODE22, SUITE_JS, VENV_PYTHON) if not p.exists()]
    if _example() is None:
        missing.append(".ci/venv/mcp-examples/*/everything-server")
    if missing:
        return "the 2026-07-28 conformance suite or its server is not installed (run .ci/setup-interop): missing " + ", ".join(missing)
    return None


@dataclass
class Run:
    label: str
    verdicts: dict[str, Verdict]
    output: str

    def __repr__(self) -> str:
        passed = sum(v.passed for v in self.verdicts.values())
        return f"<suite run {self.label}: {passed} of {len(self.verdicts)} scenarios pass>"


def _run_suite(label: str, url: str, workdir: Path) -> Run:
    results = workdir / "results"
    suite = subprocess.run(
        [str(NODE22), str(SUITE_JS), "server", "--url", url, "--requirements", "2026-07-28", "-o", str(results)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SUITE_TIMEOUT, cwd=workdir,
    )  # fmt: skip
    verdicts = {}
    for checks_file in sorted(results.glob("server-*/checks.json")):
        # Folders are `server-<scenario>-<timestamp>`; the timestamp begins with the year.
        name = checks_file.parent.name.removeprefix("server-")
        scenario = name[: name.index("-20")] if "-20" in name else name
        checks = json.loads(checks_file.read_text())
        verdicts[scenario] = Verdict(passed=not any(c.get("status") == "FAILURE" for c in checks), checks=checks)
    return Run(label, verdicts, suite.stdout + suite.stderr)


def _wait_listening(port: int, process: subprocess.Popen, log: Path) -> None:
    import socket

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode} before listening:\n{log.read_text(errors='replace')[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on port {port} within 60 s:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    if (why := _tooling_missing()) is not None:
        if _in_ci():
            pytest.fail(why)
        pytest.skip(why)
    example = _example()
    assert example is not None
    base = tmp_path_factory.mktemp("conformance-2026")
    out: dict[str, Run] = {}

    # Directly: the server's own Streamable HTTP.
    port = _free_port()
    log = base / "server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [str(VENV_PYTHON), str(CONFORMANCE_SERVER), str(example), "--http", str(port)],
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_listening(port, server, log)
        (base / "direct").mkdir()
        out["direct"] = _run_suite("direct", f"http://127.0.0.1:{port}/mcp", base / "direct")
    finally:
        _stop(server)

    # Through loom: the server on stdio, spoken to in 2026-07-28.
    config = base / "loom.config.json"
    config.write_text(json.dumps({"servers": [{
        "name": "test", "command": str(VENV_PYTHON), "args": [str(CONFORMANCE_SERVER), str(example)],
        "protocol": "2026-07-28",
    }]}))  # fmt: skip
    port = _free_port()
    log = base / "loom.log"
    with log.open("wb") as sink:
        loom = subprocess.Popen(
            [str(LOOM_BIN), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink,
            env={**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "warn")}, start_new_session=True,
        )  # fmt: skip
    try:
        _wait_listening(port, loom, log)
        (base / "loom").mkdir()
        out["loom"] = _run_suite("loom", f"http://127.0.0.1:{port}/mcp", base / "loom")
    finally:
        _stop(loom)
    return out


def _scenarios() -> list[str]:
    if _tooling_missing():
        return ["<2026-07-28 conformance suite not installed>"]
    listed = subprocess.run(
        [str(NODE22), str(SUITE_JS), "list", "--server", "--spec-version", "2026-07-28"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    return [line.strip()[2:].split()[0] for line in listed.splitlines() if line.strip().startswith("- ")]


SCENARIOS = _scenarios()


def test_the_suite_ran_and_most_scenarios_pass_directly(runs: dict[str, Run]) -> None:
    direct, through = runs["direct"], runs["loom"]
    assert direct.verdicts, direct.output[-4000:]
    assert set(through.verdicts) == set(direct.verdicts), (sorted(direct.verdicts), sorted(through.verdicts))
    passing = [s for s, v in direct.verdicts.items() if v.passed]
    # The server is the suite's own reference: every required scenario passes against it.
    assert len(passing) >= 30, f"only {passing} pass directly; the comparison would prove little"
    assert "server-stateless" in passing and "input-required-result-multi-round" in passing, passing


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_scenario_passing_directly_passes_through_loom(runs: dict[str, Run], scenario: str) -> None:
    direct = runs["direct"].verdicts.get(scenario)
    if direct is None:
        pytest.skip("not run for the 2026-07-28 requirements")
    if scenario in NAMING_ARTEFACTS:
        pytest.skip("its tool keeps no `test_` name through loom (test_naming_artefact_is_what_it_claims)")
    if not direct.passed:
        pytest.skip(f"fails directly too: {direct.failures()}")
    through = runs["loom"].verdicts.get(scenario)
    assert through is not None, f"no result for `{scenario}` through loom:\n{runs['loom'].output[-3000:]}"
    assert through.passed, f"`{scenario}` passes directly but fails through loom: {through.failures()}"


@pytest.mark.parametrize("scenario", sorted(NAMING_ARTEFACTS))
def test_naming_artefact_is_what_it_claims(runs: dict[str, Run], scenario: str) -> None:
    through = runs["loom"].verdicts.get(scenario)
    if through is None or through.passed:
        return
    tool = NAMING_ARTEFACTS[scenario]
    text = json.dumps([c for c in through.checks if c.get("status") == "FAILURE"])
    assert tool in text and ("not found" in text or "unknown tool" in text), (
        f"`{scenario}` fails through loom for another reason than the name of `{tool}`: {through.failures()}"
    )
