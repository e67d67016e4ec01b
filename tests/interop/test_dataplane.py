"""loom's data plane used through the official Python clients: the Python SDK 2.x in both of its
modes and the Python SDK 1.x (dataplane_clients.py). Each test is one loom session, as a model
would use it: a large tabular result comes back as an envelope, and loom's own tools (loom_query,
loom_describe, loom_list_datasets, loom_materialize, loom_export) work on what it holds.

A client that raises on anything loom sends fails the test: envelopes and loom's own results must
be valid for every client (2026-07-28 wants `resultType` on every result; 1.x and 2.x validate a
result against a tool's listed outputSchema).
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from typing import Any

import jsonschema
import pytest

from conftest import FS, LOOM_OUTPUT_SCHEMA_META, MEMORY, PY
from dataplane_clients import (
    CLIENTS,
    CRM,
    SALES_ROWS,
    DataClient,
    assert_envelope,
    assert_error,
    assert_ok,
    columns,
    dp,  # noqa: F401 - fixture
    open_client,
    sales_rows,
    sample,
    text_of,
)

pytestmark = pytest.mark.anyio

COUNTRIES = ["DE", "FR", "JP", "US", "BR"]
PLANS = ["free", "pro", "team"]

# The columns of the fixture's `rows` tool, as loom types them (SPEC §9.2).
USER_COLUMNS = {
    "id": "Int64",
    "name": "Utf8",
    "email": "Utf8",
    "score": "Float64",
    "active": "Boolean",
    "created": "Timestamp(µs, UTC)",
    "country": "Utf8",
    "plan": "Utf8",
    "tags": "List(Utf8)",
    "manager_id": "Int64",
    "balance": "Float64",
}


def user(i: int) -> dict[str, Any]:
    """Row `i` of the fixture's `rows` tool (src/bin/loom-fixture.rs), as loom's typed values."""
    return {
        "id": i,
        "name": f"user-{i}",
        "email": f"user-{i}@example.com",
        "score": i * 1.5,
        "active": i % 2 == 0,
        "created": f"2024-{1 + (i // 28) % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
        "country": COUNTRIES[i % 5],
        "plan": PLANS[i % 3],
        "tags": [f"t{i % 7}", f"g{i % 3}"],
        "manager_id": None if i % 10 == 0 else i // 10,
        "balance": (i % 1000) + 0.25,
    }


@pytest.fixture(params=CLIENTS)
def client_kind(request: pytest.FixtureRequest) -> str:
    return request.param


async def query(client: DataClient, sql: str) -> dict[str, Any]:
    """loom_query's inline answer ({columns, rowCount, rows})."""
    answer = assert_ok(await client.call("loom_query", {"sql": sql}), f"loom_query {sql}")
    assert "rows" in answer, f"loom_query {sql}: not an inline answer: {answer}"
    return answer


async def users(client: DataClient, count: int) -> dict[str, Any]:
    return assert_envelope(await client.call(f"{CRM}_rows", {"count": count}), f"{CRM}_rows {count}")


async def test_large_tabular_result_becomes_an_envelope(dp, client_kind):
    async with open_client(client_kind, dp) as client:
        expected = {"sdk2-auto": "2026-07-28", "sdk2-2026-07-28": "2026-07-28", "sdk2-legacy": "2025-11-25", "sdk1": "2025-11-25"}
        assert client.protocol_version == expected[client_kind]
        envelope = await users(client, 3000)
        assert envelope["ref"] == "ds_crm_rows_1"
        assert envelope["rows"] == 3000
        assert columns(envelope) == USER_COLUMNS
        rows = sample(envelope)
        assert rows == [user(i) for i in range(len(rows))]
        assert envelope["approxTokensSaved"] > 100_000
        provenance = envelope["provenance"]
        assert (provenance["server"], provenance["tool"]) == (CRM, "rows")
        assert (provenance["args"], provenance["source"]) == ({"count": 3000}, "json_text")
        # The usage example is a loom_query call that runs as written.
        tool, _, arguments = envelope["usage"].partition(" ")
        assert tool == "loom_query"
        assert (await query(client, json.loads(arguments)["sql"]))["rowCount"] > 0

        # A small result of the same tool passes through as the server sent it.
        small = await client.call(f"{CRM}_rows", {"count": 3})
        assert not small.get("isError")
        assert json.loads(text_of(small)) == [user(i) for i in range(3)]


