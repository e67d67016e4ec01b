#!/usr/bin/env python3
"""Writes the formatted-text corpus: NAME.txt and NAME.expected.json per case.

The expected verdicts are computed here from the data each text is made from (Python's own csv,
repr, json and string formatting), never from loom's reading of the text: the corpus test then
checks loom against an independent answer. Run from anywhere: `python3 make_corpus.py`.

A verdict is "passthrough" or
  {"rung": ..., "tables": [{"path"?: ..., "columns": [...], "rows": [[...], ...]}], "context": {...}}
with cells exactly as loom reads them before typing: strings for delimited, markdown and record
blocks (null for an empty cell, a quoted "" in CSV is the empty string), JSON values for NDJSON
and Python literals. In `context.dropped`, `reason` is only checked to be present.
"""

import csv
import io
import json
import os
import pprint
import random

HERE = os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20260728)
CASES = {}

FETCH_CUT = ("<error>Content truncated. Call the fetch tool with a start_index of {n} to get "
             "more content.</error>")


def case(name, text, expected):
    assert name not in CASES, name
    CASES[name] = (text, expected)


def table(columns, rows, path=None):
    t = {"columns": columns, "rows": rows}
    if path is not None:
        t["path"] = path
    return t


def verdict(rung, tables, context=None):
    return {"rung": rung, "tables": tables, "context": context or {}}


def distinct(names):
    taken, out = set(), []
    for name in names:
        key, n = name, 2
        while key in taken:
            key = f"{name}_{n}"
            n += 1
        taken.add(key)
        out.append(key)
    return out


def to_csv(header, rows, delimiter=",", terminator="\n"):
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=delimiter, lineterminator=terminator)
    w.writerow(header)
    for row in rows:
        w.writerow(["" if c is None else c for c in row])
    return buf.getvalue()


def json_rows(dicts):
    """Columns in first-seen order and rows of JSON values, as loom's rows read them."""
    columns = []
    for d in dicts:
        for k in d:
            if k not in columns:
                columns.append(k)
    plain = json.loads(json.dumps(dicts))
    return columns, [[d.get(c) for c in columns] for d in plain]


# ---------------------------------------------------------------- data

FIRST = ["Ada", "Grace", "Linus", "Barbara", "Ken", "Margaret", "Dennis", "Frances", "Edsger",
         "Radia", "José", "Zoë", "Søren", "Anaïs", "Björn"]
LAST = ["Lovelace", "Hopper", "Torvalds", "Liskov", "Thompson", "Hamilton", "Ritchie", "Allen",
        "Dijkstra", "Perlman", "García", "O'Neil", "Müller", "Nguyễn", "Smith, Jr."]
PLANS = ["free", "pro", "team", "enterprise"]
CITIES = ["Paris", "Berlin", "Lagos", "Lima", "Osaka", "Austin", "Québec", "São Paulo"]


def users(n, start=1):
    out = []
    for i in range(start, start + n):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        out.append({
            "id": str(i),
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{i}@example.com".replace("ö", "o"),
            "plan": rng.choice(PLANS),
            "score": f"{rng.randint(0, 999)}.{rng.randint(0, 99):02d}",
            "created": f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        })
    return out


def airports(n):
    codes = ["04G", "06A", "06C", "06N", "09J", "0A9", "0G6", "0G7", "0P2", "0S9", "0W3", "10C",
             "10N", "11R", "12C", "13A"]
    names = ["Lansdowne Airport", "Moton Field Municipal Airport", "Schaumburg Regional",
             "Randall Airport", "Jekyll Island Airport", "Elizabethton Municipal Airport",
             "Williams County Airport", "Finger Lakes Regional Airport", "Shoestring Aviation Airfield",
             "Jefferson County Intl", "Fort Wayne's \"Smith\" Field", "Galt Field Airport"]
    tz = ["America/New_York", "America/Chicago", None, "America/Los_Angeles"]
    out = []
    for i in range(n):
        out.append({
            "faa": codes[i % len(codes)] + ("" if i < len(codes) else str(i)),
            "name": rng.choice(names),
            "lat": round(rng.uniform(20, 60), 6),
            "lon": round(rng.uniform(-160, -60), 6),
            "alt": rng.randint(0, 5000),
            "tz": rng.choice([-5, -6, -7, -8, -9, -10]),
            "dst": rng.choice(["A", "N", "U"]),
            "tzone": rng.choice(tz),
        })
    return out


# ---------------------------------------------------------------- CSV / TSV / semicolon

def csv_case(name, header, rows, rung="csv", delimiter=",", terminator="\n", before=None,
             after=None):
    body = to_csv(header, rows, delimiter, terminator)
    text = (before + "\n" if before else "") + body + ("\n" + after + "\n" if after else "")
    ctx = {}
    residue = {}
    if before:
        residue["before"] = before.strip()
    if after:
        residue["after"] = after.strip()
    if residue:
        ctx["residue"] = residue
    case(name, text, verdict(rung, [table(distinct(header), [list(r) for r in rows])], ctx))


def user_rows(n, start=1):
    us = users(n, start)
    return list(us[0].keys()), [list(u.values()) for u in us]


h, r = user_rows(40)
csv_case("csv_users", h, r)
h, r = user_rows(25)
csv_case("csv_crlf", h, r, terminator="\r\n")
csv_case("csv_fetch_preamble", *user_rows(30),
         before="Contents of https://data.example.com/exports/users.csv:")
