"""Several `loom serve --http` instances behind Debian's HAProxy, configured with README's own
block ("Several instances behind one URL"), through the official Python SDK 2.x:

    SDK 2.x (2026-07-28 and legacy) --HTTP--> haproxy --HTTP--> loom ×3 --stdio--> Python server

These instances have no `cluster` store, so, as README says, the balancer keeps each credential
on one instance (README's block with `balance hdr(Authorization)`): each credential stays on one
instance (its datasets are answered there, in both eras), different credentials spread over the
instances, a 2025 session sticks to the instance that opened it, HAProxy's health checks use
`GET /healthz`, and when an instance dies its credentials move to the others (what they held
there is gone, and loom says so). With a store, README's block as written (round-robin) is
tested in test_cluster_store.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Iterator

import httpx2
import pytest

from conftest import PATIENCE, PY, Setup, free_port
from dataplane_clients import DataSetup
from test_http_serve import connect_http, serve_http

pytestmark = pytest.mark.anyio

HAPROXY_BIN = os.environ.get("HAPROXY_BIN", "/usr/sbin/haproxy")
README = Path(__file__).resolve().parents[2] / "README.md"
INSTANCES = 3
# Eight credentials: `http.tokens` of every instance.
TOKENS = [f"cluster-token-{i}-{'abcdefgh'[i]}7f3" for i in range(8)]


def readme_haproxy_config() -> str:
    """README's HAProxy block, as written."""
    text = README.read_text()
    _, _, after = text.partition("<!-- tested: haproxy -->")
    found = re.search(r"```text\n(.*?)```", after, re.S)
    assert found, "README has no HAProxy block after <!-- tested: haproxy -->"
    return found[1]


@contextmanager
def haproxy(backends: list[str], tmp: Path, balance: str | None = None) -> Iterator[str]:
    """README's configuration with its bind address and its servers replaced by local ones (and
    its `balance` algorithm by `balance`, when given); the balancer's MCP URL."""
    if not Path(HAPROXY_BIN).is_file():
        raise RuntimeError(f"{HAPROXY_BIN} is missing: install Debian's `haproxy` package (.ci/setup-interop does)")
    config = readme_haproxy_config()
    port = free_port()
    config, binds = re.subn(r"(?m)^(\s*bind) \S+", rf"\1 127.0.0.1:{port}", config)
    assert binds == 1, config
    servers = iter(backends)
    config, count = re.subn(r"(?m)^(\s*server \S+) \S+", lambda m: f"{m[1]} {next(servers)}", config)
    assert count == len(backends), config
    if balance is not None:
        config, swapped = re.subn(r"(?m)^(\s*balance) .+$", rf"\1 {balance}", config)
        assert swapped == 1, config
    path = tmp / "haproxy.cfg"
    path.write_text(config)
    log = (tmp / "haproxy.stderr").open("wb")
    process = subprocess.Popen([HAPROXY_BIN, "-db", "-f", str(path)], stdout=log, stderr=log)
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        wait_for(lambda: up_servers(url, backends) == len(backends), "haproxy to see every instance up")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=PATIENCE)
        log.close()


def up_servers(url: str, backends: list[str]) -> int:
    """How many backends answer `GET /healthz` (asked of each directly, as HAProxy's checks
    ask), or 0 while the balancer itself does not answer yet."""
    count = 0
    for backend in backends:
        try:
            count += httpx2.get(f"http://{backend}/healthz", timeout=2).status_code == 200
        except httpx2.HTTPError:
            pass
    try:
        httpx2.get(url.removesuffix("/mcp") + "/healthz", timeout=2)
    except httpx2.HTTPError:
        return 0
    return count