async def test_loom_query_answers_inline_and_keeps_a_large_answer(dp, client_kind):
    async with open_client(client_kind, dp) as client:
        ref = (await users(client, 3000))["ref"]
        totals = await query(client, f"SELECT count(*) AS n, sum(id) AS s, count(manager_id) AS m FROM {ref}")
        assert totals["rows"] == [{"n": 3000, "s": sum(range(3000)), "m": 2700}]
        assert totals["columns"] == [{"name": "n", "type": "Int64"}, {"name": "s", "type": "Int64"}, {"name": "m", "type": "Int64"}]
        by_plan = await query(client, f"SELECT plan, count(*) AS n FROM {ref} GROUP BY plan ORDER BY plan")
        assert by_plan["rows"] == [{"plan": "free", "n": 1000}, {"plan": "pro", "n": 1000}, {"plan": "team", "n": 1000}]
        inline = await query(client, "SELECT * FROM (VALUES (1, 'a'), (2, 'b')) AS t(id, label) ORDER BY id")
        assert (inline["rowCount"], inline["rows"]) == (2, [{"id": 1, "label": "a"}, {"id": 2, "label": "b"}])

        # Too large to answer inline: kept as an implicit dataset, answered with its envelope.
        kept = assert_envelope(
            await client.call("loom_query", {"sql": f"SELECT id, name, country FROM {ref} WHERE active"}),
            "a large loom_query",
        )
        assert kept["ref"] == "ds_query_result_1"
        assert kept["rows"] == 1500
        assert columns(kept) == {"id": "Int64", "name": "Utf8", "country": "Utf8"}
        assert (kept["provenance"]["tool"], kept["provenance"]["source"]) == ("loom_query", "query")
        again = await query(client, f"SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM {kept['ref']}")
        assert again["rows"] == [{"n": 1500, "lo": 0, "hi": 2998}]


async def test_describe_and_list_datasets(dp, client_kind):
    async with open_client(client_kind, dp) as client:
        listed = assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets")
        assert listed == {"datasets": [], "total": 0}
        ref = (await users(client, 2000))["ref"]
        orders = assert_envelope(await client.call(f"{CRM}_orders", {"count": 4000, "users": 2000}), "crm_orders")

        described = assert_ok(await client.call("loom_describe", {"ref": ref}), "loom_describe")
        assert columns(described) == USER_COLUMNS
        assert described["sample"] == [user(i) for i in range(10)]
        assert described["provenance"]["args"] == {"count": 2000}

        listed = assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets")
        summary = [(d["ref"], d["rows"], d["columns"], d["server"], d["tool"]) for d in listed["datasets"]]
        assert summary == [(ref, 2000, 11, CRM, "rows"), (orders["ref"], 4000, 4, CRM, "orders")]
        assert not any(d["implicit"] or d["pinned"] for d in listed["datasets"])


