//! Tool search (SPEC §20.3) over the 22 real servers' 294 tools of `testdata/tools/`: what a
//! `loom_find_tools` call costs by words alone (BM25F) and with the sentence model
//! (`tools.searchModel`, all-MiniLM-L6-v2 as `.ci/setup-model` installs it):
//!
//! * `words/index_294` and `words/query`: building the BM25F index, one query over it.
//! * `meaning/query_vector`: embedding one query (what each search adds on the call).
//! * `meaning/rank`: the fused ranking once the vectors are there (BM25F + 294 cosines).
//! * `meaning/tool_vector`: embedding one tool's text; then, fixed-count, all 294 once (what the
//!   background thread does after loom starts, and what a first search may wait for).
//!
//! Run: `cargo bench --bench search` (the figures in benches/README.md came from
//! `cargo bench --profile dev --bench search`: the debug build the tests run, whose candle and
//! gemm are optimized, Cargo.toml says why). Without the model only the `words/*` run.

use std::path::Path;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
use loom::gateway::search::{ToolIndex, ToolText, params_of, title_of};
use loom::gateway::semantic::{SentenceModel, text_of};
use serde_json::Value;

const QUERY: &str = "make the header row of the budget sheet bold";

fn tools() -> Vec<ToolText> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/tools");
    let mut tools = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("testdata/tools") {
        let path = entry.expect("an entry").path();
        let server = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if path.extension().is_none_or(|e| e != "json")
            || server.starts_with("holdout")
            || server == "queries"
        {
            continue;
        }
        let list: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("a list"))
            .expect("a JSON tool list");
        for tool in list.as_array().expect("an array") {
            let name = tool["name"].as_str().expect("a name");
            tools.push(ToolText {
                name: format!("{server}_{name}"),
                server: server.clone(),
                tool: name.to_owned(),
                title: tool.as_object().map(title_of).unwrap_or_default(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                params: params_of(&tool["inputSchema"]),
            });
        }
    }
    tools
}

fn bench(c: &mut Criterion) {
    let tools = tools();
    println!("{} tools", tools.len());
    c.bench_function("words/index_294", |b| {
        b.iter(|| ToolIndex::build(tools.clone()))
    });
    let index = ToolIndex::build(tools.clone());
    c.bench_function("words/query", |b| b.iter(|| index.search(QUERY, 5)));

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/models/all-MiniLM-L6-v2");
    if !dir.join("model.safetensors").is_file() {
        println!(
            "no model at {}: meaning/* left out (bash .ci/setup-model)",
            dir.display()
        );
        return;
    }
    let started = Instant::now();
    let model = SentenceModel::load(&dir).expect("the model loads");
    println!(
        "model load: {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let texts: Vec<String> = tools.iter().map(text_of).collect();
    let started = Instant::now();
    let vectors: Vec<Option<std::sync::Arc<[f32]>>> = texts
        .iter()
        .map(|t| Some(model.embed(t).expect("a tool embeds").into()))
        .collect();
    let all = started.elapsed();
    println!(
        "all {} tool vectors: {:.2} s ({:.1} ms each)",
        texts.len(),
        all.as_secs_f64(),
        all.as_secs_f64() * 1e3 / texts.len() as f64
    );
    c.bench_function("meaning/query_vector", |b| {
        b.iter(|| model.embed(QUERY).expect("embeds"))
    });
    let query = model.embed(QUERY).expect("embeds");
    c.bench_function("meaning/rank", |b| {
        b.iter(|| index.search_with_meaning(QUERY, 5, Some((&query, &vectors))))
    });
    let longest = texts.iter().max_by_key(|t| t.len()).expect("a text");
    c.bench_function("meaning/tool_vector_longest", |b| {
        b.iter(|| model.embed(longest).expect("embeds"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
