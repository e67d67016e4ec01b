"""Several `loom serve --http` instances sharing one store (`cluster`, SPEC §25), through the
official Python SDK 2.x, the store both a directory and S3 on moto:

    SDK 2.x --HTTP--> loom ×3 (each directly, or behind Debian's HAProxy) --stdio--> Python server
                        \\____ one store: ROOT/scope=S/… (Parquet + entries) ____/

What the issue's acceptance asks of datasets: a ref minted on one instance is answered by every
instance (query, describe, listing), a join of datasets minted on two instances equals the
server's own data joined, the instance that minted a dataset can die (SIGKILL) and the next query
is still answered, another credential never sees a scope on any instance, a ref outlives its
session (a new 2025 session, a new stdio process), refs are unique across instances; bad input:
a secret that differs, a store written by a newer loom, a store that becomes unreachable (local
datasets keep working, the error names the store), `loom check` naming `cluster.store` and
`cluster.secret`. Then what stays on one instance and is reached from the others: a call
waiting for input (its retries on other instances, a replayed, forged or tampered
`requestState`, the holding instance killed), a task of the tasks extension; README's HAProxy
block as written (round-robin); and a PostgreSQL-backed server (npm server-postgres over a
database of the test's own): a join of results minted on two instances equals the database's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from conftest import LOOM_BIN, PATIENCE, PY, REPO_ROOT, connect_loom
from test_cluster import TOKENS, audit_subjects, bearer, haproxy, web  # noqa: F401 (web: fixture)
from test_http_serve import _big_text_of, connect_http, serve_http
from test_protocol_2026 import Callbacks

pytestmark = pytest.mark.anyio

INSTANCES = 3
SECRET = "interop-cluster-secret-" + "5e" * 20
DATA_PYTHON = REPO_ROOT / ".ci" / "venv-data" / "bin" / "python"
MOTO = REPO_ROOT / "tests" / "engines" / "moto_server.py"
SURVEY = f"{PY}_survey"  # asks a name (elicitation), a model's word (sampling), the roots, in turn
MOTO_KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


@dataclass
class Store:
    url: str
    env: dict[str, str]
    moto: subprocess.Popen | None = None
    folder: Path | None = None

    def cut_off(self) -> None:
        """The store stops answering (S3: its server ends)."""
        assert self.moto is not None, "only the S3 store can be cut off here"
        self.moto.kill()
        self.moto.wait()


@contextmanager
def store_of(kind: str, tmp: Path) -> Iterator[Store]:
    if kind == "directory":
        folder = tmp / "cluster-store"
        yield Store(url=str(folder), env={}, folder=folder)
        return
    if not DATA_PYTHON.exists():
        raise RuntimeError(f"{DATA_PYTHON} is missing: run .ci/setup-data (it installs moto, the S3 server these tests start)")
    process = subprocess.Popen([str(DATA_PYTHON), str(MOTO)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().split()[0])
        endpoint = f"http://127.0.0.1:{port}"
        assert httpx2.put(f"{endpoint}/loom-cluster", timeout=PATIENCE).status_code == 200
        yield Store(url="s3://loom-cluster/team", env={**MOTO_KEYS, "AWS_ENDPOINT_URL": endpoint}, moto=process)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


@dataclass
class Cluster:
    looms: list[Any]
    audits: list[Path]
    store: Store
    web: Any

    def url(self, n: int) -> str:
        return self.looms[n].url


def configure(web, tmp: Path, store: Store, n: int, secret: str = SECRET) -> None:
    web.env.update({f"LOOM_CLUSTER_TOKEN_{i}": token for i, token in enumerate(TOKENS)})
    web.env.update(store.env)
    web.env["LOOM_CLUSTER_SECRET"] = secret
    web.options["http"] = {"tokens": [f"${{LOOM_CLUSTER_TOKEN_{i}}}" for i in range(len(TOKENS))]}
    web.options["audit"] = {"path": str(tmp / f"audit-{n}.jsonl")}
    web.options["cluster"] = {"store": store.url, "secret": "${LOOM_CLUSTER_SECRET}"}
    web.options["exportDir"] = str(tmp / f"exports-{n}")


@pytest.fixture(params=["directory", "s3"])
def shared(request, web, tmp_path) -> Iterator[Cluster]:
    web.use(PY)
    with ExitStack() as stack:
        store = stack.enter_context(store_of(request.param, tmp_path))
        looms = []
        for n in range(INSTANCES):
            configure(web, tmp_path, store, n)
            looms.append(stack.enter_context(serve_http(web)))
        yield Cluster(looms=looms, audits=[tmp_path / f"audit-{n}.jsonl" for n in range(INSTANCES)], store=store, web=web)


def number_of(ref: str) -> int:
    return int(ref.rsplit("_", 1)[1])


async def mint(url: str, token: str, count: int, mode: str = "2026-07-28") -> str:
    async with connect_http(url, mode, headers=bearer(token)) as client:
        envelope = await client.call_tool(f"{PY}_inventory", {"count": count})
        assert not envelope.is_error, envelope
        return envelope.structured_content["ref"]


async def query(url: str, token: str, sql: str, mode: str = "2026-07-28") -> Any:
    async with connect_http(url, mode, headers=bearer(token)) as client:
        return await client.call_tool("loom_query", {"sql": sql})


def inventory(count: int) -> list[dict[str, Any]]:
    """What the Python server's `inventory` returns (its own data, computed as it does)."""
    warehouses = ["north", "south", "east", "west"]  # python_server.WAREHOUSES
    return [
        {"sku": f"SKU-{i:05d}", "quantity": (i * 7) % 100, "warehouse": warehouses[i % len(warehouses)]}
        for i in range(count)
    ]


