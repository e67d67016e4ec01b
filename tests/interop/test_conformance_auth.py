"""loom as the OAuth client of the MCP conformance suite's auth scenarios (SPEC §4.7): every
`auth/…` client scenario of both pinned suites (0.1.16; 0.2.0-alpha.12, the first with protocol
2026-07-28's), with tests/interop/oauth/conformance_client.py as the client under test. That
script does what a person does: a config with the suite's server as a remote server (`protocol:
auto`), `loom auth login` with browser.py as `$BROWSER`, then the official Python SDK over stdio
to loom — list the tools, call `s_test-tool`, and log in again through URL elicitation when the
server wants more scopes. The suite judges loom by what reached its servers (discovery, client
registration or metadata document, PKCE, `resource`, scopes, `iss`, refusals).

Not run: the scenarios of extensions loom does not implement (client credentials, enterprise-
managed authorization, DPoP, workload identity federation), listed as `[extension]`.

One scenario cannot pass, for a reason a test checks: 0.1.16's
`auth/2025-03-26-oauth-metadata-backcompat` serves authorization server metadata whose `issuer`
(`<origin>/oauth`) is not the URL it is served for, which RFC 8414 §3.3 says a client must refuse
(loom does, through rmcp's check); the suite's later versions fixed the scenario, and loom passes
it in 0.2.0-alpha.12.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from conformance import NODE22, SUITE_2026_JS, SUITE_JS, VENV_PYTHON, list_scenarios, tooling_missing
from conftest import LOOM_BIN

CLIENT = Path(__file__).resolve().parent / "oauth" / "conformance_client.py"
SUITES = {"0.1.16": SUITE_JS, "0.2.0-alpha.12": SUITE_2026_JS}
# (suite, scenario) -> what loom's output must say for the scenario's failure to be the stated one.
EXEMPT = {
    ("0.1.16", "auth/2025-03-26-oauth-metadata-backcompat"): re.compile(
        r"the answer came from issuer `http://localhost:\d+/oauth`, but this login is with `http://localhost:\d+/`"
    ),
}


def auth_scenarios() -> list[tuple[str, str]]:
    found = []
    for version, suite in SUITES.items():
        listing = list_scenarios(suite, part="Client scenarios")
        for scenario in listing.scenarios:
            if scenario.startswith("auth/") and listing.versions.get(scenario) != "extension":
                found.append((version, scenario))
    return found or [("-", "<no scenario listed>")]


def run(version: str, scenario: str, tmp: Path) -> str:
    result = subprocess.run(
        [str(NODE22), str(SUITES[version]), "client", "--command", f"{VENV_PYTHON} {CLIENT}", "--scenario", scenario, "-o", str(tmp / "results")],
        env={**os.environ, "LOOM_BIN": str(LOOM_BIN), "PATH": f"{VENV_PYTHON.parent}:{os.environ.get('PATH', '')}"},
        capture_output=True, text=True, timeout=240, cwd=tmp,
    )  # fmt: skip
    return re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)


@pytest.mark.parametrize(("version", "scenario"), auth_scenarios())
def test_loom_passes_the_auth_scenario_as_a_client(version: str, scenario: str, tmp_path: Path) -> None:
    missing = tooling_missing(SUITE_JS, SUITE_2026_JS)
    if missing:
        pytest.skip(missing)
    assert version != "-", "the suites list no auth client scenario (has their listing changed?)"
    output = run(version, scenario, tmp_path)
    summary = re.search(r"^Passed: (\d+)/(\d+), (\d+) failed, (\d+) warnings", output, re.MULTILINE)
    assert summary, f"no verdict from the suite:\n{output[-4000:]}"
    passed, total, failed, warnings = map(int, summary.groups())
    reason = EXEMPT.get((version, scenario))
    if reason is not None:
        # Fails, and for exactly the stated reason.
        assert failed > 0 and reason.search(output), output[-4000:]
        return
    assert total > 0 and failed == 0 and warnings == 0 and "OVERALL: PASSED" in output, output[-6000:]


def test_the_auth_scenarios_are_listed() -> None:
    """Both suites list their auth scenarios (a changed listing must not quietly run none)."""
    missing = tooling_missing(SUITE_JS, SUITE_2026_JS)
    if missing:
        pytest.skip(missing)
    listed = auth_scenarios()
    by_suite = {version: [s for v, s in listed if v == version] for version in SUITES}
    assert len(by_suite["0.1.16"]) >= 19 and len(by_suite["0.2.0-alpha.12"]) >= 27, by_suite
    assert all(key in listed for key in EXEMPT), listed
