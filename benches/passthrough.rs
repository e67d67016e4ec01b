//! What loom adds to a tool call, and what it costs to keep running.
//!
//! * `passthrough/direct` vs `passthrough/via_loom`: one `tools/call` round trip (a small `echo`)
//!   against the fixture server directly and through a real loom process in front of it.
//! * After criterion, a fixed-count run prints p50/p99 of both and the difference (criterion
//!   reports central tendency; the tail needs percentiles), loom's idle RSS, and cold start:
//!   spawn → first `tools/list` answer through loom, against spawn → `initialize` answer of the
//!   fixture alone (loom starts its children in parallel, so the gap is loom's own start-up).
//!
//! * Under load: the same p50/p99 through loom while 4 heavy `loom_query` calls (a 3-way join
//!   on a 3-valued key of a 5,000-row dataset, far beyond what finishes before the timeout) run
//!   on the engine, against idle.
//!
//! Run: `cargo bench --bench passthrough`. Figures go in `benches/README.md`.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
}

impl Peer {
    fn spawn(program: &PathBuf, args: &[&str]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("LOOM_LOG", "error")
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        Self {
            child,
            stdin,
            stdout,
            next_id: 1,
            line: String::new(),
        }
    }

    /// Send a request, read lines until its response.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{message}").expect("write");
        self.stdin.flush().expect("flush");
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).expect("read") > 0,
                "closed"
            );
            let value: Value = serde_json::from_str(&self.line).expect("json");
            if value["id"] == json!(id) {
                return value;
            }
        }
    }

    fn initialize(&mut self) {
        self.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        writeln!(
            self.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
    }

    fn echo(&mut self, tool: &str) {
        let answer = self.call(
            "tools/call",
            json!({"name": tool, "arguments": {"text": "ping"}}),
        );
        assert!(answer.get("result").is_some(), "{answer}");
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom-fixture"))
}

fn loom() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

fn config_file() -> tempfile::NamedTempFile {
    config_with(json!({}))
}

/// A config with the fixture as `fx` and `settings` at the top level.
fn config_with(settings: Value) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp");
    let mut config =
        json!({"servers": [{"name": "fx", "command": fixture(), "args": ["--name", "fx"]}]});
    if let (Some(config), Some(settings)) = (config.as_object_mut(), settings.as_object()) {
        config.extend(settings.clone());
    }
    write!(file, "{config}").expect("write");
    file
}

fn direct() -> Peer {
    let mut peer = Peer::spawn(&fixture(), &["--name", "fx"]);
    peer.initialize();
    peer
}

fn via_loom(config: &tempfile::NamedTempFile) -> Peer {
    let path = config.path().to_str().expect("utf8").to_string();
    let mut peer = Peer::spawn(&loom(), &["--config", &path]);
    peer.initialize();
    peer
}

