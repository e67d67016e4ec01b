//! What loom adds on the HTTP paths (issue 15), fixed-count runs with p50/p99:
//!
//! * HTTP → loom → stdio: a Streamable HTTP client calling `fx_echo` through `loom serve --http`
//!   in front of the fixture, against a stdio client calling the fixture's `echo` directly.
//! * stdio → loom → HTTP: a stdio client calling `web_exact` through loom in front of the HTTP
//!   fixture (tests/common/http_fixture.py), against an HTTP client calling it directly.
//! * 200 HTTP clients at once, 50 calls each, each call with its own text: answers lost or
//!   crossed (must be 0), and loom's RSS before, after, and after the sessions are closed.
//!
//! Run: `cargo bench --bench http`. Figures go in `benches/README.md`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const N: usize = 2000;
const WARM: usize = 200;

#[path = "common/stdio_client.rs"]
mod stdio_client;
use stdio_client::StdioClient as Stdio1;

/// One Streamable HTTP session.
struct Http1 {
    client: reqwest::Client,
    url: String,
    session: Option<String>,
    next_id: u64,
}

impl Http1 {
    async fn open(client: reqwest::Client, url: &str) -> Http1 {
        let mut session = Http1 {
            client,
            url: url.to_string(),
            session: None,
            next_id: 1,
        };
        let response = session
            .send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "bench", "version": "1"}}}))
            .await;
        session.session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let _ = response.bytes().await;
        let _ = session
            .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
            .bytes()
            .await;
        session
    }

    async fn send(&self, message: Value) -> reqwest::Response {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(message.to_string());
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        request.send().await.expect("sent")
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let response = self
            .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}}))
            .await;
        let body = response.text().await.expect("body");
        // A JSON answer, or an SSE stream whose last event is the answer.
        let text = match body.strip_prefix("event: message\n") {
            None => body,
            Some(_) => body
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .next_back()
                .unwrap_or_default()
                .to_string(),
        };
        let value: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value["id"], json!(id), "{value}");
        value
    }

    async fn close(&self) {
        if let Some(session) = &self.session {
            let _ = self
                .client
                .delete(&self.url)
                .header("mcp-session-id", session)
                .send()
                .await;
        }
    }
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom-fixture"))
}

fn loom() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

fn config(value: Value) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp");
    write!(file, "{value}").expect("write");
    file
}

/// A child that says where it listens on a line of its own (`prefix` then the address).
fn spawn_listening(mut command: Command, stream_is_stderr: bool, prefix: &str) -> (Child, String) {
    command.stdin(Stdio::null());
    if stream_is_stderr {
        command.stderr(Stdio::piped()).stdout(Stdio::null());
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::null());
    }
    let mut child = command.spawn().expect("spawn");
    let reader: Box<dyn std::io::Read + Send> = if stream_is_stderr {
        Box::new(child.stderr.take().expect("stderr"))
    } else {
        Box::new(child.stdout.take().expect("stdout"))
    };
    let (tx, rx) = std::sync::mpsc::channel();
    let prefix = prefix.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(reader).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix(&prefix) {
                let _ = tx.send(rest.to_string());
            }
        }
    });
    let found = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the child says where it listens");
    (child, found)
}

fn loom_http(config: &tempfile::NamedTempFile) -> (Child, String) {
    let mut command = Command::new(loom());
    command
        .args(["serve", "--http", "127.0.0.1:0", "--config"])
        .arg(config.path())
        .env("LOOM_LOG", "error");
    spawn_listening(command, true, "loom: serving MCP at ")
}

fn http_fixture() -> (Child, String) {
    let mut command = Command::new("python3");
    command
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/common/http_fixture.py"
        ))
        .args(["--port", "0"]);
    let (child, port) = spawn_listening(command, false, "listening on ");
    (child, format!("http://127.0.0.1:{port}/mcp"))
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort_unstable();
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.99))
}

fn show(label: &str, direct: (Duration, Duration), via: (Duration, Duration)) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "{label}: direct p50 {:.1} µs p99 {:.1} µs; via loom p50 {:.1} µs p99 {:.1} µs; \
         added p50 {:.1} µs p99 {:.1} µs",
        us(direct.0),
        us(direct.1),
        us(via.0),
        us(via.1),
        us(via.0.saturating_sub(direct.0)),
        us(via.1.saturating_sub(direct.1)),
    );
}

