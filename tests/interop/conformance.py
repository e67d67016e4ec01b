"""What the conformance comparisons share (test_conformance.py, test_conformance_2026.py and part 7
of test_http_serve.py): where the MCP conformance suite and its reference server are installed,
the scenario listing, a run of the suite and its verdicts, and the scenarios that cannot pass
through loom for a stated reason, each with the check that it fails for exactly that reason.

The reference server is the conformance package's own: the Python SDK's
`examples/servers/everything-server` (from the `mcp` sdist; .ci/setup-interop unpacks it under
.ci/venv/mcp-examples/<version>/), which has every tool, prompt and resource the suite calls.
loom exposes tools and prompts as `<server>_<name>`, so behind loom the server runs as
`SERVER_NAME` through servers/conformance_server.py, which takes the `test_` off its names: the
suite finds the names it knows on both sides.
"""

from __future__ import annotations

import functools
import json
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO_ROOT

CONFORMANCE_MODULES = REPO_ROOT / ".ci" / "conformance" / "node_modules"
# The suite needs Node 22 (it calls `fs.globSync`); .ci/conformance/package.json pins it.
NODE22 = CONFORMANCE_MODULES / ".bin" / "node"
# 0.1.16: the scenarios of protocol versions up to 2025-11-25.
SUITE_JS = CONFORMANCE_MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# 0.2.0-alpha.12, the suite's first release with the scenarios of protocol 2026-07-28.
SUITE_2026_JS = CONFORMANCE_MODULES / "conformance-2026" / "dist" / "index.js"
# supergateway, the stdio <-> Streamable HTTP bridge of test_conformance.py.
BRIDGE_JS = CONFORMANCE_MODULES / "supergateway" / "dist" / "index.js"
# The interpreter with the SDK the reference server was unpacked from.
VENV_PYTHON = REPO_ROOT / ".ci" / "venv" / "bin" / "python"
CONFORMANCE_SERVER = Path(__file__).resolve().parent / "servers" / "conformance_server.py"

# The reference server's name in loom's config: its `x` (shortened from `test_x`) is `test_x`
# through loom.
SERVER_NAME = "test"


def reference_server() -> Path | None:
    """The everything-server example folder .ci/setup-interop unpacked, if it did."""
    found = sorted((REPO_ROOT / ".ci" / "venv" / "mcp-examples").glob("*/everything-server"))
    return found[-1] if found else None


def tooling_missing(*needed: Path) -> str | None:
    """What of Node 22, the venv, the reference server and `needed` (a suite, the bridge) is not
    installed, as a skip reason that names the fix (a failure under strict mode, conftest.py)."""
    missing = [str(p.relative_to(REPO_ROOT)) for p in (NODE22, VENV_PYTHON, *needed) if not p.exists()]
    if reference_server() is None:
        missing.append(".ci/venv/mcp-examples/*/everything-server")
    if missing:
        return "the conformance suite or its reference server is not installed (run .ci/setup-interop): missing " + ", ".join(missing)
    return None


def reference_server_command(*options: str) -> list[str]:
    """The reference server through servers/conformance_server.py with `options`: none for stdio
    behind loom, `--as-is` for stdio without loom, `--http PORT` for its own Streamable HTTP."""
    example = reference_server()
    assert example is not None, tooling_missing()
    return [str(VENV_PYTHON), str(CONFORMANCE_SERVER), str(example), *options]


def loom_config(path: Path, **server_options: Any) -> Path:
    """A loom config at `path` listing the reference server on stdio as `SERVER_NAME`."""
    command, *args = reference_server_command()
    server = {"name": SERVER_NAME, "command": command, "args": args, **server_options}
    path.write_text(json.dumps({"servers": [server]}, indent=2))
    return path


# --------------------------------------------------------------------------------------------
# The scenario listing

# The stand-in scenario when the suite lists none (see `Listing.params`).
NOTHING_LISTED = "<no scenario listed>"


@dataclass
class Listing:
    """The scenarios a suite lists (server or client ones), read when the tests are collected so
    that each scenario gets a test of its own."""

    scenarios: list[str]
    problem: str | None = None
    """Why there are none."""
    versions: dict[str, str] = field(default_factory=dict)
    """Each scenario's bracket: the protocol versions it is for, or `extension`."""
    tooling_missing: bool = False
    """Whether that is because the suite is not installed (a skip that names the fix), rather
    than because its output could not be read (always a failure)."""

    @property
    def params(self) -> list[str]:
        # pytest turns a parametrization over nothing into one quiet skip; with nothing listed,
        # one stand-in test reports why instead.
        return self.scenarios or [NOTHING_LISTED]

    def require(self) -> None:
        """Skip (tooling missing) or fail (nothing read from the listing) when nothing is listed."""
        if self.scenarios:
            return
        if self.tooling_missing:
            pytest.skip(self.problem)
        pytest.fail(self.problem, pytrace=False)


