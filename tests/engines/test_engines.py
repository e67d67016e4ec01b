"""Engines other than loom open a snapshot loom wrote, and give loom's answers.

Run by tests/integration/snapshot.rs (`engines_read_a_snapshot_with_loom_s_answers`) with:
  LOOM_SNAPSHOT_ROOT   the snapshot root (a directory)
  LOOM_SESSION_FOLDER  the session's folder under it (session_id=...)
  LOOM_EXPECTED        a JSON file: {"queries": [{"sql", "spark", "duckdb"}], "answers": [rows...],
                       "per_session": {session_id: rows of ds_crm_rows}}
Each engine reads the files as a user would: DataFusion through the catalog.sql loom wrote,
Spark through catalog.spark.sql, DuckDB through read_parquet over the Hive-style folders.
"""

import datetime
import decimal
import json
import os
import pathlib

import pytest

ROOT = pathlib.Path(os.environ.get("LOOM_SNAPSHOT_ROOT", "/nonexistent"))
SESSION = ROOT / os.environ.get("LOOM_SESSION_FOLDER", "none")
EXPECTED = json.loads(
    pathlib.Path(os.environ.get("LOOM_EXPECTED", "/nonexistent")).read_text()
    if "LOOM_EXPECTED" in os.environ
    else '{"queries": [], "answers": [], "per_session": {}}',
    parse_float=decimal.Decimal,
)


class Nanos(int):
    """A nanosecond timestamp as read from Arrow (Python's datetime stops at microseconds)."""


def value(v):
    """One cell in a form every engine's answer can be compared in."""
    if isinstance(v, Nanos):
        seconds, nanos = divmod(int(v), 1_000_000_000)
        stamp = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
        return f"{stamp.isoformat(timespec='seconds')}.{nanos:09d}"
    if isinstance(v, bool):
        # Kept apart from numbers: in Python True == 1.
        return "true" if v else "false"
    if v is None or isinstance(v, str):
        if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] == "T":
            seconds, _, fraction = v.rstrip("Z").partition(".")
            if len(fraction) > 6:  # nanoseconds: compared as text
                return f"{seconds}.{fraction:0<9}"
            return value(datetime.datetime.fromisoformat(v.replace("Z", "+00:00")))
        return v
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.isoformat(timespec="microseconds")
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, (int, float, decimal.Decimal)):
        number = decimal.Decimal(str(v)) if isinstance(v, float) else decimal.Decimal(v)
        # Sums of floats may differ in the last bits from engine to engine.
        return float(round(number, 6)) if number != number.to_integral_value() else int(number)
    if isinstance(v, (list, tuple)):
        return [value(x) for x in v]
    if isinstance(v, dict):
        return {k: value(x) for k, x in v.items()}
    if hasattr(v, "asDict"):  # a Spark Row inside a row
        return value(v.asDict(recursive=True))
    raise TypeError(f"unexpected {type(v)}: {v!r}")


def rows(records):
    return [[value(x) for x in r] for r in records]


def arrow_rows(table):
    """Rows of a pyarrow table; nanosecond timestamps as `Nanos`."""
    import pyarrow as pa

    columns = []
    for column in table.columns:
        if pa.types.is_timestamp(column.type) and column.type.unit == "ns":
            ints = column.cast(pa.timestamp("ns")).cast(pa.int64()).to_pylist()
            columns.append([None if i is None else Nanos(i) for i in ints])
        else:
            columns.append(column.to_pylist())
    return rows(zip(*columns))


def expected(i):
    return [[value(x) for x in r.values()] for r in EXPECTED["answers"][i]]


def statements(text):
    """The statements of a catalog file: comment lines dropped, split at `;` line ends."""
    body = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--"))
    return [s.strip() for s in body.split(";\n") if s.strip().rstrip(";")]


QUERIES = list(enumerate(EXPECTED["queries"]))


@pytest.fixture(scope="module")
def datafusion_ctx():
    from datafusion import SessionContext

    ctx = SessionContext()
    for statement in statements((SESSION / "catalog.sql").read_text()):
        ctx.sql(statement.rstrip(";")).collect()
    return ctx


@pytest.mark.parametrize("index,query", QUERIES, ids=[str(i) for i, _ in QUERIES])
def test_datafusion_reads_it_through_catalog_sql(datafusion_ctx, index, query):
    got = arrow_rows(datafusion_ctx.sql(query["sql"]).to_arrow_table())
    assert got == expected(index), query["sql"]