csv_case("csv_two_line_preamble", *user_rows(30),
         before="Content type text/csv cannot be simplified to markdown, but here is the raw content:\n"
                "Contents of https://data.example.com/users.csv:")
csv_case("csv_rows_trailer", *user_rows(20), after="(20 rows)")

rows = [
    ["1", "Smith, John", "He said \"hello\"", "42.50"],
    ["2", "O'Brien", "plain", "3.14"],
    ["3", "Lee, \"Bruce\"", "comma, inside, many", "0.99"],
    ["4", "Zoë", "", "100.00"],
] * 6
rows = [[str(i + 1)] + r[1:] for i, r in enumerate(rows)]
rows = [[c if c != "" else None for c in r] for r in rows]
csv_case("csv_quotes_and_commas", ["id", "customer", "remark", "amount"], rows)

rows = []
for i in range(15):
    rows.append([str(100 + i), f"Ticket {i}",
                 f"Steps:\n1. open the app\n2. click \"Save\"\nresult: crash #{i}",
                 rng.choice(["open", "closed"])])
csv_case("csv_multiline_cells", ["ticket", "title", "description", "state"], rows)

csv_case("csv_duplicate_headers", ["name", "name", "id", "name"],
         [[f"first{i}", f"second{i}", str(i), f"third{i}"] for i in range(12)])

text = "id,note,tag\n1,,\"\"\n2,hello,\n3,\"\",x\n4,,y\n"
case("csv_empty_fields", text, verdict("csv", [table(["id", "note", "tag"], [
    ["1", None, ""], ["2", "hello", None], ["3", "", "x"], ["4", None, "y"]])]))

rows = [[str(i), rng.choice(CITIES), str(rng.randint(1000, 99999))] for i in range(20)]
csv_case("csv_pandas_index", ["", "city", "population"], rows)

rows = [[str(i), rng.choice(["007", "1e5", "0x10", "1,234", "+1", "1.0", "-0", "12"]),
         f"{rng.randint(0, 9)}.{rng.randint(0, 9)}"] for i in range(30)]
csv_case("csv_tricky_numbers", ["id", "code", "ratio"], rows)

rows = [[f"{rng.choice(FIRST)}", rng.choice(["東京", "Zürich", "Kraków", "서울", "القاهرة", "Ελλάδα"]),
         f"{rng.randint(1, 50)}"] for _ in range(25)]
csv_case("csv_unicode", ["who", "where", "visits"], rows)

# psql: \copy (select …) to stdout with csv header
rows = [[str(i), f"order-{i:05d}", f"2024-03-{(i % 28) + 1:02d} 10:{i % 60:02d}:00",
         rng.choice(["paid", "refunded", "pending"]), f"{rng.randint(1, 500)}.{rng.randint(0, 99):02d}"]
        for i in range(1, 60)]
csv_case("csv_psql_copy", ["id", "reference", "created_at", "status", "total"], rows)

# sqlite3 -header -csv
rows = [[str(i), rng.choice(["Widget", "Gadget", "Gizmo, large", "Thing \"X\""]),
         str(rng.randint(0, 300)), rng.choice(["", "discontinued"]) or None] for i in range(40)]
csv_case("csv_sqlite_header", ["rowid", "product", "stock", "flag"], rows)

rows = [[f"{rng.randint(1, 9)},{rng.randint(0, 99):02d}", rng.choice(CITIES), f"Kunde {i}"]
        for i in range(30)]
csv_case("csv_semicolon_decimal_commas", ["Betrag", "Ort", "Name"], rows,
         rung="csv_semicolon", delimiter=";")

rows = [[str(i), f"user{i}", rng.choice(["NULL", "admin", "dev"]), f"2024-05-{(i % 28) + 1:02d}"]
        for i in range(35)]
csv_case("tsv_mysql_batch", ["id", "login", "role", "joined"], rows, rung="tsv", delimiter="\t")

text = "name\theight\tnote\n" + "".join(
    f"p{i}\t5'{i % 12}\"\tsays \"hi\" often\n" for i in range(15))
case("tsv_literal_quotes", text, verdict("tsv", [table(["name", "height", "note"], [
    [f"p{i}", f"5'{i % 12}\"", "says \"hi\" often"] for i in range(15)])]))

# Truncated by fetch mid-row: the last (cut) row is dropped and reported.
header, rows = user_rows(30)
full = to_csv(header, rows)
cut_at = full.rindex("\n", 0, len(full) - 1) + 9   # a few characters into the last row
body = full[:cut_at]
marker = FETCH_CUT.format(n=cut_at)
text = "Contents of https://data.example.com/users.csv:\n" + body + "\n\n" + marker
case("csv_fetch_truncated", text, verdict("csv", [table(header, rows[:-1])], {
    "residue": {"before": "Contents of https://data.example.com/users.csv:", "after": marker},
    "dropped": {"rows": 1, "text": body[body.rindex("\n") + 1:].strip()},
}))

# Cut right after a closing quote: the row looks whole, but `"say "` may have been `"say ""hi"""`,
# so with a marker right after it the last row is dropped and reported all the same.
rows = [[str(i), f"item {i}", f"note {i}"] for i in range(20)]
buf = io.StringIO()
w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)
w.writerow(["id", "item", "note"])
for r in rows:
    w.writerow(r)
