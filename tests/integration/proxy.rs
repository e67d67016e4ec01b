//! The gateway's behaviour as a client sees it: names, routing, errors, timeouts, cancellation,
//! progress, server→client requests, list changes and tool filters.

use crate::common;

use common::*;
use serde_json::{Value, json};

const LOOM_TOOLS: [&str; 7] = [
    "loom_query",
    "loom_list_datasets",
    "loom_describe",
    "loom_materialize",
    "loom_export",
    "loom_read",
    "loom_stats",
];

fn loom_with(servers: Vec<Value>) -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({ "servers": servers }));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

#[test]
fn every_tool_of_every_server_is_listed_under_its_prefix_in_order() {
    let (_dir, mut loom) = loom_with(vec![
        fixture_server("alpha", &[]),
        fixture_server("beta", &["--extra-tools", "25", "--page-size", "7"]),
    ]);
    let names = loom.tool_names();
    let mut direct = RawClient::spawn(
        &fixture_bin(),
        &["--name", "beta", "--extra-tools", "25"],
        &[],
    );
    direct.initialize();
    let beta_direct = direct.tool_names();
    assert_eq!(beta_direct.len(), 21 + 25, "fixture listing changed");
    let alpha: Vec<_> = names.iter().filter(|n| n.starts_with("alpha_")).collect();
    let beta: Vec<_> = names.iter().filter(|n| n.starts_with("beta_")).collect();
    assert_eq!(alpha.len(), 21);
    assert!(names.ends_with(&LOOM_TOOLS.map(String::from)));
    // Every page of the paginated server was read, in the server's order.
    let expected: Vec<String> = beta_direct.iter().map(|n| format!("beta_{n}")).collect();
    assert_eq!(beta, expected.iter().collect::<Vec<_>>());
    // Servers appear in config order.
    assert!(
        names[0].starts_with("alpha_")
            && names[names.len() - 1 - LOOM_TOOLS.len()].starts_with("beta_")
    );
}

#[test]
fn tool_definitions_are_forwarded_as_they_are() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let mut direct = RawClient::spawn(&fixture_bin(), &["--name", "fx"], &[]);
    direct.initialize();
    let through = loom.call("tools/list", json!({})).value["result"]["tools"].clone();
    let own = direct.call("tools/list", json!({})).value["result"]["tools"].clone();
    let own = own.as_array().expect("tools");
    for tool in own {
        let name = tool["name"].as_str().expect("name");
        let mut expected = tool.clone();
        expected["name"] = json!(format!("fx_{name}"));
        // Policy (SPEC §5.3): loom may replace results, so an outputSchema moves to _meta.
        if let Some(schema) = expected
            .as_object_mut()
            .and_then(|t| t.remove("outputSchema"))
        {
            expected["_meta"]["io.loom/outputSchema"] = schema;
        }
        let found = through
            .as_array()
            .expect("tools")
            .iter()
            .find(|t| t["name"] == expected["name"])
            .unwrap_or_else(|| panic!("fx_{name} missing"));
        assert_eq!(found, &expected, "definition of {name} changed");
    }
    assert!(own.iter().any(|t| t.get("outputSchema").is_some()));
    // loom's own tools come last.
    let names: Vec<&str> = through
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(&names[names.len() - LOOM_TOOLS.len()..], LOOM_TOOLS);
}

#[test]
fn long_and_colliding_names_stay_valid_unique_and_routable() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &["--long-names"])]);
    let names = loom.tool_names();
    for name in &names {
        assert!(name.len() <= 64, "{name} is too long");
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
            "{name} has characters clients reject"
        );
    }
    let unique: std::collections::HashSet<_> = names.iter().collect();
    assert_eq!(unique.len(), names.len());
    // `dup.name` and `dup name` both sanitize to `dup_name`: both are reachable, each routed to
    // its own original (the fixture's echo-like extra tools answer with their text).
    let dups: Vec<_> = names
        .iter()
        .filter(|n| n.starts_with("fx_dup_name"))
        .cloned()
        .collect();
    assert_eq!(dups.len(), 2, "{names:?}");
    for name in dups {
        let line = loom.call_tool(&name, json!({"text": "hi"}));
        assert_not_error(&line);
    }
    let long = names
        .iter()
        .find(|n| n.starts_with("fx_a_very_long"))
        .expect("long name");
    let line = loom.call_tool(long, json!({"text": "long"}));
    assert_eq!(first_text(&line), "long");
}

/// A server's JSON-RPC error reaches the client as that error, with the server's code, message
/// and data, as it would connected directly (SPEC §5.6); the same through the direct lane (a
/// plain call) and rmcp's path (a call with a progress token takes the same route here).
#[test]
fn a_downstream_json_rpc_error_passes_on_as_the_server_sent_it() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let line = loom.call_tool("fx_rpc_error", json!({"message": "database is on fire"}));
    assert!(line.value.get("result").is_none(), "{}", line.raw);
    assert_eq!(
        line.value["error"],
        json!({"code": -32000, "message": "database is on fire"}),
        "{}",
        line.raw
    );
    // loom's own failures keep their form: a call to a tool loom does not know is loom's error.
    let unknown = loom.call_tool("fx_nope", json!({}));
    assert_eq!(unknown.value["error"]["code"], -32602, "{}", unknown.raw);
}

