//! Protocol 2026-07-28 through loom, on the wire (SPEC §5.1, §5.8, §5.10, §5.11): a client that
//! speaks that revision (no `initialize`, the envelope on every request) in front of the
//! fixture, whose `elicit`, `sample` and `roots` tools ask their client in the middle of a call,
//! and of servers/task_server.py (2025-11-25 tasks), driven by rmcp's own client for the tasks
//! extension. The official Python clients run the same ground in tests/interop.

use crate::common;

use std::time::Duration;

use common::{RawClient, fixture_server, write_config};
use serde_json::{Value, json};

/// The envelope a 2026-07-28 client puts on every request.
fn envelope(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "loom-tests", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    })
}

fn asks_everything() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}})
}

/// A `tools/call` of a 2026-07-28 client.
fn call(name: &str, arguments: Value, extra: Value) -> Value {
    let mut params = json!({
        "name": name,
        "arguments": arguments,
        "_meta": envelope(asks_everything()),
    });
    if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            params.insert(key.clone(), value.clone());
        }
    }
    params
}

fn loom_with_fixture() -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
    (dir, RawClient::loom(&path))
}

fn error_of(line: &common::Line) -> (i64, String) {
    let error = &line.value["error"];
    (
        error["code"].as_i64().unwrap_or_default(),
        error["message"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn a_server_question_becomes_input_required_and_the_retry_answers_it() {
    let (_dir, mut loom) = loom_with_fixture();
    let first = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({}),
        ),
    );
    let result = &first.value["result"];
    assert_eq!(result["resultType"], "input_required", "{}", first.raw);
    let requests = result["inputRequests"].as_object().expect("inputRequests");
    assert_eq!(requests.len(), 1, "{}", first.raw);
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["message"], "favourite colour?");
    assert!(
        request["params"].get("_meta").is_none(),
        "2026-07-28 questions carry no _meta: {}",
        first.raw
    );
    let state = result["requestState"].as_str().expect("requestState");
    assert_eq!(state.len(), 32, "128 random bits as hex: {state}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "loom",
        "{}",
        first.raw
    );

    let answer = json!({"action": "accept", "content": {"answer": "blue"}});
    // Bad retries are refused and deliver nothing; the call keeps waiting.
    let forged = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"requestState": "0123456789abcdef0123456789abcdef", "inputResponses": {key.clone(): answer.clone()}}),
        ),
    );
    let (code, message) = error_of(&forged);
    assert_eq!(code, -32602, "{}", forged.raw);
    assert!(message.contains("unknown or expired"), "{message}");

    let unasked = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"requestState": state, "inputResponses": {"sampling-999": {"role": "assistant"}}}),
        ),
    );
    let (code, message) = error_of(&unasked);
    assert_eq!(code, -32602, "{}", unasked.raw);
    assert!(
        message.contains("`sampling-999`") && message.contains(key.as_str()),
        "{message}"
    );

    let malformed = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"requestState": state, "inputResponses": {key.clone(): {"action": "maybe"}}}),
        ),
    );
    let (code, message) = error_of(&malformed);
    assert_eq!(code, -32602, "{}", malformed.raw);
    assert!(
        message.contains("not a result of `elicitation/create`"),
        "{message}"
    );

    let other_tool = loom.call(
        "tools/call",
        call(
            "fx_echo",
            json!({"text": "x"}),
            json!({"requestState": state, "inputResponses": {key.clone(): answer.clone()}}),
        ),
    );
    let (code, message) = error_of(&other_tool);
    assert_eq!(code, -32602, "{}", other_tool.raw);
    assert!(message.contains("belongs to"), "{message}");

    let other_arguments = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "something else"}),
            json!({"requestState": state, "inputResponses": {key.clone(): answer.clone()}}),
        ),
    );
    assert_eq!(
        error_of(&other_arguments).0,
        -32602,
        "{}",
        other_arguments.raw
    );

    let no_state = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"inputResponses": {key.clone(): answer.clone()}}),
        ),
    );
    let (code, message) = error_of(&no_state);
    assert_eq!(code, -32602, "{}", no_state.raw);
    assert!(message.contains("without `requestState`"), "{message}");

    // The proper retry: the server gets the answer, the call finishes.
    let done = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"requestState": state, "inputResponses": {key.clone(): answer.clone()}}),
        ),
    );
    assert_eq!(
        done.value["result"]["resultType"], "complete",
        "{}",
        done.raw
    );
    let text = common::first_text(&done);
    assert!(text.contains("blue") && text.contains("accept"), "{text}");

    // A state answers one round: used again, it is unknown.
    let stale = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            json!({"message": "favourite colour?"}),
            json!({"requestState": state, "inputResponses": {key.clone(): answer}}),
        ),
    );
    assert_eq!(error_of(&stale).0, -32602, "{}", stale.raw);
}

