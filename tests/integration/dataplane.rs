//! The data plane end to end through a real loom process: large results become envelopes, the
//! model queries them exactly, joins across servers, and small results still pass untouched.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn loom_two_servers() -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({"servers": [
        fixture_server("crm", &[]),
        fixture_server("shop", &[]),
    ]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

#[test]
fn ten_thousand_rows_become_an_envelope_and_aggregates_are_exact() {
    let (_dir, mut loom) = loom_two_servers();
    let line = loom.call_tool("crm_rows", json!({"count": 10000}));
    let raw_size = {
        let mut direct = RawClient::spawn(&fixture_bin(), &["--name", "crm"], &[]);
        direct.initialize();
        direct.call_tool("rows", json!({"count": 10000})).raw.len()
    };
    let env = envelope(&line);
    assert_eq!(env["rows"], 10000);
    assert!(
        line.raw.len() * 20 < raw_size,
        "{} vs {raw_size}",
        line.raw.len()
    );
    let text = first_text(&line);
    assert!(
        text.chars().count() <= 2000,
        "envelope of {} chars",
        text.chars().count()
    );
    assert_eq!(env["provenance"]["server"], "crm");
    assert_eq!(env["provenance"]["tool"], "rows");
    assert_eq!(env["provenance"]["args"], json!({"count": 10000}));
    assert_eq!(env["provenance"]["source"], "json_text");
    assert!(
        env["approxTokensSaved"]
            .as_u64()
            .is_some_and(|n| n > 100_000),
        "{env}"
    );
    let names: Vec<&str> = env["schema"]
        .as_array()
        .expect("schema")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(names.len(), 11, "{names:?}");
    let types: Vec<&str> = env["schema"]
        .as_array()
        .expect("schema")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types[0], "Int64");
    assert_eq!(types[5], "Timestamp(µs, UTC)");

    let reference = env["ref"].as_str().expect("ref").to_string();
    assert_eq!(reference, "ds_crm_rows_1");
    let out = query(
        &mut loom,
        &format!("SELECT count(*) AS n, sum(id) AS s, count(manager_id) AS m FROM {reference}"),
    );
    assert_eq!(
        out["rows"],
        json!([{"n": 10000, "s": 49_995_000, "m": 9000}])
    );
    let by_plan = query(
        &mut loom,
        &format!("SELECT plan, count(*) AS n FROM {reference} GROUP BY plan ORDER BY plan"),
    );
    assert_eq!(
        by_plan["rows"],
        json!([{"plan": "free", "n": 3334}, {"plan": "pro", "n": 3333}, {"plan": "team", "n": 3333}])
    );
    // The usage example runs as written.
    let usage = env["usage"].as_str().expect("usage");
    let sql: Value =
        serde_json::from_str(usage.trim_start_matches("loom_query ")).expect("usage JSON");
    query(&mut loom, sql["sql"].as_str().expect("sql"));
}

#[test]
fn datasets_from_two_servers_join() {
    let (_dir, mut loom) = loom_two_servers();
    let users = envelope(&loom.call_tool("crm_rows", json!({"count": 3000})));
    let orders = envelope(&loom.call_tool("shop_orders", json!({"count": 5000, "users": 4000})));
    let (u, o) = (
        users["ref"].as_str().expect("ref"),
        orders["ref"].as_str().expect("ref"),
    );
    // The second envelope's first hint is the true key, and its example runs.
    let hint = &orders["joinHints"][0];
    assert_eq!(
        (
            hint["column"].as_str(),
            hint["ref"].as_str(),
            hint["otherColumn"].as_str()
        ),
        (Some("user_id"), Some(u), Some("id")),
        "{orders}"
    );
    let example = query(&mut loom, hint["example"].as_str().expect("example"));
    assert_eq!(example["rowCount"], 10, "{example}");
    let joined = query(
        &mut loom,
        &format!("SELECT count(*) AS n FROM {o} JOIN {u} ON {o}.user_id = {u}.id"),
    );
    // user_id = i·7919 mod 4000 over i < 5000; ids below 3000 have users.
    let expected = (0..5000u64).filter(|i| (i * 7919) % 4000 < 3000).count();
    assert_eq!(joined["rows"][0]["n"], expected);
    let list = loom.call_tool("loom_list_datasets", json!({}));
    let refs: Vec<&str> = list.value["result"]["structuredContent"]["datasets"]
        .as_array()
        .expect("datasets")
        .iter()
        .filter_map(|d| d["ref"].as_str())
        .collect();
    assert_eq!(refs, vec![u, o]);
}

