//! How loom sits on its stdio and in memory (SPEC §5.1): stdin/stdout as a Unix socket pair (how
//! Node's `child_process` starts a server) work as pipes do, and an idle loom hands back the code
//! pages its start-up touched.
//!
//! A binary of its own, not a module of tests/integration: `MADV_PAGEOUT` hands back only pages
//! no other process maps, and tests running beside it start other loom processes that map the
//! same executable, so its pages would stay (seen when it ran there).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{Value, json};

fn fixture_config() -> (tempfile::TempDir, std::path::PathBuf) {
    write_config(&json!({ "servers": [fixture_server("fx", &[])] }))
}

/// A field of `/proc/PID/status` in KiB.
fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[test]
fn stdio_over_a_unix_socket_pair_carries_the_session() {
    let (_dir, config) = fixture_config();
    let (mut ours, theirs) = UnixStream::pair().expect("socket pair");
    let theirs_out = theirs.try_clone().expect("clone");
    let mut child = Command::new(loom_bin())
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(theirs_out)))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn loom");
    let mut reader = BufReader::new(ours.try_clone().expect("clone"));
    let mut exchange = |message: Value| -> Option<Value> {
        writeln!(ours, "{message}").expect("write");
        let id = message.get("id")?.clone();
        loop {
            let mut line = String::new();
            assert!(
                reader.read_line(&mut line).expect("read") > 0,
                "loom closed the socket"
            );
            let value: Value = serde_json::from_str(&line).expect("one JSON message per line");
            if value.get("id") == Some(&id) && value.get("method").is_none() {
                return Some(value);
            }
        }
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "socket-client", "version": "1"}}}),
    )
    .expect("an answer");
    assert_eq!(init["result"]["serverInfo"]["name"], "loom", "{init}");
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let echo = exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "fx_echo", "arguments": {"text": "over a socket"}}}))
    .expect("an answer");
    assert_eq!(
        echo["result"]["content"][0]["text"], "over a socket",
        "{echo}"
    );
    // The client going away (the socket shut for writing) ends loom as stdin EOF does.
    ours.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let status = child.wait().expect("wait");
    assert!(status.success(), "loom exited with {status}");
}

#[test]
fn an_idle_loom_hands_back_its_start_up_and_engine_pages_and_still_serves() {
    let (_dir, config) = fixture_config();
    let mut loom = RawClient::loom(&config);
    loom.initialize();
    assert!(loom.tool_names().contains(&"fx_echo".to_string()));
    let pid = loom.child.id();
    // VmHWM keeps the peak of start-up (the engine's self-test touches code all over the
    // binary); once loom has handed those pages back, its file-backed part is a fraction of it.
    eventually("the start-up pages are handed back", || {
        let (peak, file) = (status_kib(pid, "VmHWM:"), status_kib(pid, "RssFile:"));
        peak > 0 && file * 2 < peak
    });
    // Code that runs again comes back from the page cache: the session goes on.
    let echo = loom.call_tool("fx_echo", json!({"text": "still here"}));
    assert_eq!(first_text(&echo), "still here");
    let rows = loom.call_tool("fx_rows", json!({"count": 3000}));
    let reference = envelope(&rows)["ref"]
        .as_str()
        .expect("an envelope")
        .to_string();
    let answer = query(&mut loom, &format!("SELECT count(*) AS n FROM {reference}"));
    assert!(answer.to_string().contains("3000"), "{answer}");
    // The engine's code is handed back too once it has been idle for a while: loom looks every
    // IDLE_AFTER_HEAVY_WORK (10 s) and releases once a whole period passed without heavy work,
    // so up to two periods after the query. This waited PATIENCE (30 s), which left only 10 s
    // over that design bound; now the wait is the design bound plus the full hang guard, so it
    // is a liveness check (pages that are never handed back still fail) and not a speed claim
    // (issue 35). How soon is loom's timer, not its speed.
    let after_query = status_kib(pid, "RssFile:");
    eventually_within(
        "the engine's pages are handed back after the query",
        2 * loom::footprint::IDLE_AFTER_HEAVY_WORK + PATIENCE,
        || status_kib(pid, "RssFile:") * 2 < after_query,
    );
    let echo = loom.call_tool("fx_echo", json!({"text": "and still here"}));
    assert_eq!(first_text(&echo), "and still here");
}