async def test_materialize_and_export(dp, client_kind):
    async with open_client(client_kind, dp) as client:
        ref = (await users(client, 3000))["ref"]
        view = assert_envelope(
            await client.call(
                "loom_materialize",
                {"sql": f"SELECT country, count(*) AS n, sum(balance) AS total FROM {ref} GROUP BY country", "name": "By Country"},
            ),
            "loom_materialize",
        )
        assert view["ref"] == "ds_view_by_country"
        assert view["rows"] == 5
        assert columns(view) == {"country": "Utf8", "n": "Int64", "total": "Float64"}
        listed = assert_ok(await client.call("loom_list_datasets", {}), "loom_list_datasets")
        assert {d["ref"]: d["pinned"] for d in listed["datasets"]} == {ref: False, view["ref"]: True}

        exported = assert_ok(
            await client.call("loom_export", {"ref": view["ref"], "format": "csv", "filename": "countries"}),
            "loom_export csv",
        )
        path = dp.export_dir / "countries.csv"
        assert exported["path"] == str(path)
        assert (exported["rows"], exported["format"]) == (5, "csv")
        data = path.read_bytes()
        assert exported["bytes"] == len(data)
        lines = data.decode().split("\r\n")
        assert lines[0] == "country,n,total" and lines[-1] == ""
        got = {row["country"]: (int(row["n"]), float(row["total"])) for row in csv.DictReader(io.StringIO(data.decode()))}
        want: dict[str, tuple[int, float]] = {}
        for i in range(3000):
            n, total = want.get(COUNTRIES[i % 5], (0, 0.0))
            want[COUNTRIES[i % 5]] = (n + 1, total + user(i)["balance"])
        assert got.keys() == want.keys()
        for country, (n, total) in want.items():
            assert got[country][0] == n and got[country][1] == pytest.approx(total), country

        exported = assert_ok(await client.call("loom_export", {"ref": ref, "format": "json"}), "loom_export json")
        path = dp.export_dir / f"{ref}.json"
        assert exported["path"] == str(path)
        rows = json.loads(path.read_text())
        assert len(rows) == exported["rows"] == 3000
        assert rows[:20] == [user(i) for i in range(20)]

        again = await client.call("loom_export", {"ref": ref, "format": "json"})
        assert_error(again, "a second export to the same file", "already exists", "overwrite")
        assert len(json.loads(path.read_text())) == 3000


async def test_formatted_text_results_become_datasets(dp, client_kind):
    """A CSV file read through server-filesystem (text plus a {content} structuredContent, under an
    outputSchema) and a markdown table from a Python SDK tool (text plus {"result": text})."""
    async with open_client(client_kind, dp) as client:
        sales = assert_envelope(
            await client.call(f"{FS}_read_text_file", {"path": str(dp.fs_root / "sales.csv")}),
            "read_text_file sales.csv",
        )
        assert sales["provenance"]["source"] == "csv"
        assert (sales["provenance"]["server"], sales["provenance"]["tool"]) == (FS, "read_text_file")
        assert sales["rows"] == SALES_ROWS
        assert "context" not in sales, sales["context"]  # {content: <the text>} is a copy, dropped
        assert columns(sales) == {
            "order_id": "Int64",
            "customer": "Utf8",
            "region": "Utf8",
            "amount": "Float64",
            "placed_on": "Date32",
        }
        first = sales_rows()[0]
        assert sample(sales)[0] == {**first, "amount": float(first["amount"])}
        got = await query(
            client, f"SELECT region, count(*) AS n FROM {sales['ref']} WHERE customer LIKE 'Smith, %' GROUP BY region ORDER BY region"
        )
        smiths = Counter(row["region"] for row in sales_rows() if row["customer"].startswith("Smith, "))
        assert smiths, "sales.csv has no quoted customer names"
        assert {row["region"]: row["n"] for row in got["rows"]} == smiths

        report = assert_envelope(await client.call(f"{PY}_sales_report", {"weeks": 300}), "sales_report")
        assert report["provenance"]["source"] == "markdown"
        # The line above the table is kept; the {"result": text} copy of the text is dropped.
        assert report["context"] == {"residue": {"before": "Weekly sales:"}}
        assert report["rows"] == 300
        assert columns(report) == {"week": "Int64", "region": "Utf8", "orders": "Int64", "revenue": "Float64"}
        total = await query(client, f"SELECT sum(revenue) AS revenue, max(week) AS weeks FROM {report['ref']}")
        assert total["rows"] == [{"revenue": sum(week * 12.5 for week in range(1, 301)), "weeks": 300}]


