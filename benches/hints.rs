//! Join-hint scoring: one new dataset (20 columns) against 50 held datasets × 20 columns, from
//! the sketches computed at ingest. Target ≤ 10 ms.
//!
//! Run: `cargo bench --bench hints`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::hints::hints_for;
use loom::store::{Store, StoreSettings};
use serde_json::{Map, Value, json};

fn table(seed: u64, rows: u64) -> String {
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

fn bench(c: &mut Criterion) {
    let store = Store::new(StoreSettings {
        memory_budget_bytes: u64::MAX,
        ..StoreSettings::default()
    })
    .expect("store");
    for n in 0..50 {
        common::hold(&store, &format!("t{n}"), &table(n, 2000));
    }
    let new = common::hold(&store, "new", &table(99, 5000));
    let held = store.list();
    let found = hints_for(&new, &held);
    println!("hints found: {}", found.len());
    c.bench_function("hints/score_20_columns_against_50x20", |b| {
        b.iter(|| hints_for(&new, &held))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
