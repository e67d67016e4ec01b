"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, its server scenarios)
against server-everything, once directly and once through loom: every scenario that passes
against the server directly must pass through loom too.

The suite drives a server over Streamable HTTP only (`conformance server --url URL`); loom and
server-everything's default mode speak stdio. Both sides therefore sit behind the same stdio <->
Streamable HTTP bridge, supergateway (npm; stateful mode: one child process per MCP session, the
messages relayed as they are):

    direct:   suite --HTTP--> supergateway --stdio--> server-everything
    loom:     suite --HTTP--> supergateway --stdio--> loom --stdio--> server-everything

so the only difference between the two runs is loom. (Run directly against server-everything's own
HTTP mode, `PORT=N node dist/index.js streamableHttp`, the suite gives the same verdicts as
through the bridge.) The transport-level scenarios (`server-sse-multiple-streams`,
`dns-rebinding-protection`) test the bridge on both sides, not loom.

What the suite checks is written for its own test server (tools `test_simple_text`,
`test_error_handling`, prompts `test_simple_prompt`, resources `test://static-text`, ...), which
server-everything does not have, so most scenarios fail directly and prove nothing about loom; they
are compared all the same (a scenario failing directly may fail through loom). Two pass directly
only because server-everything answers a call to a tool it does not have with an `isError` result
("Tool test_simple_text not found") where loom answers JSON-RPC error -32602 (SPEC §5.5; the MCP
spec lists unknown tools under protocol errors): those are in `UNKNOWN_TOOL_ARTEFACTS`, and a test
checks that they still pass directly for exactly that reason and fail through loom for exactly
that reason, so the exemption cannot hide anything else.

The suite, the bridge and the Node 22 the suite needs (it calls `fs.globSync`) are pinned in
.ci/conformance/package.json and installed by .ci/setup-interop.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import EVERYTHING_JS, LOOM_BIN, REPO_ROOT

CONFORMANCE = REPO_ROOT / ".ci" / "conformance" / "node_modules"
NODE22 = CONFORMANCE / ".bin" / "node"
SUITE_JS = CONFORMANCE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
BRIDGE_JS = CONFORMANCE / "supergateway" / "dist" / "index.js"

# Scenarios that pass directly only because server-everything lacks the tool the suite calls and
# answers the call with an isError result; loom answers an unknown tool with JSON-RPC error -32602.
# The value is the tool the scenario calls.
UNKNOWN_TOOL_ARTEFACTS = {
    "tools-call-simple-text": "test_simple_text",
    "tools-call-error": "test_error_handling",
}

# A whole run through loom starts one loom (and one server-everything) per scenario: ~1 minute.
SUITE_TIMEOUT = 300.0


def _tooling_missing() -> str | None:
    missing = [str(p.relative_to(REPO_ROOT)) for p in (NODE22, SUITE_JS, BRIDGE_JS) if not p.exists()]
    if missing:
        return "the conformance suite is not installed (run .ci/setup-interop): missing " + ", ".join(missing)
    return None


def _in_ci() -> bool:
    return os.environ.get("CI", "") not in ("", "0", "false")


