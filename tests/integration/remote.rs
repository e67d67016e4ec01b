//! Remote downstream servers over Streamable HTTP (SPEC §3.3, §5.12): loom in front of a real
//! HTTP server process (`tests/common/http_fixture.py`, which can be made to misbehave on
//! purpose), driven over stdio the way a client drives it.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::{Arc, Mutex};

use common::*;
use serde_json::{Value, json};

/// The bytes `exact` and `exact_sse` answer with (see the fixture).
const EXACT_RESULT: &str = r#"{"structuredContent": {"z": 1, "a": 2.50},  "content":[{"type":"text","text":"exact \u00e9"}],"isError":false,"vendorField":{"keep":[1,2.0,"x"]}}"#;

/// The fixture server as a child process, killed when dropped.
struct Remote {
    child: Child,
    port: u16,
    log: Arc<Mutex<String>>,
}

impl Remote {
    fn start(args: &[&str]) -> Remote {
        Self::start_on(0, args)
    }

    fn start_on(port: u16, args: &[&str]) -> Remote {
        let port_arg = port.to_string();
        let mut fixture_args = vec!["--port", port_arg.as_str()];
        fixture_args.extend_from_slice(args);
        let (mut child, port) = start_python_fixture("http_fixture.py", &fixture_args, true);
        let log = Arc::new(Mutex::new(String::new()));
        let sink = log.clone();
        let stderr = child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut log = sink.lock().expect("log");
                log.push_str(&line);
                log.push('\n');
            }
        });
        Remote { child, port, log }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        self.stop();
    }
}

/// loom with the remote server as `web` and a stdio fixture beside it (loom exits when no
/// server at all can start; the stdio one keeps it up when `web` cannot).
fn loom_for(entry: Value, extra: Value) -> (tempfile::TempDir, RawClient) {
    let local = fixture_server("local", &[]);
    let mut config = json!({
        "mcpServers": {"web": entry, "local": {"command": local["command"], "args": local["args"]}},
        "restart": {"baseDelayMs": 100},
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            config.insert(k.clone(), v.clone());
        }
    }
    let (dir, path) = write_config(&config);
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

fn is_error(line: &common::Line) -> bool {
    line.value["result"]["isError"] == true
}

/// A call that did not reach a server that never came up: its tools were never listed, so the
/// name is unknown (as for a stdio server that cannot start).
fn refused(line: &common::Line) -> bool {
    line.value["error"]["message"]
        .as_str()
        .is_some_and(|m| m.contains("unknown tool"))
}

fn wait_healthy(loom: &mut RawClient) {
    eventually("the remote server's tools are listed", || {
        loom.tool_names().iter().any(|n| n == "web_exact")
    });
}

#[test]
fn results_keep_their_bytes_from_json_bodies_and_sse_events() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(json!({"type": "http", "url": remote.url()}), json!({}));
    wait_healthy(&mut loom);

    let line = loom.call_tool("web_exact", json!({}));
    assert_eq!(result_bytes(&line), EXACT_RESULT, "JSON body: {}", line.raw);

    // Over SSE, with a progress notification before the answer: the progress reaches the client
    // first, under the client's own token, and the answer keeps its bytes.
    let id = loom.request(
        "tools/call",
        json!({"name": "web_exact_sse", "arguments": {}, "_meta": {"progressToken": "tok-1"}}),
    );
    let progress = loom.wait_for("progress", |v| v["method"] == "notifications/progress");
    assert_eq!(progress.value["params"]["progressToken"], "tok-1");
    let line = loom.response(id);
    assert_eq!(result_bytes(&line), EXACT_RESULT, "SSE event: {}", line.raw);

    // The session header and protocol version travel on every request after initialize.
    let log = remote.log();
    let call = log
        .lines()
        .find(|l| l.contains("mcp-method=tools/call"))
        .expect("a call was logged");
    assert!(!call.contains("session=None"), "{call}");
    assert!(!call.contains("protocol=None"), "{call}");
}