text = buf.getvalue() + "\n" + FETCH_CUT.format(n=999)
case("csv_truncated_after_quoted_field", text, verdict("csv", [table(["id", "item", "note"], rows[:-1])], {
    "residue": {"after": FETCH_CUT.format(n=999)},
    "dropped": {"rows": 1, "text": buf.getvalue().strip().split("\n")[-1]}}))

# The text ends inside a quoted, multi-line cell: cut, dropped and reported.
rows = [[str(i), f"line one\nline two of {i}"] for i in range(10)]
full = to_csv(["id", "body"], rows)
text = full + '10,"an unfinished\nmulti-line'
case("csv_unterminated_quote", text, verdict("csv", [table(["id", "body"], rows)], {
    "dropped": {"rows": 1, "text": '10,"an unfinished\nmulti-line'}}))

# ---- delimited near-tables
case("csv_ragged", "id,name,role\n1,ada,admin\n2,grace\n3,linus,dev,extra\n4,ken,dev\n" * 3,
     "passthrough")
case("csv_ambiguous_delimiters",
     "".join(f"k{i};v{i},w{i}\n" for i in range(20)).replace("k0;v0,w0", "key;value,weight"),
     "passthrough")
case("csv_headerless_numbers", "".join(f"{i},{i * i},{i * 0.5}\n" for i in range(40)), "passthrough")
case("csv_lenient_quotes",
     "id,size,label\n" + "".join(f'{i},{i}" wide,box "{i}"\n' for i in range(20)), "passthrough")
case("csv_short_last_row_no_marker", "a,b,c\n" + "".join(f"{i},{i},{i}\n" for i in range(10)) + "10,10\n",
     "passthrough")
case("csv_address_lines",
     "".join(f"{rng.choice(CITIES)}, {rng.choice(['France', 'Germany', 'Peru'])}\n" for _ in range(30)),
     "passthrough")
log = []
for i in range(60):
    log.append(f"2024-01-15 10:{i // 60:02d}:{i % 60:02d},{rng.randint(100, 999)} INFO worker-{i % 4} "
               f"processed batch {i} in {rng.randint(5, 90)}ms")
case("log_python_logging", "\n".join(log) + "\n", "passthrough")
log = [f"[2024-01-15 10:00:{i % 60:02d},{rng.randint(100, 999)}] {rng.choice(['INFO', 'WARN'])} "
       f"request {i} served" for i in range(50)]
case("log_bracketed_millis", "\n".join(log) + "\n", "passthrough")
case("prose_commas", (
    "Thanks for the question, and sorry for the delay. The migration ran overnight, but a few "
    "tables, notably orders and invoices, were locked longer than planned.\n\n"
    "We rolled back, checked the replicas, and re-ran it at 02:00, which worked.\n"
    "Next steps, in order: notify finance, re-enable the cron jobs, and close the ticket.\n") * 3,
    "passthrough")

# ---------------------------------------------------------------- markdown

def md_row(cells):
    return "| " + " | ".join(c.replace("|", "\\|") if c is not None else "" for c in cells) + " |"


def md_table(header, rows, align=None):
    align = align or ["---"] * len(header)
    lines = [md_row(header), "|" + "|".join(align) + "|"] + [md_row(r) for r in rows]
    return "\n".join(lines)


def md_case(name, header, rows, before=None, after=None, align=None):
    text = (before + "\n\n" if before else "") + md_table(header, rows, align) + "\n" + (
        "\n" + after + "\n" if after else "")
    residue = {}
    if before:
        residue["before"] = before.strip()
    if after:
        residue["after"] = after.strip()
    case(name, text, verdict("markdown", [table(distinct(header), rows)],
                             {"residue": residue} if residue else {}))


us = users(30)
md_case("md_users", list(us[0].keys()), [list(u.values()) for u in us])
md_case("md_alignment", ["item", "qty", "price"],
        [[f"thing {i}", str(i), f"{i * 1.25:.2f}"] for i in range(20)], align=[":---", ":---:", "---:"])
md_case("md_escaped_pipes", ["command", "meaning"],
        [[f"cat f{i} | grep x", f"filter {i} | keep"] for i in range(15)])
md_case("md_empty_cells", ["pr", "reviewer", "merged"],
        [[f"#{i}", rng.choice(["alice", None, "bob"]), rng.choice(["yes", None])] for i in range(20)])
md_case("md_preamble_and_total", ["issue", "title", "state"],
        [[f"#{100 + i}", f"Crash when saving file {i}", rng.choice(["open", "closed"])] for i in range(25)],
        before="Here are the issues matching `label:bug`:", after="Total: 25 issues")
md_case("md_unicode", ["城市", "人口", "国家"],
        [[rng.choice(["東京", "大阪", "서울", "München"]), str(rng.randint(1, 999)), rng.choice(["日本", "韓国", "Deutschland"])]
         for _ in range(20)])
md_case("md_duplicate_headers", ["name", "value", "name"],
        [[f"a{i}", str(i), f"b{i}"] for i in range(12)])

