//! A raw MCP client for integration tests: it starts a real `loom` (or a fixture server directly)
//! as a child process and speaks newline-delimited JSON-RPC to it, so tests can compare the exact
//! bytes that arrive. Every line the process writes to stdout must be JSON-RPC; anything else
//! fails the test (stdout belongs to the protocol).

#![allow(dead_code)] // each test binary uses a different part of this

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Generous bound for anything to happen; tests never assert on speed, this only keeps a broken
/// build from hanging CI.
pub const PATIENCE: Duration = Duration::from_secs(30);

pub fn loom_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom"))
}

pub fn fixture_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_loom-fixture"))
}

/// A fixture server entry for a loom config.
pub fn fixture_server(name: &str, args: &[&str]) -> Value {
    let mut all = vec!["--name".to_string(), name.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    json!({"name": name, "command": fixture_bin(), "args": all})
}

/// Write `config` into a fresh temp dir and return (dir, path).
pub fn write_config(config: &Value) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("loom.config.json");
    std::fs::write(&path, serde_json::to_vec_pretty(config).expect("json")).expect("write");
    (dir, path)
}

/// One line read from the child's stdout.
#[derive(Debug, Clone)]
pub struct Line {
    pub raw: String,
    pub value: Value,
}

pub struct RawClient {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Lines read but not yet claimed (notifications, requests, other responses).
    pending: VecDeque<Line>,
    pub stderr: Arc<Mutex<String>>,
    /// Signalled when the child's stderr reaches its end: all of it is in `stderr`.
    stderr_closed: Receiver<()>,
    next_id: i64,
}

impl RawClient {
    /// Start `program args` with `envs` added to the test's environment.
    pub fn spawn(program: &Path, args: &[&str], envs: &[(&str, &str)]) -> Self {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("LOOM_LOG", "info");
        for (k, v) in envs {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("spawn");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = channel();
        thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut buf = String::new();
            loop {
                buf.clear();
                match reader.read_line(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let raw = buf.trim_end_matches('\n').to_string();
                        let value: Value = serde_json::from_str(&raw).unwrap_or_else(|e| {
                            panic!("stdout carried a non-JSON line ({e}): {raw:.200}")
                        });
                        assert_eq!(value["jsonrpc"], "2.0", "not JSON-RPC: {raw:.200}");
                        if tx.send(Line { raw, value }).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let (closed_tx, closed_rx) = channel();
        thread::spawn(move || {
            let reader = BufReader::new(stderr);
            for line in reader.lines().map_while(Result::ok) {
                if std::env::var_os("LOOM_TEST_ECHO_STDERR").is_some() {
                    eprintln!("[child] {line}");
                }
                let mut log = sink.lock().expect("log");
                log.push_str(&line);
                log.push('\n');
            }
            let _ = closed_tx.send(());
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            pending: VecDeque::new(),
            stderr: log,
            stderr_closed: closed_rx,
            next_id: 1,
        }
    }

    /// Start loom with `config`.
    pub fn loom(config: &Path) -> Self {
        Self::spawn(
            &loom_bin(),
            &["--config", config.to_str().expect("utf8")],
            &[],
        )
    }

    pub fn stderr_text(&self) -> String {
        self.stderr.lock().expect("log").clone()
    }

    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    pub fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    /// Send a request and return its id.
    pub fn request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// The next line matching `pred`, keeping the others for later.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Line {
        if let Some(pos) = self.pending.iter().position(|l| pred(&l.value)) {
            return self.pending.remove(pos).expect("present");
        }
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line.value) => return line,
                Ok(line) => self.pending.push_back(line),
                Err(RecvTimeoutError::Timeout) => panic!(
                    "timed out waiting for {what}; pending: {:?}\nstderr:\n{}",
                    self.pending.iter().map(|l| &l.raw).collect::<Vec<_>>(),
                    self.stderr_text()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "stdout closed while waiting for {what}\nstderr:\n{}",
                    self.stderr_text()
                ),
            }
        }
    }

    /// Whether a line matching `pred` arrives within `within` (for "this must not happen").
    pub fn arrives_within(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> bool {
        if self.pending.iter().any(|l| pred(&l.value)) {
            return true;
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if pred(&line.value) => return true,
                Ok(line) => self.pending.push_back(line),
                Err(_) => return false,
            }
        }
    }

