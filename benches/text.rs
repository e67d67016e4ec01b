//! Formatted-text extraction (SPEC §16): every rung run over one text, the disagreement check,
//! residue and coverage — `loom::intercept::text::extract` — for 10k-row texts of ~1–2 MB each:
//! CSV, a GFM markdown table and the `repr` of a Python list of dicts. Target: ≤ 50 ms each.
//! Ingest to Arrow is measured by `benches/ingest.rs`.
//!
//! Run: `cargo bench --bench text`.

use criterion::{Criterion, criterion_group, criterion_main};
use loom::intercept::text::extract;

const ROWS: usize = 10_000;
const PLANS: [&str; 3] = ["free", "pro", "team"];
const CITIES: [&str; 4] = ["Paris", "São Paulo", "Lagos, NG", "東京"];

struct Row {
    id: usize,
    name: String,
    email: String,
    plan: &'static str,
    city: &'static str,
    score: String,
    created: String,
    note: String,
}

fn rows() -> Vec<Row> {
    (0..ROWS)
        .map(|i| Row {
            id: i,
            name: format!("user {i}"),
            email: format!("user-{i}@example.com"),
            plan: PLANS[i % 3],
            city: CITIES[i % 4],
            score: format!("{}.{:02}", i % 1000, i % 100),
            created: format!("2024-{:02}-{:02}", 1 + i % 12, 1 + i % 28),
            note: if i % 7 == 0 {
                format!("said \"hi\" to {i}, twice")
            } else {
                format!("note {i}")
            },
        })
        .collect()
}

fn csv_text(rows: &[Row]) -> String {
    let mut out = String::from("id,name,email,plan,city,score,created,note\n");
    let quote = |s: &str| {
        if s.contains([',', '"', '\n']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    };
    for r in rows {
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{}\n",
            r.id,
            r.name,
            r.email,
            r.plan,
            quote(r.city),
            r.score,
            r.created,
            quote(&r.note)
        ));
    }
    out
}

fn markdown_text(rows: &[Row]) -> String {
    let mut out = String::from(
        "| id | name | email | plan | city | score | created | note |\n|---:|---|---|---|---|---:|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.id, r.name, r.email, r.plan, r.city, r.score, r.created, r.note
        ));
    }
    out
}

fn python_text(rows: &[Row]) -> String {
    let quote = |s: &str| {
        if s.contains('\'') && !s.contains('"') {
            format!("\"{s}\"")
        } else {
            format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
        }
    };
    let items: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{{'id': {}, 'name': {}, 'email': {}, 'plan': {}, 'city': {}, 'score': {}, 'created': {}, 'note': {}, 'active': {}, 'manager': {}}}",
                r.id,
                quote(&r.name),
                quote(&r.email),
                quote(r.plan),
                quote(r.city),
                r.score,
                quote(&r.created),
                quote(&r.note),
                if r.id % 2 == 0 { "True" } else { "False" },
                if r.id % 10 == 0 { "None".to_string() } else { (r.id / 10).to_string() }
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn bench(c: &mut Criterion) {
    let rows = rows();
    let inputs = [
        ("csv", csv_text(&rows)),
        ("markdown", markdown_text(&rows)),
        ("python_repr", python_text(&rows)),
    ];
    let mut group = c.benchmark_group("text_extract_10k");
    group.sample_size(20);
    for (rung, text) in &inputs {
        // Checked once, outside the timing: each text must really be read by its rung.
        let found = extract(text).unwrap_or_else(|| panic!("{rung}: no table"));
        assert_eq!(found.rung.as_str(), *rung);
        eprintln!("{rung}: {} bytes", text.len());
        group.bench_function(*rung, |b| b.iter(|| extract(std::hint::black_box(text))));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
