//! Formatted-text rungs end to end through a real loom: the fixture's `raw` tool answers with a
//! result whose only content is a large CSV (or markdown) text; loom replaces it with an envelope
//! whose provenance names the rung, and `loom_query` sees every row, typed.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn loom_with_fixture() -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

fn call_raw(loom: &mut RawClient, text: &str) -> Line {
    let result = json!({"content": [{"type": "text", "text": text}]});
    loom.call_tool("fx_raw", json!({"json": result.to_string()}))
}

fn column_type<'a>(envelope: &'a Value, name: &str) -> &'a str {
    envelope["schema"]
        .as_array()
        .expect("schema")
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["type"].as_str())
        .unwrap_or_else(|| panic!("no column {name} in {envelope}"))
}

#[test]
fn a_2000_row_csv_text_becomes_a_csv_dataset_counted_exactly() {
    let (_dir, mut loom) = loom_with_fixture();
    let mut csv = String::from("Contents of /exports/users.csv:\nid,name,plan,score,joined,code\n");
    for i in 0..2000 {
        let plan = ["free", "pro", "team"][i % 3];
        let name = if i % 10 == 0 {
            format!("\"Smith, user {i}\"")
        } else {
            format!("user {i}")
        };
        csv.push_str(&format!(
            "{i},{name},{plan},{}.{},2024-01-{:02},{:03}\n",
            i % 100,
            i % 10,
            i % 28 + 1,
            i % 1000
        ));
    }
    let line = call_raw(&mut loom, &csv);
    let env = envelope(&line);
    assert_eq!(env["provenance"]["source"], "csv");
    assert_eq!(env["rows"], 2000);
    assert_eq!(
        env["context"]["residue"]["before"],
        "Contents of /exports/users.csv:"
    );
    assert_eq!(column_type(&env, "id"), "Int64");
    assert_eq!(column_type(&env, "score"), "Float64");
    assert_eq!(column_type(&env, "joined"), "Date32");
    // `007` is text: leading zeros are part of the value.
    assert_eq!(column_type(&env, "code"), "Utf8");
    let reference = env["ref"].as_str().expect("ref").to_string();
    let out = query(
        &mut loom,
        &format!(
            "SELECT count(*) AS n, sum(id) AS s, count(DISTINCT plan) AS p, \
             sum(CASE WHEN name LIKE 'Smith, %' THEN 1 ELSE 0 END) AS quoted FROM {reference}"
        ),
    );
    assert_eq!(
        out["rows"],
        json!([{"n": 2000, "s": 1_999_000, "p": 3, "quoted": 200}])
    );
    let code = query(
        &mut loom,
        &format!("SELECT code FROM {reference} WHERE id = 7"),
    );
    assert_eq!(code["rows"], json!([{"code": "007"}]));
}

#[test]
fn a_markdown_report_with_two_tables_becomes_two_datasets() {
    let (_dir, mut loom) = loom_with_fixture();
    let mut text = String::from("## Users\n\n| id | login |\n|---|---|\n");
    for i in 0..600 {
        text.push_str(&format!("| {i} | user{i} |\n"));
    }
    text.push_str("\n## Orders\n\n| order | user | total |\n|---|---|---:|\n");
    for i in 0..900 {
        text.push_str(&format!("| o{i} | {} | {}.50 |\n", i % 600, i % 40));
    }
    let line = call_raw(&mut loom, &text);
    let env = envelope(&line);
    assert_eq!(env["provenance"]["source"], "markdown");
    let datasets = env["datasets"].as_array().expect("datasets");
    assert_eq!(datasets.len(), 2, "{env}");
    let users = datasets[0]["ref"].as_str().expect("ref").to_string();
    let orders = datasets[1]["ref"].as_str().expect("ref").to_string();
    let out = query(
        &mut loom,
        &format!(
            "SELECT count(*) AS n, sum(o.total) AS t FROM {orders} o JOIN {users} u ON o.\"user\" = u.id"
        ),
    );
    let expected_total: f64 = (0..900).map(|i| f64::from(i % 40) + 0.5).sum();
    assert_eq!(out["rows"][0]["n"], 900, "{out}");
    assert_eq!(out["rows"][0]["t"].as_f64(), Some(expected_total), "{out}");
}

#[test]
fn prose_with_commas_and_pipes_makes_no_table() {
    let (_dir, mut loom) = loom_with_fixture();
    let text = "Notes, in no order: use a | b, then c | d; see the runbook.\n".repeat(400);
    let result = json!({"content": [{"type": "text", "text": text}]});
    let line = loom.call_tool("fx_raw", json!({"json": result.to_string()}));
    // Not an envelope: only the context firewall's budget cut (SPEC §19), no dataset.
    let shown = first_text(&line);
    assert!(
        shown.starts_with("[loom: text reduced"),
        "{:.300}",
        line.raw
    );
    assert!(line.value["result"].get("structuredContent").is_none());
    let list = loom.call_tool("loom_list_datasets", json!({}));
    let held = &list.value["result"]["structuredContent"]["datasets"];
    assert!(
        held.as_array()
            .is_some_and(|d| d.iter().all(|d| d["kind"] == "document")),
        "{held}"
    );
}