async def test_a_dataset_minted_on_one_instance_is_answered_by_every_instance(shared):
    token = TOKENS[0]
    ref = await mint(shared.url(0), token, 2000)
    # Every instance answers it, the one that minted it included; describe and the listing too.
    for n in range(INSTANCES):
        answer = await query(shared.url(n), token, f"SELECT count(*) AS n, sum(quantity) AS q FROM {ref}")
        assert not answer.is_error, answer
        expected = sum(row["quantity"] for row in inventory(2000))
        assert answer.structured_content["rows"] == [{"n": 2000, "q": expected}]
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(token)) as client:
        described = await client.call_tool("loom_describe", {"ref": ref})
        assert not described.is_error, described
        assert described.structured_content["rows"] == 2000
    # A fresh instance session lists it before it holds it: held elsewhere, in the store.
    ref_b = await mint(shared.url(1), token, 300)
    async with connect_http(shared.url(2), "legacy", headers=bearer(token)) as client:
        listed = await client.call_tool("loom_list_datasets", {})
        assert not listed.is_error, listed
        found = {d["ref"]: d for d in listed.structured_content["datasets"]}
        assert ref in found and ref_b in found, found
        assert "clusterStore" not in listed.structured_content
    # Refs are unique across instances: the second instance numbered from another block.
    assert ref != ref_b and number_of(ref) // 1000 != number_of(ref_b) // 1000, (ref, ref_b)


async def test_a_join_of_datasets_minted_on_two_instances_equals_the_data_joined(shared):
    token = TOKENS[1]
    left = await mint(shared.url(0), token, 1500)
    right = await mint(shared.url(1), token, 900)
    sql = (
        f"SELECT l.warehouse, count(*) AS n, sum(l.quantity + r.quantity) AS q FROM {left} l "
        f"JOIN {right} r ON l.sku = r.sku GROUP BY l.warehouse ORDER BY l.warehouse"
    )
    answer = await query(shared.url(2), token, sql)
    assert not answer.is_error, answer
    right_rows = {row["sku"]: row for row in inventory(900)}
    expected: dict[str, dict[str, Any]] = {}
    for row in inventory(1500):
        other = right_rows.get(row["sku"])
        if other is None:
            continue
        group = expected.setdefault(row["warehouse"], {"warehouse": row["warehouse"], "n": 0, "q": 0})
        group["n"] += 1
        group["q"] += row["quantity"] + other["quantity"]
    assert answer.structured_content["rows"] == [expected[k] for k in sorted(expected)]


async def test_a_new_envelope_s_join_hints_name_a_dataset_minted_on_another_instance(shared):
    token = TOKENS[3]
    first = await mint(shared.url(0), token, 2000)
    async with connect_http(shared.url(1), "2026-07-28", headers=bearer(token)) as client:
        envelope = (await client.call_tool(f"{PY}_inventory", {"count": 500})).structured_content
        hints = [h for h in envelope.get("joinHints", []) if h["ref"] == first and h["column"] == "sku"]
        assert hints and hints[0]["otherColumn"] == "sku", envelope.get("joinHints")
        assert hints[0]["containment"] == 1.0, hints
        # Its example joins, on this instance, the two datasets.
        example = hints[0]["example"].removesuffix(" LIMIT 10")
        joined = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM ({example})"})
        assert not joined.is_error and joined.structured_content["rows"] == [{"n": 500}], joined
    # Another credential's envelope never names it.
    async with connect_http(shared.url(1), "2026-07-28", headers=bearer(TOKENS[4])) as client:
        theirs = (await client.call_tool(f"{PY}_inventory", {"count": 500})).structured_content
        assert all(h["ref"] != first for h in theirs.get("joinHints", [])), theirs.get("joinHints")