/// The tool a call waits in leaves the catalog (its server relists its tools) before the
/// client comes back: the retry still reaches the waiting call, where the tool led then.
#[test]
fn a_retry_goes_on_after_its_tool_left_the_catalog() {
    let (_dir, mut loom) = loom_with_fixture();
    let arguments = json!({"message": "still there?"});
    let first = loom.call(
        "tools/call",
        call("fx_elicit", arguments.clone(), json!({})),
    );
    let result = &first.value["result"];
    assert_eq!(result["resultType"], "input_required", "{}", first.raw);
    let state = result["requestState"]
        .as_str()
        .expect("requestState")
        .to_string();
    let key = result["inputRequests"]
        .as_object()
        .and_then(|r| r.keys().next().cloned())
        .expect("a question");
    let removed = loom.call(
        "tools/call",
        call(
            "fx_add_tool",
            json!({"name": "elicit", "remove": true}),
            json!({}),
        ),
    );
    assert_eq!(common::first_text(&removed), "removed", "{}", removed.raw);
    common::eventually("fx_elicit to leave loom's tools/list", || {
        let listed = loom.call("tools/list", json!({"_meta": envelope(asks_everything())}));
        !listed.raw.contains("\"fx_elicit\"")
    });
    // A new call of the tool is unknown now …
    let fresh = loom.call(
        "tools/call",
        call("fx_elicit", arguments.clone(), json!({})),
    );
    let (code, message) = error_of(&fresh);
    assert_eq!(code, -32602, "{}", fresh.raw);
    assert!(message.contains("unknown tool"), "{message}");
    // … and a retry with another tool's name still is not this call's.
    let answer = json!({"action": "accept", "content": {"answer": "yes"}});
    let done = loom.call(
        "tools/call",
        call(
            "fx_elicit",
            arguments,
            json!({"requestState": state, "inputResponses": {key: answer}}),
        ),
    );
    assert_eq!(
        done.value["result"]["resultType"], "complete",
        "{}",
        done.raw
    );
    let text = common::first_text(&done);
    assert!(text.contains("yes") && text.contains("accept"), "{text}");
}