    /// The first response to any of `ids` that arrives within `within` (other lines are kept
    /// for later); `None` if none does. Unlike [`Self::arrives_within`], the line is returned.
    pub fn response_within(&mut self, ids: &[i64], within: Duration) -> Option<Line> {
        let is_one = |v: &Value| {
            ids.iter().any(|id| v["id"] == json!(id))
                && (v.get("result").is_some() || v.get("error").is_some())
        };
        if let Some(pos) = self.pending.iter().position(|l| is_one(&l.value)) {
            return self.pending.remove(pos);
        }
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if is_one(&line.value) => return Some(line),
                Ok(line) => self.pending.push_back(line),
                Err(_) => return None,
            }
        }
    }

    /// The lines read so far and not yet claimed, in the order they arrived.
    pub fn take_pending(&mut self) -> Vec<Line> {
        self.pending.drain(..).collect()
    }

    pub fn response(&mut self, id: i64) -> Line {
        self.wait_for(&format!("the response to request {id}"), |v| {
            v["id"] == json!(id) && (v.get("result").is_some() || v.get("error").is_some())
        })
    }

    /// Send a request and wait for its response.
    pub fn call(&mut self, method: &str, params: Value) -> Line {
        let id = self.request(method, params);
        self.response(id)
    }

    /// `initialize` + `notifications/initialized` with the given client capabilities.
    pub fn initialize_with(&mut self, capabilities: Value) -> Value {
        let line = self.call(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": capabilities,
                "clientInfo": {"name": "loom-tests", "version": "1"}
            }),
        );
        self.notify("notifications/initialized", json!({}));
        line.value["result"].clone()
    }

    pub fn initialize(&mut self) -> Value {
        self.initialize_with(json!({}))
    }

    /// `tools/call`, returning the raw response line.
    pub fn call_tool(&mut self, name: &str, arguments: Value) -> Line {
        self.call("tools/call", json!({"name": name, "arguments": arguments}))
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        let line = self.call("tools/list", json!({}));
        line.value["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect()
    }

    /// Close stdin (the MCP way of saying goodbye).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Wait for the process to exit, up to [`PATIENCE`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // What it wrote last (the session report, say) may still be in the pipe. A
                // server that outlived it holding the same stderr would keep it open: wait a
                // little, not for ever.
                let _ = self.stderr_closed.recv_timeout(Duration::from_secs(5));
                return status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("process did not exit\nstderr:\n{}", self.stderr_text());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The exact bytes of the `result` member of a response line: everything between `"result":`
/// and the closing brace of the envelope. Both loom and the fixture write `result` last.
pub fn result_bytes(line: &Line) -> &str {
    let raw = line.raw.as_str();
    let start = raw.find("\"result\":").expect("a result member") + "\"result\":".len();
    raw[start..].strip_suffix('}').expect("closing brace")
}

/// The text of the first content block of a tool result.
pub fn first_text(line: &Line) -> String {
    line.value["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {}", line.raw))
        .to_string()
}

/// Whether a process with this pid still exists (zombies count as gone: they hold nothing).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state letter follows the parenthesised command name.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            state != Some("Z")
        }
        Err(_) => false,
    }
}

/// Poll `cond` until it holds or [`PATIENCE`] runs out.
pub fn eventually(what: &str, cond: impl FnMut() -> bool) {
    eventually_within(what, PATIENCE, cond);
}

/// Poll `cond` until it holds or `within` runs out: for what loom does on a timer of its own,
/// with `within` that timer's longest wait plus [`PATIENCE`] (a hang guard on top of the design
/// bound, never a speed claim).
pub fn eventually_within(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !cond() {
        assert!(
            Instant::now() < deadline,
            "never happened within {within:?}: {what}"
        );
        thread::sleep(Duration::from_millis(25));
    }
}

/// The envelope of a replaced result (checks it is in both channels, identical).
pub fn envelope(line: &Line) -> Value {
    let result = &line.value["result"];
    assert!(
        result.get("isError").is_none_or(|e| e == false),
        "{:.400}",
        line.raw
    );
    let structured = result["structuredContent"].clone();
    assert_eq!(structured["kind"], "loom_dataset_ref", "{:.400}", line.raw);
    let text: Value = serde_json::from_str(&first_text(line)).expect("text is JSON");
    assert_eq!(text, structured, "text and structuredContent differ");
    structured
}

pub fn query(loom: &mut RawClient, sql: &str) -> Value {
    let line = loom.call_tool("loom_query", json!({ "sql": sql }));
    assert_not_error(&line);
    line.value["result"]["structuredContent"].clone()
}

/// The call answered with a result that is not `isError`.
pub fn assert_not_error(line: &Line) {
    assert!(
        line.value["result"]
            .get("isError")
            .is_none_or(|e| e == false),
        "{}",
        line.raw
    );
}

/// Start one of the Python fixture servers (`tests/common/<script>`, standard library only) with
/// `args`, and wait until it prints `listening on PORT`: the process and its port. Its stderr is
/// piped when `keep_stderr`, else dropped.
pub fn start_python_fixture(
    script: &str,
    args: &[&str],
    keep_stderr: bool,
) -> (std::process::Child, u16) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/common")
        .join(script);
    let mut child = Command::new("python3")
        .arg(&path)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(if keep_stderr {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .spawn()
        .unwrap_or_else(|e| panic!("python3 runs {script}: {e}"));
    let stdout = child.stdout.take().expect("stdout");
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("the fixture says where it listens");
    let port = first
        .trim()
        .strip_prefix("listening on ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{script}: unexpected first line: {first:?}"));
    (child, port)
}