async def test_tool_with_output_schema_and_large_structured_content(dp, client_kind):
    """SPEC §5.3: a server tool with an outputSchema is listed without it (kept under
    `_meta["io.loom/outputSchema"]`), so no client validates an envelope against it; a result that
    passes through still matches the server's schema."""
    async with open_client(client_kind, dp) as client:
        tools = {tool["name"]: tool for tool in await client.list_tools()}
        inventory = tools[f"{PY}_inventory"]
        assert "outputSchema" not in inventory, inventory
        schema = (inventory.get("_meta") or {}).get(LOOM_OUTPUT_SCHEMA_META)
        assert schema is not None and set(schema["properties"]) == {"total", "items"}, inventory
        for name, tool in tools.items():
            if not name.startswith("loom_"):
                assert "outputSchema" not in tool, f"{name} is listed with an outputSchema"

        envelope = assert_envelope(await client.call(f"{PY}_inventory", {"count": 2000}), "inventory 2000")
        assert envelope["provenance"]["source"] == "structuredContent"
        assert envelope["rows"] == 2000
        assert envelope["context"] == {"total": 2000}
        assert columns(envelope) == {"sku": "Utf8", "name": "Utf8", "quantity": "Int64", "price": "Float64", "warehouse": "Utf8"}
        stock = await query(client, f"SELECT warehouse, sum(quantity) AS q FROM {envelope['ref']} GROUP BY warehouse ORDER BY warehouse")
        want = {w: sum((i * 7) % 100 for i in range(2000) if i % 4 == k) for k, w in enumerate(["north", "south", "east", "west"])}
        assert stock["rows"] == [{"warehouse": w, "q": want[w]} for w in sorted(want)]

        small = await client.call(f"{PY}_inventory", {"count": 3})
        assert not small.get("isError"), text_of(small)
        assert small["structuredContent"]["total"] == 3
        jsonschema.validate(small["structuredContent"], schema)

        # The fixture's `structured` tool (also with an outputSchema) is small: passed through.
        structured = await client.call(f"{CRM}_structured", {})
        assert structured["structuredContent"] == {"total": 2, "items": [{"id": 1}, {"id": 2}]}
        jsonschema.validate(structured["structuredContent"], tools[f"{CRM}_structured"]["_meta"][LOOM_OUTPUT_SCHEMA_META])


async def test_error_results(dp, client_kind):
    async with open_client(client_kind, dp) as client:
        # The server's own isError result passes through (its JSON-RPC errors pass as errors,
        # SPEC §5.6: test_server_errors.py).
        assert_error(await client.call(f"{CRM}_fail", {"message": "the crm is down"}), "crm_fail", "the crm is down")
        assert_error(await client.call(f"{PY}_fail", {"reason": "no stock"}), "py_fail", "no stock")
        # loom's own tools: errors that say what to do (SPEC §12).
        text = assert_error(await client.call("loom_query", {"sql": "SELECT 1 FROM ds_nope"}), "unknown table", "loom_query:")
        assert "this session holds no datasets: a ref belongs to the session" in text
        ref = (await users(client, 2500))["ref"]
        assert_error(await client.call("loom_query", {"sql": f"DROP TABLE {ref}"}), "DROP", "loom_query: refused")
        assert_error(await client.call("loom_query", {}), "no sql", "loom_query: missing argument `sql`", '{"sql": "SELECT')
        assert_error(await client.call("loom_query", {"sql": 5}), "sql not a string", "loom_query:", '{"sql": "SELECT')
        assert_error(await client.call("loom_describe", {"ref": "ds_nope"}), "describe unknown", "loom_describe: no dataset `ds_nope`", ref)
        assert_error(await client.call("loom_export", {"ref": ref, "format": "xlsx"}), "export xlsx", "loom_export", "csv")
        assert_error(
            await client.call("loom_export", {"ref": ref, "format": "csv", "filename": "../escape"}),
            "export outside exportDir",
            "loom_export: filename",
        )
        assert not (dp.tmp / "escape.csv").exists()
        # loom is still fine afterwards.
        assert (await query(client, f"SELECT count(*) AS n FROM {ref}"))["rows"] == [{"n": 2500}]


