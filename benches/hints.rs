//! Join-hint scoring: one new dataset (20 columns) against 50 held datasets × 20 columns, from
//! the sketches computed at ingest. Target ≤ 10 ms.
//!
//! Run: `cargo bench --bench hints`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::hints::hints_for;
use loom::store::{Store, StoreSettings};

fn bench(c: &mut Criterion) {
    let store = Store::new(StoreSettings {
        memory_budget_bytes: u64::MAX,
        ..StoreSettings::default()
    })
    .expect("store");
    for n in 0..50 {
        common::hold(&store, &format!("t{n}"), &common::wide_table(n, 2000));
    }
    let new = common::hold(&store, "new", &common::wide_table(99, 5000));
    let held = store.list();
    let found = hints_for(&new, &held);
    println!("hints found: {}", found.len());
    c.bench_function("hints/score_20_columns_against_50x20", |b| {
        b.iter(|| hints_for(&new, &held))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