#[test]
fn describe_errors_and_refusals_help_the_model() {
    let (_dir, mut loom) = loom_two_servers();
    let env = envelope(&loom.call_tool("crm_rows", json!({"count": 2000})));
    let reference = env["ref"].as_str().expect("ref");
    let described = loom.call_tool("loom_describe", json!({"ref": reference}));
    let d = &described.value["result"]["structuredContent"];
    assert_eq!(
        d["sample"].as_array().map(Vec::len),
        Some(10),
        "{}",
        described.raw
    );
    assert_eq!(d["schema"].as_array().map(Vec::len), Some(11));

    let unknown = loom.call_tool("loom_describe", json!({"ref": "ds_nope"}));
    assert_eq!(unknown.value["result"]["isError"], true);
    assert!(first_text(&unknown).contains(reference), "{}", unknown.raw);

    for (sql, needle) in [
        ("COPY (SELECT 1) TO '/tmp/x'", "read-only"),
        ("SELECT * FROM '/etc/passwd'", "not found"),
        ("SELECT * FROM range(10)", "not a loom dataset"),
        ("SELECT nope FROM ds_crm_rows_1", "nope"),
    ] {
        let line = loom.call_tool("loom_query", json!({ "sql": sql }));
        assert_eq!(line.value["result"]["isError"], true, "{sql}");
        assert!(first_text(&line).contains(needle), "{sql}: {}", line.raw);
    }
    let bad_args = loom.call_tool("loom_query", json!({"sql": 5}));
    assert_eq!(bad_args.value["result"]["isError"], true);
}

/// A client that opens a session per tool call (langchain-mcp-adapters' default `get_tools()`)
/// gets an envelope in one session and queries its ref in the next: the answer says the ref
/// belonged to a session that ended and what to do, not that datasets appear later.
#[test]
fn a_ref_from_a_session_that_ended_is_explained() {
    let reference = {
        let (_dir, mut first) = loom_two_servers();
        let env = envelope(&first.call_tool("crm_rows", json!({"count": 2000})));
        env["ref"].as_str().expect("ref").to_string()
    };
    let (_dir, mut second) = loom_two_servers();
    for (tool, arguments) in [
        (
            "loom_query",
            json!({"sql": format!("SELECT count(*) FROM {reference}")}),
        ),
        ("loom_describe", json!({"ref": reference})),
    ] {
        let line = second.call_tool(tool, arguments);
        assert_eq!(line.value["result"]["isError"], true, "{}", line.raw);
        let text = first_text(&line);
        assert!(
            text.contains("a ref belongs to the session whose tool call made it")
                && text.contains("keep one session open"),
            "{tool}: {text}"
        );
    }
}

#[test]
fn a_large_query_result_becomes_an_implicit_dataset() {
    let (_dir, mut loom) = loom_two_servers();
    let env = envelope(&loom.call_tool("crm_rows", json!({"count": 5000})));
    let reference = env["ref"].as_str().expect("ref");
    let line = loom.call_tool(
        "loom_query",
        json!({"sql": format!("SELECT * FROM {reference}")}),
    );
    let implicit = envelope(&line);
    assert_eq!(implicit["rows"], 5000);
    assert_eq!(implicit["provenance"]["source"], "query");
    let described = loom.call_tool("loom_list_datasets", json!({}));
    assert!(
        described.raw.contains("\"implicit\":true"),
        "{}",
        described.raw
    );
}

