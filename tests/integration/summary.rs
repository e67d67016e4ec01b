//! The model summary stage end to end (SPEC §19.9): a real loom, the fixture server, and an
//! OpenAI-compatible endpoint process (`tests/common/llm_endpoint.py`) that answers, fails in
//! every way an endpoint can, and records what it was sent.

use crate::common;

use std::path::PathBuf;
use std::process::Child;

use common::*;
use serde_json::{Value, json};

const KEY: &str = "sk-loom-test-b7c2e9f41d";
const KEY_VAR: &str = "LOOM_TEST_LLM_KEY";

/// The endpoint process; killed when dropped.
struct Endpoint {
    child: Child,
    port: u16,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl Endpoint {
    fn start() -> Endpoint {
        let dir = tempfile::tempdir().expect("tempdir");
        let record = dir.path().join("requests.jsonl");
        let record_arg = record.to_str().expect("utf8");
        let (child, port) = start_python_fixture(
            "llm_endpoint.py",
            &["--key", KEY, "--record", record_arg],
            false,
        );
        Endpoint {
            child,
            port,
            record,
            _dir: dir,
        }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request it got, in order.
    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.record)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str(line).expect("a recorded request"))
            .collect()
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// loom with the fixture server, the `llm` block pointing at `base_url` with `model`, and
/// `llmSummary` on for every tool.
fn loom_with_llm(base_url: &str, model: &str, llm_extra: Value) -> (tempfile::TempDir, RawClient) {
    let mut llm = json!({"baseUrl": base_url, "apiKey": format!("${{{KEY_VAR}}}"), "model": model});
    if let (Value::Object(llm), Value::Object(extra)) = (&mut llm, llm_extra) {
        llm.extend(extra);
    }
    let config = json!({
        "servers": [fixture_server("fx", &[])],
        "llm": llm,
        "compression": {"default": {"llmSummary": true}},
    });
    let (dir, path) = write_config(&config);
    let mut loom = RawClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &[(KEY_VAR, KEY)],
    );
    loom.initialize();
    (dir, loom)
}

/// A service log of `lines` lines with one error in it.
fn service_log(lines: usize) -> String {
    (1..=lines)
        .map(|i| match i {
            1200 => format!(
                "2026-12-03T10:{:02}:{:02}Z ERROR disk /var/data full\n",
                i / 60 % 60,
                i % 60
            ),
            _ => format!(
                "2026-12-03T10:{:02}:{:02}Z INFO GET /api/items/{i} 200 in {} ms\n",
                i / 60 % 60,
                i % 60,
                i % 97
            ),
        })
        .collect()
}

fn call_with_text(loom: &mut RawClient, text: &str) -> Line {
    let result = json!({"content": [{"type": "text", "text": text}]});
    loom.call_tool("fx_raw", json!({"json": result.to_string()}))
}

/// loom's log once it has `needle`: the log is read from a pipe by another thread, so a line
/// written before an answer may still be on its way when the answer is read.
fn stderr_with(loom: &RawClient, needle: &str) -> String {
    eventually(&format!("loom logs {needle:?}"), || {
        loom.stderr_text().contains(needle)
    });
    loom.stderr_text()
}

fn text_of(line: &Line) -> String {
    assert_not_error(line);
    first_text(line)
}

/// The ref the header line names as the whole original.
fn original_ref(text: &str) -> String {
    let marker = "loom_read(\"";
    let header = text.lines().next().expect("a header line");
    let at = header.rfind(marker).expect("a loom_read pointer") + marker.len();
    header[at..].split('"').next().expect("ref").to_string()
}

/// A document read back whole, page by page.
fn read_all(loom: &mut RawClient, reference: &str) -> String {
    let mut out = String::new();
    let mut offset = 0u64;
    loop {
        let page = loom.call_tool(
            "loom_read",
            json!({"ref": reference, "offset": offset, "length": 100000}),
        );
        out.push_str(&text_of(&page));
        match page.value["result"]["structuredContent"]["nextOffset"].as_u64() {
            Some(next) => offset = next,
            None => return out,
        }
    }
}