@pytest.fixture(scope="module")
def duckdb_con():
    import duckdb

    con = duckdb.connect()
    manifest = json.loads((SESSION / "manifest.json").read_text())
    for d in manifest["datasets"]:
        folder = (SESSION / d["file"]).parent
        con.execute(
            f'CREATE VIEW "{d["ref"]}" AS SELECT * EXCLUDE (session_id, server, tool, ref) '
            f"FROM read_parquet('{folder}/*.parquet', hive_partitioning = true)"
        )
    return con


@pytest.mark.parametrize("index,query", QUERIES, ids=[str(i) for i, _ in QUERIES])
def test_duckdb_reads_the_hive_folders(duckdb_con, index, query):
    if not query["duckdb"]:
        # Names that differ only in case are one name to DuckDB: it reads the first.
        assert arrow_rows(duckdb_con.sql(query["sql"]).to_arrow_table()) != expected(index)
        return
    got = arrow_rows(duckdb_con.sql(query["sql"]).to_arrow_table())
    assert got == expected(index), query["sql"]


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[1]")
        .appName("loom-snapshot-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    for statement in statements((SESSION / "catalog.spark.sql").read_text()):
        session.sql(statement.rstrip(";"))
    yield session
    session.stop()


@pytest.mark.parametrize("index,query", QUERIES, ids=[str(i) for i, _ in QUERIES])
def test_spark_reads_it_through_catalog_spark_sql(spark, index, query):
    if not query["spark"]:
        text = (SESSION / "catalog.spark.sql").read_text()
        table = query["sql"].split(" FROM ")[1].split()[0]
        assert f"-- `{table}` left out: column" in text
        return
    # Spark quotes identifiers with backticks; the queries use standard double quotes.
    sql = query["sql"].replace('"', "`")
    got = rows(spark.sql(sql).collect())
    assert got == expected(index), query["sql"]


def test_every_session_of_one_tool_at_once(spark, duckdb_con):
    """Spark and DuckDB read one tool's datasets of every session together, the partitions
    (session_id, server, tool, ref) as columns: the README's commands."""
    want = sorted([sid, n] for sid, n in EXPECTED["per_session"].items())
    frame = (
        spark.read.option("basePath", str(ROOT))
        .parquet(str(ROOT / "session_id=*" / "server=crm" / "tool=rows"))
        .groupBy("session_id")
        .count()
    )
    assert sorted([r["session_id"], r["count"]] for r in frame.collect()) == want
    got = duckdb_con.execute(
        f"SELECT session_id, count(*) FROM read_parquet('{ROOT}/session_id=*/server=crm/tool=rows/*/*.parquet', "
        "hive_partitioning = true) GROUP BY session_id"
    ).fetchall()
    assert sorted([sid, n] for sid, n in got) == want


def readme_blocks():
    """The README's engine examples: the Python block after each `<!-- tested: ENGINE -->`.

    Other tested blocks (HAProxy's configuration, tested by test_cluster.py) open with
    another language and are not this file's."""
    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    blocks = []
    for part in readme.split("<!-- tested: ")[1:]:
        engine, _, rest = part.partition(" -->")
        fence = rest.split("```", 1)[1]
        if not fence.startswith("python\n"):
            continue
        code = fence.removeprefix("python\n").split("```", 1)[0]
        blocks.append((engine, code))
    assert {e for e, _ in blocks} == {"spark", "datafusion", "duckdb"}, blocks
    return blocks


@pytest.mark.parametrize("engine,code", readme_blocks(), ids=[e for e, _ in readme_blocks()])
def test_readme_examples_run_as_written(spark, engine, code, capsys):
    """The README's code, with `root` and `session` pointing at this snapshot."""
    assert 'root = "/path/to/snapshots"' in code
    assert 'session = "session_id=' in code or engine == "duckdb"
    code = code.replace('root = "/path/to/snapshots"', f"root = {str(ROOT)!r}")
    code = code.replace(
        'session = "session_id=20261202T150357350Z-19081"', f"session = {SESSION.name!r}"
    )
    exec(compile(code, f"README.md ({engine})", "exec"), {})
    shown = capsys.readouterr().out
    # Each example prints a table: the plans of the session or the sessions of the root.
    assert "free" in shown or "session_id" in shown, shown
