//! What loom adds to a tool call, and what it costs to keep running.
//!
//! * `passthrough/direct` vs `passthrough/via_loom`: one `tools/call` round trip (a small `echo`)
//!   against the fixture server directly and through a real loom process in front of it.
//! * `through_loom/intercept_10k_rows`: a 10,000-row result through loom to its envelope (ingest,
//!   statistics, hints); `through_loom/query_join_aggregate`: a `loom_query` join + aggregate
//!   over it. `LOOM_BENCH_BIN` runs another build of loom (e.g. packaging/dist.sh's) instead of
//!   this bench's, to compare code generation on one source.
//! * After criterion, a fixed-count run prints p50/p99 of three sides in one run: the fixture
//!   directly, through a bare relay (this bench binary re-executed as a 30-line program that
//!   copies lines both ways with blocking threads and parses nothing: the floor any stdio proxy
//!   pays for two more pipe hops), and through loom; with 1, 10 and 100 callers keeping a call
//!   each in flight on the one connection. The figures that matter are what the relay and loom
//!   add to the direct p50/p99, and their ratio. Then loom's idle RSS (with its split into
//!   anonymous and file-backed pages), and cold start:
//!   spawn → first `tools/list` answer through loom, against spawn → `initialize` answer of the
//!   fixture alone (loom starts its children in parallel, so the gap is loom's own start-up).
//!
//! * Under load: the same p50/p99 through loom while 4 heavy `loom_query` calls (a 3-way join
//!   on a 3-valued key of a 5,000-row dataset, far beyond what finishes before the timeout) run
//!   on the engine, against idle.
//!
//! * Telemetry (SPEC §24): `telemetry/off`, `telemetry/traces` (spans to an OTLP collector that
//!   answers at once) and `telemetry/traces_metrics_audit` (with `--metrics` and the audit log
//!   too), and a fixed-count p50/p99 of off against each part on and all on (`LOOM_BENCH_TELEMETRY_ONLY=1` with
//!   `-- telemetry` runs these alone).
//!
//! * The official client: benches/official_client.py drives the Python SDK (.ci/venv) in each of
//!   its modes through server-everything (.ci/node) directly, through the bare relay and through
//!   loom — the setup a user has, where the SDK's own cost and a real server's are part of every
//!   call (run when .ci/setup-interop has installed them; skipped, with a note, otherwise).
//!
//! Run: `cargo bench --bench passthrough` (append `-- skip` to skip criterion and print only the
//! fixed-count figures; set `LOOM_BENCH_CRITERION_ONLY=1` for criterion alone,
//! `LOOM_BENCH_CALLERS_ONLY=1` for the callers' rounds alone, with `LOOM_BENCH_CALLERS=10` and
//! `LOOM_BENCH_N=100000` to run one case longer under a profiler: the pids go to stderr). Figures
//! go in `benches/README.md`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use serde_json::{Value, json};

#[path = "common/http_sink.rs"]
mod http_sink;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    line: String,
    /// The 2026-07-28 envelope every request carries (a client of that revision), if any.
    envelope: Option<Value>,
}

impl Peer {
    fn spawn(program: &PathBuf, args: &[&str]) -> Self {
        let mut command = Command::new(program);
        command.args(args);
        Self::from_command(command)
    }

