"""The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, its server
scenarios) against its own reference server, once directly and once through loom: every scenario
must pass on both sides.

The reference server is the Python SDK's everything-server (conformance.py), which has every
tool, prompt and resource the scenarios call, so every scenario proves something about loom
(against npm's server-everything, which has few of them, most scenarios failed directly and
compared nothing). The suite drives a server over Streamable HTTP only (`conformance server --url
URL`); loom and the reference server here speak stdio. Both sides therefore sit behind the same
stdio <-> Streamable HTTP bridge, supergateway (npm; stateful mode: one child process per MCP
session, the messages relayed as they are):

    direct:   suite --HTTP--> supergateway --stdio--> reference server (names as they are)
    loom:     suite --HTTP--> supergateway --stdio--> loom --stdio--> reference server as `test`

so the only difference between the two runs is loom (behind loom the server's `test_` names are
shortened, so that loom's `test_<name>` gives them back; servers/conformance_server.py).

Three scenarios cannot pass, each for a stated reason that a test checks, so that the exemption
cannot hide anything else:
- `json-schema-2020-12` (NAMING_ARTEFACTS): its tool has no `test_` name, and through loom the
  suite finds it only as `test_json_schema_2020_12_tool`.
- `dns-rebinding-protection` (BRIDGE_ARTEFACTS): it tests the HTTP server, which is the bridge on
  both sides; supergateway accepts a foreign Host and Origin. loom's own HTTP face passes it
  (test_http_serve.py, test_conformance_2026.py).
- `server-sse-polling` (UNSCORED): the suite scores no check of it on either side, only notes.

The suite, the bridge and the Node 22 the suite needs are pinned in .ci/conformance/package.json
and installed by .ci/setup-interop, which also unpacks the reference server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from conformance import (
    BRIDGE_JS,
    NAMING_ARTEFACTS,
    NODE22,
    SUITE_JS,
    UNSCORED,
    Run,
    assert_naming_artefact,
    assert_passes_directly_and_through_loom,
    assert_scenarios_ran,
    assert_unscored,
    list_scenarios,
    loom_config,
    reference_server_command,
    run_suite,
    tooling_missing,
    verdict,
)
from conftest import LOOM_BIN, free_port

# Every server scenario the suite lists (its "all" suite, which the runs use: the default
# "active" one plus the pending `json-schema-2020-12` and `server-sse-polling`).
LISTING = list_scenarios(SUITE_JS)

# Scenarios that test the HTTP server, which is the bridge on both sides: the check that fails on
# both sides, for supergateway answering 200 to a foreign Host and Origin.
BRIDGE_ARTEFACTS = {"dns-rebinding-protection": "localhost-host-rebinding-rejected"}

EXEMPT = set(NAMING_ARTEFACTS) | set(BRIDGE_ARTEFACTS) | UNSCORED
COMPARED = [s for s in LISTING.params if s not in EXEMPT]

# A run through loom starts one bridge child (loom, and the server behind it) per scenario.
SUITE_TIMEOUT = 300.0


def _exchanges_behind(run: Run, failures: str) -> str:
    """The requests the bridge relayed and the JSON-RPC errors that answered them, for each error
    whose message appears in `failures` (the bridge logs every message at `info`)."""
    if run.log is None or not run.log.exists():
        return ""
    requests: dict[Any, str] = {}
    shown = []
    for line in run.log.read_text(errors="replace").splitlines():
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
    return "\n" + "\n".join(dict.fromkeys(shown)) if shown else ""


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


def _stop_pid(pid: int) -> None:
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


def _sh_quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _run_through_bridge(label: str, command: list[str], workdir: Path) -> Run:
    """Serve `command` (a stdio MCP server) over Streamable HTTP and run every server scenario."""
    workdir.mkdir(parents=True)
    # The bridge starts the command through a shell, once per MCP session; the wrapper records
    # each child's pid (exec keeps it) so that none outlives the test.
    pids = workdir / "children.pid"
    wrapper = workdir / "serve.sh"
    wrapper.write_text(
        '#!/bin/sh\necho $$ >> "$(dirname "$0")/children.pid"\nexec ' + " ".join(_sh_quote(a) for a in command) + "\n"
    )
    wrapper.chmod(0o755)
    port = free_port()
    log = workdir / "bridge.log"
    env = {**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "warn")}
    with log.open("w") as sink:
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
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, env=env,
            cwd=workdir, start_new_session=True,
        )  # fmt: skip
        try:
            _wait_healthy(port, bridge)
            url = f"http://127.0.0.1:{port}/mcp"
            return run_suite(SUITE_JS, url, workdir, "--suite", "all", label=label, timeout=SUITE_TIMEOUT, log=log)
        finally:
            _stop_pid(bridge.pid)
            bridge.wait(timeout=10)
            if pids.exists():
                for pid in pids.read_text().split():
                    _stop_pid(int(pid))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    LISTING.require()
    if (why := tooling_missing(SUITE_JS, BRIDGE_JS)) is not None:
        pytest.skip(why)  # a failure under CI or LOOM_STRICT_TESTS=1 (conftest.py)
    base = tmp_path_factory.mktemp("conformance")
    config = loom_config(base / "loom.config.json")
    return {
        "direct": _run_through_bridge("directly", reference_server_command("--as-is"), base / "direct"),
        "loom": _run_through_bridge("through loom", [str(LOOM_BIN), "--config", str(config)], base / "loom"),
    }


def test_the_suite_ran_every_listed_scenario_on_both_sides(runs: dict[str, Run]) -> None:
    assert_scenarios_ran(runs, LISTING)
    assert EXEMPT <= set(LISTING.scenarios), f"exempt but no longer listed: {sorted(EXEMPT - set(LISTING.scenarios))}"


@pytest.mark.parametrize("scenario", COMPARED)
def test_a_scenario_passes_directly_and_through_loom(runs: dict[str, Run], scenario: str) -> None:
    LISTING.require()
    through = runs["loom"]
    failures = through.verdicts[scenario].failures() if scenario in through.verdicts else ""
    assert_passes_directly_and_through_loom(runs["direct"], through, scenario, detail=_exchanges_behind(through, failures))


@pytest.mark.parametrize("scenario", sorted(NAMING_ARTEFACTS))
def test_naming_artefact_is_what_it_claims(runs: dict[str, Run], scenario: str) -> None:
    assert_naming_artefact(runs["direct"], runs["loom"], scenario)


@pytest.mark.parametrize("scenario", sorted(BRIDGE_ARTEFACTS))
def test_bridge_artefact_is_what_it_claims(runs: dict[str, Run], scenario: str) -> None:
    """It fails on both sides, on the same one check, for the bridge accepting a foreign Host and
    Origin with 200; whatever else it checks passes on both sides."""
    check_id = BRIDGE_ARTEFACTS[scenario]
    for run in runs.values():
        failed = verdict(run, scenario).failed_checks()
        assert [c.get("id") for c in failed] == [check_id], (
            f"`{scenario}` {run.label}: expected only `{check_id}` to fail, got {verdict(run, scenario).failures()}; "
            "if it passes, take it out of BRIDGE_ARTEFACTS"
        )
        details = failed[0].get("details") or {}
        assert details.get("statusCode") == 200 and "evil" in str(details.get("hostHeader")), (
            f"`{scenario}` {run.label} fails for another reason than the bridge accepting a foreign Host: {failed[0]}"
        )


@pytest.mark.parametrize("scenario", sorted(UNSCORED))
def test_unscored_scenario_is_what_it_claims(runs: dict[str, Run], scenario: str) -> None:
    assert_unscored(runs["direct"], runs["loom"], scenario)