fn bench_calls(c: &mut Criterion) {
    let config = config_file();
    let mut group = c.benchmark_group("passthrough");
    let mut d = direct();
    group.bench_function("direct", |b| b.iter(|| d.echo("echo")));
    let mut l = via_loom(&config);
    group.bench_function("via_loom", |b| b.iter(|| l.echo("fx_echo")));
    group.finish();
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn timed(peer: &mut Peer, tool: &str, n: usize) -> Vec<Duration> {
    for _ in 0..200 {
        peer.echo(tool);
    }
    let mut samples: Vec<Duration> = (0..n)
        .map(|_| {
            let start = Instant::now();
            peer.echo(tool);
            start.elapsed()
        })
        .collect();
    samples.sort_unstable();
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

fn report() {
    const N: usize = 5000;
    let config = config_file();
    // Interleave rounds so drift on a shared machine hits both sides alike.
    let (mut all_direct, mut all_loom) = (Vec::new(), Vec::new());
    let mut d = direct();
    let mut l = via_loom(&config);
    for _ in 0..5 {
        all_direct.extend(timed(&mut d, "echo", N / 5));
        all_loom.extend(timed(&mut l, "fx_echo", N / 5));
    }
    all_direct.sort_unstable();
    all_loom.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, d99) = (percentile(&all_direct, 0.5), percentile(&all_direct, 0.99));
    let (l50, l99) = (percentile(&all_loom, 0.5), percentile(&all_loom, 0.99));
    println!("\npassthrough round trip, {N} calls each (µs)");
    println!("  direct    p50 {:8.1}  p99 {:8.1}", us(d50), us(d99));
    println!("  via loom  p50 {:8.1}  p99 {:8.1}", us(l50), us(l99));
    println!(
        "  overhead  p50 {:8.1}  p99 {:8.1}",
        us(l50) - us(d50),
        us(l99) - us(d99)
    );
    std::thread::sleep(Duration::from_millis(500));
    println!(
        "loom idle RSS after {N} calls: {} KiB",
        rss_kib(l.child.id())
    );
    drop(l);

    let mut loom_starts = Vec::new();
    let mut fixture_starts = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let mut f = Peer::spawn(&fixture(), &["--name", "fx"]);
        f.initialize();
        fixture_starts.push(start.elapsed());
        drop(f);
        let start = Instant::now();
        let mut l = via_loom(&config);
        l.call("tools/list", json!({}));
        loom_starts.push(start.elapsed());
        let fresh_rss = rss_kib(l.child.id());
        if loom_starts.len() == 1 {
            println!("loom idle RSS right after start: {fresh_rss} KiB");
        }
    }
    loom_starts.sort_unstable();
    fixture_starts.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "cold start (median of 20): fixture alone to initialize {:.1} ms; loom to first tools/list {:.1} ms; gap {:.1} ms",
        ms(percentile(&fixture_starts, 0.5)),
        ms(percentile(&loom_starts, 0.5)),
        ms(percentile(&loom_starts, 0.5)) - ms(percentile(&fixture_starts, 0.5)),
    );
}

/// Passthrough latency while heavy queries run, against idle, on one loom.
fn report_under_load() {
    const N: usize = 2000;
    const HEAVY: usize = 4;
    let config = config_with(json!({"queryTimeoutMs": 60_000}));
    let mut l = via_loom(&config);
    let envelope = l.call(
        "tools/call",
        json!({"name": "fx_rows", "arguments": {"count": 5000}}),
    );
    let reference = envelope["result"]["structuredContent"]["ref"]
        .as_str()
        .expect("an envelope")
        .to_string();
    let idle = timed(&mut l, "fx_echo", N);
    // Fire the heavy queries without waiting: their answers are skipped by `call` while the
    // echoes are timed (each runs to the 60 s timeout, longer than the timed calls take).
    // A key join on a 3-valued column (1.4e10 rows streamed through the filter): passes every
    // guard (a cross join of this size is refused) and keeps the engine busy until the timeout.
    let sql = format!(
        "SELECT count(*) AS n FROM {reference} a JOIN {reference} b ON a.plan = b.plan \
         JOIN {reference} c ON b.plan = c.plan WHERE a.id + b.id + c.id = 7"
    );
    for i in 0..HEAVY {
        let message = json!({"jsonrpc": "2.0", "id": format!("heavy-{i}"), "method": "tools/call",
                             "params": {"name": "loom_query", "arguments": {"sql": sql}}});
        writeln!(l.stdin, "{message}").expect("write");
    }
    l.stdin.flush().expect("flush");
    std::thread::sleep(Duration::from_millis(500));
    let loaded = timed(&mut l, "fx_echo", N);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("\npassthrough through loom, {N} calls (µs), idle vs {HEAVY} heavy queries running");
    println!(
        "  idle    p50 {:8.1}  p99 {:8.1}",
        us(percentile(&idle, 0.5)),
        us(percentile(&idle, 0.99))
    );
    println!(
        "  loaded  p50 {:8.1}  p99 {:8.1}",
        us(percentile(&loaded, 0.5)),
        us(percentile(&loaded, 0.99))
    );
}

criterion_group!(benches, bench_calls);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    report();
    report_under_load();
}
