//! The engine path around a query and an envelope:
//! * `guard`: statement check + planning + plan walk of a typical join/aggregate query (what every
//!   `loom_query` pays before it runs);
//! * `envelope`: building the envelope (schema, stats already profiled, sample, usage, shrinking)
//!   for a held 10k × 11 dataset;
//! * `query`: whole `loom_query` runs (guard, plan, execution under the value bounds and the
//!   deadline, output bound): the join/aggregate above, every row and column of the 10k dataset
//!   (each value measured on its way out), and a list built per row (a value-building function
//!   measured before it builds).
//!
//! Run: `cargo bench --bench engine`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::envelope::{DatasetView, build};
use loom::store::{Store, StoreSettings};
use serde_json::Map;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let store = Store::new(StoreSettings::default()).expect("store");
    let users = common::hold(&store, "rows", &common::user_rows(10_000).to_string());
    let other = common::hold(&store, "more", &common::user_rows(2_000).to_string());
    let sql = format!(
        "SELECT u.plan, count(*) AS n, avg(o.score) FROM {} u JOIN {} o ON u.id = o.manager_id \
         WHERE u.active GROUP BY u.plan ORDER BY n DESC LIMIT 10",
        users.reference, other.reference
    );
    c.bench_function("guard/plan_and_check_join_query", |b| {
        b.iter(|| runtime.block_on(store.plan_checked(&sql)).expect("plan"))
    });
    for (name, sql) in [
        ("query/join_aggregate_10k", sql.clone()),
        (
            "query/all_rows_10k_x11",
            format!("SELECT * FROM {}", users.reference),
        ),
        (
            "query/make_array_per_row_10k",
            format!(
                "SELECT id, make_array(id, manager_id, id + 1) AS l, concat(name, '-', plan) AS s \
                 FROM {}",
                users.reference
            ),
        ),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| runtime.block_on(store.query(&sql)).expect("query"))
        });
    }
    let view = DatasetView {
        dataset: &users,
        path: "$",
    };
    let envelope = build(std::slice::from_ref(&view), &[], &Map::new(), 600_000);
    println!("envelope: {} chars", envelope.to_string().chars().count());
    c.bench_function("envelope/build_10k_x11", |b| {
        b.iter(|| build(std::slice::from_ref(&view), &[], &Map::new(), 600_000))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
