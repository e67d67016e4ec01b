//! Added latency of interception: a tool result's raw bytes → datasets + envelope, the whole
//! path (parse, locate, ingest to Arrow, profile, register, envelope). Inputs are the fixture's
//! 11-column user rows: 10k rows as JSON text (~2.5 MB), the same via structuredContent, and
//! 100k rows (~25 MB). Also prints the envelope size, and times the steps of the 10k case
//! (rows → Arrow, profile + register, join hints).
//!
//! Run: `cargo bench --bench ingest`.

use std::sync::Arc;

mod common;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::intercept::{Origin, Outcome, intercept};
use loom::store::{Store, StoreSettings};
use serde_json::json;
use serde_json::value::RawValue;

fn as_text(count: u64) -> Box<RawValue> {
    let result =
        json!({"content": [{"type": "text", "text": common::user_rows(count).to_string()}]});
    RawValue::from_string(result.to_string()).expect("raw")
}

fn as_structured(count: u64) -> Box<RawValue> {
    let rows = common::user_rows(count);
    let result = json!({"content": [{"type": "text", "text": format!("{} users", count)}],
                        "structuredContent": {"users": rows, "total": count}});
    RawValue::from_string(result.to_string()).expect("raw")
}

/// The same rows as CSV text (a formatted-text rung finds the table).
fn as_csv(count: u64) -> Box<RawValue> {
    let mut text = String::from("id,name,email,score,active,created,country,plan,balance\n");
    for row in common::user_rows(count).as_array().into_iter().flatten() {
        text.push_str(&format!(
            "{},{},{},{},{},{},{},{},{}\n",
            row["id"],
            row["name"].as_str().unwrap_or(""),
            row["email"].as_str().unwrap_or(""),
            row["score"],
            row["active"],
            row["created"].as_str().unwrap_or(""),
            row["country"].as_str().unwrap_or(""),
            row["plan"].as_str().unwrap_or(""),
            row["balance"]
        ));
    }
    let result = json!({"content": [{"type": "text", "text": text}]});
    RawValue::from_string(result.to_string()).expect("raw")
}

fn origin() -> Origin {
    Origin {
        server: "bench".into(),
        tool: "rows".into(),
        args: json!({}),
    }
}

/// The store a session has when the result arrives: 10 held datasets of 20 columns × 2,000
/// rows (so join hints are scored against 200 columns, many of which overlap). Every timed run
/// meets this same store: what a run adds is removed, untimed, before the next.
fn store() -> Arc<Store> {
    let store = Arc::new(
        Store::new(StoreSettings {
            memory_budget_bytes: 256 * 1024 * 1024,
            ..StoreSettings::default()
        })
        .expect("store"),
    );
    for n in 0..10 {
        common::hold(&store, &format!("held{n}"), &common::wide_table(n, 2000));
    }
    store
}

fn envelope_chars(outcome: Outcome) -> usize {
    match outcome {
        Outcome::Replaced(v) => v["content"][0]["text"]
            .as_str()
            .map_or(0, |t| t.chars().count()),
        Outcome::PassThrough(_, why) => panic!("not intercepted: {why}"),
        Outcome::Reduced(_) => panic!("reduced as a document, not a table"),
        Outcome::Spliced(..) => panic!("spliced: the bench's tools have no view"),
        Outcome::Summarize(_) => panic!("sent to a model: the bench's policy has no llmSummary"),
    }
}

fn bench(c: &mut Criterion) {
    let store = store();
    let mut group = c.benchmark_group("intercept");
    for (name, input, samples) in [
        ("10k_x11_json_text", as_text(10_000), 20),
        ("10k_x11_structured", as_structured(10_000), 20),
        ("10k_x9_csv_text", as_csv(10_000), 20),
        ("100k_x11_json_text", as_text(100_000), 10),
    ] {
        common::timed_then_reset(
            &store,
            1,
            || input.clone(),
            |input| {
                println!(
                    "{name}: input {} bytes, envelope {} chars",
                    input.get().len(),
                    envelope_chars(intercept(
                        input,
                        &origin(),
                        &store,
                        2000,
                        &loom::config::policy::Policy::default()
                    ))
                )
            },
        );
        group.sample_size(samples);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                common::timed_then_reset(
                    &store,
                    iters,
                    || input.clone(),
                    |input| {
                        intercept(
                            input,
                            &origin(),
                            &store,
                            2000,
                            &loom::config::policy::Policy::default(),
                        )
                    },
                )
            })
        });
    }
    group.finish();

    // Where the 10k JSON-text case spends its time, step by step.
    let mut phases = c.benchmark_group("intercept_phases_10k");
    phases.sample_size(20);
    let rows = common::user_rows(10_000).to_string();
    phases.bench_function("ingest_rows_to_arrow", |b| {
        b.iter(|| loom::ingest::ingest_json_array(&rows).expect("ingest"))
    });
    let ingested = loom::ingest::ingest_json_array(&rows).expect("ingest");
    phases.bench_function("store_add_profile_register", |b| {
        b.iter_custom(|iters| {
            common::timed_then_reset(
                &store,
                iters,
                || common::new_dataset("rows", ingested.clone()),
                |new| store.add(new).expect("add"),
            )
        })
    });
    let new = store
        .add(common::new_dataset("rows", ingested.clone()))
        .expect("add");
    let held = store.list();
    phases.bench_function("join_hints_vs_10x20", |b| {
        b.iter(|| loom::hints::hints_for(&new, &held))
    });
    store.remove(&new.reference);
    phases.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