async def test_a_view_materialized_on_one_instance_is_answered_by_the_others_and_its_name_is_taken(shared):
    token = TOKENS[2]
    ref = await mint(shared.url(0), token, 2000)
    async with connect_http(shared.url(0), "2026-07-28", headers=bearer(token)) as client:
        made = await client.call_tool("loom_materialize", {"sql": f"SELECT warehouse, sum(quantity) AS stock FROM {ref} GROUP BY warehouse", "name": "stock"})
    assert not made.is_error, made
    view = made.structured_content["ref"]
    assert view == "ds_view_stock", made.structured_content
    expected = {}
    for row in inventory(2000):
        expected[row["warehouse"]] = expected.get(row["warehouse"], 0) + row["quantity"]
    answer = await query(shared.url(1), token, f"SELECT warehouse, stock FROM {view} ORDER BY warehouse")
    assert answer.structured_content["rows"] == [{"warehouse": w, "stock": expected[w]} for w in sorted(expected)], answer
    # The name is the scope's: another instance cannot make another view under it.
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(token)) as client:
        again = await client.call_tool("loom_materialize", {"sql": f"SELECT * FROM {ref} LIMIT 1", "name": "stock"})
    assert again.is_error and "already exists" in again.content[0].text, again


async def test_another_credential_never_sees_a_scope_on_any_instance(shared):
    ref = await mint(shared.url(0), TOKENS[2], 1200)
    for n in range(INSTANCES):
        refused = await query(shared.url(n), TOKENS[3], f"SELECT count(*) FROM {ref}")
        assert refused.is_error, refused
        async with connect_http(shared.url(n), "2026-07-28", headers=bearer(TOKENS[3])) as client:
            listed = await client.call_tool("loom_list_datasets", {})
            assert ref not in json.dumps(listed.structured_content)
            described = await client.call_tool("loom_describe", {"ref": ref})
            assert described.is_error
    # Nothing in the store names the token.
    if shared.store.folder is not None:
        names = "\n".join(str(p) for p in shared.store.folder.rglob("*"))
        assert all(token not in names for token in TOKENS)


async def test_the_instance_that_minted_a_dataset_can_die(shared, tmp_path):
    token = TOKENS[4]
    ref = await mint(shared.url(0), token, 2000)
    shared.looms[0].process.kill()
    shared.looms[0].process.wait()
    for n in (1, 2):
        answer = await query(shared.url(n), token, f"SELECT count(*) AS n FROM {ref}")
        assert not answer.is_error, answer
        assert answer.structured_content["rows"] == [{"n": 2000}]


async def test_round_robin_through_the_balancer_every_instance_answers(shared, tmp_path):
    """README's HAProxy block as written (round-robin, 2025 sessions stuck on their header): one
    2026-07-28 client's requests land on every instance, each answers the dataset one of them
    minted, and an elicitation round trip — the SDK's own retries, each on the next instance —
    ends as it does on one loom; a 2025 session stays on one instance."""
    backends = [loom.url.removeprefix("http://").removesuffix("/mcp") for loom in shared.looms]
    with haproxy(backends, tmp_path) as url:
        token = TOKENS[5]
        before = [len(audit_subjects(path)) for path in shared.audits]
        asked = Callbacks()
        async with connect_http(url, "2026-07-28", headers=bearer(token), **asked.kwargs()) as client:
            envelope = await client.call_tool(f"{PY}_inventory", {"count": 2000})
            ref = envelope.structured_content["ref"]
            for _ in range(6):
                answer = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
                assert not answer.is_error, answer
                assert answer.structured_content["rows"] == [{"n": 2000}]
            surveyed = await client.call_tool(SURVEY, {"topic": "rivers"})
        assert [b.text for b in surveyed.content if b.type == "text"] == ["Ada|lyrical|file:///srv/project"], surveyed
        assert (len(asked.elicited), len(asked.sampled), asked.rooted) == (1, 1, 1)
        grown = [len(audit_subjects(path)) - count for path, count in zip(shared.audits, before)]
        assert all(g > 0 for g in grown), grown
        # A 2025 session: every request of it on the instance that opened it.
        before = [len(audit_subjects(path)) for path in shared.audits]
        async with connect_http(url, "legacy", headers=bearer(token)) as client:
            for _ in range(6):
                answer = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
                assert answer.structured_content["rows"] == [{"n": 2000}], answer
        grown = [len(audit_subjects(path)) - count for path, count in zip(shared.audits, before)]
        assert sorted(grown)[:2] == [0, 0] and max(grown) >= 6, grown


async def test_a_ref_outlives_its_session(shared):
    token = TOKENS[6]
    ref = await mint(shared.url(0), token, 1000, mode="legacy")
    # A new 2025 session (a new Mcp-Session-Id) on the same instance, and on another.
    for n in (0, 1):
        answer = await query(shared.url(n), token, f"SELECT count(*) AS n FROM {ref}", mode="legacy")
        assert not answer.is_error, answer
        assert answer.structured_content["rows"] == [{"n": 1000}]