def wait_for(check, what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def audit_subjects(path: Path) -> list[str]:
    if not path.exists():
        return []
    return [json.loads(line)["subject"] for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def web(setup: Setup) -> DataSetup:
    return DataSetup(tmp=setup.tmp, fs_root=setup.fs_root, servers=dict(setup.servers), enabled=[PY], env=dict(setup.env))


@pytest.fixture
def cluster(web, tmp_path):
    """Three instances (one config each: its own audit log) and README's HAProxy in front,
    balancing on the credential as README says to without a store."""
    web.use(PY)
    web.env.update({f"LOOM_CLUSTER_TOKEN_{i}": token for i, token in enumerate(TOKENS)})
    with ExitStack() as stack:
        looms = []
        for n in range(INSTANCES):
            web.options["http"] = {"tokens": [f"${{LOOM_CLUSTER_TOKEN_{i}}}" for i in range(len(TOKENS))]}
            web.options["audit"] = {"path": str(tmp_path / f"audit-{n}.jsonl")}
            looms.append(stack.enter_context(serve_http(web)))
        backends = [loom.url.removeprefix("http://").removesuffix("/mcp") for loom in looms]
        url = stack.enter_context(haproxy(backends, tmp_path, balance="hdr(Authorization)"))
        yield url, looms, [tmp_path / f"audit-{n}.jsonl" for n in range(INSTANCES)]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def instance_of(audits: list[Path], subject_calls: int, before: list[int]) -> int:
    """The one instance whose audit log grew by the calls just made (every line of it)."""
    grown = [len(audit_subjects(path)) - count for path, count in zip(audits, before)]
    assert sorted(grown)[:-1] == [0] * (len(grown) - 1) and grown[grown.index(max(grown))] >= subject_calls, grown
    return grown.index(max(grown))


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_a_credential_stays_on_one_instance_and_its_datasets_answer(cluster, mode):
    url, looms, audits = cluster
    homes = set()
    for token in TOKENS[:4]:
        before = [len(audit_subjects(path)) for path in audits]
        async with connect_http(url, mode, headers=bearer(token)) as client:
            envelope = await client.call_tool(f"{PY}_inventory", {"count": 2000})
            ref = envelope.structured_content["ref"]
            for _ in range(5):
                answer = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
                assert not answer.is_error, answer
                assert answer.structured_content["rows"] == [{"n": 2000}]
        homes.add(instance_of(audits, 6, before))
    # Different credentials are spread (the hash of these four tokens lands on more than one).
    assert len(homes) > 1, homes


async def test_an_instance_that_dies_hands_its_credentials_to_the_others(cluster):
    url, looms, audits = cluster
    token = TOKENS[5]
    before = [len(audit_subjects(path)) for path in audits]
    async with connect_http(url, "2026-07-28", headers=bearer(token)) as client:
        envelope = await client.call_tool(f"{PY}_inventory", {"count": 2000})
        ref = envelope.structured_content["ref"]
    home = instance_of(audits, 1, before)
    looms[home].process.kill()
    looms[home].process.wait()
    # The balancer's health checks (`GET /healthz`, README: inter 1s fall 2) take it out.
    time.sleep(3)
    async with connect_http(url, "2026-07-28", headers=bearer(token)) as client:
        echoed = await client.call_tool(f"{PY}_add", {"a": 2, "b": 40})
        assert echoed.structured_content == {"result": 42}
        gone = await client.call_tool("loom_query", {"sql": f"SELECT count(*) FROM {ref}"})
        assert gone.is_error
        assert ref in gone.content[0].text


async def test_health_checks_reach_loom_s_healthz(cluster):
    url, looms, _ = cluster
    # Each instance's /healthz answers without a token, as HAProxy's check asks it.
    for loom in looms:
        answer = httpx2.get(loom.url.removesuffix("/mcp") + "/healthz", timeout=PATIENCE)
        assert answer.status_code == 200 and answer.json()["servers"][PY] == "healthy"
    # Through the balancer too (it forwards any path).
    through = httpx2.get(url.removesuffix("/mcp") + "/healthz", timeout=PATIENCE)
    assert through.status_code == 200 and through.json()["status"] == "serving"
