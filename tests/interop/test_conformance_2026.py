"""The MCP conformance suite's scenarios of protocol 2026-07-28 (`conformance-2026`, the
suite's first release that has them: `--requirements 2026-07-28`) against its reference server,
once directly and once through `loom serve --http`: every scenario must pass on both sides.

    direct:   suite --HTTP 2026-07-28--> reference server (Python SDK 2.x, its HTTP mode)
    loom:     suite --HTTP 2026-07-28--> loom --stdio, 2026-07-28--> reference server as `test`

The reference server (conformance.py) has every tool, prompt and resource the suite calls —
among them the tools that answer `input_required` (which loom passes on, §4.6, §5.11) and the one
that refuses a client without sampling with JSON-RPC error -32021 and its `data`, which
`server-stateless` expects through loom as that same error (loom passes a server's JSON-RPC error
to tools/call on as it came, §5.6).
Behind loom its `test_` names are shortened (servers/conformance_server.py), so the suite calls
the names it knows.

The scenarios test loom's own 2026-07-28 face too: no sessions (`server-stateless`), the standard
headers (`http-header-validation`, `http-custom-header-server-validation`), caching hints, the
removed methods, resource-not-found codes, DNS rebinding protection.

Scenarios that cannot pass, each with a test of its stated reason:
- `json-schema-2020-12` (NAMING_ARTEFACTS): its tool has no `test_` name, and through loom the
  suite finds it only as `test_json_schema_2020_12_tool`.
- The tasks extension's scenarios (TASKS_EXTENSION), which `--requirements 2026-07-28` runs
  unscored besides the listed ones: the reference server has no tasks extension and none of the
  tools they call, so they fail directly. They are compared check by check instead: every check
  that passes directly must pass through loom, except where the server answered a call to a tool
  it does not have with an isError result (which the check took for an answer) and loom, for
  the same unknown tool, with JSON-RPC error -32602 (SPEC §5.5).
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conformance import (
    NAMING_ARTEFACTS,
    SUITE_2026_JS,
    Run,
    assert_naming_artefact,
    assert_passes_directly_and_through_loom,
    assert_scenarios_ran,
    list_scenarios,
    loom_config,
    reference_server_command,
    run_suite,
    stop,
    tooling_missing,
    verdict,
    wait_listening,
)
from conftest import LOOM_BIN, free_port

SUITE_TIMEOUT = 600.0

# The scenarios of 2026-07-28: the ones it requires and the pending ones (json-schema-2020-12,
# the two header scenarios), all of which `--requirements 2026-07-28` runs.
LISTING = list_scenarios(SUITE_2026_JS, "--server", "--spec-version", "2026-07-28")

# The tasks extension's scenarios (SEP-2663), run but not listed for 2026-07-28 (they are listed
# as `[extension]`).
TASKS_EXTENSION = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]
# The tools they call, none of which the reference server has.
TASKS_FIXTURE_TOOLS = {
    "greet",
    "slow_compute",
    "failing_job",
    "protocol_error_job",
    "confirm_delete",
    "multi_input",
    "test_tool_with_task",
}

COMPARED = [s for s in LISTING.params if s not in NAMING_ARTEFACTS]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    LISTING.require()
    if (why := tooling_missing(SUITE_2026_JS)) is not None:
        pytest.skip(why)  # a failure under CI or LOOM_STRICT_TESTS=1 (conftest.py)
    base = tmp_path_factory.mktemp("conformance-2026")
    requirements = ("--requirements", "2026-07-28")
    out: dict[str, Run] = {}

    # Directly: the server's own Streamable HTTP.
    port = free_port()
    log = base / "server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            reference_server_command("--http", str(port)),
            stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        wait_listening(port, server, log)
        (base / "direct").mkdir()
        url = f"http://127.0.0.1:{port}/mcp"
        out["direct"] = run_suite(SUITE_2026_JS, url, base / "direct", *requirements, label="directly", timeout=SUITE_TIMEOUT, log=log)
    finally:
        stop(server)

    # Through loom: the server on stdio, spoken to in 2026-07-28.
    config = loom_config(base / "loom.config.json", protocol="2026-07-28")
    port = free_port()
    log = base / "loom.log"
    with log.open("wb") as sink:
        loom = subprocess.Popen(
            [str(LOOM_BIN), "serve", "--http", f"127.0.0.1:{port}", "--config", str(config)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink,
            env={**os.environ, "LOOM_LOG": os.environ.get("LOOM_LOG", "warn")}, start_new_session=True,
        )  # fmt: skip
    try:
        wait_listening(port, loom, log)
        (base / "loom").mkdir()
        url = f"http://127.0.0.1:{port}/mcp"
        out["loom"] = run_suite(SUITE_2026_JS, url, base / "loom", *requirements, label="through loom", timeout=SUITE_TIMEOUT, log=log)
    finally:
        stop(loom)
    return out


def test_the_suite_ran_every_listed_scenario_on_both_sides(runs: dict[str, Run]) -> None:
    assert_scenarios_ran(runs, LISTING, *TASKS_EXTENSION)
    assert set(NAMING_ARTEFACTS) <= set(LISTING.scenarios), f"exempt but no longer listed: {sorted(set(NAMING_ARTEFACTS) - set(LISTING.scenarios))}"


@pytest.mark.parametrize("scenario", COMPARED)
def test_a_scenario_passes_directly_and_through_loom(runs: dict[str, Run], scenario: str) -> None:
    LISTING.require()
    assert_passes_directly_and_through_loom(runs["direct"], runs["loom"], scenario, detail=runs["loom"].log_tail())


@pytest.mark.parametrize("scenario", sorted(NAMING_ARTEFACTS))
def test_naming_artefact_is_what_it_claims(runs: dict[str, Run], scenario: str) -> None:
    assert_naming_artefact(runs["direct"], runs["loom"], scenario)


def test_the_reference_server_has_no_tasks_extension(runs: dict[str, Run]) -> None:
    """The reason the tasks scenarios cannot pass directly: the server lists none of their tools
    and declares no extension. Once it has them, they belong among the compared scenarios."""
    listing = {c.get("id"): c for c in verdict(runs["direct"], "tools-list").checks}["tools-list"]
    listed = set((listing.get("details") or {}).get("tools") or [])
    assert listed, f"the tools-list scenario no longer shows the tools it saw: {listing}"
    assert not TASKS_FIXTURE_TOOLS & listed, (
        f"the reference server lists {sorted(TASKS_FIXTURE_TOOLS & listed)} now: compare the tasks scenarios"
    )
    advertised = {c.get("id"): c for c in verdict(runs["direct"], "tasks-capability-negotiation").checks}["tasks-extension-advertised"]
    assert advertised.get("status") == "FAILURE", f"the reference server declares the tasks extension now: {advertised}"


def _loom_unknown_fixture_tool(check: dict) -> bool:
    """Whether the check failed on loom's -32602 for one of the tools the server does not have."""
    message = str(check.get("errorMessage") or "")
    return any(message.startswith(f"unknown tool `{tool}`") for tool in TASKS_FIXTURE_TOOLS)


@pytest.mark.parametrize("scenario", TASKS_EXTENSION)
def test_a_tasks_scenario_keeps_through_loom_every_check_passing_directly(runs: dict[str, Run], scenario: str) -> None:
    direct = {c.get("id"): c for c in verdict(runs["direct"], scenario).checks}
    through = {c.get("id"): c for c in verdict(runs["loom"], scenario).checks}
    lost = [
        through.get(check_id) or {"id": check_id, "errorMessage": "not run through loom"}
        for check_id, check in direct.items()
        if check.get("status") == "SUCCESS"
        and (through.get(check_id) or {}).get("status") != "SUCCESS"
        and not _loom_unknown_fixture_tool(through.get(check_id) or {})
    ]
    assert not lost, f"`{scenario}`: checks passing directly but failing through loom:\n" + "\n".join(
        json.dumps(c)[:1500] for c in lost
    )
