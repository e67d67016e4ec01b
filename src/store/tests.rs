use super::*;
use crate::ingest::ingest_json_array;

fn provenance() -> Provenance {
    Provenance {
        server: "s".into(),
        tool: "t".into(),
        args: serde_json::json!({}),
        created_at: "2026-01-01T00:00:00Z".into(),
        source: "test".into(),
    }
}

fn add_rows(store: &Store, server: &str, tool: &str, text: &str) -> Arc<Dataset> {
    let ingested = ingest_json_array(text).expect("ingest");
    store
        .add(NewDataset {
            server: server.into(),
            tool: tool.into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: provenance(),
            pinned: false,
            implicit: false,
            name: None,
        })
        .expect("add")
}

fn rows(n: usize) -> String {
    let items: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"id": {i}, "name": "user-{i}", "score": {}.5}}"#,
                i % 10
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

#[tokio::test]
async fn refs_are_named_after_server_and_tool_and_numbered() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let a = add_rows(&store, "GitHub", "list-issues", &rows(3));
    let b = add_rows(&store, "GitHub", "list-issues", &rows(3));
    assert_eq!(a.reference, "ds_github_list_issues_1");
    assert_eq!(b.reference, "ds_github_list_issues_2");
    let out = store
        .query("SELECT count(*) AS n, sum(id) AS s FROM ds_github_list_issues_2")
        .await
        .expect("query");
    assert_eq!(out.rows, 1);
}

#[tokio::test]
async fn the_self_test_refuses_everything_forbidden() {
    let store = Store::new(StoreSettings::default()).expect("store");
    store.self_test().await.expect("sealed");
    add_rows(&store, "s", "t", &rows(3));
    for sql in Store::FORBIDDEN {
        let error = store.query(sql).await.expect_err(sql);
        assert!(!error.to_string().is_empty());
    }
}

#[tokio::test]
async fn refusals_name_the_reason() {
    let store = Store::new(StoreSettings::default()).expect("store");
    add_rows(&store, "s", "t", &rows(3));
    let cases = [
        ("SELECT * FROM range(10)", "not a loom dataset"),
        ("COPY (SELECT 1) TO '/tmp/x.csv'", "read-only"),
        (
            "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
            "read-only",
        ),
        ("SELECT repeat('a', 300000000)", "repeat"),
        ("SELECT repeat(name, id) FROM ds_s_t_1", "literal"),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            "recursive",
        ),
    ];
    for (sql, needle) in cases {
        let error = store.query(sql).await.expect_err(sql).to_string();
        assert!(error.contains(needle), "{sql}: {error}");
    }
    let ok = store.query("SELECT repeat(name, 2) FROM ds_s_t_1").await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn eviction_drops_least_recently_used_but_never_pinned_or_new() {
    let store = Store::new(StoreSettings {
        memory_budget_bytes: 1,
        ..StoreSettings::default()
    })
    .expect("store");
    let first = add_rows(&store, "s", "t", &rows(100));
    let second = add_rows(&store, "s", "t", &rows(100));
    // Budget of one byte: only the newest survives.
    assert_eq!(store.references(), vec![second.reference.clone()]);
    assert!(store.was_evicted(&first.reference));
    let error = store
        .query(&format!("SELECT * FROM {}", first.reference))
        .await
        .expect_err("evicted");
    assert!(error.to_string().contains(&first.reference), "{error}");
}

#[test]
fn min_and_max_compare_typed_values() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add_rows(
        &store,
        "s",
        "mm",
        r#"[{"big": 5, "at": "2024-01-01T00:00:00.500000Z"},
            {"big": 123456789012345678901, "at": "2024-01-01T00:00:00Z"},
            {"big": -123456789012345678901, "at": "2024-01-01T00:00:01Z"}]"#,
    );
    let big = &d.profile[0];
    assert_eq!(big.min, Some(serde_json::json!("-123456789012345678901")));
    assert_eq!(big.max, Some(serde_json::json!("123456789012345678901")));
    let at = &d.profile[1];
    assert_eq!(at.min, Some(serde_json::json!("2024-01-01T00:00:00Z")));
    assert_eq!(at.max, Some(serde_json::json!("2024-01-01T00:00:01Z")));
}

#[test]
fn automatic_refs_never_take_a_chosen_name() {
    let store = Store::new(StoreSettings::default()).expect("store");
    let ingested = ingest_json_array(&rows(2)).expect("ingest");
    store
        .add(NewDataset {
            server: "view".into(),
            tool: "x".into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: provenance(),
            pinned: true,
            implicit: false,
            name: Some("ds_view_x_1".into()),
        })
        .expect("view");
    let auto = add_rows(&store, "view", "x", &rows(2));
    assert_eq!(auto.reference, "ds_view_x_2");
}