@functools.cache
def list_scenarios(suite_js: Path, *options: str, part: str = "Server scenarios") -> Listing:
    """The scenarios under `part` ("Server scenarios", "Client scenarios") in the output of
    `conformance list OPTIONS`, each with its versions' bracket (once per session: two modules
    compare the same listing)."""
    missing = [str(p.relative_to(REPO_ROOT)) for p in (NODE22, suite_js) if not p.exists()]
    if missing:
        why = "the conformance suite is not installed (run .ci/setup-interop): missing " + ", ".join(missing)
        return Listing([], why, tooling_missing=True)
    command = [str(NODE22), str(suite_js), "list", *options]
    shown = "conformance list " + " ".join(options)
    try:
        listed = subprocess.run(command, capture_output=True, text=True, timeout=60, check=True).stdout
    except subprocess.CalledProcessError as e:
        return Listing([], f"`{shown}` exited with {e.returncode}:\n{(e.stdout or '')[-2000:]}{(e.stderr or '')[-2000:]}")
    except (OSError, subprocess.TimeoutExpired) as e:
        return Listing([], f"`{shown}` did not run: {e}")
    scenarios, versions, in_server_part = [], {}, False
    for line in listed.splitlines():
        if line.startswith(part):
            in_server_part = True
        elif line and not line.startswith(" "):
            in_server_part = False
        elif in_server_part and line.strip().startswith("- "):
            # `  - tools-list [2025-06-18,2025-11-25]`: the name, without the versions.
            name, _, bracket = line.strip()[2:].partition(" ")
            scenarios.append(name)
            versions[name] = bracket.strip().strip("[]")
    if not scenarios:
        return Listing([], f"found nothing under {part!r} in the output of `{shown}` (has its format changed?):\n{listed[-3000:]}")
    return Listing(scenarios, versions=versions)


# --------------------------------------------------------------------------------------------
# Runs and verdicts


@dataclass(repr=False)
class Verdict:
    passed: bool
    checks: list[dict[str, Any]]

    def __repr__(self) -> str:
        return "PASS" if self.passed else f"FAIL ({self.failures()})"

    def scored(self) -> bool:
        """Whether any check succeeded or failed: a scenario that only took notes (INFO, WARNING)
        passes without having tested anything."""
        return any(c.get("status") in ("SUCCESS", "FAILURE") for c in self.checks)

    def failed_checks(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if c.get("status") == "FAILURE"]

    def failures(self) -> str:
        return "; ".join(f"{c.get('id')}: {c.get('errorMessage') or c.get('details')}" for c in self.failed_checks()) or "-"