def loom_start_fails(web, tmp: Path, store: Store, secret: str) -> str:
    """Start one more instance; it must exit; what it said."""
    configure(web, tmp, store, 9, secret=secret)
    config = web.write_config()
    done = subprocess.run(
        [str(LOOM_BIN), "serve", "--http", "127.0.0.1:0", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=PATIENCE,
        env={**os.environ, **web.env},
    )
    assert done.returncode != 0, done.stderr
    return done.stderr


def loom_check(web, tmp: Path, store: Store, secret: str) -> subprocess.CompletedProcess:
    configure(web, tmp, store, 9, secret=secret)
    config = web.write_config()
    return subprocess.run(
        [str(LOOM_BIN), "check", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env={**os.environ, **web.env},
    )


async def test_a_different_secret_or_a_newer_store_is_refused_by_name(shared, tmp_path):
    other = "another-secret-of-enough-length-" + "ab" * 8
    said = loom_start_fails(shared.web, tmp_path, shared.store, other)
    assert "cluster.secret differs" in said, said
    checked = loom_check(shared.web, tmp_path, shared.store, other)
    assert checked.returncode == 2 and "cluster.secret differs" in checked.stderr, checked
    checked = loom_check(shared.web, tmp_path, shared.store, SECRET)
    assert checked.returncode == 0 and "set up with this secret" in checked.stdout, checked
    assert SECRET not in checked.stdout + checked.stderr
    if shared.store.folder is not None:
        # A store set up by a newer loom: refused with its version.
        path = shared.store.folder / "cluster.json"
        data = json.loads(path.read_text())
        path.write_text(json.dumps({**data, "layout": 7, "loomVersion": "9.1.0"}))
        said = loom_start_fails(shared.web, tmp_path, shared.store, SECRET)
        assert "loom 9.1.0 (layout 7)" in said and "upgrade" in said, said


async def test_loom_check_names_what_the_cluster_block_lacks(web, tmp_path):
    web.use(PY)
    unreachable = Store(url="s3://loom-cluster/team", env={**MOTO_KEYS, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"})
    checked = loom_check(web, tmp_path, unreachable, SECRET)
    assert checked.returncode == 2, checked
    assert "cluster.store" in checked.stderr and "cannot reach" in checked.stderr, checked.stderr
    folder = Store(url=str(tmp_path / "fresh-store"), env={})
    checked = loom_check(web, tmp_path, folder, "too-short")
    assert checked.returncode == 2 and "cluster.secret" in checked.stderr and "at least 32" in checked.stderr, checked
    checked = loom_check(web, tmp_path, folder, SECRET)
    assert checked.returncode == 0 and "not set up yet" in checked.stdout, checked
    # The check leaves nothing behind: the first instance sets the store up.
    assert not (tmp_path / "fresh-store" / "cluster.json").exists()


@pytest.mark.parametrize("shared", ["s3"], indirect=True)
async def test_a_store_that_becomes_unreachable_is_named_and_local_datasets_keep_working(shared):
    token = TOKENS[7]
    elsewhere = await mint(shared.url(1), token, 500)
    async with connect_http(shared.url(0), "2026-07-28", headers=bearer(token)) as client:
        shared.store.cut_off()
        envelope = await client.call_tool(f"{PY}_inventory", {"count": 2000})
        assert not envelope.is_error, envelope
        ref = envelope.structured_content["ref"]
        local = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
        assert not local.is_error and local.structured_content["rows"] == [{"n": 2000}], local
        remote = await client.call_tool("loom_query", {"sql": f"SELECT count(*) FROM {elsewhere}"})
        assert remote.is_error, remote
        assert "cluster.store" in remote.content[0].text and "cannot reach" in remote.content[0].text, remote
        listed = await client.call_tool("loom_list_datasets", {})
        assert not listed.is_error, listed
        assert ref in json.dumps(listed.structured_content["datasets"])
        assert "cannot reach" in listed.structured_content["clusterStore"], listed.structured_content
    assert "cluster store" in shared.looms[0].stderr()


async def test_a_new_stdio_process_opens_a_ref_an_earlier_one_was_given(web, tmp_path):
    """langchain-mcp-adapters' default opens a new session — a new loom process — for every tool
    call: with a store, the ref of one call is answered by the next process."""
    web.use(PY)
    web.options["cluster"] = {"store": str(tmp_path / "store"), "secret": "${LOOM_CLUSTER_SECRET}"}
    web.env["LOOM_CLUSTER_SECRET"] = SECRET
    async with connect_loom(web, mode="legacy") as client:
        envelope = await client.call_tool(f"{PY}_inventory", {"count": 2000})
        ref = envelope.structured_content["ref"]
    for mode in ("2026-07-28", "legacy"):
        async with connect_loom(web, mode=mode) as client:
            answer = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
            assert not answer.is_error, answer
            assert answer.structured_content["rows"] == [{"n": 2000}]
            again = await client.call_tool(f"{PY}_inventory", {"count": 2000})
            assert number_of(again.structured_content["ref"]) > 1000, again.structured_content["ref"]


async def test_a_reduced_page_s_original_is_read_on_another_instance(shared):
    """The firewall's document (`doc_…`, the original of a reduced result) is in the store too:
    `loom_read` on another instance gives it back whole, page by page, and SQL reads its lines."""
    big_text_of = _big_text_of
    token = TOKENS[0]
    async with connect_http(shared.url(0), "2026-07-28", headers=bearer(token)) as client:
        reduced = await client.call_tool(f"{PY}_big_text", {"size": 60_000})
        assert not reduced.is_error, reduced
        header = reduced.content[0].text.split("\n", 1)[0]
        found = re.search(r'full original: loom_read\("(doc_\d+)"\)', header)
        assert found, header
        ref = found[1]
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(token)) as client:
        pages, offset = [], 0
        while True:
            page = await client.call_tool("loom_read", {"ref": ref, "offset": offset})
            assert not page.is_error, page
            pages.append(page.content[0].text)
            position = page.structured_content
            if "nextOffset" not in position:
                break
            offset = position["nextOffset"]
        assert "".join(pages) == big_text_of(60_000)
        lines = await client.call_tool("loom_query", {"sql": f"SELECT count(*) AS n FROM {ref}"})
        assert not lines.is_error, lines
        assert lines.structured_content["rows"] == [{"n": big_text_of(60_000).count("\n") + 1}]


def stored_bytes(store: Store, url: str) -> bytes:
    """An object of the store, read as a user would (the folder, or S3 over HTTP)."""
    if store.folder is not None:
        assert url.startswith("file://"), url
        return Path(url.removeprefix("file://")).read_bytes()
    assert url.startswith("s3://loom-cluster/"), url
    bucket, _, key = url.removeprefix("s3://").partition("/")
    # boto3 (in the venv that has moto) signs the request as any S3 client would.
    script = (
        "import boto3, sys; s3 = boto3.client('s3', endpoint_url=sys.argv[1]); "
        "sys.stdout.buffer.write(s3.get_object(Bucket=sys.argv[2], Key=sys.argv[3])['Body'].read())"
    )
    done = subprocess.run(
        [str(DATA_PYTHON), "-c", script, store.env["AWS_ENDPOINT_URL"], bucket, key],
        capture_output=True,
        timeout=PATIENCE,
        env={**os.environ, **store.env},
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return done.stdout


async def test_an_export_is_copied_to_the_store_under_its_scope(shared):
    token = TOKENS[1]
    ref = await mint(shared.url(0), token, 1200)
    async with connect_http(shared.url(1), "2026-07-28", headers=bearer(token)) as client:
        exported = await client.call_tool("loom_export", {"ref": ref, "format": "csv", "filename": "stock.csv"})
        assert not exported.is_error, exported
        written = exported.structured_content
        assert written["rows"] == 1200 and "storeError" not in written, written
        assert "/scope=" in written["stored"] and written["stored"].endswith("/exports/stock.csv"), written
        assert json.loads(exported.content[0].text) == written
        assert stored_bytes(shared.store, written["stored"]) == Path(written["path"]).read_bytes()
    # Another session (here, on another instance) does not replace it unasked.
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(token)) as client:
        again = await client.call_tool("loom_export", {"ref": ref, "format": "csv", "filename": "stock.csv"})
        assert not again.is_error, again
        assert "already" in again.structured_content["storeError"] and "overwrite" in again.structured_content["storeError"]
        smaller = (await client.call_tool(f"{PY}_inventory", {"count": 300})).structured_content["ref"]
        replaced = await client.call_tool("loom_export", {"ref": smaller, "format": "csv", "filename": "stock.csv", "overwrite": True})
        assert replaced.structured_content["rows"] == 300, replaced
        assert replaced.structured_content["stored"] == written["stored"], replaced
        assert stored_bytes(shared.store, written["stored"]) == Path(replaced.structured_content["path"]).read_bytes()
    # Another credential's exports are elsewhere.
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(TOKENS[2])) as client:
        other_ref = await client.call_tool(f"{PY}_inventory", {"count": 1500})
        theirs = await client.call_tool("loom_export", {"ref": other_ref.structured_content["ref"], "format": "csv", "filename": "stock.csv"})
        assert "storeError" not in theirs.structured_content, theirs
        assert theirs.structured_content["stored"] != written["stored"]


@pytest.mark.parametrize("shared", ["directory"], indirect=True)
async def test_other_engines_read_the_store(shared):
    """The store is the snapshot layout (SPEC §25): DuckDB and DataFusion (from .ci/venv-data)
    read every dataset of a scope with Hive partitioning, the rows the client was told of."""
    ref = await mint(shared.url(0), TOKENS[3], 1700)
    other = await mint(shared.url(1), TOKENS[3], 400)
    assert shared.store.folder is not None
    pattern = f"{shared.store.folder}/scope=*/server=*/tool=*/ref=*/*.parquet"
    script = (
        "import sys, duckdb, datafusion\n"
        "rows = duckdb.sql(f\"SELECT ref, count(*) FROM read_parquet('{sys.argv[1]}', hive_partitioning = true) GROUP BY ref ORDER BY ref\").fetchall()\n"
        "print(dict(rows))\n"
        "ctx = datafusion.SessionContext()\n"
        "print(sum(ctx.read_parquet(path).count() for path in sys.argv[2:]))\n"
    )
    files = sorted(str(p) for p in shared.store.folder.glob("scope=*/server=*/tool=*/ref=*/*.parquet"))
    done = subprocess.run([str(DATA_PYTHON), "-c", script, pattern, *files], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    by_ref, total = done.stdout.strip().splitlines()
    assert json.loads(by_ref.replace("'", '"')) == {ref: 1700, other: 400}
    assert int(total) == 2100


# --- Calls that wait for input, and tasks, across instances (SPEC §25) ----------------------------



def answers_to(asked: types.InputRequiredResult) -> dict[str, Any]:
    """The answers a person (and their model and roots) give to whatever `asked` asks."""
    out: dict[str, Any] = {}
    for key, request in (asked.input_requests or {}).items():
        if isinstance(request, types.ElicitRequest):
            out[key] = types.ElicitResult(action="accept", content={"name": "Ada"})
        elif isinstance(request, types.CreateMessageRequest):
            out[key] = types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text="lyrical"), model="m")
        else:
            out[key] = types.ListRootsResult(roots=[types.Root(uri="file:///srv/project")])
    return out


@asynccontextmanager
async def asking_client(url: str, token: str):
    """A 2026-07-28 client that can be asked anything (it declares elicitation, sampling, roots)."""
    async with connect_http(url, "2026-07-28", headers=bearer(token), **Callbacks().kwargs()) as client:
        yield client.session


async def retry(url: str, token: str, asked: types.InputRequiredResult) -> Any:
    async with asking_client(url, token) as session:
        return await session.call_tool(SURVEY, {"topic": "rivers"}, request_state=asked.request_state, input_responses=answers_to(asked), allow_input_required=True)


async def refused(url: str, token: str, state: str, answers: dict[str, Any]) -> str:
    async with asking_client(url, token) as session:
        with pytest.raises(MCPError) as caught:
            await session.call_tool(SURVEY, {"topic": "rivers"}, request_state=state, input_responses=answers, allow_input_required=True)
    assert caught.value.code == -32602, caught.value.error
    return caught.value.error.message


async def test_each_retry_of_a_waiting_call_may_land_on_another_instance(shared):
    """The server's call stays open on the instance that started it; the client's retries, each on
    another instance, are forwarded there: the answers reach the server and the call finishes as
    it does on one instance."""
    token = TOKENS[1]
    async with asking_client(shared.url(0), token) as session:
        asked = await session.call_tool(SURVEY, {"topic": "rivers"}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult), asked
    first = asked
    rounds = 0
    for n in (1, 2, 1, 2):
        result = await retry(shared.url(n), token, asked)
        rounds += 1
        if not isinstance(result, types.InputRequiredResult):
            break
        asked = result
    assert isinstance(result, types.CallToolResult) and not result.is_error, result
    assert [b.text for b in result.content if b.type == "text"] == ["Ada|lyrical|file:///srv/project"], result
    assert rounds == 3, rounds
    assert "io.loom/retried" not in (result.meta or {})
    # One retry per state in the whole cluster: the first state again, on any instance, is refused.
    for n in (0, 2):
        assert "unknown or expired" in await refused(shared.url(n), token, first.request_state, answers_to(first))


async def test_a_forged_or_tampered_or_foreign_request_state_is_refused(shared):
    token = TOKENS[2]
    async with asking_client(shared.url(0), token) as session:
        asked = await session.call_tool(SURVEY, {"topic": "rivers"}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult), asked
    state = asked.request_state
    assert state.startswith("loom1."), state
    flipped = state[:-3] + ("A" if state[-3] != "A" else "B") + state[-2:]
    answers = answers_to(asked)
    for bad in (flipped, "loom1." + "A" * 80, "f" * 32):
        for n in (0, 1):
            assert "unknown or expired" in await refused(shared.url(n), token, bad, answers)
    # Another credential presenting it, on the instance that holds it and on another.
    for n in (0, 1):
        assert "unknown or expired" in await refused(shared.url(n), TOKENS[3], state, answers)
    # Another call (other arguments) with it, on another instance.
    async with asking_client(shared.url(1), token) as session:
        with pytest.raises(MCPError) as caught:
            await session.call_tool(SURVEY, {"topic": "seas"}, request_state=state, input_responses=answers, allow_input_required=True)
    assert caught.value.code == -32602
    # A client that sends loom's own forwarding header itself is not taken for an instance.
    envelope = {**TASKS_ENVELOPE, "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": SURVEY, "arguments": {"topic": "rivers"}, "requestState": state, "_meta": envelope}}
    headers = {**bearer(token), "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": SURVEY, "Accept": "application/json", "Loom-Forwarded": "from-a-friend"}
    posed = httpx2.post(shared.url(1), json=body, headers=headers, timeout=PATIENCE)
    assert posed.status_code == 421, posed.text
    # None of that used it up: the real retry still goes on.
    result = await retry(shared.url(2), token, asked)
    assert isinstance(result, types.InputRequiredResult), result