fn stdio_samples(peer: &mut Stdio1, tool: &str, arguments: Value) -> Vec<Duration> {
    let params = json!({"name": tool, "arguments": arguments});
    for _ in 0..WARM {
        peer.call("tools/call", params.clone());
    }
    (0..N)
        .map(|_| {
            let start = Instant::now();
            let answer = peer.call("tools/call", params.clone());
            assert!(answer.get("result").is_some(), "{answer}");
            start.elapsed()
        })
        .collect()
}

async fn http_samples(session: &mut Http1, tool: &str, arguments: Value) -> Vec<Duration> {
    for _ in 0..WARM {
        session.call(tool, arguments.clone()).await;
    }
    let mut samples = Vec::with_capacity(N);
    for _ in 0..N {
        let start = Instant::now();
        let answer = session.call(tool, arguments.clone()).await;
        assert!(answer.get("result").is_some(), "{answer}");
        samples.push(start.elapsed());
    }
    samples
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn threads(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

async fn run() {
    loom::downstream::http::install_crypto_provider();
    let client = reqwest::Client::new();
    let fixture_entry = json!({"name": "fx", "command": fixture(), "args": ["--name", "fx"]});

    // HTTP → loom → stdio.
    let mut direct = Stdio1::spawn(&fixture(), &["--name", "fx"], &[]);
    let direct_samples = stdio_samples(&mut direct, "echo", json!({"text": "ping"}));
    drop(direct);
    let served = config(json!({"servers": [fixture_entry.clone()], "http": {"maxSessions": 512}}));
    let (mut loom_child, url) = loom_http(&served);
    let mut session = Http1::open(client.clone(), &url).await;
    let via = http_samples(&mut session, "fx_echo", json!({"text": "ping"})).await;
    show(
        "HTTP → loom → stdio (fx echo)",
        percentiles(direct_samples),
        percentiles(via),
    );
    session.close().await;

    // 200 clients × 50 calls at once, four times: what later rounds leave behind shows
    // whether closed sessions are freed (the first round also warms the allocator).
    let pid = loom_child.id();
    let before = rss_kib(pid);
    for round in 1..=4 {
        let started = Instant::now();
        let tasks: Vec<_> = (0..200)
            .map(|c| {
                let client = client.clone();
                let url = url.clone();
                tokio::spawn(async move {
                    let mut session = Http1::open(client, &url).await;
                    let mut wrong = 0usize;
                    for i in 0..50 {
                        let text = format!("client {c} call {i}");
                        let answer = session.call("fx_echo", json!({"text": text})).await;
                        if answer["result"]["content"][0]["text"] != json!(text) {
                            wrong += 1;
                        }
                    }
                    (session, wrong)
                })
            })
            .collect();
        let mut sessions = Vec::new();
        let mut wrong = 0;
        let mut lost = 0;
        for task in tasks {
            match task.await {
                Ok((session, w)) => {
                    wrong += w;
                    sessions.push(session);
                }
                Err(_) => lost += 1,
            }
        }
        let elapsed = started.elapsed();
        let during = rss_kib(pid);
        for session in &sessions {
            session.close().await;
        }
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let after = rss_kib(pid);
        println!(
            "round {round}: 200 HTTP clients × 50 calls: {} calls in {:.2} s ({:.0} calls/s); \
             lost clients {lost}, wrong or crossed answers {wrong}; loom RSS {:.1} MiB before, \
             {:.1} MiB with 200 sessions open, {:.1} MiB after they closed; threads {}",
            200 * 50,
            elapsed.as_secs_f64(),
            10_000.0 / elapsed.as_secs_f64(),
            before as f64 / 1024.0,
            during as f64 / 1024.0,
            after as f64 / 1024.0,
            threads(pid),
        );
    }
    let _ = loom_child.kill();
    let _ = loom_child.wait();

    // stdio → loom → HTTP.
    let (mut remote, remote_url) = http_fixture();
    let mut direct = Http1::open(client.clone(), &remote_url).await;
    let direct_samples = http_samples(&mut direct, "exact", json!({})).await;
    let front = config(json!({"mcpServers": {"web": {"url": remote_url}}}));
    let mut via = Stdio1::spawn(
        &loom(),
        &["--config", front.path().to_str().expect("utf8")],
        &[],
    );
    let via_samples = stdio_samples(&mut via, "web_exact", json!({}));
    show(
        "stdio → loom → HTTP (python fixture `exact`)",
        percentiles(direct_samples),
        percentiles(via_samples),
    );
    drop(via);
    let _ = remote.kill();
    let _ = remote.wait();
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}