def _list_scenarios() -> list[str]:
    """Every server scenario the suite lists (its "all" suite: the default "active" one plus the
    pending `json-schema-2020-12` and `server-sse-polling`), read at collection so that each gets
    its own test."""
    if _tooling_missing():
        return ["<conformance suite not installed>"]
    out = subprocess.run(
        [str(NODE22), str(SUITE_JS), "list"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    scenarios, in_server_part = [], False
    for line in out.splitlines():
        if line.startswith("Server scenarios"):
            in_server_part = True
        elif line and not line.startswith(" "):
            in_server_part = False
        elif in_server_part and line.strip().startswith("- "):
            scenarios.append(line.strip()[2:].split()[0])
    return scenarios


SCENARIOS = _list_scenarios()


@dataclass(repr=False)
class Verdict:
    passed: bool
    checks: list[dict[str, Any]]

    def __repr__(self) -> str:
        return "PASS" if self.passed else f"FAIL ({self.failures()})"

    def failures(self) -> str:
        bad = [c for c in self.checks if c.get("status") == "FAILURE"]
        return "; ".join(f"{c.get('id')}: {c.get('errorMessage') or c.get('details')}" for c in bad) or "-"


@dataclass(repr=False)
class Run:
    """One run of the whole suite through the bridge in front of one stdio command."""

    label: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    bridge_log: Path | None = None
    stdout: str = ""

    def __repr__(self) -> str:
        passed = sum(v.passed for v in self.verdicts.values())
        return f"<suite run {self.label}: {passed} of {len(self.verdicts)} scenarios pass>"

    def exchanges_behind(self, failures: str) -> str:
        """The requests the bridge relayed and the JSON-RPC errors that answered them, for each
        error whose message appears in `failures` (the bridge logs every message at `info`)."""
        if self.bridge_log is None or not self.bridge_log.exists():
            return ""
        requests: dict[Any, str] = {}
        shown = []
        for line in self.bridge_log.read_text(errors="replace").splitlines():
            _, sep, body = line.partition("StreamableHttp → Child: ")
            if sep:
                try:
                    requests[json.loads(body).get("id")] = body
                except ValueError:
                    pass
                continue
            _, sep, body = line.partition("Child → StreamableHttp: ")
            if not sep:
                continue
            try:
                message = json.loads(body)
            except ValueError:
                continue
            error = message.get("error") if isinstance(message, dict) else None
            if isinstance(error, dict) and str(error.get("message")) in failures:
                shown.append(f"  request: {requests.get(message.get('id'), '?')}\n  answer:  {body}")
        return "\n".join(dict.fromkeys(shown))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_healthy(port: int, bridge: subprocess.Popen, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if bridge.poll() is not None:
            raise RuntimeError(f"the bridge exited with {bridge.returncode} before listening")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"the bridge did not listen on port {port} within {timeout} s")


def _stop(pid: int) -> None:
    """SIGTERM, then SIGKILL after 3 s, to one process this module started."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run_suite(label: str, command: list[str], workdir: Path) -> Run:
    """Serve `command` (a stdio MCP server) over Streamable HTTP and run every server scenario."""
    workdir.mkdir(parents=True)
    # The bridge starts the command through a shell, once per MCP session; the wrapper records
    # each child's pid (exec keeps it) so that none outlives the test.
    pids = workdir / "children.pid"
    wrapper = workdir / "serve.sh"
    wrapper.write_text(
        '#!/bin/sh\necho $$ >> "$(dirname "$0")/children.pid"\nexec '
        + " ".join(_sh_quote(a) for a in command)
        + "\n"
    )
    wrapper.chmod(0o755)
    port = _free_port()
    run = Run(label=label, bridge_log=workdir / "bridge.log")
    env = {**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "warn")}
    with run.bridge_log.open("w") as log:
        bridge = subprocess.Popen(
            [
                str(NODE22), str(BRIDGE_JS),
                "--stdio", _sh_quote(str(wrapper)),
                "--outputTransport", "streamableHttp", "--stateful",
                "--port", str(port), "--healthEndpoint", "/healthz",
                # The suite never ends its sessions; let idle ones (and their children) go.
                "--sessionTimeout", "15000",
                "--logLevel", "info",
            ],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
            cwd=workdir, start_new_session=True,
        )
        try:
            _wait_healthy(port, bridge)
            run_scenarios(run, f"http://127.0.0.1:{port}/mcp", workdir)
        finally:
            _stop(bridge.pid)
            bridge.wait(timeout=10)
            if pids.exists():
                for pid in pids.read_text().split():
                    _stop(int(pid))
    return run


def run_scenarios(run: Run, url: str, workdir: Path) -> None:
    """Every server scenario against the MCP endpoint `url`; the verdicts go into `run`."""
    results = workdir / "results"
    suite = subprocess.run(
        [str(NODE22), str(SUITE_JS), "server", "--url", url, "--suite", "all", "-o", str(results)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SUITE_TIMEOUT,
        cwd=workdir,
    )
    # Exit 1 just means some scenario failed; the verdicts are in the result files.
    run.stdout = suite.stdout + suite.stderr
    for checks_file in sorted(results.glob("server-*/checks.json")):
        checks = json.loads(checks_file.read_text())
        scenario = next((s for s in SCENARIOS if checks_file.parent.name.startswith(f"server-{s}-")), None)
        if scenario is None:
            continue
        run.verdicts[scenario] = Verdict(
            passed=not any(c.get("status") == "FAILURE" for c in checks), checks=checks
        )


def _sh_quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    if (why := _tooling_missing()) is not None:
        if _in_ci():
            pytest.fail(why)
        pytest.skip(why)
    node = shutil.which("node")
    assert node, "node is not on PATH"
    base = tmp_path_factory.mktemp("conformance")
    config = base / "loom.config.json"
    config.write_text(json.dumps({
        "servers": [{"name": "everything", "command": "node", "args": [str(EVERYTHING_JS)]}]
    }))
    return {
        "direct": _run_suite("direct", [node, str(EVERYTHING_JS)], base / "direct"),
        "loom": _run_suite("loom", [str(LOOM_BIN), "--config", str(config)], base / "loom"),
    }


def _verdict(run: Run, scenario: str) -> Verdict:
    assert scenario in run.verdicts, (
        f"the suite wrote no result for `{scenario}` {run.label}; its output:\n{run.stdout[-4000:]}"
    )
    return run.verdicts[scenario]


def test_the_suite_ran_and_some_scenarios_pass_directly(runs: dict[str, Run]) -> None:
    direct = runs["direct"]
    assert set(direct.verdicts) == set(SCENARIOS), direct.stdout[-4000:]
    assert set(runs["loom"].verdicts) == set(SCENARIOS), runs["loom"].stdout[-4000:]
    comparable = [s for s, v in direct.verdicts.items() if v.passed and s not in UNKNOWN_TOOL_ARTEFACTS]
    # server-initialize, ping, logging-set-level, tools-list, resources-list, resources-subscribe,
    # resources-unsubscribe, prompts-list, server-sse-multiple-streams at the time of writing.
    assert len(comparable) >= 5, f"only {comparable} pass directly; the comparison would prove little"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_scenario_passing_directly_passes_through_loom(runs: dict[str, Run], scenario: str) -> None:
    if scenario in UNKNOWN_TOOL_ARTEFACTS:
        pytest.skip("passes directly only through server-everything's answer to an unknown tool "
                    "(see test_unknown_tool_artefacts_are_what_they_claim)")
    direct = _verdict(runs["direct"], scenario)
    if not direct.passed:
        pytest.skip(f"fails directly too: {direct.failures()}")
    through_loom = _verdict(runs["loom"], scenario)
    assert through_loom.passed, (
        f"`{scenario}` passes against server-everything directly but fails through loom: "
        f"{through_loom.failures()}\n{runs['loom'].exchanges_behind(through_loom.failures())}"
    )


@pytest.mark.parametrize("scenario", sorted(UNKNOWN_TOOL_ARTEFACTS))
def test_unknown_tool_artefacts_are_what_they_claim(runs: dict[str, Run], scenario: str) -> None:
    tool = UNKNOWN_TOOL_ARTEFACTS[scenario]
    direct = _verdict(runs["direct"], scenario)
    if direct.passed:
        # It passes directly on an isError result that says the tool does not exist.
        results = [c.get("details", {}).get("result", {}) for c in direct.checks]
        texts = [b.get("text", "") for r in results for b in r.get("content", []) if isinstance(b, dict)]
        assert any(f"Tool {tool} not found" in t for t in texts), (
            f"`{scenario}` passes directly for another reason than an unknown tool: {texts}; "
            "take it out of UNKNOWN_TOOL_ARTEFACTS"
        )
    through_loom = _verdict(runs["loom"], scenario)
    if not through_loom.passed:
        # ... and fails through loom on loom's JSON-RPC error for an unknown tool, nothing else.
        assert f"unknown tool `{tool}`" in through_loom.failures(), (
            f"`{scenario}` fails through loom for another reason than an unknown tool: "
            f"{through_loom.failures()}"
        )