#[test]
fn an_unknown_tool_is_a_json_rpc_error_with_a_suggestion() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let line = loom.call_tool("fx_ecoh", json!({}));
    let error = &line.value["error"];
    assert_eq!(error["code"], -32602, "{}", line.raw);
    let message = error["message"].as_str().expect("message");
    assert!(
        message.contains("fx_ecoh") && message.contains("fx_echo"),
        "{message}"
    );
}

#[test]
fn unknown_methods_are_answered_at_once() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let line = loom.call("no/such/method", json!({}));
    assert_eq!(line.value["error"]["code"], -32601, "{}", line.raw);
}

#[test]
fn the_per_server_timeout_cancels_downstream_and_names_the_server() {
    let mut server = fixture_server("fx", &[]);
    server["callTimeoutMs"] = json!(300);
    let (_dir, mut loom) = loom_with(vec![server]);
    let line = loom.call_tool("fx_slow", json!({"ms": 20000}));
    assert_eq!(line.value["result"]["isError"], true, "{}", line.raw);
    let text = first_text(&line);
    assert!(text.contains("`fx`") && text.contains("300 ms"), "{text}");
    // The fixture saw the cancellation of that very request, which loom sent on its direct
    // path (SPEC §5.1: ids of the form `loom:N` towards the child).
    eventually("the fixture records the cancellation", || {
        let cancelled = loom.call_tool("fx_cancelled", json!({}));
        let ids: Vec<Value> = serde_json::from_str(&first_text(&cancelled)).expect("json");
        ids.first()
            .and_then(Value::as_str)
            .is_some_and(|id| id.starts_with("loom:"))
    });
    // The server is still usable.
    let line = loom.call_tool("fx_echo", json!({"text": "after"}));
    assert_eq!(first_text(&line), "after", "{}", line.raw);
}

#[test]
fn a_client_cancellation_reaches_the_downstream_request() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let id = loom.request(
        "tools/call",
        json!({"name": "fx_slow", "arguments": {"ms": 20000}}),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    loom.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "changed my mind"}),
    );
    eventually("the fixture records the cancellation", || {
        let cancelled = loom.call_tool("fx_cancelled", json!({}));
        let ids: Vec<Value> = serde_json::from_str(&first_text(&cancelled)).expect("json");
        ids.len() == 1
    });
    // A cancelled request gets no answer (the fixture stopped at once, so it would be here).
    let line = loom.call_tool("fx_echo", json!({"text": "next"}));
    assert_eq!(first_text(&line), "next", "{}", line.raw);
    let late = loom.response_within(&[id], std::time::Duration::from_millis(500));
    assert!(late.is_none(), "a cancelled call was answered: {late:?}");
}

#[test]
fn progress_notifications_come_back_with_the_clients_token_and_meta_travels() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let id = loom.request(
        "tools/call",
        json!({"name": "fx_slow", "arguments": {"ms": 200, "steps": 4},
               "_meta": {"progressToken": "my-token"}}),
    );
    let mut seen = Vec::new();
    for _ in 0..4 {
        let note = loom.wait_for("a progress notification", |v| {
            v["method"] == "notifications/progress"
        });
        assert_eq!(
            note.value["params"]["progressToken"], "my-token",
            "{}",
            note.raw
        );
        seen.push(note.value["params"]["progress"].as_f64().expect("progress"));
    }
    assert_eq!(seen, vec![1.0, 2.0, 3.0, 4.0]);
    let done = loom.response(id);
    assert!(first_text(&done).contains("done"));

    // Other `_meta` keys reach the server untouched.
    let line = loom.call(
        "tools/call",
        json!({"name": "fx_meta_echo", "arguments": {},
               "_meta": {"traceparent": "00-abc-def-01", "custom": {"k": [1, 2]}}}),
    );
    let meta = &line.value["result"]["structuredContent"];
    assert_eq!(meta["traceparent"], "00-abc-def-01", "{}", line.raw);
    assert_eq!(meta["custom"], json!({"k": [1, 2]}));
}

