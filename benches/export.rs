//! Export of 10k × 11 rows (the fixture's user rows) to CSV and JSON by loom's own serializers,
//! to a temporary directory. Target ≤ 50 ms each.
//!
//! Run: `cargo bench --bench export`.

use criterion::{Criterion, criterion_group, criterion_main};
use loom::export::{Format, export};
use loom::ingest::ingest_json_array;
use loom::store::{NewDataset, Provenance, Store, StoreSettings};
use serde_json::{Value, json};

fn rows(count: u64) -> String {
    const COUNTRIES: [&str; 5] = ["DE", "FR", "JP", "US", "BR"];
    const PLANS: [&str; 3] = ["free", "pro", "team"];
    let rows: Vec<Value> = (0..count)
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
        .collect();
    Value::Array(rows).to_string()
}

fn bench(c: &mut Criterion) {
    let store = Store::new(StoreSettings::default()).expect("store");
    let ingested = ingest_json_array(&rows(10_000)).expect("ingest");
    let dataset = store
        .add(NewDataset {
            server: "bench".into(),
            tool: "rows".into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: Provenance {
                server: "bench".into(),
                tool: "rows".into(),
                args: Value::Null,
                created_at: String::new(),
                source: "bench".into(),
            },
            pinned: true,
            implicit: false,
            name: None,
        })
        .expect("add");
    let dir = tempfile::tempdir().expect("dir");
    let mut group = c.benchmark_group("export_10k_x11");
    for (name, format) in [("csv", Format::Csv), ("json", Format::Json)] {
        let written =
            export(&dataset, format, dir.path(), &format!("out.{name}"), true).expect("export");
        println!("{name}: {} rows, {} bytes", written.rows, written.bytes);
        group.bench_function(name, |b| {
            b.iter(|| {
                export(&dataset, format, dir.path(), &format!("out.{name}"), true).expect("export")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
