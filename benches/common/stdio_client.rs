//! A line-delimited JSON-RPC client of one MCP server over stdio, shared by the benches that
//! time calls through a real process (`#[path]`-included: each bench is its own crate).

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

pub struct StdioClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioClient {
    /// Start `program args`, with `envs` added to its environment, and initialize it.
    pub fn spawn(program: &Path, args: &[&str], envs: &[(&str, &str)]) -> Self {
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .env("LOOM_LOG", "error")
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut peer = Self {
            child,
            stdin,
            stdout,
            next_id: 1,
        };
        peer.call(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}),
        );
        writeln!(
            peer.stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .expect("write");
        peer
    }

    /// A request and its response (other lines are skipped).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        // One write per message, as clients write (`writeln!` of a `Value` on the unbuffered
        // pipe writes token by token).
        let mut bytes = serde_json::to_vec(&message).expect("json");
        bytes.push(b'\n');
        self.stdin.write_all(&bytes).expect("write");
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).expect("read") > 0,
                "closed"
            );
            let value: Value = serde_json::from_str(&line).expect("json");
            if value["id"] == json!(id) {
                return value;
            }
        }
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