#[test]
fn small_results_pass_byte_identical_and_large_text_makes_no_table() {
    let (_dir, mut loom) = loom_two_servers();
    let mut direct = RawClient::spawn(&fixture_bin(), &["--name", "crm"], &[]);
    direct.initialize();
    let via = loom.call_tool("crm_rows", json!({"count": 5}));
    let own = direct.call_tool("rows", json!({"count": 5}));
    assert_eq!(result_bytes(&via), result_bytes(&own));
    // A large text without a table is reduced by the context firewall (SPEC §19): a document
    // holds its original, and no dataset is made of it.
    let big = loom.call_tool("crm_big_text", json!({"bytes": 200000}));
    assert!(
        first_text(&big).starts_with("[loom: text reduced 200,000 → "),
        "{:.300}",
        big.raw
    );
    // The five rows passed through whole are held too (SPEC §8.4); the text made no table.
    let mut held = Vec::new();
    eventually("the passed-through table to be kept", || {
        held = datasets(&mut loom);
        held.len() == 2
    });
    let kinds: Vec<(&str, bool)> = held
        .iter()
        .map(|d| (d["kind"].as_str().unwrap_or(""), d["passedThrough"] == true))
        .collect();
    assert_eq!(kinds, [("dataset", true), ("document", false)], "{held:?}");
}