#[test]
fn a_long_log_is_summarised_with_a_pointer_to_its_whole_original() {
    let endpoint = Endpoint::start();
    let (_dir, mut loom) = loom_with_llm(&endpoint.base_url(), "summary", json!({}));
    let log = service_log(6000);
    let text = text_of(&call_with_text(&mut loom, &log));
    let header = text.lines().next().expect("header");
    assert!(
        header.starts_with("[loom: text summarised by the model \"summary\""),
        "{header}"
    );
    assert!(
        header.contains("the whole original is loom_read(\"doc_"),
        "{header}"
    );
    let summary = &text[header.len() + 1..];
    assert!(summary.starts_with("Summary (fixture): "), "{summary}");
    assert!(summary.contains("ERROR disk /var/data full"), "{summary}");
    assert!(summary.chars().count() <= 7000, "within the budget");
    // The original, whole, as the server sent it.
    assert_eq!(read_all(&mut loom, &original_ref(&text)), log);

    // What went out: the key in its header, loom's instructions and the text — nothing else.
    let requests = endpoint.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    let request = &requests[0];
    assert_eq!(request["path"], "/v1/chat/completions");
    assert_eq!(request["authorization"], format!("Bearer {KEY}"));
    assert_eq!(request["contentType"], "application/json");
    let body = &request["body"];
    let members: Vec<&String> = body.as_object().expect("object").keys().collect();
    assert_eq!(members, ["model", "messages", "max_tokens", "stream"]);
    assert_eq!(body["model"], "summary");
    let messages = body["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2);
    let instructions = messages[0]["content"].as_str().expect("instructions");
    assert!(
        !instructions.contains("fx") && !instructions.contains("raw"),
        "no tool named"
    );
    // Over maxInputChars (120,000): its head and tail, as the cut would keep them.
    let sent = messages[1]["content"].as_str().expect("text");
    assert!(sent.chars().count() <= 120_000);
    assert!(log.starts_with(sent.split("[…").next().expect("head")));
    assert!(log.ends_with(sent.rsplit("…]\n").next().expect("tail")));

    // The session counts it, with the endpoint's tokens.
    let stats: Value =
        serde_json::from_str(&text_of(&loom.call_tool("loom_stats", json!({})))).expect("json");
    let figures = &stats["modelSummaries"];
    assert_eq!(figures["summarized"], 1, "{stats:#}");
    assert_eq!(figures["fellBack"], 0);
    assert!(
        figures["promptTokens"].as_u64().expect("tokens") > 20_000,
        "{figures}"
    );
    assert!(figures["completionTokens"].as_u64().expect("tokens") > 0);

    let everything = format!("{}{}{text}", loom.stderr_text(), stats);
    assert!(!everything.contains(KEY), "the key leaked");
}

/// The token-limit members of each request the endpoint got, in order.
fn limits_sent(endpoint: &Endpoint) -> Vec<(String, u64)> {
    endpoint
        .requests()
        .iter()
        .flat_map(|request| {
            let body = request["body"].as_object().expect("a JSON body").clone();
            body.into_iter()
                .filter(|(member, _)| member.starts_with("max_"))
                .map(|(member, value)| (member, value.as_u64().expect("a number")))
        })
        .collect()
}

#[test]
fn the_token_limit_follows_what_the_endpoint_takes() {
    const SUMMARY: u64 = 7000 / 3 + 64;
    const REASONING: u64 = SUMMARY + 4096;
    const PLAIN: &str = "max_tokens";
    const COMPLETION: &str = "max_completion_tokens";
    let log = service_log(3000);
    // (model, llm keys, summarised?, the limits sent over two calls, the one line logged)
    type Case = (
        &'static str,
        Value,
        bool,
        &'static [(&'static str, u64)],
        &'static str,
    );
    let cases: [Case; 4] = [
        // A reasoning model behind a plain baseUrl refuses `max_tokens` by name: asked once
        // more with `max_completion_tokens` (room to reason included), and so from then on.
        (
            "reasoning",
            json!({}),
            true,
            &[
                (PLAIN, SUMMARY),
                (COMPLETION, REASONING),
                (COMPLETION, REASONING),
            ],
            "the model endpoint refuses `max_tokens`",
        ),
        // `provider: openai` starts with `max_completion_tokens`; an endpoint that predates
        // it gets `max_tokens` once it says so.
        (
            "legacy-limit",
            json!({"provider": "openai"}),
            true,
            &[(COMPLETION, REASONING), (PLAIN, SUMMARY), (PLAIN, SUMMARY)],
            "the model endpoint refuses `max_completion_tokens`",
        ),
        // An older model that writes at most 4,096 tokens finds the room to reason too
        // large: asked once more without it, and without it from then on.
        (
            "small-output",
            json!({"provider": "openai"}),
            true,
            &[
                (COMPLETION, REASONING),
                (COMPLETION, SUMMARY),
                (COMPLETION, SUMMARY),
            ],
            "loom leaves out the room to reason from now on",
        ),
        // An endpoint that refuses both members: each call asks twice and falls back, and no
        // switch is remembered (it would flap).
        (
            "refuses-both",
            json!({}),
            false,
            &[
                (PLAIN, SUMMARY),
                (COMPLETION, REASONING),
                (PLAIN, SUMMARY),
                (COMPLETION, REASONING),
            ],
            "model summary failed (error status)",
        ),
    ];
    for (model, llm, summarised, limits, logged) in cases {
        let endpoint = Endpoint::start();
        let (_dir, mut loom) = loom_with_llm(&endpoint.base_url(), model, llm);
        for _ in 0..2 {
            let text = text_of(&call_with_text(&mut loom, &log));
            let header = text.lines().next().unwrap_or("");
            if summarised {
                let expected = format!("[loom: text summarised by the model \"{model}\"");
                assert!(header.starts_with(&expected), "{model}: {header}");
                assert!(text.contains("ERROR disk /var/data full"), "{text:.600}");
            } else {
                assert!(
                    header.starts_with("[loom: text reduced"),
                    "{model}: {header}"
                );
            }
        }
        let sent: Vec<(String, u64)> = limits
            .iter()
            .map(|(member, tokens)| (member.to_string(), *tokens))
            .collect();
        assert_eq!(limits_sent(&endpoint), sent, "{model}");
        let stderr = stderr_with(&loom, logged);
        assert_eq!(stderr.matches(logged).count(), 1, "{model}: {stderr}");
        assert_eq!(
            stderr.contains("from now on"),
            summarised,
            "{model}: a switch is remembered only when it worked: {stderr}"
        );
        let stats: Value =
            serde_json::from_str(&text_of(&loom.call_tool("loom_stats", json!({})))).expect("json");
        let (summarized, fell_back) = if summarised { (2, 0) } else { (0, 2) };
        assert_eq!(
            stats["modelSummaries"]["summarized"], summarized,
            "{model}: {stats:#}"
        );
        assert_eq!(
            stats["modelSummaries"]["fellBack"], fell_back,
            "{model}: {stats:#}"
        );
    }
}