#[test]
fn a_pretty_printed_result_keeps_its_bytes_but_its_line_breaks() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_pretty", json!({}));
    // On stdio one message is one line: the breaks between tokens become spaces, nothing else
    // changes (the `\n` inside the string is an escape, not a break).
    let expected = "{   \"content\": [     {\"type\": \"text\", \"text\": \"line\\nbreak\"}   ],    \"isError\": false }";
    assert_eq!(result_bytes(&line), expected, "{}", line.raw);
    assert_eq!(first_text(&line), "line\nbreak");
}

#[test]
fn a_large_remote_table_becomes_a_dataset() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_rows", json!({"n": 5000}));
    let env = envelope(&line);
    assert_eq!(env["rows"], 5000, "{env}");
    let table = env["ref"].as_str().expect("ref").to_string();
    let answer = query(
        &mut loom,
        &format!("SELECT region, count(*) AS n FROM {table} GROUP BY region ORDER BY region"),
    );
    assert_eq!(
        answer["rows"][0],
        json!({"region": "east", "n": 1250}),
        "{answer}"
    );
}

#[test]
fn headers_carry_the_token_and_a_refusal_says_which_header() {
    let remote = Remote::start(&["--token", "s3cret-token"]);
    // `${VAR}` in a header value is expanded from loom's environment.
    let config = json!({"mcpServers": {"web": {"url": remote.url(),
        "headers": {"Authorization": "Bearer ${FIXTURE_TOKEN}"}}}});
    let (_dir, path) = write_config(&config);
    let mut loom = RawClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &[("FIXTURE_TOKEN", "s3cret-token")],
    );
    loom.initialize();
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_exact", json!({}));
    assert_eq!(result_bytes(&line), EXACT_RESULT);
    assert!(remote.log().contains("auth=Bearer s3cret-token"));
    // The token never reaches loom's log.
    assert!(!loom.stderr_text().contains("s3cret-token"));

    // Missing: the log says the token is missing and how to send one; loom stays up.
    let (_dir2, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    eventually("the refusal is logged", || {
        loom.stderr_text().contains("401 Unauthorized")
    });
    let log = loom.stderr_text();
    assert!(log.contains("the token is missing"), "{log}");
    assert!(log.contains("`headers`"), "{log}");
    let answer = query(&mut loom, "SELECT 1 AS one");
    assert_eq!(answer["rows"][0]["one"], 1);
    let line = loom.call_tool("web_exact", json!({}));
    assert!(refused(&line), "{}", line.raw);

    // Wrong: the log names the header whose credentials were refused.
    let (_dir3, loom) = loom_for(
        json!({"url": remote.url(), "headers": {"Authorization": "Bearer wrong"}}),
        json!({}),
    );
    eventually("the refusal is logged", || {
        loom.stderr_text()
            .contains("credentials in header `Authorization` were refused")
    });
    assert!(!loom.stderr_text().contains("Bearer wrong"));
}

#[test]
fn a_server_that_answers_html_is_named_as_not_mcp() {
    let remote = Remote::start(&["--html"]);
    let (_dir, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    eventually("the HTML answer is logged", || {
        loom.stderr_text().contains("answered with an HTML page")
    });
    assert!(loom.stderr_text().contains("/mcp"));
    let line = loom.call_tool("web_exact", json!({}));
    assert!(refused(&line), "{}", line.raw);
}

#[test]
fn unreachable_and_tls_failures_are_reported_and_loom_stays_up() {
    // A port nobody listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let (_dir, mut loom) = loom_for(
        json!({"url": format!("http://127.0.0.1:{port}/mcp")}),
        json!({"restart": {"maxAttempts": 2, "baseDelayMs": 50}}),
    );
    eventually("the connection failure is logged", || {
        loom.stderr_text().contains("cannot reach http://127.0.0.1")
    });
    let line = loom.call_tool("web_anything", json!({}));
    assert!(refused(&line), "{}", line.raw);

    // TLS to a server that speaks plain HTTP.
    let remote = Remote::start(&[]);
    let (_dir2, mut loom) = loom_for(
        json!({"url": format!("https://127.0.0.1:{}/mcp", remote.port)}),
        json!({"restart": {"maxAttempts": 1}}),
    );
    eventually("the TLS failure is logged", || {
        let log = loom.stderr_text();
        log.contains("cannot reach https://127.0.0.1") || log.contains("request to https://")
    });
    let answer = query(&mut loom, "SELECT 2 AS two");
    assert_eq!(answer["rows"][0]["two"], 2);
}