fn datasets(loom: &mut RawClient) -> Vec<Value> {
    let list = loom.call_tool("loom_list_datasets", json!({}));
    list.value["result"]["structuredContent"]["datasets"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// A small table passes through whole and is still there for SQL: listed, described, named in
/// a later envelope's join hints and joined exactly (SPEC §8.4).
#[test]
fn a_small_table_passes_through_whole_and_joins_later_results() {
    let (_dir, mut loom) = loom_two_servers();
    let mut direct = RawClient::spawn(&fixture_bin(), &["--name", "crm"], &[]);
    direct.initialize();
    let via = loom.call_tool("crm_rows", json!({"count": 12}));
    let own = direct.call_tool("rows", json!({"count": 12}));
    assert_eq!(result_bytes(&via), result_bytes(&own));
    let mut held = Vec::new();
    eventually("the small table to be kept", || {
        held = datasets(&mut loom);
        !held.is_empty()
    });
    let small = held[0]["ref"].as_str().expect("ref").to_string();
    assert_eq!(
        (
            &held[0]["rows"],
            &held[0]["passedThrough"],
            &held[0]["tool"]
        ),
        (&json!(12), &json!(true), &json!("rows")),
        "{held:?}"
    );
    // The same result again is not kept twice.
    loom.call_tool("crm_rows", json!({"count": 12}));
    let described = loom.call_tool("loom_describe", json!({"ref": small}));
    assert_eq!(
        described.value["result"]["structuredContent"]["passedThrough"], true,
        "{}",
        described.raw
    );
    assert_eq!(datasets(&mut loom).len(), 1);

    let orders = envelope(&loom.call_tool("shop_orders", json!({"count": 3000, "users": 12})));
    let hints = orders["joinHints"].as_array().expect("joinHints");
    let hint = hints
        .iter()
        .find(|h| h["ref"] == small.as_str())
        .unwrap_or_else(|| panic!("no hint names the small table: {orders}"));
    assert_eq!(
        (&hint["column"], &hint["otherColumn"]),
        (&json!("user_id"), &json!("id"))
    );
    let about = hint["about"].as_str().unwrap_or_default();
    assert!(
        about.contains("an earlier result of 12 rows from crm/rows"),
        "{hint}"
    );
    let o = orders["ref"].as_str().expect("ref");
    let joined = query(
        &mut loom,
        &format!(
            "SELECT u.plan, count(*) AS n FROM {o} JOIN {small} u ON {o}.user_id = u.id \
             GROUP BY u.plan ORDER BY u.plan"
        ),
    );
    // user_id = i·7919 mod 12; plan = ["free", "pro", "team"][id mod 3].
    let mut expected = std::collections::BTreeMap::new();
    for i in 0..3000u64 {
        let plan = ["free", "pro", "team"][((i * 7919) % 12 % 3) as usize];
        *expected.entry(plan).or_insert(0u64) += 1;
    }
    let got: Vec<(String, u64)> = joined["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| {
            (
                r["plan"].as_str().unwrap_or("").to_string(),
                r["n"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = expected
        .into_iter()
        .map(|(p, n)| (p.to_string(), n))
        .collect();
    assert_eq!(got, want);
}

/// `keepSmallTables: false` for a tool: its small results pass through and nothing is kept.
#[test]
fn keeping_small_tables_can_be_turned_off_per_tool() {
    let (_dir, path) = write_config(&json!({
        "servers": [fixture_server("crm", &[])],
        "compression": {"perTool": {"crm_rows": {"keepSmallTables": false}}},
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    loom.call_tool("crm_rows", json!({"count": 5}));
    // Another small table of the same server is kept: once it is, the first was not.
    loom.call_tool("crm_orders", json!({"count": 5, "users": 5}));
    let mut held = Vec::new();
    eventually("the orders table to be kept", || {
        held = datasets(&mut loom);
        !held.is_empty()
    });
    let tools: Vec<&str> = held.iter().filter_map(|d| d["tool"].as_str()).collect();
    assert_eq!(tools, ["orders"], "{held:?}");
}

#[test]
fn provenance_is_redacted_before_it_is_stored_and_denylisted_tools_keep_none() {
    let mut shop = fixture_server("shop", &[]);
    shop["provenanceDenylist"] = json!(["orders"]);
    let (_dir, path) = write_config(&json!({"servers": [fixture_server("crm", &[]), shop]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let line = loom.call_tool(
        "crm_rows",
        json!({"count": 3000, "apiKey": "plain-value-1234", "note": format!("token {secret}")}),
    );
    let env = envelope(&line);
    assert_eq!(env["provenance"]["args"]["apiKey"], "[redacted]");
    assert_eq!(env["provenance"]["args"]["note"], "[redacted]");
    let orders = envelope(&loom.call_tool("shop_orders", json!({"count": 3000, "users": 10})));
    assert_eq!(orders["provenance"]["args"], "[omitted]");
    let listing = loom.call_tool("loom_list_datasets", json!({}));
    let described = loom.call_tool("loom_describe", json!({"ref": env["ref"]}));
    for text in [&line.raw, &listing.raw, &described.raw, &loom.stderr_text()] {
        assert!(
            !text.contains(secret) && !text.contains("plain-value-1234"),
            "leaked: {text:.300}"
        );
    }
}

#[test]
fn materialized_views_keep_their_types_and_exports_stay_in_the_export_dir() {
    let exports = tempfile::tempdir().expect("exports");
    let (_dir, path) = write_config(&json!({
        "exportDir": exports.path(),
        "servers": [fixture_server("crm", &[])]
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let env = envelope(&loom.call_tool("crm_rows", json!({"count": 3000})));
    let reference = env["ref"].as_str().expect("ref").to_string();

    let sql = format!(
        "SELECT plan, count(*) AS n, sum(id) AS total, CAST(min(created) AS DATE) AS first_day \
         FROM {reference} GROUP BY plan"
    );
    let view = envelope(&loom.call_tool(
        "loom_materialize",
        json!({"sql": sql, "name": "Plan Counts!"}),
    ));
    assert_eq!(view["ref"], "ds_view_plan_counts");
    let types: Vec<&str> = view["schema"]
        .as_array()
        .expect("schema")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .collect();
    assert_eq!(types, vec!["Utf8", "Int64", "Int64", "Date32"], "{view}");
    let again = loom.call_tool(
        "loom_materialize",
        json!({"sql": "SELECT 1", "name": "plan counts"}),
    );
    assert_eq!(again.value["result"]["isError"], true);
    assert!(
        first_text(&again).contains("already exists"),
        "{}",
        again.raw
    );
    let empty = envelope(&loom.call_tool(
        "loom_materialize",
        json!({"sql": format!("SELECT id, name FROM {reference} WHERE id < 0"), "name": "nobody"}),
    ));
    assert_eq!(empty["rows"], 0);
    assert_eq!(empty["schema"].as_array().map(Vec::len), Some(2));

    let written = loom.call_tool(
        "loom_export",
        json!({"ref": "ds_view_plan_counts", "format": "csv", "filename": "plans"}),
    );
    let out = &written.value["result"]["structuredContent"];
    assert_eq!(out["rows"], 3, "{}", written.raw);
    let file = exports
        .path()
        .canonicalize()
        .expect("dir")
        .join("plans.csv");
    assert_eq!(out["path"], file.display().to_string());
    let text = std::fs::read_to_string(&file).expect("exported");
    assert!(text.starts_with("plan,n,total,first_day\r\n"), "{text}");
    assert_eq!(out["bytes"], text.len());

    for (args, needle) in [
        (
            json!({"ref": reference, "format": "csv", "filename": "../escape.csv"}),
            "is a path",
        ),
        (
            json!({"ref": reference, "format": "csv", "filename": ".."}),
            "directory",
        ),
        (json!({"ref": reference, "format": "xml"}), "unknown format"),
        (json!({"ref": "ds_nope", "format": "csv"}), "no dataset"),
        (
            json!({"ref": "ds_view_plan_counts", "format": "csv", "filename": "plans"}),
            "already exists",
        ),
    ] {
        let line = loom.call_tool("loom_export", args.clone());
        assert_eq!(line.value["result"]["isError"], true, "{args}");
        assert!(first_text(&line).contains(needle), "{args}: {}", line.raw);
    }
    assert!(
        !exports
            .path()
            .parent()
            .expect("parent")
            .join("escape.csv")
            .exists()
    );
    let json_out = loom.call_tool("loom_export", json!({"ref": reference, "format": "json"}));
    let path = json_out.value["result"]["structuredContent"]["path"]
        .as_str()
        .expect("path")
        .to_string();
    let rows: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json");
    assert_eq!(rows.as_array().map(Vec::len), Some(3000));
    assert_eq!(rows[0]["created"], "2024-01-01T00:00:00Z");
}

/// Materialized views cannot switch the firewall off: once they hold half of
/// `memoryBudgetBytes`, `loom_materialize` is refused with the share named, and the next large
/// tool result still becomes an envelope (it passed through raw when views filled the budget).
#[test]
fn pinned_views_leave_room_for_the_firewall() {
    let (_dir, path) = write_config(&json!({
        "servers": [fixture_server("crm", &[])],
        "memoryBudgetBytes": 8 << 20,
    }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let first = envelope(&loom.call_tool("crm_rows", json!({"count": 5000})));
    let source = first["ref"].as_str().expect("ref").to_string();
    let mut refused = None;
    for n in 0..40 {
        let line = loom.call_tool(
            "loom_materialize",
            json!({"sql": format!("SELECT * FROM {source}"), "name": format!("copy{n}")}),
        );
        if line.value["result"]["isError"] == json!(true) {
            refused = Some(first_text(&line));
            break;
        }
    }
    let refused = refused.expect("pinning stops before 40 copies of 5,000 rows in 8 MiB");
    assert!(
        refused.starts_with("loom_materialize: pinning `ds_view_copy"),
        "{refused}"
    );
    assert!(
        refused.contains("at most half of memoryBudgetBytes (4194304 of 8388608 bytes)"),
        "{refused}"
    );
    let line = loom.call_tool("crm_rows", json!({"count": 5000}));
    let again = envelope(&line);
    assert_eq!(again["rows"], 5000, "{again}");
    let listed = loom.call_tool("loom_list_datasets", json!({}));
    assert_not_error(&listed);
}

/// `loom_describe` answers a page of columns (issue 35: thousands of columns made one answer of
/// megabytes): 50 by default, up to 200 when asked, fewer when wide ones would take the answer
/// over 64 KiB; `columns` counts them all, the pages followed by `nextOffset` give every column
/// once, in order; bad paging arguments are named.
#[test]
fn a_wide_dataset_is_described_a_page_of_columns_at_a_time() {
    let (_dir, mut loom) = loom_two_servers();
    let env = envelope(&loom.call_tool("crm_rows", json!({"count": 300})));
    let reference = env["ref"].as_str().expect("ref").to_string();
    let long = |i: usize| format!("{}{i:03}", "n".repeat(190));
    let mut expected = vec!["id".to_string()];
    let mut select = vec!["id".to_string()];
    for i in 0..250 {
        select.push(format!("id AS c{i}"));
        expected.push(format!("c{i}"));
    }
    for i in 0..40 {
        select.push(format!(
            "repeat('x', 190) || CAST(id AS VARCHAR) AS \"{}\"",
            long(i)
        ));
        expected.push(long(i));
    }
    let sql = format!("SELECT {} FROM {reference}", select.join(", "));
    let made = loom.call_tool("loom_materialize", json!({"sql": sql, "name": "wide"}));
    assert_not_error(&made);

    let first = loom.call_tool("loom_describe", json!({"ref": "ds_view_wide"}));
    let answer = &first.value["result"]["structuredContent"];
    assert_eq!(answer["columns"], 291, "{:.300}", first.raw);
    assert_eq!(answer["nextOffset"], 50);
    assert_eq!(answer["schema"].as_array().map(Vec::len), Some(50));
    assert_eq!(answer["sample"].as_array().map(Vec::len), Some(10));
    assert_eq!(answer["sample"][0].as_object().map(|r| r.len()), Some(50));

    let mut names: Vec<String> = Vec::new();
    let mut offset = Some(0u64);
    let mut shortened = 0;
    while let Some(at) = offset {
        let page = loom.call_tool(
            "loom_describe",
            json!({"ref": "ds_view_wide", "offset": at, "limit": 200}),
        );
        assert_not_error(&page);
        let text = first_text(&page);
        assert!(text.len() <= 65_536, "a page of {} bytes", text.len());
        let answer = &page.value["result"]["structuredContent"];
        let shown: Vec<String> = answer["schema"]
            .as_array()
            .expect("schema")
            .iter()
            .filter_map(|c| c["name"].as_str().map(str::to_string))
            .collect();
        offset = answer["nextOffset"].as_u64();
        if offset.is_some() && shown.len() < 200 {
            shortened += 1;
        }
        names.extend(shown);
    }
    assert_eq!(names, expected);
    assert!(shortened > 0, "the byte bound shortened a page");

    for (arguments, says) in [
        (
            json!({"ref": "ds_view_wide", "offset": 291}),
            "loom_describe: `offset` 291 is past the end: `ds_view_wide` has 291 columns \
             (offsets 0–290)",
        ),
        (
            json!({"ref": "ds_view_wide", "limit": 201}),
            "loom_describe: `limit` must be from 1 to 200 columns, found 201",
        ),
        (
            json!({"ref": "ds_view_wide", "offset": -5}),
            "loom_describe: `offset` must be a whole number of 0 or more, found -5",
        ),
        (
            json!({"ref": "ds_view_wide", "columns": 5}),
            "loom_describe: unknown argument `columns`",
        ),
    ] {
        let line = loom.call_tool("loom_describe", arguments);
        assert_eq!(line.value["result"]["isError"], true, "{}", line.raw);
        assert!(first_text(&line).contains(says), "{}", line.raw);
    }
    let listed = loom.call("tools/list", json!({}));
    let describe = listed.value["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == "loom_describe")
        .cloned()
        .expect("loom_describe is listed");
    assert_eq!(
        describe["inputSchema"]["properties"]["limit"]["maximum"],
        200
    );
}