#[test]
fn every_way_the_endpoint_fails_answers_the_cut_text_and_warns_once() {
    let endpoint = Endpoint::start();
    let log = service_log(3000);
    // What loom answers without the stage: the reference.
    let cut = {
        let config = json!({"servers": [fixture_server("fx", &[])]});
        let (_dir, path) = write_config(&config);
        let mut loom = RawClient::loom(&path);
        loom.initialize();
        text_of(&call_with_text(&mut loom, &log))
    };
    assert!(cut.contains("cut to 7,000 chars"), "{cut:.300}");
    let cases = [
        ("status-503", "error status", "HTTP 503"),
        ("status-400", "error status", "HTTP 400"),
        ("malformed", "malformed answer", "not JSON"),
        ("html", "wrong content type", "text/html"),
        ("huge", "answer too large", "bytes"),
        ("huge-chunked", "answer too large", "bytes"),
        ("echo-key", "malformed answer", "repeats the API key"),
        ("echo-key-error", "error status", "HTTP 400"),
        ("reset", "endpoint unreachable", ""),
        ("empty", "empty answer", ""),
        ("null-content", "empty answer", ""),
        ("no-choices", "malformed answer", "choices[0]"),
        ("cutoff", "summary cut off", "finish_reason"),
        ("long", "summary over budget", "the budget of 7,000 chars"),
        ("slow", "timeout", "timeoutMs (1500 ms)"),
    ];
    for (model, kind, detail) in cases {
        let (_dir, mut loom) =
            loom_with_llm(&endpoint.base_url(), model, json!({"timeoutMs": 1500}));
        for call in 1..=2 {
            let text = text_of(&call_with_text(&mut loom, &log));
            // The second call's original is the session's second document.
            let expected = cut.replace("doc_1", &format!("doc_{call}"));
            assert_eq!(text, expected, "{model}: the cut text answers");
        }
        let stderr = stderr_with(&loom, "model summary failed");
        let warned: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("model summary failed"))
            .collect();
        assert_eq!(
            warned.len(),
            1,
            "{model}: one warning for two failures:\n{stderr}"
        );
        assert!(warned[0].contains("WARN"), "{model}: {}", warned[0]);
        assert!(
            warned[0].contains(&format!("({kind})")),
            "{model}: {}",
            warned[0]
        );
        assert!(warned[0].contains(detail), "{model}: {}", warned[0]);
        assert!(!stderr.contains(KEY), "{model}: the key leaked");
        // Not even a part of it (a message cut at 200 characters would split it).
        assert!(
            !stderr.contains(&KEY[..10]),
            "{model}: part of the key leaked"
        );
        let stats: Value =
            serde_json::from_str(&text_of(&loom.call_tool("loom_stats", json!({})))).expect("json");
        assert_eq!(stats["modelSummaries"]["fellBack"], 2, "{model}: {stats:#}");
        assert_eq!(stats["modelSummaries"]["summarized"], 0, "{model}");
    }
}

