//! Session snapshots (issue 16), release build, printed figures (no criterion: each case is a
//! few long operations, not a hot loop):
//!
//! 1. Parquet encode and write throughput for a 100,000-row dataset of the fixture's shape
//!    (11 columns), to a local directory and, when `.ci/venv-data` exists, to moto.
//! 2. The live session while such datasets are written: p50/p99 of small calls through a real
//!    loom in the second after each 100k-row result, snapshots on vs off, and the big call's own
//!    latency on vs off.
//! 3. `loom query --all-sessions` over 500 sessions × 5 datasets (1,000 rows each): wall time
//!    to the first answer for a `loom_catalog` aggregate and for a query over one cross-session
//!    table (500 files), local and on moto.
//!
//! `cargo bench --bench snapshot`; `-- skip-live` / `skip-many` leave parts out.

#[path = "common/stdio_client.rs"]
mod stdio_client;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use std::sync::Arc;
use std::time::{Duration, Instant};
use stdio_client::StdioClient;

use serde_json::{Value, json};

use loom::snapshot::{self, SnapshotWriter};
use loom::store::{NewDataset, Provenance, Store, StoreSettings};

fn rows_json(count: usize, offset: usize) -> String {
    let rows: Vec<Value> = (offset..offset + count)
        .map(|i| {
            let country = ["DE", "FR", "JP", "US", "BR"][i % 5];
            let plan = ["free", "pro", "team"][i % 3];
            json!({
                "id": i, "name": format!("user-{i}"), "email": format!("user-{i}@example.com"),
                "score": i as f64 * 1.5, "active": i % 2 == 0,
                "created": format!("2024-{:02}-{:02}T{:02}:00:00Z", 1 + (i / 28) % 12, 1 + i % 28, i % 24),
                "country": country, "plan": plan,
                "tags": [format!("t{}", i % 7)], "manager_id": i / 10, "balance": (i % 1000) as f64 + 0.25,
            })
        })
        .collect();
    Value::Array(rows).to_string()
}

fn add(store: &Store, tool: &str, rows: usize) -> Arc<loom::store::Dataset> {
    let ingested = loom::ingest::ingest_json_array(&rows_json(rows, 0)).expect("ingest");
    store
        .add(NewDataset {
            server: "crm".into(),
            tool: tool.into(),
            schema: ingested.batch.schema(),
            batches: vec![ingested.batch],
            columns: ingested.columns,
            provenance: Provenance {
                server: "crm".into(),
                tool: tool.into(),
                args: json!({"count": rows}),
                created_at: "2026-12-02T00:00:00.000Z".into(),
                source: "json_text".into(),
            },
            pinned: false,
            implicit: false,
            passed_through: false,
            name: None,
        })
        .expect("add")
}