async def test_when_the_instance_holding_a_waiting_call_dies_the_retry_starts_over_and_says_so(shared):
    token = TOKENS[5]
    async with asking_client(shared.url(0), token) as session:
        asked = await session.call_tool(SURVEY, {"topic": "rivers"}, allow_input_required=True)
    assert isinstance(asked, types.InputRequiredResult), asked
    shared.looms[0].process.kill()
    shared.looms[0].process.wait()
    again = await retry(shared.url(1), token, asked)
    # Made again from the start: the server asks its first question again, and loom says why.
    assert isinstance(again, types.InputRequiredResult), again
    assert "made the call again from the start" in (again.meta or {}).get("io.loom/retried", ""), again
    assert [type(r) for r in again.input_requests.values()] == [type(r) for r in asked.input_requests.values()]
    # Once: the same state on the third instance is refused.
    assert "unknown or expired" in await refused(shared.url(2), token, asked.request_state, answers_to(asked))
    result = again
    for n in (2, 1, 2):
        result = await retry(shared.url(n), token, result)
        if not isinstance(result, types.InputRequiredResult):
            break
    assert isinstance(result, types.CallToolResult), result
    assert [b.text for b in result.content if b.type == "text"] == ["Ada|lyrical|file:///srv/project"], result


TASKS_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw-tasks", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


