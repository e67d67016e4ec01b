//! MCP Apps behind loom (SPEC §8.5, §5.4): a tool with a view keeps its `structuredContent`
//! (what the view draws) as the server sent it while the model's `content` becomes the envelope;
//! the same `ui://` page of two servers is renamed for the later one, consistently in the tool's
//! `_meta`, `resources/list` and `resources/read`. Real processes: loom and the fixture with
//! `--app`.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn loom_two_apps() -> (tempfile::TempDir, RawClient) {
    let (dir, path) = write_config(&json!({"servers": [
        fixture_server("a", &["--app"]),
        fixture_server("b", &["--app"]),
    ]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

fn tool<'a>(listed: &'a Line, name: &str) -> &'a Value {
    listed.value["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name}: {}", listed.raw))
}

#[test]
fn a_large_result_of_a_tool_with_a_view_keeps_its_structured_content() {
    let (_dir, mut loom) = loom_two_apps();
    let mut direct = RawClient::spawn(&fixture_bin(), &["--name", "a", "--app"], &[]);
    direct.initialize();
    let listed = loom.call("tools/list", json!({}));
    let cohorts = tool(&listed, "a_cohorts");
    // Its structuredContent is never replaced, so its outputSchema stays where clients read it.
    assert_eq!(cohorts["outputSchema"]["type"], "object", "{cohorts}");
    assert!(
        cohorts["_meta"].get("io.loom/outputSchema").is_none(),
        "{cohorts}"
    );

    let via = loom.call_tool("a_cohorts", json!({"count": 2000}));
    let own = direct.call_tool("cohorts", json!({"count": 2000}));
    let (via, own) = (&via.value["result"], &own.value["result"]);
    assert_eq!(via["structuredContent"], own["structuredContent"]);
    assert_eq!(via["_meta"], own["_meta"]);
    // What the model reads is the envelope.
    let text = via["content"][0]["text"].as_str().expect("a text block");
    let envelope: Value = serde_json::from_str(text).expect("the envelope as JSON text");
    assert_eq!(envelope["kind"], "loom_dataset_ref", "{envelope}");
    assert!(text.len() < 8_192, "{} characters", text.len());
    let reference = envelope["ref"].as_str().expect("ref");
    let counted = query(
        &mut loom,
        &format!("SELECT count(*) AS n, sum(retained) AS r FROM {reference}"),
    );
    let retained: u64 = (0..2000u64).map(|i| (i * 37) % 1000).sum();
    assert_eq!(counted["rows"][0], json!({"n": 2000, "r": retained}));

    // A small one passes through byte for byte.
    let small_via = loom.call_tool("a_cohorts", json!({"count": 3}));
    let small_own = direct.call_tool("cohorts", json!({"count": 3}));
    assert_eq!(result_bytes(&small_via), result_bytes(&small_own));
}

#[test]
fn the_same_ui_page_of_two_servers_is_renamed_for_the_later_one() {
    let (_dir, mut loom) = loom_two_apps();
    let listed = loom.call("tools/list", json!({}));
    let (a, b) = (tool(&listed, "a_cohorts"), tool(&listed, "b_cohorts"));
    assert_eq!(a["_meta"]["ui"]["resourceUri"], "ui://cohorts/view.html");
    assert_eq!(a["_meta"]["ui/resourceUri"], "ui://cohorts/view.html");
    assert_eq!(b["_meta"]["ui"]["resourceUri"], "ui://b/cohorts/view.html");
    assert_eq!(b["_meta"]["ui/resourceUri"], "ui://b/cohorts/view.html");

    let resources = loom.call("resources/list", json!({}));
    let uris: Vec<&str> = resources.value["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .filter(|uri| uri.starts_with("ui://"))
        .collect();
    // loom's own view comes after every server's resources (SPEC §12.1).
    assert_eq!(
        uris,
        [
            "ui://cohorts/view.html",
            "ui://b/cohorts/view.html",
            "ui://loom/dataset.html"
        ]
    );

    for (uri, server) in [
        ("ui://cohorts/view.html", "a"),
        ("ui://b/cohorts/view.html", "b"),
    ] {
        let read = loom.call("resources/read", json!({"uri": uri}));
        let contents = &read.value["result"]["contents"][0];
        assert_eq!(contents["uri"], uri, "{}", read.raw);
        assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
        assert_eq!(
            contents["text"],
            format!("<!doctype html><title>cohorts of {server}</title>")
        );
    }
    let view = loom.call("resources/read", json!({"uri": "ui://loom/dataset.html"}));
    let contents = &view.value["result"]["contents"][0];
    assert_eq!(contents["mimeType"], "text/html;profile=mcp-app");
    assert!(
        contents["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("<!doctype html>")),
        "{}",
        view.raw
    );
    // A view calls its server's tools by their own names; one that both servers have cannot
    // be told apart and stays unknown.
    let ambiguous = loom.call_tool("cohorts", json!({"count": 2}));
    assert_eq!(
        ambiguous.value["error"]["code"], -32602,
        "{}",
        ambiguous.raw
    );
    // A ui:// URI that no server uses is not found, and names what is there to read.
    let unknown = loom.call("resources/read", json!({"uri": "ui://c/cohorts/view.html"}));
    assert_eq!(unknown.value["error"]["code"], -32002, "{}", unknown.raw);
}

/// A view calls its server's tools by the names its server gave them: with one server of that
/// name, loom routes the call (SPEC §8.5).
#[test]
fn a_tool_called_by_its_own_name_reaches_its_server() {
    let (_dir, path) = write_config(&json!({"servers": [
        fixture_server("a", &["--app"]),
        fixture_server("crm", &[]),
    ]}));
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    let by_own = loom.call_tool("cohorts", json!({"count": 2}));
    let by_exposed = loom.call_tool("a_cohorts", json!({"count": 2}));
    assert_eq!(result_bytes(&by_own), result_bytes(&by_exposed));
    // `echo` is both servers' own name: unknown, with the usual hint.
    let shared = loom.call_tool("echo", json!({"text": "x"}));
    assert_eq!(shared.value["error"]["code"], -32602, "{}", shared.raw);
}
