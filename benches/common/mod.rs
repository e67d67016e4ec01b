//! Data shared by the benches: the fixture server's 11-column user rows.

#![allow(dead_code)] // each bench uses a part of this

use serde_json::{Value, json};

/// `count` user rows of 11 mixed columns, as JSON (the shape benches call "10k × 11").
pub fn user_rows(count: u64) -> Value {
    const COUNTRIES: [&str; 5] = ["DE", "FR", "JP", "US", "BR"];
    const PLANS: [&str; 3] = ["free", "pro", "team"];
    Value::Array(
        (0..count)
            .map(|i| {
                let idx = i as usize;
                json!({
                    "id": i, "name": format!("user-{i}"), "email": format!("user-{i}@example.com"),
                    "score": i as f64 * 1.5, "active": i % 2 == 0,
                    "created": format!("2024-{:02}-{:02}T{:02}:00:00Z", 1 + (i / 28) % 12, 1 + i % 28, i % 24),
                    "country": COUNTRIES[idx % 5], "plan": PLANS[idx % 3],
                    "tags": [format!("t{}", i % 7), format!("g{}", i % 3)],
                    "manager_id": if i % 10 == 0 { Value::Null } else { json!(i / 10) },
                    "balance": (i % 1000) as f64 + 0.25,
                })
            })
            .collect(),
    )
}

/// Hold `text` (a JSON array of objects) as a pinned dataset named after `tool`.
pub fn hold(
    store: &loom::store::Store,
    tool: &str,
    text: &str,
) -> std::sync::Arc<loom::store::Dataset> {
    let ingested = loom::ingest::ingest_json_array(text).expect("ingest");
    store
        .add(loom::store::NewDataset {
            server: "bench".into(),
            tool: tool.into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: loom::store::Provenance {
                server: "bench".into(),
                tool: tool.into(),
                args: Value::Null,
                created_at: String::new(),
                source: "bench".into(),
            },
            pinned: true,
            implicit: false,
            name: None,
        })
        .expect("add")
}