def rpc(url: str, token: str, method: str, params: dict[str, Any], name: str | None = None) -> dict[str, Any]:
    """One 2026-07-28 request of a client that declares the tasks extension (no SDK has it yet)."""
    headers = {**bearer(token), "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Accept": "application/json", "Content-Type": "application/json"}
    if name is not None:
        headers["Mcp-Name"] = name
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": TASKS_ENVELOPE}}
    answer = httpx2.post(url, json=body, headers=headers, timeout=PATIENCE)
    message = answer.json()
    # 2026-07-28's statuses: 200 for results, 400 for an invalid request (-32602 among them).
    assert answer.status_code == (400 if message.get("error", {}).get("code") == -32602 else 200), answer.text
    assert message["id"] == 7, message
    return message


@pytest.fixture
def tasked(web, tmp_path) -> Iterator[Cluster]:
    """The cluster of `shared` (directory store) with servers/task_server.py as `tasks`."""
    from test_tasks import TASK_SERVER

    web.servers["tasks"] = {"command": sys.executable, "args": [str(TASK_SERVER)], "env": {}}
    web.use(PY, "tasks")
    with ExitStack() as stack:
        store = stack.enter_context(store_of("directory", tmp_path))
        looms = []
        for n in range(INSTANCES):
            configure(web, tmp_path, store, n)
            looms.append(stack.enter_context(serve_http(web)))
        yield Cluster(looms=looms, audits=[], store=store, web=web)