/// moto on loopback when `.ci/venv-data` exists: (server process, endpoint).
fn moto() -> Option<(Child, String)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let python = root.join(".ci/venv-data/bin/python");
    if !python.exists() {
        eprintln!("(no .ci/venv-data: the S3 figures are left out; run .ci/setup-data)");
        return None;
    }
    let mut child = Command::new(python)
        .arg(root.join("tests/engines/moto_server.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let endpoint = format!("http://127.0.0.1:{}", line.trim());
    let bucket = Command::new(root.join(".ci/venv-data/bin/python"))
        .args(["-c", "import boto3,sys; boto3.client('s3', endpoint_url=sys.argv[1]).create_bucket(Bucket='bench')", &endpoint])
        .envs(s3_env(&endpoint))
        .status()
        .ok()?;
    bucket.success().then_some((child, endpoint))
}

fn s3_env(endpoint: &str) -> Vec<(String, String)> {
    vec![
        ("AWS_ACCESS_KEY_ID".into(), "bench".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "bench-secret".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
        ("AWS_ENDPOINT_URL".into(), endpoint.into()),
    ]
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

fn throughput(runtime: &tokio::runtime::Runtime, endpoint: Option<&str>) {
    let store = Store::new(StoreSettings::default()).expect("store");
    let d = add(&store, "rows", 100_000);
    let encode: Vec<(Duration, usize)> = (0..5)
        .map(|_| {
            let start = Instant::now();
            let file = snapshot::parquet_file(&d.schema, &d.batches).expect("encode");
            (start.elapsed(), file.bytes.len())
        })
        .collect();
    let bytes = encode[0].1;
    let took = median(encode.iter().map(|(t, _)| *t).collect());
    let mb = bytes as f64 / 1e6;
    println!(
        "\nParquet of a 100,000-row, 11-column dataset: {mb:.2} MB (zstd), Arrow {:.1} MB",
        d.bytes as f64 / 1e6
    );
    println!(
        "  encode           {:7.1} ms  {:7.1} MB/s of Parquet  ({:.2} M rows/s)",
        took.as_secs_f64() * 1e3,
        mb / took.as_secs_f64(),
        0.1 / took.as_secs_f64()
    );
    let payload = snapshot::parquet_file(&d.schema, &d.batches)
        .expect("encode")
        .bytes;
    let dir = tempfile::tempdir().expect("dir");
    let mut targets = vec![("local dir", dir.path().to_string_lossy().into_owned())];
    if endpoint.is_some() {
        targets.push(("moto (S3)", "s3://bench/throughput".into()));
    }
    for (name, url) in targets {
        let location = snapshot::open(&url).expect("open");
        let puts: Vec<Duration> = (0..5)
            .map(|i| {
                let path = object_store::path::Path::from(format!("put-{i}.parquet"));
                let payload = object_store::PutPayload::from(payload.clone());
                let start = Instant::now();
                runtime
                    .block_on(object_store::ObjectStoreExt::put(
                        location.store.as_ref(),
                        &path,
                        payload,
                    ))
                    .expect("put");
                start.elapsed()
            })
            .collect();
        let put = median(puts);
        let total = took + put;
        println!(
            "  put to {name:<9} {:7.1} ms  {:7.1} MB/s;  encode + put {:7.1} MB/s",
            put.as_secs_f64() * 1e3,
            mb / put.as_secs_f64(),
            mb / total.as_secs_f64()
        );
    }
}

/// loom with `config`, over stdio.
fn loom_with(config: &Value) -> (StdioClient, tempfile::NamedTempFile) {
    let mut file = tempfile::NamedTempFile::new().expect("temp");
    write!(file, "{config}").expect("config");
    let path = file.path().to_str().expect("utf8").to_string();
    let peer = StdioClient::spawn(
        std::path::Path::new(env!("CARGO_BIN_EXE_loom")),
        &["--config", &path],
        &[],
    );
    (peer, file)
}

/// One `tools/call` that must succeed; how long it took.
fn tool(peer: &mut StdioClient, name: &str, arguments: Value) -> Duration {
    let start = Instant::now();
    let answer = peer.call("tools/call", json!({"name": name, "arguments": arguments}));
    assert!(answer.get("result").is_some(), "{answer}");
    start.elapsed()
}

fn live_session() {
    const ROUNDS: usize = 6;
    let fixture = env!("CARGO_BIN_EXE_loom-fixture");
    let root = tempfile::tempdir().expect("root");
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "\nThe live session while 100,000-row datasets are written ({ROUNDS} rounds; small calls in the second after each big one)"
    );
    for snapshots in [false, true] {
        let mut config =
            json!({"servers": [{"name": "fx", "command": fixture, "args": ["--name", "fx"]}]});
        if snapshots {
            config["snapshot"] = json!({"url": root.path()});
        }
        let (mut peer, _file) = loom_with(&config);
        for _ in 0..200 {
            tool(&mut peer, "fx_echo", json!({"text": "warm"}));
        }
        let mut small = Vec::new();
        let mut big = Vec::new();
        for round in 0..ROUNDS {
            big.push(tool(
                &mut peer,
                "fx_rows",
                json!({"count": 100_000, "offset": round}),
            ));
            let until = Instant::now() + Duration::from_secs(1);
            while Instant::now() < until {
                small.push(tool(&mut peer, "fx_echo", json!({"text": "ping"})));
            }
        }
        small.sort_unstable();
        let p = |q: f64| small[((small.len() - 1) as f64 * q) as usize];
        println!(
            "  snapshots {:3}: small calls p50 {:7.1} µs  p99 {:8.1} µs  ({} calls); the 100k-row call itself median {:6.1} ms",
            if snapshots { "on" } else { "off" },
            us(p(0.5)),
            us(p(0.99)),
            small.len(),
            median(big).as_secs_f64() * 1e3
        );
    }
}

fn many_sessions(runtime: &tokio::runtime::Runtime, endpoint: Option<&str>) {
    const SESSIONS: usize = 500;
    const TOOLS: [&str; 5] = ["rows", "orders", "tickets", "events", "users"];
    let dir = tempfile::tempdir().expect("root");
    let mut roots = vec![("local dir", dir.path().to_string_lossy().into_owned())];
    if endpoint.is_some() {
        roots.push(("moto (S3)", "s3://bench/many".into()));
    }
    println!(
        "\nloom query --all-sessions over {SESSIONS} sessions × 5 datasets of 1,000 rows: wall time to the answer (process start included)"
    );
    for (name, url) in roots {
        let made = Instant::now();
        runtime.block_on(async {
            let location = snapshot::open(&url).expect("open");
            for _ in 0..SESSIONS {
                let store = Store::new(StoreSettings::default()).expect("store");
                let (writer, task) = SnapshotWriter::start(location.clone());
                let w = writer.clone();
                store.listen(Box::new(move |d| w.dataset_created(d)));
                for tool in TOOLS {
                    add(&store, tool, 1_000);
                }
                store.stop_listening();
                drop(writer);
                task.await.expect("writer");
            }
        });
        println!(
            "  {name}: root written in {:.1} s",
            made.elapsed().as_secs_f64()
        );
        for sql in [
            "SELECT server, tool, count(*) AS datasets, sum(rows) AS rows FROM loom_catalog GROUP BY 1, 2",
            "SELECT count(DISTINCT session_id) AS sessions, count(*) AS n, sum(balance) AS balance FROM ds_crm_rows",
        ] {
            let runs: Vec<Duration> = (0..3)
                .map(|_| {
                    let start = Instant::now();
                    let out = Command::new(env!("CARGO_BIN_EXE_loom"))
                        .args([
                            "query",
                            "--snapshot",
                            &url,
                            "--all-sessions",
                            "--format",
                            "csv",
                            sql,
                        ])
                        .envs(endpoint.map(s3_env).unwrap_or_default())
                        .output()
                        .expect("loom query");
                    assert!(
                        out.status.success(),
                        "{}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                    start.elapsed()
                })
                .collect();
            println!("    {:7.0} ms  {sql}", median(runs).as_secs_f64() * 1e3);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let moto = moto();
    let endpoint = moto.as_ref().map(|(_, e)| e.clone());
    if let Some(endpoint) = &endpoint {
        for (k, v) in s3_env(endpoint) {
            // SAFETY: set before any other thread of this process reads the environment
            // (the runtime's workers are idle; object_store reads it when a store is opened).
            unsafe { std::env::set_var(k, v) };
        }
    }
    throughput(&runtime, endpoint.as_deref());
    if !args.iter().any(|a| a == "skip-live") {
        live_session();
    }
    if !args.iter().any(|a| a == "skip-many") {
        many_sessions(&runtime, endpoint.as_deref());
    }
    drop(moto);
}