# Inline code with a bare pipe (GFM would split it; the code-aware reading keeps it).
rows = [[f"`a{i}|b{i}`", f"alternation {i}"] for i in range(12)]
text = "| pattern | meaning |\n|---|---|\n" + "".join(f"| {a} | {b} |\n" for a, b in rows)
case("md_inline_code_pipes", text, verdict("markdown", [table(["pattern", "meaning"], rows)]))

rows = [[f"r{i}", str(i * 3)] for i in range(15)]
text = "key | value\n--- | ---\n" + "".join(f"{a} | {b}\n" for a, b in rows)
case("md_no_outer_pipes", text, verdict("markdown", [table(["key", "value"], rows)]))

# sqlite3 .mode markdown
rows = [[str(i), f"name{i}", f"{rng.randint(0, 99)}.{rng.randint(0, 9)}"] for i in range(25)]
text = "| id |  name  | ratio |\n|----|--------|-------|\n" + "".join(
    f"| {a:<2} | {b:<6} | {c:<5} |\n" for a, b, c in rows)
case("md_sqlite_mode", text, verdict("markdown", [table(["id", "name", "ratio"], rows)]))

t1 = [[str(i), f"user{i}", rng.choice(PLANS)] for i in range(10)]
t2 = [[f"o{i}", str(i % 10), f"{rng.randint(1, 99)}.00"] for i in range(12)]
text = ("## Users\n\n" + md_table(["id", "login", "plan"], t1) + "\n\n## Orders\n\n"
        + md_table(["order", "user", "total"], t2) + "\n")
case("md_two_tables", text, verdict("markdown", [
    table(["id", "login", "plan"], t1, path="table1"),
    table(["order", "user", "total"], t2, path="table2")],
    {"residue": {"before table1": "## Users", "before table2": "## Orders"}}))

rows = [[f"#{i}", f"Title {i}", rng.choice(["open", "closed"])] for i in range(20)]
full = md_table(["pr", "title", "state"], rows)
body = full[:full.rindex("|")]   # the last row loses its closing pipe and a bit more
body = body[:len(body) - 3]
marker = FETCH_CUT.format(n=len(body))
text = "Contents of https://example.com/prs.md:\n" + body + "\n\n" + marker
case("md_truncated", text, verdict("markdown", [table(["pr", "title", "state"], rows[:-1])], {
    "residue": {"before": "Contents of https://example.com/prs.md:", "after": marker},
    "dropped": {"rows": 1, "text": body[body.rindex("\n") + 1:].strip()}}))

# ---- markdown near-tables
inner = md_table(["a", "b"], [["1", "2"], ["3", "4"]])
case("md_in_code_fence", "Example of a table in markdown:\n\n```markdown\n" + inner + "\n```\n\n" +
     "Render it with any GFM viewer.\n", "passthrough")
case("md_ragged", "| a | b | c |\n|---|---|---|\n| 1 | 2 | 3 |\n| 4 | 5 |\n| 6 | 7 | 8 |\n" * 2,
     "passthrough")
case("prose_with_pipes", (
    "To count errors, run `grep ERROR app.log | wc -l` and compare.\n"
    "Options are a | b | c, pick one; the default is b.\n"
    "Pipe chains like ps aux | grep node | awk '{print $2}' are common.\n") * 4, "passthrough")
analysis = ("The numbers above suggest that the retention drop is concentrated in the free plan, "
            "and that the cohort of March behaves differently from the others. ") * 8
case("md_small_table_in_long_prose",
     "# Report\n\n" + analysis + "\n\n" + md_table(["plan", "users"], [["free", "10"], ["pro", "4"]]) +
     "\n\n" + analysis + "\n", "passthrough")

psql = [" id |    name    | plan ", "----+------------+------"]
for i in range(30):
    psql.append(f" {i:>2} | {('user' + str(i)):<10} | {rng.choice(['free', 'pro']):<4} ")
psql.append("(30 rows)")
case("psql_aligned", "\n".join(psql) + "\n", "passthrough")

box = ["┌────┬──────────┐", "│ id │   name   │", "├────┼──────────┤"]
for i in range(20):
    box.append(f"│ {i:<2} │ {('n' + str(i)):<8} │")
box.append("└────┴──────────┘")
case("sqlite_box", "\n".join(box) + "\n", "passthrough")

# ---------------------------------------------------------------- NDJSON

def ndjson_case(name, dicts, before=None, after=None, torn=None):
    lines = [json.dumps(d, ensure_ascii=False) for d in dicts]
    text = (before + "\n" if before else "") + "\n".join(lines) + "\n"
    if torn is not None:
        text += torn
    if after:
        text += after + "\n"
    ctx = {}
    residue = {}
    if before:
        residue["before"] = before
    if after:
        residue["after"] = after
    if residue:
        ctx["residue"] = residue
    if torn is not None:
        ctx["dropped"] = {"rows": 1, "text": torn.strip()}
    cols, rows = json_rows(dicts)
    case(name, text, verdict("ndjson", [table(cols, rows)], ctx))


events = [{"ts": f"2024-06-01T12:00:{i % 60:02d}Z", "level": rng.choice(["info", "warn", "error"]),
           "msg": f"request {i} done", "ms": rng.randint(1, 500), "ok": rng.random() > 0.2,
           "user": rng.choice([None, "ada", "linus"])} for i in range(40)]