def task_of(message: dict[str, Any]) -> dict[str, Any]:
    assert "result" in message, message
    return message["result"]


async def test_a_task_created_on_one_instance_is_read_and_cancelled_on_the_others(tasked):
    token = TOKENS[0]
    created = task_of(rpc(tasked.url(0), token, "tools/call", {"name": "tasks_table_report", "arguments": {"rows": 3000}}, name="tasks_table_report"))
    assert created["resultType"] == "task", created
    task = created["taskId"]
    deadline = time.monotonic() + PATIENCE
    while True:
        got = task_of(rpc(tasked.url(1 + int(time.monotonic() * 10) % 2), token, "tasks/get", {"taskId": task}, name=task))
        if got["status"] != "working":
            break
        assert time.monotonic() < deadline, got
        time.sleep(0.1)
    assert got["status"] == "completed", got
    envelope = got["result"]["structuredContent"]
    assert envelope["kind"] == "loom_dataset_ref" and envelope["rows"] == 3000, envelope
    # The envelope's ref is answered by every instance.
    for n in range(INSTANCES):
        answer = await query(tasked.url(n), token, f"SELECT count(*) AS n FROM {envelope['ref']}")
        assert answer.structured_content["rows"] == [{"n": 3000}], answer

    held = task_of(rpc(tasked.url(2), token, "tools/call", {"name": "tasks_held_report", "arguments": {}}, name="tasks_held_report"))["taskId"]
    assert task_of(rpc(tasked.url(0), token, "tasks/get", {"taskId": held}, name=held))["status"] == "working"
    rpc(tasked.url(1), token, "tasks/cancel", {"taskId": held}, name=held)
    assert task_of(rpc(tasked.url(0), token, "tasks/get", {"taskId": held}, name=held))["status"] == "cancelled"
    # Another credential does not find it on any instance.
    for n in range(INSTANCES):
        refused = rpc(tasked.url(n), TOKENS[1], "tasks/get", {"taskId": held}, name=held)
        assert refused["error"]["code"] == -32602 and "unknown task" in refused["error"]["message"], refused

    # The instance holding a task dies: the others say the task ended with it.
    lost = task_of(rpc(tasked.url(0), token, "tools/call", {"name": "tasks_held_report", "arguments": {}}, name="tasks_held_report"))["taskId"]
    tasked.looms[0].process.kill()
    tasked.looms[0].process.wait()
    gone = rpc(tasked.url(1), token, "tasks/get", {"taskId": lost}, name=lost)
    assert gone["error"]["code"] == -32602 and "does not answer any more" in gone["error"]["message"], gone