#[test]
fn an_sse_stream_that_stops_mid_event_fails_that_call_only() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(
        json!({"url": remote.url(), "callTimeoutMs": 5000}),
        json!({}),
    );
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_cut", json!({}));
    assert!(is_error(&line), "{}", line.raw);
    assert!(first_text(&line).contains("server `web`"), "{}", line.raw);
    eventually("the server is usable again", || {
        let line = loom.call_tool("web_exact", json!({}));
        !is_error(&line) && result_bytes(&line) == EXACT_RESULT
    });
}

#[test]
fn an_expired_session_is_opened_again() {
    let remote = Remote::start(&["--forget-sessions-after", "1"]);
    let (_dir, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    wait_healthy(&mut loom);
    for _ in 0..4 {
        let line = loom.call_tool("web_exact", json!({}));
        assert_eq!(result_bytes(&line), EXACT_RESULT, "{}", line.raw);
    }
    let initializes = remote.log().matches("mcp-method=initialize").count();
    assert!(
        initializes >= 2,
        "the session was re-initialised: {}",
        remote.log()
    );
}

#[test]
fn a_timeout_cancels_the_call_on_the_server() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(
        json!({"url": remote.url(), "callTimeoutMs": 300}),
        json!({}),
    );
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_slow", json!({"ms": 3000}));
    assert!(is_error(&line), "{}", line.raw);
    assert!(first_text(&line).contains("did not answer"), "{}", line.raw);
    eventually("the server got notifications/cancelled", || {
        remote.log().contains("cancelled {")
    });
}

#[test]
fn an_outage_is_reported_and_the_server_comes_back() {
    let mut remote = Remote::start(&[]);
    let port = remote.port;
    let (_dir, mut loom) = loom_for(
        json!({"url": remote.url()}),
        json!({"restart": {"maxAttempts": 50, "baseDelayMs": 100}}),
    );
    wait_healthy(&mut loom);
    remote.stop();
    // The first call after the server went away fails and names the server.
    let line = loom.call_tool("web_exact", json!({}));
    assert!(is_error(&line), "{}", line.raw);
    assert!(first_text(&line).contains("web"), "{}", line.raw);
    eventually("loom noticed the outage", || {
        loom.stderr_text().contains("state=restarting")
    });
    let line = loom.call_tool("web_exact", json!({}));
    assert!(is_error(&line), "{}", line.raw);
    assert!(first_text(&line).contains("restarting"), "{}", line.raw);

    let _back = Remote::start_on(port, &[]);
    eventually("the server is back", || {
        let line = loom.call_tool("web_exact", json!({}));
        !is_error(&line) && result_bytes(&line) == EXACT_RESULT
    });
}

#[test]
fn a_5xx_answer_fails_its_call_and_three_in_a_row_reconnect() {
    let remote = Remote::start(&[]);
    let (_dir, mut loom) = loom_for(json!({"url": remote.url()}), json!({}));
    wait_healthy(&mut loom);
    let line = loom.call_tool("web_fail", json!({}));
    assert!(is_error(&line), "{}", line.raw);
    let text = first_text(&line);
    assert!(text.contains("server `web` could not answer"), "{text}");
    assert!(text.contains("answered HTTP 500"), "{text}");
    // One 5xx is that request's failure: the server stays up.
    let line = loom.call_tool("web_exact", json!({}));
    assert_eq!(result_bytes(&line), EXACT_RESULT, "{}", line.raw);
    for _ in 0..3 {
        let line = loom.call_tool("web_fail", json!({}));
        assert!(is_error(&line), "{}", line.raw);
    }
    eventually("three 5xx in a row count as an outage", || {
        loom.stderr_text()
            .contains("answered HTTP 500 (3 times in a row)")
    });
    eventually("the server is usable again", || {
        let line = loom.call_tool("web_exact", json!({}));
        !is_error(&line) && result_bytes(&line) == EXACT_RESULT
    });
    assert!(remote.log().matches("mcp-method=initialize").count() >= 2);
}