#[test]
fn a_wrong_key_and_a_closed_port_fall_back_too() {
    let endpoint = Endpoint::start();
    let log = service_log(3000);
    // The endpoint wants KEY; loom sends another.
    let config = json!({
        "servers": [fixture_server("fx", &[])],
        "llm": {"baseUrl": endpoint.base_url(), "apiKey": "${OTHER_KEY}", "model": "summary"},
        "compression": {"default": {"llmSummary": true}},
    });
    let (_dir, path) = write_config(&config);
    let mut loom = RawClient::spawn(
        &loom_bin(),
        &["--config", path.to_str().expect("utf8")],
        &[("OTHER_KEY", "sk-wrong-one")],
    );
    loom.initialize();
    let text = text_of(&call_with_text(&mut loom, &log));
    assert!(text.starts_with("[loom: text reduced"), "{text:.200}");
    let stderr = stderr_with(&loom, "(error status): HTTP 401");
    assert!(!stderr.contains("sk-wrong-one"));

    // Nothing listens: the call still answers, at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let (_dir, mut loom) =
        loom_with_llm(&format!("http://127.0.0.1:{port}/v1"), "summary", json!({}));
    let text = text_of(&call_with_text(&mut loom, &log));
    assert!(text.starts_with("[loom: text reduced"), "{text:.200}");
    stderr_with(&loom, "(endpoint unreachable)");
}