ndjson_case("ndjson_events", events)
ndjson_case("ndjson_preamble", events[:20], before="Showing the last 20 events:")
ndjson_case("ndjson_nested", [{"id": i, "meta": {"tags": ["a", "b"][: i % 3], "score": i / 4},
                               "name": f"n{i}"} for i in range(25)])
ndjson_case("ndjson_cut_last_line", events[:15], torn='{"ts": "2024-06-01T12:00:15Z", "level": "in')
case("ndjson_mixed_with_text",
     "".join(f'{{"step": {i}}}\nstep {i} finished\n' for i in range(20)), "passthrough")
case("ndjson_arrays_per_line", "".join(f"[{i}, {i + 1}]\n" for i in range(30)), "passthrough")

# ---------------------------------------------------------------- Python literal rows

def py_case(name, value, text=None, before=None, after=None, path=None, context=None, rows_key=None):
    text = text if text is not None else repr(value)
    full = (before + "\n" if before else "") + text + ("\n" + after if after else "")
    dicts = value if rows_key is None else value[rows_key]
    cols, rows = json_rows(dicts)
    ctx = dict(context or {})
    residue = {}
    if before:
        residue["before"] = before
    if after:
        residue["after"] = after
    if residue:
        ctx["residue"] = residue
    case(name, full, verdict("python_repr", [table(cols, rows, path=path)], ctx))


ap = airports(40)
py_case("py_airports", ap)
py_case("py_airports_pprint", ap[:25], text=pprint.pformat(ap[:25], width=100, sort_dicts=False))
tricky = [
    {"id": 1, "text": "it's", "quote": 'say "hi"', "both": "it's \"both\"", "path": "C:\\Users\\ada"},
    {"id": 2, "text": "tab\there", "quote": "new\nline", "both": "\x00nul", "path": "\\\\server\\share"},
    {"id": 3, "text": "café ☕ 東京", "quote": "\u2028sep", "both": "'", "path": '"'},
    {"id": 4, "text": "", "quote": "\\n literal", "both": "\x7f", "path": "emoji 😀"},
] * 5
py_case("py_tricky_quoting", tricky)
py_case("py_true_false_none", [{"name": f"svc{i}", "enabled": i % 2 == 0, "port": None if i % 3 else 8000 + i,
                                "healthy": [True, False, None][i % 3]} for i in range(20)])
py_case("py_nested_values", [{"id": i, "tags": ["x", "y"][: i % 3], "point": (i, i * 0.5),
                              "owner": {"name": f"o{i}", "roles": ("admin",) if i % 2 else ()},
                              "flags": {"beta": i % 2 == 1}} for i in range(20)])
py_case("py_big_ints", [{"id": i, "snowflake": 1234567890123456789012 + i, "small": -i} for i in range(15)])
py_case("py_floats", [{"x": v} for v in [0.1, 1e-07, 1.5e+16, 3.0, -2.5, 1e100, 123456.789, 0.0] * 3])
py_case("py_wrapped_in_dict", {"count": 12, "next": None, "results": [{"id": i, "v": f"v{i}"} for i in range(12)]},
        path="results", context={"count": 12, "next": None}, rows_key="results")
py_case("py_with_preamble", users(15), before="Query returned 15 rows:")
py_case("py_tuple_of_dicts", tuple({"k": i, "sq": i * i} for i in range(15)))
py_case("py_unicode_escapes", [{"s": "\u00e9"}, {"s": "\x1b[31mred\x1b[0m"}, {"s": "\U0001F600"}] * 6,
        text=repr([{"s": "\u00e9"}, {"s": "\x1b[31mred\x1b[0m"}, {"s": "\U0001F600"}] * 6).replace("é", "\\xe9"))

# Written by hand: literal forms repr never produces but literal_eval reads.
hand = ("[{'a': 0x1F, 'b': 1_000, 'c': 'x' 'y', 'd': r'\\d+', 'e': (1,), 'f': {1, 2}, 'g': set(), "
        "'h': u'uni', 'i': '''tri'ple''', 'j': .5},\n # a comment\n {'a': 0o17, 'b': -1, 'c': \"z\", "
        "'d': r'\\w', 'e': (), 'f': {3}, 'g': set(), 'h': 'u', 'i': 'x', 'j': 5.},]")
case("py_literal_forms", hand, verdict("python_repr", [table(
    ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
    [[31, 1000, "xy", "\\d+", [1], [1, 2], [], "uni", "tri'ple", 0.5],
     [15, -1, "z", "\\w", [], [3], [], "u", "x", 5.0]])]))

ap = airports(30)
full = repr(ap)
cut = full.index("{", full.index("{", len(full) - 400) + 1) + 20   # inside a late row
body = full[:cut]
marker = FETCH_CUT.format(n=cut)
complete = body.count("}")  # rows that closed before the cut
case("py_truncated", body + "\n\n" + marker, verdict("python_repr", [table(*json_rows(ap[:complete]))], {
    "residue": {"after": marker},
    "dropped": {"rows": 1, "text": body[body.rindex("}") + 1:].strip()}}))

case("py_list_of_tuples", repr([(c, rng.random()) for c in "abcdefghijklmnopqrst"]), "passthrough")
case("py_datetime_objects", "[" + ", ".join(
    f"{{'id': {i}, 'at': datetime.datetime(2024, 1, {i + 1}, 10, 0)}}" for i in range(20)) + "]", "passthrough")