#[test]
fn server_requests_reach_a_client_that_declared_sampling() {
    let (dir, path) = write_config(&json!({"servers": [fixture_server("fx", &[])]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize_with(json!({"sampling": {}, "roots": {"listChanged": true}}));
    let id = loom.request(
        "tools/call",
        json!({"name": "fx_sample", "arguments": {"prompt": "2+2?"}}),
    );
    let request = loom.wait_for("sampling/createMessage", |v| {
        v["method"] == "sampling/createMessage"
    });
    assert!(request.raw.contains("2+2?"), "{}", request.raw);
    loom.send(
        &json!({"jsonrpc": "2.0", "id": request.value["id"], "result": {
        "role": "assistant", "content": {"type": "text", "text": "four"}, "model": "test-model"}}),
    );
    let answer = loom.response(id);
    assert!(first_text(&answer).contains("four"), "{}", answer.raw);

    let id = loom.request("tools/call", json!({"name": "fx_roots", "arguments": {}}));
    let request = loom.wait_for("roots/list", |v| v["method"] == "roots/list");
    loom.send(
        &json!({"jsonrpc": "2.0", "id": request.value["id"], "result": {
        "roots": [{"uri": "file:///work", "name": "work"}]}}),
    );
    let answer = loom.response(id);
    assert!(
        first_text(&answer).contains("file:///work"),
        "{}",
        answer.raw
    );
    drop(dir);
}

#[test]
fn server_requests_fail_cleanly_when_the_client_lacks_the_capability() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let line = loom.call_tool("fx_sample", json!({"prompt": "hi"}));
    assert_eq!(line.value["result"]["isError"], true, "{}", line.raw);
    assert!(first_text(&line).contains("sampling"), "{}", line.raw);
}

#[test]
fn a_downstream_list_change_is_relisted_and_announced_once() {
    let (_dir, mut loom) = loom_with(vec![fixture_server("fx", &[])]);
    let line = loom.call_tool("fx_add_tool", json!({"name": "fresh"}));
    assert_eq!(first_text(&line), "added");
    loom.wait_for("tools/list_changed", |v| {
        v["method"] == "notifications/tools/list_changed"
    });
    assert!(loom.tool_names().contains(&"fx_fresh".to_string()));
    let line = loom.call_tool("fx_fresh", json!({"text": "new"}));
    assert_eq!(first_text(&line), "new");
    // Coalesced: one announcement for one change.
    assert!(
        !loom.arrives_within(std::time::Duration::from_millis(300), |v| {
            v["method"] == "notifications/tools/list_changed"
        })
    );
}

#[test]
fn allow_and_deny_lists_filter_tools_and_deny_wins() {
    let mut server = fixture_server("fx", &[]);
    server["allowTools"] = json!(["echo", "r*"]);
    server["denyTools"] = json!(["raw"]);
    let (_dir, mut loom) = loom_with(vec![server]);
    let mut names: Vec<String> = loom
        .tool_names()
        .into_iter()
        .filter(|n| !n.starts_with("loom_"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            "fx_echo",
            "fx_resource_link",
            "fx_roots",
            "fx_rows",
            "fx_rpc_error"
        ]
    );
    let line = loom.call_tool("fx_raw", json!({"json": "{}"}));
    assert_eq!(line.value["error"]["code"], -32602, "{}", line.raw);
}

#[test]
fn resources_templates_and_prompts_are_routed_back() {
    let (_dir, mut loom) = loom_with(vec![
        fixture_server("one", &["--no-resources"]),
        fixture_server("two", &[]),
    ]);
    let list = loom.call("resources/list", json!({}));
    let uris: Vec<&str> = list.value["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert!(uris.contains(&"fixture://greeting"), "{}", list.raw);
    let read = loom.call("resources/read", json!({"uri": "fixture://greeting"}));
    assert!(read.raw.contains("hello from two"), "{}", read.raw);
    let templated = loom.call("resources/read", json!({"uri": "fixture://items/7"}));
    assert!(templated.raw.contains("item 7"), "{}", templated.raw);
    let missing = loom.call("resources/read", json!({"uri": "nowhere://x"}));
    assert!(missing.value.get("error").is_some(), "{}", missing.raw);

    let prompts = loom.call("prompts/list", json!({}));
    assert_eq!(
        prompts.value["result"]["prompts"][0]["name"], "two_greet",
        "{}",
        prompts.raw
    );
    let prompt = loom.call(
        "prompts/get",
        json!({"name": "two_greet", "arguments": {"name": "Ada"}}),
    );
    assert!(prompt.raw.contains("Hello, Ada!"), "{}", prompt.raw);

    let sub = loom.call("resources/subscribe", json!({"uri": "fixture://greeting"}));
    assert!(sub.value.get("result").is_some(), "{}", sub.raw);
    let updated = loom.wait_for("resources/updated", |v| {
        v["method"] == "notifications/resources/updated"
    });
    assert_eq!(updated.value["params"]["uri"], "fixture://greeting");
}

/// A subscription to a URI no server lists (a resource a server may create later; the MCP
/// conformance suite subscribes to such a URI) goes to the servers that declared
/// `resources.subscribe`, as it would without loom (SPEC §5.4).
#[test]
fn subscriptions_to_unlisted_uris_reach_the_servers_that_accept_them() {
    let (_dir, mut loom) = loom_with(vec![
        fixture_server("one", &["--no-resources"]),
        fixture_server("two", &[]),
    ]);
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let line = loom.call(method, json!({"uri": "test://not-listed/yet"}));
        assert!(line.value.get("result").is_some(), "{method}: {}", line.raw);
    }

    // With no server that accepts subscriptions, the client is told why.
    let (_dir, mut loom) = loom_with(vec![fixture_server("one", &["--no-resources"])]);
    let line = loom.call(
        "resources/subscribe",
        json!({"uri": "test://not-listed/yet"}),
    );
    assert_eq!(line.value["error"]["code"], -32002, "{}", line.raw);
    let message = line.value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("none accepts subscriptions"),
        "{}",
        line.raw
    );
}
