//! Data shared by the benches: the fixture server's 11-column user rows, and the 20-column
//! tables a session holds.

#![allow(dead_code)] // each bench uses a part of this

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

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

/// A 20-column table (`id`, `user_id`, 18 columns of strings, small integers and floats) as a
/// JSON array text. Tables of different seeds share their small integers and strings, so many
/// column pairs overlap: the expensive case for join hints.
pub fn wide_table(seed: u64, rows: u64) -> String {
    let rows: Vec<Value> = (0..rows)
        .map(|i| {
            let mut row = Map::new();
            row.insert("id".into(), json!(seed * 100_000 + i));
            row.insert("user_id".into(), json!((i * 7919 + seed) % 5000));
            for c in 0..18 {
                let value = match c % 3 {
                    0 => json!(format!("v{}-{}", c, (i + seed) % 97)),
                    1 => json!((i * (c + 1)) % 1000),
                    _ => json!(i as f64 / 3.0),
                };
                row.insert(format!("col_{c}"), value);
            }
            Value::Object(row)
        })
        .collect();
    Value::Array(rows).to_string()
}

/// Hold `text` (a JSON array of objects) as a pinned dataset named after `tool`.
pub fn hold(
    store: &loom::store::Store,
    tool: &str,
    text: &str,
) -> std::sync::Arc<loom::store::Dataset> {
    let ingested = loom::ingest::ingest_json_array(text).expect("ingest");
    store.add(new_dataset(tool, ingested)).expect("add")
}

pub fn new_dataset(tool: &str, ingested: loom::ingest::Ingested) -> loom::store::NewDataset {
    loom::store::NewDataset {
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
        passed_through: false,
        name: None,
    }
}

/// Time `iters` runs of `run` on what `prepare` made (untimed: a tool result arrives already
/// owned), each followed (untimed) by removing what it added to `store`, so every run meets the
/// same store.
pub fn timed_then_reset<I, T>(
    store: &loom::store::Store,
    iters: u64,
    mut prepare: impl FnMut() -> I,
    mut run: impl FnMut(I) -> T,
) -> Duration {
    let before: Vec<String> = store.list().iter().map(|d| d.reference.clone()).collect();
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let input = prepare();
        let start = Instant::now();
        let out = run(input);
        total += start.elapsed();
        drop(out);
        for dataset in store.list() {
            if !before.contains(&dataset.reference) {
                store.remove(&dataset.reference);
            }
        }
    }
    total
}
