//! The context firewall's stages on real inputs (SPEC §19): a Python documentation page scaled to
//! ~1 MB of HTML reduced to Markdown (target ≤ 50 ms), a 5.7 MB npm packument summarised (target
//! ≤ 60 ms, parse included), base64 lifting and the budget cut over a 5 MB log, and the whole
//! pipeline on a tool result (document kept, stages run, header written).
//!
//! Run: `cargo bench --bench firewall`. Prints each input's reduction once.

use std::io::Read;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::config::policy::Policy;
use loom::intercept::Origin;
use loom::reduce::{budget, html, json};
use loom::store::{Store, StoreSettings};
use serde_json::json;

fn testdata(path: &str) -> String {
    let full = format!("{}/testdata/{path}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&full).unwrap_or_else(|e| panic!("{full}: {e}"));
    if path.ends_with(".gz") {
        let mut text = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .expect("gzip");
        text
    } else {
        String::from_utf8(bytes).expect("utf-8")
    }
}

/// A page of about 1 MB: the largest corpus page, its article repeated inside one body.
fn one_megabyte_page() -> String {
    let page = testdata("html/pages/py_library_datetime.html");
    let (head, rest) = page.split_at(page.find("<body").unwrap_or(0));
    let mut out = head.to_string();
    while out.len() + rest.len() < 1_000_000 {
        out.push_str(rest);
    }
    out
}

fn log(bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 100);
    let mut n = 0;
    while out.len() < bytes {
        n += 1;
        out.push_str(&format!(
            "2026-12-01T00:00:{:02}Z INFO request {n} served in {} ms\n",
            n % 60,
            n % 17
        ));
    }
    out
}

fn origin() -> Origin {
    Origin {
        server: "bench".into(),
        tool: "fetch".into(),
        args: json!({}),
    }
}

fn stages(c: &mut Criterion) {
    let page = one_megabyte_page();
    let packument = testdata("json/registry_types_node_trimmed.json.gz");
    let big_log = log(5_000_000);
    let options = json::JsonOptions {
        document_ref: "doc_1".into(),
        ..Default::default()
    };
    if let Ok(reduced) = html::reduce_page(&page, &mut |_, _| None) {
        eprintln!(
            "page: {} → {} chars of Markdown",
            page.chars().count(),
            reduced.markdown.chars().count()
        );
    }
    if let Some(summary) = json::summarize(&packument, &options, &mut |_, _| None) {
        eprintln!(
            "packument: {} → {} chars",
            packument.len(),
            summary.json.len()
        );
    }
    let mut group = c.benchmark_group("firewall");
    group.sample_size(20);
    group.bench_function("html_1MB_to_markdown", |b| {
        b.iter(|| html::reduce_page(&page, &mut |_, _| None))
    });
    group.bench_function("json_5.7MB_summary", |b| {
        b.iter(|| json::summarize(&packument, &options, &mut |_, _| None))
    });
    group.bench_function("base64_scan_5MB_log", |b| {
        b.iter(|| loom::reduce::binary::lift_binary(&big_log, 1024, &mut |_| None))
    });
    group.bench_function("budget_cut_5MB_log", |b| {
        b.iter(|| {
            budget::cut_to_budget(&big_log, 7000, budget::Keep::HeadAndTail, &|o| {
                format!("[{} left out]", o.length)
            })
        })
    });
    let store = Store::new(StoreSettings {
        memory_budget_bytes: 4 << 30,
        ..StoreSettings::default()
    })
    .expect("store");
    let policy = Policy::default();
    let page_result = json!({"content": [{"type": "text", "text": page}]}).to_string();
    group.bench_function("pipeline_1MB_page_result", |b| {
        b.iter(|| loom::reduce::reduce(&page_result, &origin(), &store, &policy))
    });
    group.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