case("py_nan_values", "[" + ", ".join(f"{{'id': {i}, 'v': nan}}" for i in range(20)) + "]", "passthrough")
case("py_status_dict", repr({"status": "ok", "message": "Deployed 3 services", "took_ms": 1234}), "passthrough")
case("py_bytes_values", repr([{"id": i, "blob": bytes([i, 255])} for i in range(20)]), "passthrough")
case("py_source_code", '''import json


def load(path):
    """Load rows from a JSON file."""
    with open(path) as f:
        rows = json.load(f)
    return [{"id": r["id"], "name": r.get("name")} for r in rows]


if __name__ == "__main__":
    print(load("rows.json"))
''', "passthrough")

# ---------------------------------------------------------------- record blocks

def rec_case(name, blocks, numbered_titles=None, before=None, after=None, indent="", drop_last=False,
             marker=None):
    parts = []
    for i, block in enumerate(blocks):
        lines = []
        if numbered_titles is not None:
            lines.append(f"{i + 1}. {numbered_titles[i]}")
        for k, v in block:
            lines.append(f"{indent}{k}: {v}" if v is not None else f"{indent}{k}:")
        parts.append("\n".join(lines))
    sep = "\n" if numbered_titles is not None else "\n\n"
    text = (before + "\n\n" if before else "") + sep.join(parts) + "\n" + ("\n" + after + "\n" if after else "")
    if marker:
        text += "\n" + marker
    kept = blocks[:-1] if drop_last else blocks
    columns = []
    if numbered_titles is not None:
        columns = ["number", "title"]
    ids = []
    for block in blocks[: len(kept)]:
        seen = {}
        for k, _ in block:
            seen[k] = seen.get(k, 0) + 1
            ident = (k, seen[k])
            if ident not in ids:
                ids.append(ident)
    names = columns + [k if n == 1 else f"{k}_{n}" for k, n in ids]
    rows = []
    for i, block in enumerate(kept):
        row = {}
        seen = {}
        for k, v in block:
            seen[k] = seen.get(k, 0) + 1
            row[(k, seen[k])] = v.strip() if v is not None and v.strip() else None
        cells = []
        if numbered_titles is not None:
            cells = [str(i + 1), numbered_titles[i]]
        rows.append(cells + [row.get(ident) for ident in ids])
    ctx = {}
    residue = {}
    if before:
        residue["before"] = before
    if after:
        residue["after"] = after
    if marker:
        residue["after"] = ((residue.get("after", "") + "\n") if after else "") + marker
    if residue:
        ctx["residue"] = residue
    if drop_last:
        ctx["dropped"] = {"rows": 1, "text": parts[-1].strip()}
    case(name, text, verdict("record_blocks", [table(distinct(names), rows)], ctx))


commits = []
for i in range(25):
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    commits.append([("Commit", sha), ("Author", f"{rng.choice(FIRST)} <dev{i}@example.com>"),
                    ("Date", f"2024-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T1{i % 10}:00:00Z"),
                    ("Subject", rng.choice(["Fix: crash on start", "Add tests", "Bump deps: serde 1.0.200",
                                            "Refactor parser", "Docs: README"]))])
rec_case("rec_git_log_format", commits)
repos = []
titles = []
for i in range(20):
    titles.append(f"acme/{rng.choice(['widget', 'gadget', 'gizmo', 'sprocket'])}-{i}")
    repos.append([("Description", rng.choice(["A small tool", "Fast JSON: parser & printer", "Experimental"])),
                  ("Stars", str(rng.randint(0, 5000))), ("Language", rng.choice(["Rust", "Go", "Python"])),
                  ("URL", f"https://github.com/{titles[-1]}")])
rec_case("rec_numbered_search_results", repos, numbered_titles=titles, indent="   ",
         before="Found 20 repositories:")
issues = []
for i in range(30):
    block = [("Issue", f"#{200 + i}"), ("Title", f"Crash when saving file {i}"),
             ("State", rng.choice(["open", "closed"])), ("Labels", rng.choice(["bug, ui", "bug", "docs"]))]
    issues.append(block)
issues[7] = issues[7] + [("Milestone", "v2.0")]   # one block with an extra key (97% share one key set)
rec_case("rec_issues_extra_key", issues)
pkgs = [[("Package", f"lib{i}"), ("Version", f"1.{i}.0"), ("Label", "core"), ("Label", "stable" if i % 2 else "beta")]
        for i in range(12)]
rec_case("rec_repeated_key", pkgs)
svc = [[("Name", f"svc-{i}"), ("Status", rng.choice(["running", "stopped"])), ("Port", str(8000 + i)),
        ("Owner", None if i % 4 == 0 else "ops")] for i in range(20)]
rec_case("rec_empty_values", svc, after="Showing 20 of 87 services")
svc = [[("Name", f"svc-{i}"), ("Status", "running"), ("Uptime", f"{i}d")] for i in range(15)]
rec_case("rec_truncated", svc, marker="[output truncated]", drop_last=True)

# ---- record near-tables
git_default = []
for i in range(10):
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    git_default.append(f"commit {sha}\nAuthor: Dev {i} <dev{i}@example.com>\nDate:   Mon Jan {i + 1} 10:00:00 2024 +0100\n\n"
                       f"    Fix bug number {i}\n\n    Longer explanation: the cache was stale.\n")