#[test]
fn sampling_and_roots_become_questions_and_undeclared_ones_are_refused() {
    let (_dir, mut loom) = loom_with_fixture();
    let asked = loom.call(
        "tools/call",
        call("fx_sample", json!({"prompt": "hi"}), json!({})),
    );
    let result = &asked.value["result"];
    let (key, request) = result["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .expect("a question");
    assert_eq!(request["method"], "sampling/createMessage", "{}", asked.raw);
    let state = result["requestState"].as_str().expect("state").to_string();
    let model = json!({"role": "assistant", "content": {"type": "text", "text": "hello there"}, "model": "m"});
    let done = loom.call(
        "tools/call",
        call(
            "fx_sample",
            json!({"prompt": "hi"}),
            json!({"requestState": state, "inputResponses": {key.clone(): model}}),
        ),
    );
    assert!(
        common::first_text(&done).contains("hello there"),
        "{}",
        done.raw
    );

    let asked = loom.call("tools/call", call("fx_roots", json!({}), json!({})));
    let result = &asked.value["result"];
    let (key, request) = result["inputRequests"]
        .as_object()
        .and_then(|r| r.iter().next())
        .expect("a question");
    assert_eq!(request, &json!({"method": "roots/list"}), "{}", asked.raw);
    let state = result["requestState"].as_str().expect("state").to_string();
    let done = loom.call(
        "tools/call",
        call(
            "fx_roots",
            json!({}),
            json!({"requestState": state, "inputResponses": {key.clone(): {"roots": [{"uri": "file:///work"}]}}}),
        ),
    );
    assert!(
        common::first_text(&done).contains("file:///work"),
        "{}",
        done.raw
    );

    // A request that does not declare sampling: the server is refused, the call answers.
    let mut params = call("fx_sample", json!({"prompt": "hi"}), json!({}));
    params["_meta"] = envelope(json!({}));
    let refused = loom.call("tools/call", params);
    assert_eq!(
        refused.value["result"]["resultType"], "complete",
        "{}",
        refused.raw
    );
    let text = serde_json::to_string(&refused.value["result"]).expect("json");
    assert!(
        text.contains("did not declare the sampling capability"),
        "{}",
        refused.raw
    );
}

#[test]
fn the_envelope_is_checked_on_every_request() {
    let (_dir, mut loom) = loom_with_fixture();
    // The first request opens the 2026-07-28 lifecycle.
    let listed = loom.call("tools/list", json!({"_meta": envelope(json!({}))}));
    let result = &listed.value["result"];
    assert_eq!(result["resultType"], "complete", "{}", listed.raw);
    assert_eq!(result["cacheScope"], "private", "{}", listed.raw);
    assert_eq!(result["ttlMs"], 0, "{}", listed.raw);
    // The same order every time.
    let again = loom.call("tools/list", json!({"_meta": envelope(json!({}))}));
    assert_eq!(
        listed.value["result"]["tools"],
        again.value["result"]["tools"]
    );

    let missing = loom.call(
        "tools/call",
        json!({"name": "fx_echo", "arguments": {"text": "x"},
               "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
    );
    let (code, message) = error_of(&missing);
    assert_eq!(code, -32602, "{}", missing.raw);
    assert!(message.contains("clientCapabilities"), "{message}");

    let mut future = call("fx_echo", json!({"text": "x"}), json!({}));
    future["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let unsupported = loom.call("tools/call", future);
    assert_eq!(error_of(&unsupported).0, -32022, "{}", unsupported.raw);
    assert_eq!(
        unsupported.value["error"]["data"]["requested"], "2099-01-01",
        "{}",
        unsupported.raw
    );

    for method in ["ping", "logging/setLevel", "resources/subscribe"] {
        let mut params = json!({"_meta": envelope(json!({}))});
        if method == "logging/setLevel" {
            params["level"] = json!("debug");
        }
        if method == "resources/subscribe" {
            params["uri"] = json!("fixture://greeting");
        }
        let removed = loom.call(method, params);
        assert_eq!(error_of(&removed).0, -32601, "{method}: {}", removed.raw);
    }

    // A passthrough result keeps every byte after the members 2026-07-28 needs.
    let echo = loom.call(
        "tools/call",
        call(
            "fx_raw",
            json!({"json": "{\"content\":[],\"v\":2.50}"}),
            json!({}),
        ),
    );
    assert_eq!(
        common::result_bytes(&echo),
        format!(
            r#"{{"resultType":"complete","_meta":{{"io.modelcontextprotocol/serverInfo":{{"name":"loom","version":"{}"}}}},"content":[],"v":2.50}}"#,
            env!("CARGO_PKG_VERSION")
        )
    );
    // Trace context reaches the server unchanged.
    let mut traced = call("fx_meta_echo", json!({}), json!({}));
    traced["_meta"]["traceparent"] =
        json!("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    traced["_meta"]["tracestate"] = json!("vendor=1");
    traced["_meta"]["baggage"] = json!("user=a");
    let seen = loom.call("tools/call", traced);
    let meta = &seen.value["result"]["structuredContent"];
    assert_eq!(
        meta["traceparent"], "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        "{}",
        seen.raw
    );
    assert_eq!(meta["tracestate"], "vendor=1");
    assert_eq!(meta["baggage"], "user=a");
    assert!(
        meta.as_object()
            .is_some_and(|m| !m.keys().any(|k| k.starts_with("io.modelcontextprotocol/"))),
        "the envelope must stop at loom: {}",
        seen.raw
    );
}

#[test]
fn a_waiting_call_is_cancelled_downstream_when_the_client_goes() {
    let (_dir, mut loom) = loom_with_fixture();
    let asked = loom.call(
        "tools/call",
        call("fx_elicit", json!({"message": "m"}), json!({})),
    );
    assert_eq!(
        asked.value["result"]["resultType"], "input_required",
        "{}",
        asked.raw
    );
    // While the call waits for its client, other calls go on.
    let echo = loom.call(
        "tools/call",
        call("fx_echo", json!({"text": "still here"}), json!({})),
    );
    assert_eq!(common::first_text(&echo), "still here");
    loom.close_stdin();
    let status = loom.wait_exit();
    assert!(status.success(), "{status:?}\n{}", loom.stderr_text());
}

#[test]
fn listen_streams_carry_list_changes() {
    let (_dir, mut loom) = loom_with_fixture();
    let listen = loom.request(
        "subscriptions/listen",
        json!({"_meta": envelope(json!({})), "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["fixture://greeting", "nobody://x"]}}),
    );
    let ack = loom.wait_for("the acknowledgement", |v| {
        v["method"] == "notifications/subscriptions/acknowledged"
    });
    assert_eq!(
        ack.value["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{}",
        ack.raw
    );
    // The fixture declares `resources.subscribe`: it takes URIs it does not list too.
    assert_eq!(
        ack.value["params"]["notifications"]["resourceSubscriptions"],
        json!(["fixture://greeting", "nobody://x"]),
        "{}",
        ack.raw
    );
    // The fixture announces an update 50 ms after a subscription to its greeting.
    let updated = loom.wait_for("the resource update", |v| {
        v["method"] == "notifications/resources/updated"
    });
    assert_eq!(updated.value["params"]["uri"], "fixture://greeting");
    assert_eq!(
        updated.value["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen)
    );
    let added = loom.call(
        "tools/call",
        call("fx_add_tool", json!({"name": "late"}), json!({})),
    );
    assert!(
        common::first_text(&added).contains("added"),
        "{}",
        added.raw
    );
    let changed = loom.wait_for("tools list_changed on the stream", |v| {
        v["method"] == "notifications/tools/list_changed"
    });
    assert_eq!(
        changed.value["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{}",
        changed.raw
    );
    loom.notify(
        "notifications/cancelled",
        json!({"requestId": listen, "reason": "done"}),
    );
    // After the stream ends, no more notifications for it.
    let after = loom.call(
        "tools/call",
        call("fx_add_tool", json!({"name": "later"}), json!({})),
    );
    assert!(common::first_text(&after).contains("added"));
    assert!(
        !loom.arrives_within(Duration::from_millis(400), |v| {
            v["method"] == "notifications/tools/list_changed"
        }),
        "a list change reached a 2026-07-28 client outside a listen stream"
    );
}

#[test]
fn a_listen_stream_is_acknowledged_without_what_no_server_can_watch() {
    let (_dir, path) =
        write_config(&json!({"servers": [fixture_server("fx", &["--no-resources"])]}));
    let mut loom = RawClient::loom(&path);
    loom.request(
        "subscriptions/listen",
        json!({"_meta": envelope(json!({})), "notifications": {"promptsListChanged": true, "resourceSubscriptions": ["nobody://x"]}}),
    );
    let ack = loom.wait_for("the acknowledgement", |v| {
        v["method"] == "notifications/subscriptions/acknowledged"
    });
    assert_eq!(
        ack.value["params"]["notifications"],
        json!({"promptsListChanged": true}),
        "{}",
        ack.raw
    );
}

/// rmcp's client (the official Rust SDK), which implements the tasks extension of 2026-07-28,
/// over loom in front of servers/task_server.py (2025-11-25 tasks, standard library only).
mod tasks_extension {
    use std::path::PathBuf;
    use std::process::Stdio;
    use std::time::Duration;

    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
        ClientConfig, GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
    };
    use rmcp::service::{ClientLifecycleMode, RunningService};
    use rmcp::{ClientHandler, RoleClient};
    use serde_json::{Value, json};

    use super::common::write_config;

    struct Client {
        tasks: bool,
    }

    impl ClientHandler for Client {
        fn get_info(&self) -> ClientConfig {
            let mut capabilities = ClientCapabilities::default();
            if self.tasks {
                capabilities.extensions = Some(
                    [(
                        rmcp::model::TASKS_EXTENSION_ID.to_string(),
                        serde_json::Map::new(),
                    )]
                    .into_iter()
                    .collect(),
                );
            }
            ClientConfig::new(capabilities, Implementation::new("loom-tests", "1"))
        }
    }

    fn task_server() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/servers/task_server.py")
    }

    async fn connect(
        config: &std::path::Path,
        tasks: bool,
    ) -> (tokio::process::Child, RunningService<RoleClient, Client>) {
        let mut child = tokio::process::Command::new(super::common::loom_bin())
            .args(["--config", config.to_str().expect("utf-8")])
            .env("LOOM_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn loom");
        let transport = (
            child.stdout.take().expect("stdout"),
            child.stdin.take().expect("stdin"),
        );
        let client = rmcp::serve_client_with_lifecycle(
            Client { tasks },
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp client over loom");
        (child, client)
    }

    /// `loom serve --http` over `config`, and the URL it serves at.
    fn serve_http(config: &std::path::Path) -> (std::process::Child, String) {
        use std::io::BufRead;
        let mut child = std::process::Command::new(super::common::loom_bin())
            .args(["serve", "--http", "127.0.0.1:0", "--config"])
            .arg(config)
            .env("LOOM_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn loom");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                if let Some(url) = line.strip_prefix("loom: serving MCP at ") {
                    let _ = tx.send(url.to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("loom says where it listens");
        (child, url)
    }

    /// rmcp's client over loom's HTTP face as the holder of `token`, declaring the extension.
    async fn connect_http(url: &str, token: &str) -> RunningService<RoleClient, Client> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url,
            )
            .auth_header(token);
        let transport = rmcp::transport::StreamableHttpClientTransport::with_client(
            reqwest::Client::new(),
            config,
        );
        rmcp::serve_client_with_lifecycle(
            Client { tasks: true },
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp client over loom's HTTP face")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_of_one_credential_is_unknown_to_another() {
        let (_dir, config) = write_config(&json!({
            "servers": [
                {"name": "tasks", "command": "python3", "args": [task_server().to_str().expect("utf-8")]}
            ],
            "http": {"tokens": ["alice-5b21e0", "bob-9f3c7a"]}
        }));
        let (mut loom, url) = serve_http(&config);
        let alice = connect_http(&url, "alice-5b21e0").await;
        let bob = connect_http(&url, "bob-9f3c7a").await;
        let created = alice
            .peer()
            .call_tool_once(CallToolRequestParams::new("tasks_held_report"))
            .await
            .expect("tools/call");
        let CallToolResponse::Task(created) = created else {
            panic!("not a task: {created:?}");
        };
        let id = created.task.task_id;
        // Alice sees her task; Bob, holding its id, is told it does not exist, and cannot cancel it.
        let own = alice
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect("alice's tasks/get");
        assert_eq!(own.task.task.status, TaskStatus::Working);
        let theirs = bob
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect_err("bob's tasks/get of alice's task");
        assert!(theirs.to_string().contains("unknown task"), "{theirs}");
        let cancel = bob
            .peer()
            .cancel_task(CancelTaskParams::new(id.clone()))
            .await
            .expect_err("bob's tasks/cancel of alice's task");
        assert!(cancel.to_string().contains("unknown task"), "{cancel}");
        let still = alice
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect("alice's tasks/get");
        assert_eq!(
            still.task.task.status,
            TaskStatus::Working,
            "bob's cancel reached the task"
        );
        alice
            .peer()
            .cancel_task(CancelTaskParams::new(id))
            .await
            .expect("alice cancels her own task");
        let _ = loom.kill();
        let _ = loom.wait();
    }

    fn arguments(value: Value) -> serde_json::Map<String, Value> {
        value.as_object().cloned().unwrap_or_default()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_in_the_extension_s_shape_and_task_tools_for_clients_without_it() {
        let (_dir, config) = write_config(&json!({"servers": [
            {"name": "tasks", "command": "python3", "args": [task_server().to_str().expect("utf-8")]}
        ]}));
        let (_loom, client) = connect(&config, true).await;
        let peer = client.peer().clone();
        let info = peer.peer_info().expect("discovered");
        assert!(
            info.capabilities.supports_tasks(),
            "server/discover does not declare the tasks extension: {:?}",
            info.capabilities
        );
        let tools = peer.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(
            names.contains(&"tasks_table_report") && names.contains(&"tasks_held_report"),
            "{names:?}"
        );

        // A task tool: the server decides (through loom) to answer with a task.
        let created = peer
            .call_tool_once(
                CallToolRequestParams::new("tasks_table_report")
                    .with_arguments(arguments(json!({"rows": 3000}))),
            )
            .await
            .expect("tools/call");
        let CallToolResponse::Task(created) = created else {
            panic!("not a task: {created:?}");
        };
        let id = created.task.task_id.clone();
        assert!(created.task.ttl_ms.is_some(), "{created:?}");
        // Polled until it is done; its result is inlined, made an envelope (3,000 rows).
        let done = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let task = peer
                    .get_task(GetTaskParams::new(id.clone()))
                    .await
                    .expect("tasks/get");
                if task.task.task.status != TaskStatus::Working {
                    return task;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await
        .expect("the task ends");
        let TaskPayload::Completed { result } = &done.task.payload else {
            panic!("not completed: {done:?}");
        };
        let envelope = &result["structuredContent"];
        assert_eq!(envelope["kind"], "loom_dataset_ref", "{result:?}");
        assert_eq!(envelope["rows"], 3000, "{result:?}");
        // Asked again, the same result (the envelope is made once).
        let again = peer
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect("tasks/get");
        let TaskPayload::Completed { result: second } = &again.task.payload else {
            panic!("not completed: {again:?}");
        };
        assert_eq!(second["structuredContent"]["ref"], envelope["ref"]);

        // A task that works until it is cancelled.
        let held = peer
            .call_tool_once(CallToolRequestParams::new("tasks_held_report"))
            .await
            .expect("tools/call");
        let CallToolResponse::Task(held) = held else {
            panic!("not a task: {held:?}");
        };
        peer.cancel_task(CancelTaskParams::new(held.task.task_id.clone()))
            .await
            .expect("tasks/cancel");
        let cancelled = peer
            .get_task(GetTaskParams::new(held.task.task_id.clone()))
            .await
            .expect("tasks/get");
        assert_eq!(
            cancelled.task.task.status,
            TaskStatus::Cancelled,
            "{cancelled:?}"
        );

        // An id loom did not create for this client.
        let unknown = peer
            .get_task(GetTaskParams::new("ts-not-a-task"))
            .await
            .expect_err("unknown task");
        assert!(
            unknown.to_string().contains("unknown task `ts-not-a-task`"),
            "{unknown}"
        );

        // A client without the extension on the same loom kind: the task tool runs as a task
        // in loom and answers as a plain call.
        let (_plain_loom, plain) = connect(&config, false).await;
        let answer = plain
            .peer()
            .call_tool_once(
                CallToolRequestParams::new("tasks_table_report")
                    .with_arguments(arguments(json!({"rows": 200}))),
            )
            .await
            .expect("tools/call");
        let CallToolResponse::Complete(answer) = answer else {
            panic!("a client without the extension got {answer:?}");
        };
        let text = answer
            .content
            .first()
            .and_then(|c| c.as_text())
            .map(|t| t.text.clone())
            .unwrap_or_default();
        assert!(
            text.contains("\"region\"") || answer.structured_content.is_some(),
            "{answer:?}"
        );
        // And it cannot poll a task.
        let refused = plain
            .peer()
            .get_task(GetTaskParams::new(id))
            .await
            .expect_err("tasks/get without the extension");
        assert!(
            refused.to_string().contains("-32021") || refused.to_string().contains("extension"),
            "{refused}"
        );
    }
}

#[test]
fn calls_of_2026_07_28_take_the_direct_path_with_progress_and_cancellation() {
    let (_dir, mut loom) = loom_with_fixture();
    // rmcp's session is under way after its first request.
    loom.call("tools/list", json!({"_meta": envelope(json!({}))}));
    let mut slow = call("fx_slow", json!({"ms": 200, "steps": 2}), json!({}));
    slow["_meta"]["progressToken"] = json!("p-1");
    let done = loom.call("tools/call", slow);
    assert!(
        common::first_text(&done).contains("done after"),
        "{}",
        done.raw
    );
    // Progress came first, with the client's token.
    let progress = loom.wait_for("progress", |v| v["method"] == "notifications/progress");
    assert_eq!(
        progress.value["params"]["progressToken"], "p-1",
        "{}",
        progress.raw
    );

    let cancelled = loom.request(
        "tools/call",
        call("fx_slow", json!({"ms": 20000}), json!({})),
    );
    std::thread::sleep(Duration::from_millis(200));
    loom.notify(
        "notifications/cancelled",
        json!({"requestId": cancelled, "reason": "changed my mind"}),
    );
    assert!(
        loom.response_within(&[cancelled], Duration::from_millis(500))
            .is_none(),
        "a cancelled call was answered"
    );
    // The child was told, under the id the direct path gives its calls.
    common::eventually("the child records the cancellation", || {
        let seen = loom.call("tools/call", call("fx_cancelled", json!({}), json!({})));
        common::first_text(&seen).contains("loom:")
    });
}

/// A client may name 2026-07-28 in `initialize` (rmcp's own client does): it is answered in the
/// handshake's shape with the version negotiated there, and the session goes on in that era.
#[test]
fn initialize_asking_for_2026_07_28_is_answered_as_a_handshake() {
    let (_dir, mut loom) = loom_with_fixture();
    let answer = loom.call(
        "initialize",
        json!({"protocolVersion": "2026-07-28", "capabilities": {},
               "clientInfo": {"name": "loom-tests", "version": "1"}}),
    );
    let result = &answer.value["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25", "{}", answer.raw);
    assert_eq!(result["serverInfo"]["name"], "loom", "{}", answer.raw);
    assert!(result.get("resultType").is_none(), "{}", answer.raw);
    assert!(result.get("_meta").is_none(), "{}", answer.raw);
    loom.notify("notifications/initialized", json!({}));
    let listed = loom.call("tools/list", json!({}));
    assert!(
        listed.value["result"].get("resultType").is_none(),
        "{}",
        listed.raw
    );
    assert!(
        listed.value["result"]["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty()),
        "{}",
        listed.raw
    );
}