# --- A PostgreSQL-backed server behind the instances ------------------------------------------

SHOP = """
CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, region text NOT NULL);
INSERT INTO customers SELECT i, 'customer ' || i, (ARRAY['north','south','east','west'])[1 + i % 4] FROM generate_series(1, 400) AS i;
CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers, cents int NOT NULL);
INSERT INTO orders SELECT i, 1 + (i * 7) % 400, 100 + (i * 37) % 9000 FROM generate_series(1, 3000) AS i;
"""


@pytest.fixture
def with_postgres(web, tmp_path) -> Iterator[tuple[Cluster, Any]]:
    """Three instances over a directory store, in front of the npm server-postgres (`pg`, the
    reference MCP server for PostgreSQL) on a database of the test's own."""
    from conftest import MCP_PACKAGES, node_server
    from postgres import database

    with ExitStack() as stack:
        db = stack.enter_context(database("shop", SHOP))
        web.servers["pg"] = node_server(MCP_PACKAGES / "server-postgres" / "dist" / "index.js", db.url)
        web.use(PY, "pg")
        store = stack.enter_context(store_of("directory", tmp_path))
        looms = []
        for n in range(INSTANCES):
            configure(web, tmp_path, store, n)
            looms.append(stack.enter_context(serve_http(web)))
        yield Cluster(looms=looms, audits=[], store=store, web=web), db


async def test_a_join_of_database_results_minted_on_two_instances_equals_the_database_s_answer(with_postgres, tmp_path):
    """Through README's balancer (round-robin): the customers and the orders are minted by two
    different instances; their join, asked of each instance directly and of the balancer,
    equals the database's own answer."""
    shared, db = with_postgres
    token = TOKENS[7]
    backends = [loom.url.removeprefix("http://").removesuffix("/mcp") for loom in shared.looms]
    with haproxy(backends, tmp_path) as balancer:

        async def minted(sql: str) -> dict[str, Any]:
            async with connect_http(balancer, "2026-07-28", headers=bearer(token)) as client:
                envelope = await client.call_tool("pg_query", {"sql": sql})
            assert envelope.structured_content and envelope.structured_content.get("kind") == "loom_dataset_ref", envelope
            return envelope.structured_content

        customers = await minted("SELECT id, name, region FROM customers ORDER BY id")
        orders = await minted("SELECT id, customer_id, cents FROM orders ORDER BY id")
        # Round-robin: the orders are minted by another instance than the customers (another
        # block of refs), asked again should the balancer's turn have come round to the same one.
        block = lambda ref: (number_of(ref) - 1) // 1000  # noqa: E731
        for _ in range(6):
            if block(orders["ref"]) != block(customers["ref"]):
                break
            orders = await minted("SELECT id, customer_id, cents FROM orders ORDER BY id")
        assert block(orders["ref"]) != block(customers["ref"]), (customers["ref"], orders["ref"])
        await _join_equals_the_database(shared, db, token, customers, orders, balancer)


async def _join_equals_the_database(shared, db, token, customers, orders, balancer) -> None:
    assert (customers["rows"], orders["rows"]) == (400, 3000)
    joined = (
        "SELECT c.region, count(*) AS orders, sum(o.cents) AS cents FROM {orders} o JOIN {customers} c "
        "ON o.customer_id = c.id GROUP BY c.region ORDER BY c.region"
    )
    theirs = db.psql(joined.format(orders="orders", customers="customers"))
    expected = [{"region": region, "orders": int(n), "cents": int(cents)} for region, n, cents in theirs]
    assert len(expected) == 4, expected
    for url in [shared.url(n) for n in range(INSTANCES)] + [balancer]:
        answer = await query(url, token, joined.format(orders=orders["ref"], customers=customers["ref"]))
        assert not answer.is_error, answer
        assert answer.structured_content["rows"] == expected, (url, answer.structured_content)
    # The server's own error passes through as it came (bad SQL), on any instance.
    async with connect_http(shared.url(2), "2026-07-28", headers=bearer(token)) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("pg_query", {"sql": "SELEC 1"})
    assert "syntax error" in caught.value.error.message, caught.value.error