@dataclass(repr=False)
class Run:
    """One run of the suite against one MCP endpoint."""

    label: str
    """The endpoint, as failure messages name it ("directly", "through loom")."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    output: str = ""
    """What the suite printed."""
    log: Path | None = None
    """The log of what served the suite (loom's stderr, the bridge's log), for failure messages."""

    def __repr__(self) -> str:
        passed = sum(v.passed for v in self.verdicts.values())
        return f"<suite run {self.label}: {passed} of {len(self.verdicts)} scenarios pass>"

    def log_tail(self, chars: int = 3000) -> str:
        if self.log is None or not self.log.exists():
            return ""
        return f"\n--- {self.log.name} (tail) ---\n{self.log.read_text(errors='replace')[-chars:]}"


# Result folders are `server-<scenario>-<timestamp>`, e.g.
# `server-json-schema-2020-12-2026-12-04T18-05-38-250Z` (scenario names hold dashes and years).
_RESULT_FOLDER = re.compile(r"server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z")


def run_suite(suite_js: Path, url: str, workdir: Path, *options: str, label: str, timeout: float, log: Path | None = None) -> Run:
    """`conformance server --url URL OPTIONS`; its verdicts read from the result files."""
    results = workdir / "results"
    done = subprocess.run(
        [str(NODE22), str(suite_js), "server", "--url", url, *options, "-o", str(results)],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, cwd=workdir,
    )  # fmt: skip
    # Exit 1 just means some scenario failed; the verdicts are in the result files.
    run = Run(label=label, output=done.stdout + done.stderr, log=log)
    for checks_file in sorted(results.glob("server-*/checks.json")):
        found = _RESULT_FOLDER.fullmatch(checks_file.parent.name)
        # A folder named otherwise keeps its whole name: the tests' comparison of the scenarios
        # run with those listed then shows it.
        scenario = found["scenario"] if found else checks_file.parent.name
        checks = json.loads(checks_file.read_text())
        run.verdicts[scenario] = Verdict(passed=not any(c.get("status") == "FAILURE" for c in checks), checks=checks)
    return run


def verdict(run: Run, scenario: str) -> Verdict:
    assert scenario in run.verdicts, f"the suite wrote no result for `{scenario}` {run.label}; its output:\n{run.output[-4000:]}"
    return run.verdicts[scenario]


def assert_scenarios_ran(runs: dict[str, Run], listing: Listing, *not_listed: str) -> None:
    """Every side ran exactly the listed scenarios (and `not_listed`, ones a run adds that the
    listing does not show), so none goes uncompared and none is compared twice by name."""
    listing.require()
    expected = set(listing.scenarios) | set(not_listed)
    for run in runs.values():
        assert set(run.verdicts) == expected, (
            f"{run.label}: run but not listed {sorted(set(run.verdicts) - expected)}, "
            f"listed but not run {sorted(expected - set(run.verdicts))}; the suite's output:\n{run.output[-3000:]}"
        )


def assert_passes_directly_and_through_loom(direct: Run, through: Run, scenario: str, *, detail: str = "") -> None:
    """The comparison: the scenario passes against the reference server directly, on at least one
    scored check (otherwise the comparison would prove nothing), and through loom."""
    before = verdict(direct, scenario)
    assert before.passed, (
        f"`{scenario}` fails against the reference server {direct.label}: {before.failures()}\n"
        "It is the suite's own server, so this is the setup's fault; if the scenario cannot pass "
        "for a reason outside loom, list it among the exemptions with a check of that reason."
    )
    assert before.scored(), (
        f"`{scenario}` scores no check {direct.label} (only notes: {[c.get('id') for c in before.checks]}), "
        "so it passes on both sides without proving anything; list it in UNSCORED"
    )
    after = verdict(through, scenario)
    assert after.passed, f"`{scenario}` passes {direct.label} but fails {through.label}: {after.failures()}{detail}"


# --------------------------------------------------------------------------------------------
# Scenarios that cannot pass, and why

# The one tool of the reference server without a `test_` name: through loom it is
# `test_json_schema_2020_12_tool`, and the scenario, which looks for it by name, cannot find it.
NAMING_ARTEFACTS = {"json-schema-2020-12": "json_schema_2020_12_tool"}


def assert_naming_artefact(direct: Run, through: Run, scenario: str) -> None:
    """The scenario passes directly, and through loom it fails only for not finding its tool, which
    the suite is shown under loom's name for it."""
    tool = NAMING_ARTEFACTS[scenario]
    before = verdict(direct, scenario)
    assert before.passed, f"`{scenario}` fails {direct.label} too: {before.failures()}"
    after = verdict(through, scenario)
    assert not after.passed, f"`{scenario}` passes {through.label} now: take it out of NAMING_ARTEFACTS so it is compared"
    for check in after.failed_checks():
        text = json.dumps(check)
        assert f"'{tool}' not found" in text and f"{SERVER_NAME}_{tool}" in text, (
            f"`{scenario}` fails {through.label} for another reason than the name of `{tool}`: {text[:2000]}"
        )


# Scenarios the suite scores no check of against the reference server, directly or through loom,
# only notes: `server-sse-polling` (SEP-1699) tests a server that closes its SSE stream in the
# middle of a call and sends priming events for the client to resume from, which the reference
# server does not do here (the notes say so: "did not disconnect mid-call", "no priming event");
# loom over HTTP answers the call as JSON, where the SSE tests do not apply.
UNSCORED = {"server-sse-polling"}


def assert_unscored(direct: Run, through: Run, scenario: str) -> None:
    """The scenario neither passes nor fails a check on either side: were one scored now, it
    belongs among the compared scenarios."""
    for run in (direct, through):
        scored = [c for c in verdict(run, scenario).checks if c.get("status") in ("SUCCESS", "FAILURE")]
        assert not scored, f"`{scenario}` scores checks {run.label} now: take it out of UNSCORED so it is compared: {scored}"


# --------------------------------------------------------------------------------------------
# Processes


def wait_listening(port: int, process: subprocess.Popen, log: Path, patience: float = 60.0) -> None:
    """Until something accepts connections on 127.0.0.1:`port`; fails showing `log` if `process`
    exits first or nothing listens within `patience` seconds."""
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"exited with {process.returncode} before listening:\n{log.read_text(errors='replace')[-3000:]}")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listened on port {port} within {patience} s:\n{log.read_text(errors='replace')[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    """SIGTERM, then SIGKILL after 10 s, to a process the tests started."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