async def test_secrets_in_arguments_are_not_kept_and_exports_keep_their_extension(dp, client_kind):
    """Arguments are redacted before they are stored (SPEC §13): key names and token shapes, and
    a URL keeps all but its password. An export's name must end in its format's extension (§15)."""
    async with open_client(client_kind, dp) as client:
        # The envelope shows three arguments: two calls of three each.
        first = {"count": 2500, "db_pass": "hunter2", "access_key": "abc"}
        second = {"count": 2400, "note": "sk_live_51Habcdefghijklmn", "source": "postgres://app:s3cr3t@db.internal:5432/crm"}
        envelope = assert_envelope(await client.call(f"{CRM}_rows", first), "rows with secrets")
        assert envelope["provenance"]["args"] == {"count": 2500, "db_pass": "[redacted]", "access_key": "[redacted]"}
        other = assert_envelope(await client.call(f"{CRM}_rows", second), "rows with secrets")
        assert other["provenance"]["args"] == {
            "count": 2400,
            "note": "[redacted]",
            "source": "postgres://app:[redacted]@db.internal:5432/crm",
        }
        for ref in [envelope["ref"], other["ref"]]:
            described = json.dumps(assert_ok(await client.call("loom_describe", {"ref": ref}), "describe"))
            assert "hunter2" not in described and "s3cr3t" not in described and "sk_live" not in described
        for name in ["conftest.py", "index.html"]:
            text = assert_error(
                await client.call("loom_export", {"ref": envelope["ref"], "format": "csv", "filename": name}),
                f"export {name}",
                "does not end in `.csv`",
            )
            assert name in text
            assert not (dp.export_dir / name).exists()


@pytest.mark.parametrize("client_kind", ["sdk1"])
async def test_a_twelve_mb_result_reaches_the_client_as_an_envelope(dp, client_kind):
    """60,000 rows are about 12 MB of JSON from the server. The 1.x SDK reads a line that long
    slowly (it re-joins its read buffer for every chunk; straight from the fixture this took 6.6 s
    here); through loom it gets a small envelope, and the numbers are exact. (Only the 1.x client:
    what reaches the client does not depend on which client it is, and this costs ~10 s in a
    debug build.)"""
    async with open_client(client_kind, dp) as client:
        envelope = await users(client, 60_000)
        assert envelope["rows"] == 60_000
        totals = await query(client, f"SELECT count(DISTINCT email) AS emails, sum(id) AS s FROM {envelope['ref']}")
        assert totals["rows"] == [{"emails": 60_000, "s": sum(range(60_000))}]


def _people(count: int) -> list[dict[str, Any]]:
    return [
        {"name": f"person-{i}", "entityType": "team" if i % 3 == 0 else "person", "observations": [f"likes {i % 7}"]}
        for i in range(count)
    ]


async def test_a_result_with_two_tables_becomes_two_datasets(dp, client_kind):
    """server-memory's read_graph: {entities, relations} as structuredContent (under an
    outputSchema) and the same graph pretty-printed as text; one envelope lists both tables."""
    dp.use(MEMORY)
    async with open_client(client_kind, dp) as client:
        created = await client.call(f"{MEMORY}_create_entities", {"entities": _people(300)})
        assert not created.get("isError"), text_of(created)
        relations = [{"from": f"person-{i}", "to": f"person-{(i * 7) % 300}", "relationType": "knows"} for i in range(300)]
        related = await client.call(f"{MEMORY}_create_relations", {"relations": relations})
        assert not related.get("isError"), text_of(related)

        envelope = assert_envelope(await client.call(f"{MEMORY}_read_graph", {}), "read_graph")
        assert envelope["provenance"]["source"] == "structuredContent"
        tables = {d["path"]: d for d in envelope["datasets"]}
        assert {path: d["rows"] for path, d in tables.items()} == {"entities": 300, "relations": 300}
        assert columns(tables["entities"]) == {"name": "Utf8", "entityType": "Utf8", "observations": "List(Utf8)"}
        entities, links = tables["entities"]["ref"], tables["relations"]["ref"]
        teams = await query(
            client,
            f'SELECT count(*) AS n FROM {links} JOIN {entities} ON {links}."to" = {entities}.name '
            f"WHERE {entities}.\"entityType\" = 'team'",
        )
        assert teams["rows"] == [{"n": sum(1 for i in range(300) if (i * 7) % 300 % 3 == 0)}]


async def test_a_pretty_printed_copy_of_a_table_is_not_kept_as_text(dp):
    """server-memory's create_entities sends the created entities twice: the array pretty-printed
    as text, and `{"entities": [...]}` compact as structuredContent (SPEC §8.3: a text block equal
    to a table's rows is a copy)."""
    dp.use(MEMORY)
    async with open_client("sdk2-legacy", dp) as client:
        created = await client.call(f"{MEMORY}_create_entities", {"entities": _people(300)})
        assert_envelope(created, "create_entities")