case("git_log_default", "\n".join(git_default), "passthrough")
case("rec_commit_message_lines",
     "\n\n".join(f"Author: dev{i}\nDate: 2024-01-{i + 1:02d}\nFixed the flaky test\nMessage: ok" for i in range(10)),
     "passthrough")
case("rec_inconsistent_keys", "\n\n".join(
    f"Name: n{i}\n" + rng.choice(["Size: 1\nColor: red", "Weight: 2", "Shape: round\nSize: 3"]) for i in range(20)),
    "passthrough")
case("pip_show_multi", "\n---\n".join(
    f"Name: pkg{i}\nVersion: 1.0.{i}\nSummary: A package\nLocation: /usr/lib/python3/site-packages\nRequires: \nRequired-by: "
    for i in range(8)) + "\n", "passthrough")
case("http_headers", "HTTP/1.1 200 OK\nContent-Type: application/json\nContent-Length: 1234\nDate: Mon, 01 Jan 2024 10:00:00 GMT\n"
     "Server: nginx\nCache-Control: no-cache\n\n{\"ok\": true}\n", "passthrough")
case("yaml_nested_services", """services:
  web:
    image: nginx:1.25
    ports:
      - "80:80"
    depends_on:
      - api

  api:
    image: example/api:2.3
    environment:
      LOG_LEVEL: debug
      DATABASE_URL: postgres://db:5432/app

  db:
    image: postgres:16
""", "passthrough")
case("yaml_k8s_deployment", """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: nginx:1.25
          ports:
            - containerPort: 80
""", "passthrough")
case("yaml_flat_groups", "\n\n".join(
    f"name: job{i}\nschedule: \"*/{i + 1} * * * *\"\ncommand: run-{i}" if i % 3 else f"# group {i}\nenabled: true"
    for i in range(12)), "passthrough")
case("email_thread", """From: Ada Lovelace <ada@example.com>
To: Charles Babbage <cb@example.com>
Subject: Re: the engine
Date: Tue, 2 Jan 2024 09:00:00 +0000

Charles,

The notes are done. See the attached table, and note G: it computes Bernoulli numbers.

Ada

From: Charles Babbage <cb@example.com>
To: Ada Lovelace <ada@example.com>
Subject: the engine
Date: Mon, 1 Jan 2024 18:00:00 +0000

Could you send the notes?
""", "passthrough")

# ---------------------------------------------------------------- other shapes that must pass through

ls = ["total 1284"]
for i in range(30):
    ls.append(f"-rw-r--r--  1 ada  staff  {rng.randint(100, 99999):>6} Jan {rng.randint(1, 28):>2} 10:{i:02d} file_{i}.txt")
case("ls_l", "\n".join(ls) + "\n", "passthrough")
ps = ["USER         PID %CPU %MEM    VSZ   RSS TTY      STAT START   TIME COMMAND"]
for i in range(30):
    ps.append(f"root     {1000 + i:>7}  {rng.random() * 5:.1f}  {rng.random() * 2:.1f} {rng.randint(10000, 99999):>6} "
              f"{rng.randint(1000, 9999):>5} ?        Ss   10:00   0:0{i % 10} /usr/bin/worker --id={i}, --mode=fast")
case("ps_aux", "\n".join(ps) + "\n", "passthrough")
case("df_h", "Filesystem      Size  Used Avail Use% Mounted on\n" + "".join(
    f"/dev/sda{i}       {rng.randint(10, 900)}G  {rng.randint(1, 9)}G  {rng.randint(1, 800)}G  {rng.randint(1, 99)}% /mnt/d{i}\n"
    for i in range(12)), "passthrough")
case("docker_ps", "CONTAINER ID   IMAGE          COMMAND                  CREATED        STATUS        PORTS                  NAMES\n" + "".join(
    f"{''.join(rng.choice('0123456789abcdef') for _ in range(12))}   nginx:1.25     \"/docker-entrypoint.…\"   {i} hours ago    Up {i} hours    0.0.0.0:80{i:02d}->80/tcp   web_{i}\n"
    for i in range(15)), "passthrough")
case("pip_list", "Package            Version\n------------------ ---------\n" + "".join(
    f"{('package-' + str(i)):<18} {i}.{i % 5}.0\n" for i in range(30)), "passthrough")
case("npm_ls", "my-app@1.0.0 /srv/app\n" + "".join(
    f"├─┬ dep-{i}@{i}.0.0\n│ └── sub-{i}@0.{i}.1\n" for i in range(15)) + "└── last@1.0.0\n", "passthrough")
case("apt_list", "Listing... Done\n" + "".join(
    f"lib{i}/jammy-updates,now 1.{i}-1ubuntu0.{i} amd64 [installed,automatic]\n" for i in range(30)), "passthrough")