    fn from_command(mut command: Command) -> Self {
        let mut child = command
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
            envelope: None,
        }
    }

    /// Send a request without waiting; returns its id.
    fn send(&mut self, method: &str, mut params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if let (Some(envelope), Some(object)) = (&self.envelope, params.as_object_mut()) {
            object.insert("_meta".into(), envelope.clone());
        }
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // One write per message, as clients write: `writeln!` of a `Value` on the unbuffered
        // pipe wrote each token on its own (a 2026-07-28 request in ~20 pieces), and loom woke
        // for each — what made the 2026-07-28 hop look 4× slower at 10 callers.
        let mut line = serde_json::to_vec(&message).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write");
        id
    }

    /// Read lines until the next response (a message with a numeric id and no method).
    fn next_response(&mut self) -> (u64, Value) {
        loop {
            self.line.clear();
            assert!(
                self.stdout.read_line(&mut self.line).expect("read") > 0,
                "closed"
            );
            let value: Value = serde_json::from_str(&self.line).expect("json");
            if let (Some(id), None) = (value["id"].as_u64(), value.get("method")) {
                return (id, value);
            }
        }
    }

    /// Send a request, read lines until its response.
    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let (answered, value) = self.next_response();
            if answered == id {
                return value;
            }
        }
    }

    /// Send an `echo` call without waiting; returns its id.
    fn send_echo(&mut self, tool: &str) -> u64 {
        self.send(
            "tools/call",
            json!({"name": tool, "arguments": {"text": "ping"}}),
        )
    }

    /// Read lines until a response, which must be a result; returns its id.
    fn read_response(&mut self) -> u64 {
        let (id, value) = self.next_response();
        assert!(value.get("result").is_some(), "{value}");
        id
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

/// The loom under test: this build's, or `LOOM_BENCH_BIN` (to compare two builds of one source,
/// e.g. the release profile against packaging/dist.sh's fat-LTO `dist` profile).
fn loom() -> PathBuf {
    std::env::var_os("LOOM_BENCH_BIN")
        .filter(|path| !path.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_loom")))
}

/// The config of the passthrough rounds: the fixture, plus the top-level settings in
/// `LOOM_BENCH_CONFIG` (JSON) when set, to compare one binary with a setting on and off (e.g.
/// `{"compression": {"default": {"keepSmallTables": false}}}`).
fn config_file() -> tempfile::NamedTempFile {
    let settings = std::env::var("LOOM_BENCH_CONFIG")
        .ok()
        .map(|text| serde_json::from_str(&text).expect("LOOM_BENCH_CONFIG is JSON"))
        .unwrap_or_else(|| json!({}));
    config_with(settings)
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

/// loom with a client of 2026-07-28: no `initialize`, the envelope on every request (the
/// SDKs' default mode against loom).
fn via_loom_2026(config: &tempfile::NamedTempFile) -> Peer {
    let path = config.path().to_str().expect("utf8").to_string();
    let mut peer = Peer::spawn(&loom(), &["--config", &path]);
    peer.envelope = Some(json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    }));
    peer.call("tools/list", json!({}));
    peer
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

/// The ref of a `count`-row dataset made by calling the fixture's `rows` through loom.
fn rows_dataset(loom: &mut Peer, count: usize) -> String {
    let envelope = loom.call(
        "tools/call",
        json!({"name": "fx_rows", "arguments": {"count": count}}),
    );
    envelope["result"]["structuredContent"]["ref"]
        .as_str()
        .expect("an envelope")
        .to_string()
}

fn bench_calls(c: &mut Criterion) {
    let config = config_file();
    let mut group = c.benchmark_group("passthrough");
    let mut d = direct();
    group.bench_function("direct", |b| b.iter(|| d.echo("echo")));
    let mut r = via_relay();
    group.bench_function("via_relay", |b| b.iter(|| r.echo("echo")));
    let mut l = via_loom(&config);
    group.bench_function("via_loom", |b| b.iter(|| l.echo("fx_echo")));
    group.finish();

    // The data path through the same process: what a build's code generation changes (the
    // in-process `ingest` and `engine` benches measure the same stages without the hops).
    let mut group = c.benchmark_group("through_loom");
    group.sample_size(20);
    group.bench_function("intercept_10k_rows", |b| {
        b.iter(|| {
            let answer = l.call(
                "tools/call",
                json!({"name": "fx_rows", "arguments": {"count": 10_000}}),
            );
            assert!(
                answer["result"]["structuredContent"]["ref"].is_string(),
                "{answer}"
            );
        })
    });
    let reference = rows_dataset(&mut l, 10_000);
    let sql = format!(
        "SELECT a.active, count(*) AS n, avg(a.score) AS mean, max(b.email) AS last \
         FROM {reference} a JOIN {reference} b ON a.id = b.id GROUP BY a.active ORDER BY n"
    );
    group.bench_function("query_join_aggregate", |b| {
        b.iter(|| {
            let answer = l.call(
                "tools/call",
                json!({"name": "loom_query", "arguments": {"sql": sql}}),
            );
            assert!(answer["result"]["content"].is_array(), "{answer}");
            assert_ne!(answer["result"]["isError"], json!(true), "{answer}");
        })
    });
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

/// VmRSS of `pid` with its split into anonymous and file-backed pages, in MiB.
fn rss_line(pid: u32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> f64 {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    format!(
        "{:.1} MiB (anonymous {:.1}, file-backed {:.1})",
        field("VmRSS:"),
        field("RssAnon:"),
        field("RssFile:")
    )
}

/// The environment variable that turns this bench binary into the bare relay.
const RELAY_ENV: &str = "LOOM_BENCH_RELAY";

/// The bare relay: start the command given as arguments and copy lines both ways, one blocking
/// thread per direction, flushing each line. It parses nothing, so what it adds is the cost of
/// two more pipe hops and a thread wake-up each way.
fn relay(args: &[String]) -> ! {
    let mut child = Command::new(&args[0])
        .args(&args[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("relay: spawn");
    let mut to_child = child.stdin.take().expect("stdin");
    let mut from_child = BufReader::new(child.stdout.take().expect("stdout"));
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let mut stdout = std::io::stdout().lock();
        while from_child.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
            stdout
                .write_all(&line)
                .and_then(|()| stdout.flush())
                .expect("relay: write");
            line.clear();
        }
    });
    let mut stdin = std::io::stdin().lock();
    let mut line = Vec::new();
    while stdin.read_until(b'\n', &mut line).unwrap_or(0) > 0 {
        if to_child
            .write_all(&line)
            .and_then(|()| to_child.flush())
            .is_err()
        {
            break;
        }
        line.clear();
    }
    drop(to_child);
    let _ = child.wait();
    std::process::exit(0)
}

fn via_relay() -> Peer {
    let exe = std::env::current_exe().expect("bench binary");
    let fixture = fixture();
    let fixture = fixture.to_str().expect("utf8");
    let mut child = Command::new(exe);
    child.env(RELAY_ENV, "1").args([fixture, "--name", "fx"]);
    let mut peer = Peer::from_command(child);
    peer.initialize();
    peer
}

/// `callers` closed-loop callers on one connection: each keeps one `echo` in flight and sends
/// the next as soon as its answer arrives, until `total` answers were timed (after a warm-up).
fn closed_loop(peer: &mut Peer, tool: &str, callers: usize, total: usize) -> Vec<Duration> {
    let mut in_flight: HashMap<u64, Instant> = HashMap::new();
    let mut samples = Vec::with_capacity(total);
    let warm_up = 200;
    let mut sent = 0;
    for _ in 0..callers {
        let id = peer.send_echo(tool);
        in_flight.insert(id, Instant::now());
        sent += 1;
    }
    while samples.len() < total {
        let id = peer.read_response();
        let Some(start) = in_flight.remove(&id) else {
            continue;
        };
        let elapsed = start.elapsed();
        if sent > warm_up + callers {
            samples.push(elapsed);
        }
        let id = peer.send_echo(tool);
        in_flight.insert(id, Instant::now());
        sent += 1;
    }
    // Drain the calls still in flight so the next run starts on a quiet connection.
    while !in_flight.is_empty() {
        let id = peer.read_response();
        in_flight.remove(&id);
    }
    samples
}

fn report() {
    // `LOOM_BENCH_N` calls per side (default 5,000) and `LOOM_BENCH_CALLERS` (e.g. `10`, or
    // `1,10,100`, the default): to look at one case longer, with a profiler on the printed pids.
    let n: usize = std::env::var("LOOM_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let caller_counts: Vec<usize> = std::env::var("LOOM_BENCH_CALLERS")
        .ok()
        .map(|v| v.split(',').filter_map(|c| c.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1, 10, 100]);
    let config = config_file();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mut d = direct();
    let mut r = via_relay();
    let mut l = via_loom(&config);
    let mut m = via_loom_2026(&config);
    eprintln!(
        "pids: direct {}, relay {}, loom {}, loom for 2026-07-28 {}",
        d.child.id(),
        r.child.id(),
        l.child.id(),
        m.child.id()
    );
    println!("\npassthrough round trip, {n} calls per side and concurrency (µs)");
    for callers in caller_counts {
        // Interleave rounds so drift on a shared machine hits all sides alike.
        let (mut all_direct, mut all_relay, mut all_loom, mut all_modern) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..5 {
            all_direct.extend(closed_loop(&mut d, "echo", callers, n / 5));
            all_relay.extend(closed_loop(&mut r, "echo", callers, n / 5));
            all_loom.extend(closed_loop(&mut l, "fx_echo", callers, n / 5));
            all_modern.extend(closed_loop(&mut m, "fx_echo", callers, n / 5));
        }
        for samples in [
            &mut all_direct,
            &mut all_relay,
            &mut all_loom,
            &mut all_modern,
        ] {
            samples.sort_unstable();
        }
        let p = |s: &[Duration], q: f64| us(percentile(s, q));
        let (d50, d99) = (p(&all_direct, 0.5), p(&all_direct, 0.99));
        let (r50, r99) = (p(&all_relay, 0.5) - d50, p(&all_relay, 0.99) - d99);
        let (l50, l99) = (p(&all_loom, 0.5) - d50, p(&all_loom, 0.99) - d99);
        let (m50, m99) = (p(&all_modern, 0.5) - d50, p(&all_modern, 0.99) - d99);
        println!("  {callers:>3} callers  direct p50 {d50:8.1}  p99 {d99:8.1}");
        println!("               relay adds p50 {r50:8.1}  p99 {r99:8.1}");
        println!(
            "               loom adds  p50 {l50:8.1}  p99 {l99:8.1}   (p50 {:.1}× the relay's)",
            l50 / r50.max(0.1)
        );
        println!(
            "  loom, 2026-07-28 adds  p50 {m50:8.1}  p99 {m99:8.1}   (p50 {:.1}× the relay's)",
            m50 / r50.max(0.1)
        );
    }
    drop(d);
    drop(r);
    drop(m);
    std::thread::sleep(Duration::from_millis(1500));
    println!("loom idle RSS after the calls: {}", rss_line(l.child.id()));
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
        if loom_starts.len() == 1 {
            // Idle: loom hands back its start-up pages one second after start (SPEC §2).
            std::thread::sleep(Duration::from_millis(1500));
            println!(
                "loom idle RSS right after the first tools/list: {}",
                rss_line(l.child.id())
            );
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
    let reference = rows_dataset(&mut l, 5000);
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

/// An OTLP/HTTP collector that takes every export and answers 200 at once (the bench measures
/// loom's side of tracing, not a collector's).
fn otlp_sink() -> String {
    let address = http_sink::start("application/x-protobuf", String::new());
    format!("http://{address}")
}

/// loom over `config` with `env` added (the OTEL_* variables) and `args` (`--metrics`).
fn via_loom_with(config: &tempfile::NamedTempFile, env: &[(&str, &str)], args: &[&str]) -> Peer {
    let path = config.path().to_str().expect("utf8").to_string();
    let mut command = Command::new(loom());
    command.args(["--config", &path]).args(args);
    command.envs(env.iter().copied());
    let mut peer = Peer::from_command(command);
    peer.initialize();
    peer
}

/// The hop with telemetry off, with traces on (to a collector that answers at once), and with
/// traces, metrics and the audit log all on (SPEC §24).
fn bench_telemetry(c: &mut Criterion) {
    let plain = config_with(json!({}));
    let audit = tempfile::tempdir().expect("temp");
    let audited = config_with(json!({"audit": {"path": audit.path().join("audit.jsonl")}}));
    let sink = otlp_sink();
    let traces = [("OTEL_EXPORTER_OTLP_ENDPOINT", sink.as_str())];
    let metrics_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let mut group = c.benchmark_group("telemetry");
    let mut off = via_loom_with(&plain, &[], &[]);
    group.bench_function("off", |b| b.iter(|| off.echo("fx_echo")));
    let mut traced = via_loom_with(&plain, &traces, &[]);
    group.bench_function("traces", |b| b.iter(|| traced.echo("fx_echo")));
    let mut all = via_loom_with(&audited, &traces, &["--metrics", &metrics]);
    group.bench_function("traces_metrics_audit", |b| b.iter(|| all.echo("fx_echo")));
    group.finish();
}

/// p50/p99 of the hop with telemetry off and with each part of it on (then all), in
/// interleaved rounds on one machine state.
fn report_telemetry() {
    const N: usize = 10_000;
    const ROUNDS: usize = 10;
    let plain = config_with(json!({}));
    let audit = tempfile::tempdir().expect("temp");
    let audited = config_with(json!({"audit": {"path": audit.path().join("audit.jsonl")}}));
    let sink = otlp_sink();
    let traces = [("OTEL_EXPORTER_OTLP_ENDPOINT", sink.as_str())];
    let sampled_out = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", sink.as_str()),
        ("OTEL_TRACES_SAMPLER", "always_off"),
    ];
    let metrics = ["--metrics", "127.0.0.1:0"];
    let mut sides = [
        ("off", via_loom_with(&plain, &[], &[])),
        ("traces", via_loom_with(&plain, &traces, &[])),
        (
            "traces, sampled out",
            via_loom_with(&plain, &sampled_out, &[]),
        ),
        ("metrics", via_loom_with(&plain, &[], &metrics)),
        ("audit", via_loom_with(&audited, &[], &[])),
        ("all three", via_loom_with(&audited, &traces, &metrics)),
        // A second process with everything off: how far two equal sides differ.
        ("off, again", via_loom_with(&plain, &[], &[])),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for _ in 0..ROUNDS {
        for (side, (_, peer)) in sides.iter_mut().enumerate() {
            times[side].extend(timed(peer, "fx_echo", N / ROUNDS));
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("\nthe hop through loom, {N} calls per side in {ROUNDS} interleaved rounds (µs)");
    let mut off_p50 = 0.0;
    for (side, (name, _)) in sides.iter().enumerate() {
        times[side].sort_unstable();
        let p50 = us(percentile(&times[side], 0.5));
        let p99 = us(percentile(&times[side], 0.99));
        if side == 0 {
            off_p50 = p50;
        }
        println!(
            "  {name:<20} p50 {p50:8.1}  p99 {p99:8.1}   ({:+.1} p50)",
            p50 - off_p50
        );
    }
}

criterion_group!(benches, bench_calls, bench_telemetry);

fn main() {
    if std::env::var_os(RELAY_ENV).is_some() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        relay(&args);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
    if std::env::var_os("LOOM_BENCH_CRITERION_ONLY").is_some() {
        return;
    }
    if std::env::var_os("LOOM_BENCH_TELEMETRY_ONLY").is_some() {
        report_telemetry();
        return;
    }
    if std::env::var_os("LOOM_BENCH_CALLERS_ONLY").is_some() {
        report();
        return;
    }
    report();
    report_under_load();
    report_telemetry();
    report_official_client();
}

/// benches/official_client.py with the installed Python SDK and server-everything.
fn report_official_client() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".ci/venv/bin/python");
    let everything =
        root.join(".ci/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !python.is_file() || !everything.is_file() {
        println!(
            "\nofficial client: skipped (run .ci/setup-interop for the Python SDK and server-everything)"
        );
        return;
    }
    let Ok(relay) = std::env::current_exe() else {
        return;
    };
    println!();
    let status = Command::new(python)
        .arg(root.join("benches/official_client.py"))
        .arg("--loom")
        .arg(loom())
        .arg("--relay")
        .arg(relay)
        .arg("--everything")
        .arg(everything)
        .status();
    match status {
        Ok(status) if status.success() => {}
        other => println!("official client: the script failed ({other:?})"),
    }
}
