//! Export of 10k × 11 rows (the fixture's user rows) to CSV and JSON by loom's own serializers,
//! to a temporary directory. Target ≤ 50 ms each.
//!
//! Run: `cargo bench --bench export`.

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::export::{Format, export};
use loom::store::{Store, StoreSettings};

fn bench(c: &mut Criterion) {
    let store = Store::new(StoreSettings::default()).expect("store");
    let dataset = common::hold(&store, "rows", &common::user_rows(10_000).to_string());
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
