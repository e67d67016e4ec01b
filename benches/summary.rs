//! What the model summary stage (SPEC §19.9, issue 30) adds to a call, besides the model's own
//! time: a `tools/call` whose result is a 6,000-line log (~330 KB) through a real loom process in
//! front of the fixture, fixed-count runs with p50/p99, three ways:
//!
//! * `cut`: `llmSummary` off — the deterministic stages and the budget cut (the baseline);
//! * `summary`: `llmSummary` on, against a local endpoint (in this bench: a keep-alive HTTP/1.1
//!   server on a thread that reads the request whole and answers a fixed chat completion at
//!   once), so the difference is loom's part: cutting the input to `maxInputChars`, writing
//!   and sending ~120 KB of JSON, reading and checking the answer;
//! * `refused`: `llmSummary` on, nothing listening — the cost of the fallback path.
//!
//! Run: `cargo bench --bench summary`. Figures go in `benches/README.md`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

#[path = "common/http_sink.rs"]
mod http_sink;
#[path = "common/stdio_client.rs"]
mod stdio_client;
use stdio_client::StdioClient;

const N: usize = 200;
const WARM: usize = 20;
const KEY_VAR: &str = "LOOM_BENCH_LLM_KEY";

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom-fixture"))
}

fn loom_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

fn service_log(lines: usize) -> String {
    (1..=lines)
        .map(|i| {
            format!(
                "2026-12-03T10:{:02}:{:02}Z INFO GET /api/items/{i} 200 in {} ms\n",
                i / 60 % 60,
                i % 60,
                i % 97
            )
        })
        .collect()
}

/// A local chat-completions endpoint answering every request with the same completion: its
/// port.
fn local_endpoint() -> u16 {
    let answer = json!({
        "id": "bench", "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "6,000 lines of GET /api/items/N, all 200; no errors."}}],
        "usage": {"prompt_tokens": 30000, "completion_tokens": 15}
    })
    .to_string();
    http_sink::start("application/json", answer).port()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// `N` calls through loom with `llm` (or none): the latencies and the last answer's header.
fn run(llm: Option<u16>) -> (Vec<Duration>, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = json!({
        "servers": [{"name": "fx", "command": fixture(), "args": ["--name", "fx"]}],
    });
    if let Some(port) = llm {
        config["llm"] = json!({
            "baseUrl": format!("http://127.0.0.1:{port}/v1"),
            "apiKey": format!("${{{KEY_VAR}}}"),
            "model": "bench",
        });
        config["compression"] = json!({"default": {"llmSummary": true}});
    }
    let path = dir.path().join("loom.json");
    std::fs::write(&path, config.to_string()).expect("config");
    let mut loom = StdioClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &[(KEY_VAR, "sk-bench")],
    );
    let result = json!({"content": [{"type": "text", "text": service_log(6000)}]}).to_string();
    let params = json!({"name": "fx_raw", "arguments": {"json": result}});
    let mut samples = Vec::with_capacity(N);
    let mut header = String::new();
    for i in 0..WARM + N {
        let started = Instant::now();
        let answer = loom.call("tools/call", params.clone());
        let took = started.elapsed();
        if i >= WARM {
            samples.push(took);
        }
        header = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
    }
    (samples, header)
}

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| {
        let index = ((samples.len() as f64 - 1.0) * q).round() as usize;
        samples[index].as_secs_f64() * 1000.0
    };
    (at(0.5), at(0.99))
}

/// loom's side of one summary request alone, in this process: the 120,000-character input
/// written as JSON, sent to the local endpoint, the answer read and checked.
fn exchange_alone(port: u16) -> (f64, f64) {
    let config = loom::config::LlmConfig {
        provider: None,
        base_url: format!("http://127.0.0.1:{port}/v1"),
        api_key: loom::config::Secret::new("sk-bench".into()),
        key_source: loom::config::KeySource::Literal,
        model: "bench".into(),
        timeout_ms: 20_000,
        max_input_chars: 120_000,
        max_in_flight: 4,
    };
    let summarizer = loom::llm::Summarizer::new(config).expect("client");
    let input: String = service_log(6000).chars().take(120_000).collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut samples = Vec::with_capacity(N);
    runtime.block_on(async {
        for i in 0..WARM + N {
            let started = Instant::now();
            let summary = summarizer.summarize(&input, None, 7000).await;
            let took = started.elapsed();
            assert!(summary.is_ok(), "{summary:?}");
            if i >= WARM {
                samples.push(took);
            }
        }
    });
    percentiles(samples)
}

fn main() {
    let endpoint = local_endpoint();
    let (alone_p50, alone_p99) = exchange_alone(endpoint);
    println!(
        "one exchange alone (120,000 chars to the local endpoint and back): p50 {alone_p50:.3} ms \
         p99 {alone_p99:.3} ms"
    );
    let (cut, cut_header) = run(None);
    let (summary, summary_header) = run(Some(endpoint));
    let (refused, refused_header) = run(Some(closed_port()));
    let (cut_p50, cut_p99) = percentiles(cut);
    for (label, samples, header) in [
        ("summary (local endpoint)", summary, summary_header),
        ("refused (nothing listening)", refused, refused_header),
    ] {
        let (p50, p99) = percentiles(samples);
        println!(
            "{label}: p50 {p50:.2} ms p99 {p99:.2} ms; the cut alone p50 {cut_p50:.2} ms p99 \
             {cut_p99:.2} ms; added p50 {:.2} ms p99 {:.2} ms\n  header: {header}",
            p50 - cut_p50,
            p99 - cut_p99
        );
    }
    println!("cut header: {cut_header}");
}