case("git_status", """On branch main
Your branch is ahead of 'origin/main' by 2 commits.
  (use "git push" to publish your local commits)

Changes not staged for commit:
  (use "git add <file>..." to update what will be committed)
	modified:   src/lib.rs
	modified:   src/main.rs

Untracked files:
	notes.txt
""", "passthrough")
case("stack_trace_python", """Traceback (most recent call last):
  File "/srv/app/main.py", line 42, in <module>
    main()
  File "/srv/app/main.py", line 38, in main
    rows = load(path, strict=True)
  File "/srv/app/load.py", line 12, in load
    raise ValueError(f"bad row {i}: {row!r}")
ValueError: bad row 7: {'id': 7, 'name': None}
""", "passthrough")
case("stack_trace_java", "Exception in thread \"main\" java.lang.IllegalStateException: pool closed, retry later\n" + "".join(
    f"\tat com.example.pool.Pool.acquire(Pool.java:{100 + i})\n" for i in range(20)) +
    "Caused by: java.io.IOException: Broken pipe\n\t... 20 more\n", "passthrough")
case("diff_unified", """diff --git a/src/lib.rs b/src/lib.rs
index 3b18e51..a9c2f0d 100644
--- a/src/lib.rs
+++ b/src/lib.rs
@@ -1,6 +1,7 @@
 pub mod config;
+pub mod text;
 pub mod store;
-fn old(a: u32, b: u32) -> u32 { a | b }
+fn new(a: u32, b: u32) -> u32 { a ^ b }
 | a | b |
 |---|---|
""", "passthrough")
case("rust_source", """use std::collections::HashMap;

/// Counts words, case-insensitively.
pub fn count(text: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() { continue; }
        *out.entry(word.to_lowercase()).or_insert(0) += 1;
    }
    out
}

#[test]
fn counts() {
    assert_eq!(count("a, A; b")["a"], 2);
}
""", "passthrough")
case("js_source", """const rows = [{ id: 1, name: 'a' }, { id: 2, name: 'b' }];
export function byId(id) {
  return rows.find((r) => r.id === id) || null;
}
console.log(byId(1), byId(3));
""", "passthrough")
case("sql_dump", "CREATE TABLE users (id integer PRIMARY KEY, name text, plan text);\n" + "".join(
    f"INSERT INTO users VALUES ({i}, 'user{i}', '{rng.choice(PLANS)}');\n" for i in range(25)), "passthrough")
case("toml_config", """[package]
name = "demo"
version = "0.1.0"

[dependencies]
serde = { version = "1", features = ["derive"] }
csv = "1.3"
""", "passthrough")
case("ini_file", "[server]\nhost=0.0.0.0\nport=8080\n\n[db]\nurl=postgres://localhost/app\npool=5\n", "passthrough")
case("dotenv", "".join(f"VAR_{i}=value-{i}\n" for i in range(20)), "passthrough")
case("crontab", "# m h dom mon dow command\n" + "".join(
    f"{i} */2 * * 1-5 /usr/local/bin/job-{i} --quiet\n" for i in range(20)), "passthrough")
case("cargo_build_output", """   Compiling serde v1.0.200
   Compiling csv v1.3.0
   Compiling demo v0.1.0 (/srv/demo)
warning: unused variable: `x`
 --> src/main.rs:3:9
  |
3 |     let x = 5;
  |         ^ help: if this is intentional, prefix it with an underscore: `_x`
  |
  = note: `#[warn(unused_variables)]` on by default

    Finished `dev` profile [unoptimized + debuginfo] target(s) in 4.20s
""", "passthrough")
case("terraform_plan", """Terraform will perform the following actions:

  # aws_instance.web will be created
  + resource "aws_instance" "web" {
      + ami           = "ami-0c55b159cbfafe1f0"
      + instance_type = "t3.micro"
      + tags          = {
          + "Name" = "web"
        }
    }

Plan: 1 to add, 0 to change, 0 to destroy.
""", "passthrough")
case("html_snippet", "<table>\n<tr><th>a</th><th>b</th></tr>\n" + "".join(
    f"<tr><td>{i}</td><td>x, y</td></tr>\n" for i in range(20)) + "</table>\n", "passthrough")
case("prose_article", ("Formatted text is everywhere in tool output. Some of it is a table: rows, "
                       "columns, a header. Most of it is not: it is a story, a log, a list of "
                       "steps. Telling the two apart is the whole job.\n\n") * 6, "passthrough")
case("prose_colons", ("Note: the deploy is at noon.\nReason: the freeze ends then.\nAlso note that the "
                      "database: it is read-only until 13:00.\n\n") * 5, "passthrough")
case("numbered_steps", "".join(f"{i}. Open the settings page, then choose option {i}.\n" for i in range(1, 15)),
     "passthrough")
case("markdown_list_report", "## Findings\n\n" + "".join(
    f"- **Issue {i}**: the importer drops rows when the file has a BOM ({i} cases)\n" for i in range(20)),
    "passthrough")
case("json_broken", '{"rows": [{"a": 1}, {"a": 2}], "note": "unterminated\n' * 3, "passthrough")
case("empty_text", "", "passthrough")
case("whitespace_only", "   \n\n\t\n", "passthrough")


def main():
    for old in os.listdir(HERE):
        if old.endswith(".txt") or old.endswith(".expected.json"):
            os.remove(os.path.join(HERE, old))
    for name, (text, expected) in sorted(CASES.items()):
        with open(os.path.join(HERE, name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)
        with open(os.path.join(HERE, name + ".expected.json"), "w", encoding="utf-8") as f:
            json.dump(expected, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print(f"{len(CASES)} cases, "
          f"{sum(1 for _, e in CASES.values() if e != 'passthrough')} with tables")


if __name__ == "__main__":
    main()