#[test]
fn errors_denials_and_texts_within_the_budget_are_never_sent() {
    let endpoint = Endpoint::start();
    let (_dir, mut loom) = loom_with_llm(&endpoint.base_url(), "summary", json!({}));
    let log = service_log(3000);
    let error = json!({"isError": true, "content": [{"type": "text", "text": log}]});
    let line = loom.call_tool("fx_raw", json!({"json": error.to_string()}));
    assert_eq!(line.value["result"]["isError"], true);
    let denial = format!("Error: EACCES: permission denied, open '/etc/shadow'\n{log}");
    let text = first_text(&call_with_text(&mut loom, &denial));
    assert!(!text.contains("summarised by the model"), "{text:.200}");
    let small = service_log(40);
    assert_eq!(first_text(&call_with_text(&mut loom, &small)), small);
    assert!(endpoint.requests().is_empty(), "{:#?}", endpoint.requests());
}

/// Four calls at once through a loom whose endpoint never answers in time: what the endpoint
/// saw, as (requests, the most in flight at once), and loom's log once it has each of `logged`.
fn four_at_once(max_in_flight: u64, logged: &[&str]) -> (usize, u64, String) {
    let endpoint = Endpoint::start();
    let (_dir, mut loom) = loom_with_llm(
        &endpoint.base_url(),
        "slow",
        json!({"timeoutMs": 3000, "maxInFlight": max_in_flight}),
    );
    let result = json!({"content": [{"type": "text", "text": service_log(3000)}]}).to_string();
    let ids: Vec<i64> = (0..4)
        .map(|_| {
            loom.request(
                "tools/call",
                json!({"name": "fx_raw", "arguments": {"json": result}}),
            )
        })
        .collect();
    for id in ids {
        let line = loom.response(id);
        assert!(
            text_of(&line).starts_with("[loom: text reduced"),
            "the cut text answers"
        );
    }
    let requests = endpoint.requests();
    let most = requests
        .iter()
        .filter_map(|r| r["inFlight"].as_u64())
        .max()
        .unwrap_or(0);
    for needle in logged {
        stderr_with(&loom, needle);
    }
    (requests.len(), most, loom.stderr_text())
}

#[test]
fn requests_in_flight_are_bounded_and_late_slots_are_not_used() {
    let (sent, most, stderr) = four_at_once(4, &["(timeout)"]);
    assert_eq!((sent, most), (4, 4), "unbounded enough, all four overlap");
    assert!(!stderr.contains("(all slots busy)"), "{stderr}");

    // Two slots: two requests time out holding them; the other two would get them with no
    // time left, and give up instead of sending.
    let (sent, most, _) = four_at_once(
        2,
        &[
            "(timeout)",
            "(all slots busy): 2 requests in flight (llm.maxInFlight)",
        ],
    );
    assert_eq!((sent, most), (2, 2));
}

#[test]
fn a_call_cancelled_while_its_summary_is_awaited_leaves_nothing_held() {
    let result = json!({"content": [{"type": "text", "text": service_log(3000)}]}).to_string();
    // A plain call takes the direct lane; one through loom_call takes rmcp's path.
    let direct = json!({"name": "fx_raw", "arguments": {"json": result}});
    let through_rmcp = json!({"name": "loom_call", "arguments": {"tool": "fx_raw", "arguments": {"json": result}}});
    for (lane, params) in [("direct", direct), ("rmcp", through_rmcp)] {
        let endpoint = Endpoint::start();
        let (_dir, mut loom) = loom_with_llm(&endpoint.base_url(), "slow", json!({}));
        let id = loom.request("tools/call", params);
        eventually(&format!("{lane}: the summary is asked for"), || {
            !endpoint.requests().is_empty()
        });
        loom.notify(
            "notifications/cancelled",
            json!({"requestId": id, "reason": "the user pressed stop"}),
        );
        // The store as the session sees it: the original and the cut were never sent, so
        // they go (before the 30 s the slow model takes, and the 20 s of timeoutMs).
        eventually(
            &format!("{lane}: the cancelled call's documents are let go"),
            || {
                let stats: Value =
                    serde_json::from_str(&text_of(&loom.call_tool("loom_stats", json!({}))))
                        .expect("json");
                stats["held"]["documents"] == 0
            },
        );
        // And the endpoint's request was dropped with it.
        eventually(&format!("{lane}: the endpoint sees the request go"), || {
            endpoint.requests().len() == 1
        });
    }
}
