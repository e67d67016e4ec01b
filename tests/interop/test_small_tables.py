"""Small tables stay queryable after they pass through (SPEC §8.4), with a real server: the
reference SQLite MCP server (mcp-server-sqlite from PyPI, which answers rows as Python reprs)
behind loom, through the official client in both of its modes. A 16-row `airlines` answer
passes through as it would directly; the 842-row `flights` answer becomes an envelope whose join
hints name the airlines; "flights per airline name" is answered exactly — checked against the
database itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import StdioServerParameters

from conftest import PASSTHROUGH_MODES, PATIENCE, REPO_ROOT, connect, connect_loom
from dataplane_clients import DataSetup

pytestmark = pytest.mark.anyio

SQLITE_SERVER = REPO_ROOT / ".ci" / "venv1" / "bin" / "mcp-server-sqlite"
SQ = "sq"
AIRLINES = 16
FLIGHTS = 842
JOIN = (
    "SELECT a.name AS name, count(*) AS n, sum(f.delay_minutes) AS delay FROM {flights} f "
    "JOIN {airlines} a ON f.airline_id = a.id GROUP BY a.name ORDER BY a.name"
)


def make_database(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE airlines (id INTEGER PRIMARY KEY, code TEXT, name TEXT)")
        db.execute(
            "CREATE TABLE flights (id INTEGER PRIMARY KEY, airline_id INTEGER, origin TEXT, dest TEXT, "
            "delay_minutes INTEGER)"
        )
        db.executemany(
            "INSERT INTO airlines VALUES (?, ?, ?)",
            [(i, f"A{i:02d}", f"Airline {chr(65 + i)}") for i in range(1, AIRLINES + 1)],
        )
        airports = ["BER", "CDG", "HND", "JFK", "GRU", "LHR", "MAD"]
        db.executemany(
            "INSERT INTO flights VALUES (?, ?, ?, ?, ?)",
            [
                (i, 1 + (i * 7) % AIRLINES, airports[i % 7], airports[(i * 3 + 1) % 7], (i * 37) % 180 - 20)
                for i in range(1, FLIGHTS + 1)
            ],
        )


@pytest.fixture
def airline_db(setup) -> DataSetup:
    if not SQLITE_SERVER.is_file():
        pytest.fail(f"{SQLITE_SERVER} is missing: run .ci/setup-interop")
    database = setup.tmp / "flights.db"
    make_database(database)
    servers = dict(setup.servers)
    servers[SQ] = {"command": str(SQLITE_SERVER), "args": ["--db-path", str(database)], "env": {}}
    return DataSetup(tmp=setup.tmp, fs_root=setup.fs_root, servers=servers, enabled=[SQ], env=dict(setup.env))


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content]


async def held(client: Any) -> list[dict[str, Any]]:
    return (await client.call_tool("loom_list_datasets", {})).structured_content["datasets"]


@pytest.mark.parametrize("mode", PASSTHROUGH_MODES)
async def test_a_small_table_that_passed_through_joins_a_large_one(airline_db, mode):
    database = airline_db.tmp / "flights.db"
    params = StdioServerParameters(command=str(SQLITE_SERVER), args=["--db-path", str(database)])
    async with connect(params, mode=mode, loom_like=True, quick_stop=True) as direct:
        own = await direct.call_tool("read_query", {"query": "SELECT * FROM airlines"})
    async with connect_loom(airline_db, mode) as client:
        airlines = await client.call_tool(f"{SQ}_read_query", {"query": "SELECT * FROM airlines"})
        # Passed through: what the client reads is what the server wrote.
        assert texts(airlines) == texts(own)
        assert texts(airlines)[0].startswith("[{'id': 1, 'code': 'A01'")
        with anyio.fail_after(PATIENCE):
            while not (kept := [d for d in await held(client) if d["passedThrough"]]):
                await anyio.sleep(0.05)
        assert [(d["rows"], d["server"], d["tool"]) for d in kept] == [(AIRLINES, SQ, "read_query")], kept
        small = kept[0]["ref"]

        flights = await client.call_tool(f"{SQ}_read_query", {"query": "SELECT * FROM flights"})
        envelope = flights.structured_content
        assert envelope["kind"] == "loom_dataset_ref" and envelope["rows"] == FLIGHTS, texts(flights)[0][:300]
        hint = next(h for h in envelope["joinHints"] if h["ref"] == small)
        assert (hint["column"], hint["otherColumn"]) == ("airline_id", "id"), hint
        assert hint["about"] == f"an earlier result of {AIRLINES} rows from {SQ}/read_query, passed to you whole", hint

        answer = await client.call_tool("loom_query", {"sql": JOIN.format(flights=envelope["ref"], airlines=small)})
        rows = answer.structured_content["rows"]
    with sqlite3.connect(database) as db:
        truth = [{"name": n, "n": c, "delay": d} for n, c, d in db.execute(JOIN.format(flights="flights", airlines="airlines"))]
    assert rows == truth
    assert len(rows) == AIRLINES and sum(r["n"] for r in rows) == FLIGHTS
