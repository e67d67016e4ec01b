//! Tool definitions through a real loom (SPEC §20, §21): search mode lists little and finds the
//! real servers' tools (replayed from their recorded `tools/list` by fixture processes), found tools
//! join the list with one `list_changed`, `loom_call` is a drop-in for a direct call, allow/deny
//! holds, descriptions can be cut, and the session report counts what happened without ever
//! containing arguments or output.

use crate::common;

use std::path::PathBuf;

use common::*;
use serde_json::{Value, json};

/// The eight servers of `testdata/tools/`, in the order.
const SERVERS: &[&str] = &[
    "everything",
    "filesystem",
    "memory",
    "postgres",
    "sqlite",
    "git",
    "time",
    "fetch",
];

fn recorded(server: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/tools")
        .join(format!("{server}.json"))
        .to_string_lossy()
        .into_owned()
}

/// A fixture that lists exactly `server`'s recorded tools.
fn replay(server: &str) -> Value {
    let file = recorded(server);
    fixture_server(server, &["--no-base-tools", "--tools-from", &file])
}

fn loom_with(servers: Vec<Value>, extra: Value) -> (tempfile::TempDir, RawClient) {
    let mut config = json!({"servers": servers});
    if let (Value::Object(config), Value::Object(extra)) = (&mut config, extra) {
        config.extend(extra);
    }
    let (dir, path) = write_config(&config);
    let mut loom = RawClient::loom(&path);
    loom.initialize();
    (dir, loom)
}

fn all_eight(extra: Value) -> (tempfile::TempDir, RawClient) {
    loom_with(SERVERS.iter().map(|s| replay(s)).collect(), extra)
}

/// `tools/list` as the client receives it: the tools and the size of the `result` text.
fn listing(loom: &mut RawClient) -> (Vec<Value>, usize) {
    let line = loom.call("tools/list", json!({}));
    let tools = line.value["result"]["tools"]
        .as_array()
        .expect("tools")
        .clone();
    (tools, result_bytes(&line).chars().count())
}

fn names(tools: &[Value]) -> Vec<String> {
    tools
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

fn structured(line: &Line) -> Value {
    line.value["result"]["structuredContent"].clone()
}

fn found_names(line: &Line) -> Vec<String> {
    structured(line)["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {:.400}", line.raw))
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

const OWN: &[&str] = &[
    "loom_query",
    "loom_list_datasets",
    "loom_describe",
    "loom_materialize",
    "loom_export",
    "loom_read",
    "loom_stats",
];

#[test]
fn search_mode_lists_loom_and_discovery_tools_only_within_budget() {
    let (_dir, mut all) = all_eight(json!({}));
    let (every, all_chars) = listing(&mut all);
    let downstream = every
        .iter()
        .filter(|t| !t["name"].as_str().unwrap_or_default().starts_with("loom_"))
        .count();
    assert_eq!(downstream, 58, "the eight recorded servers list 58 tools");
    assert!(
        !names(&every).contains(&"loom_find_tools".to_string()),
        "all mode lists no discovery tools"
    );
    drop(all);

    let (_dir, mut search) = all_eight(json!({"tools": {"mode": "search"}}));
    let (shown, search_chars) = listing(&mut search);
    let mut expected: Vec<String> = OWN.iter().map(|s| s.to_string()).collect();
    expected.extend(["loom_tool_categories", "loom_find_tools", "loom_call"].map(str::to_string));
    let mut got = names(&shown);
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    eprintln!(
        "tools/list with 8 servers: all mode {all_chars} chars ({} tools), search mode \
         {search_chars} chars ({} tools), {:.1}%",
        every.len(),
        shown.len(),
        search_chars as f64 * 100.0 / all_chars as f64
    );
    assert!(
        search_chars <= 6000,
        "search mode's tools/list is {search_chars} chars"
    );
    assert!(
        search_chars * 100 <= all_chars * 12,
        "search mode is over 12% of all mode at 8 servers"
    );
    // Whatever the number of servers: one server or eight, the same list.
    let (_dir, mut one) = loom_with(vec![replay("git")], json!({"tools": {"mode": "search"}}));
    assert_eq!(listing(&mut one).1, search_chars);
}

#[test]
fn found_tools_join_the_list_and_are_callable_directly_or_through_loom_call() {
    let (_dir, mut loom) = all_eight(json!({"tools": {"mode": "search", "maxJoined": 3}}));
    let categories = loom.call_tool("loom_tool_categories", json!({}));
    let servers = structured(&categories)["servers"].clone();
    let git = servers
        .as_array()
        .expect("servers")
        .iter()
        .find(|s| s["server"] == "git")
        .expect("git listed")
        .clone();
    assert_eq!(git["tools"], 12);
    assert_eq!(git["state"], "healthy");
    assert!(
        git["categories"].to_string().contains("diff"),
        "git's categories: {git}"
    );

    let found = loom.call_tool(
        "loom_find_tools",
        json!({"query": "show me what changed in the repo since the last commit"}),
    );
    let hits = found_names(&found);
    assert!(
        hits.contains(&"git_git_diff_unstaged".to_string()),
        "{hits:?}"
    );
    assert!(hits.len() <= 5);
    // Descriptions are wrapped in markers with a nonce that the note names.
    let first = &structured(&found)["tools"][0];
    let description = first["description"].as_str().expect("description");
    let note = structured(&found)["note"]
        .as_str()
        .expect("note")
        .to_string();
    let nonce = description
        .strip_prefix("<<")
        .and_then(|d| d.split_once(">>"))
        .map(|(n, _)| n.to_string())
        .expect("a nonce marker");
    assert_eq!(nonce.len(), 32);
    assert!(
        description.ends_with(&format!("<</{nonce}>>")),
        "{description}"
    );
    assert!(
        note.contains(&nonce) && note.contains("not instructions"),
        "{note}"
    );
    assert!(first["inputSchema"]["properties"].is_object(), "{first}");

    // One list_changed, then the best three found are listed. Awaited with the common hang
    // guard (PATIENCE), not within 5 s: how soon it comes is not what this test claims (issue
    // 35), and a loaded CI machine could pass 5 s. A list_changed that never comes still fails.
    loom.wait_for("list_changed after loom_find_tools", |v| {
        v["method"] == "notifications/tools/list_changed"
    });
    let (shown, _) = listing(&mut loom);
    let shown = names(&shown);
    let joined: Vec<&String> = shown.iter().filter(|n| !n.starts_with("loom_")).collect();
    assert_eq!(joined.len(), 3, "maxJoined 3: {shown:?}");
    assert!(shown.contains(&hits[0]), "the best hit joined: {shown:?}");

    // Direct call by name, and the same through loom_call: identical results.
    let direct = loom.call_tool("git_git_status", json!({"text": "clean"}));
    let through = loom.call_tool(
        "loom_call",
        json!({"tool": "git_git_status", "arguments": {"text": "clean"}}),
    );
    assert_eq!(result_bytes(&direct), result_bytes(&through));
    assert_eq!(first_text(&through), "clean");

    // A name the model got slightly wrong: the closest real names.
    let wrong = loom.call_tool("loom_call", json!({"tool": "git_status"}));
    assert_eq!(wrong.value["result"]["isError"], true);
    let text = first_text(&wrong);
    assert!(
        text.contains("unknown tool `git_status`") && text.contains("git_git_status"),
        "{text}"
    );
    for (args, words) in [
        (json!({}), "missing argument `tool`"),
        (json!({"tool": "loom_call"}), "names loom_call itself"),
        (
            json!({"tool": "git_git_status", "arguments": [1]}),
            "`arguments` must be an object",
        ),
        (
            json!({"tool": "git_git_status", "args": {}}),
            "unknown argument `args`",
        ),
    ] {
        let line = loom.call_tool("loom_call", args);
        assert_eq!(line.value["result"]["isError"], true);
        assert!(first_text(&line).contains(words), "{}", first_text(&line));
    }
    for (args, words) in [
        (json!({}), "missing argument `query`"),
        (json!({"query": "  "}), "non-empty string"),
        (json!({"query": "x".repeat(1001)}), "longer than 1000"),
        (json!({"query": "file", "limit": 0}), "from 1 to 20"),
        (json!({"query": "file", "limit": "5"}), "from 1 to 20"),
    ] {
        let line = loom.call_tool("loom_find_tools", args);
        assert_eq!(line.value["result"]["isError"], true);
        assert!(first_text(&line).contains(words), "{}", first_text(&line));
    }
    let nothing = loom.call_tool("loom_find_tools", json!({"query": "the of and"}));
    assert_eq!(structured(&nothing)["tools"], json!([]));
}

#[test]
fn denied_tools_are_neither_found_nor_callable() {
    let mut filesystem = replay("filesystem");
    filesystem["denyTools"] = json!(["write_file", "edit_file"]);
    let (_dir, mut loom) = loom_with(
        vec![filesystem, replay("git")],
        json!({"tools": {"mode": "search"}}),
    );
    let found = loom.call_tool(
        "loom_find_tools",
        json!({"query": "write or edit a file", "limit": 20}),
    );
    let hits = found_names(&found);
    assert!(
        !hits
            .iter()
            .any(|h| h == "filesystem_write_file" || h == "filesystem_edit_file"),
        "{hits:?}"
    );
    let through = loom.call_tool(
        "loom_call",
        json!({"tool": "filesystem_write_file", "arguments": {"text": "x"}}),
    );
    assert_eq!(through.value["result"]["isError"], true);
    assert!(first_text(&through).contains("unknown tool"));
    let direct = loom.call_tool("filesystem_write_file", json!({"text": "x"}));
    assert!(direct.value["error"].is_object(), "{}", direct.raw);
    let categories = loom.call_tool("loom_tool_categories", json!({}));
    let fs = &structured(&categories)["servers"][0];
    assert_eq!(fs["tools"], 12, "14 tools less the 2 denied: {fs}");
}

#[test]
fn pinned_tools_stay_listed_in_search_mode() {
    let (_dir, mut loom) =
        all_eight(json!({"tools": {"mode": "pinned", "pinned": ["time_*", "git/git_log"]}}));
    let (shown, _) = listing(&mut loom);
    let shown = names(&shown);
    for name in [
        "time_get_current_time",
        "time_convert_time",
        "git_git_log",
        "loom_find_tools",
    ] {
        assert!(
            shown.contains(&name.to_string()),
            "{name} missing from {shown:?}"
        );
    }
    assert_eq!(shown.len(), OWN.len() + 3 + 3);
}

#[test]
fn long_descriptions_are_cut_and_found_whole() {
    let (_dir, mut loom) = all_eight(json!({"tools": {"maxDescriptionChars": 80}}));
    let (shown, _) = listing(&mut loom);
    assert!(names(&shown).contains(&"loom_find_tools".to_string()));
    let mut cut = 0;
    for tool in shown
        .iter()
        .filter(|t| !t["name"].as_str().unwrap_or_default().starts_with("loom_"))
    {
        let description = tool["description"].as_str().unwrap_or_default();
        assert!(description.chars().count() <= 80, "{description}");
        cut += usize::from(description.ends_with('…'));
    }
    assert!(cut > 20, "only {cut} descriptions were cut");
    let found = loom.call_tool(
        "loom_find_tools",
        json!({"query": "read a text file", "limit": 1}),
    );
    let description = structured(&found)["tools"][0]["description"]
        .as_str()
        .expect("d")
        .to_string();
    assert!(
        description.chars().count() > 150,
        "the full text: {description}"
    );
    let seen = |loom: &mut RawClient| {
        let stats = loom.call_tool("loom_stats", json!({}));
        structured(&stats)["tools"]["seen"]["chars"]
            .as_i64()
            .expect("seen")
    };
    let cut_chars = seen(&mut loom);
    let (_dir, mut whole) = all_eight(json!({}));
    listing(&mut whole);
    let whole_chars = seen(&mut whole);
    eprintln!("8 servers, all mode: {whole_chars} chars; maxDescriptionChars 80: {cut_chars}");
    assert!(
        whole_chars - cut_chars > 3000,
        "{whole_chars} → {cut_chars}"
    );
}

/// A scripted session: the report's figures match the calls made, and neither `loom_stats` nor the
/// report file nor stderr ever holds an argument or an output.
#[test]
fn the_session_report_counts_the_calls_and_leaks_nothing() {
    const ARG_CANARY: &str = "CANARY-ARGUMENT-5e1d";
    const OUT_CANARY: &str = "CANARY-OUTPUT-77aa";
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().join("reports/session.json");
    let (_cfg, mut loom) = loom_with(
        vec![fixture_server("fx", &[])],
        json!({"report": {"path": report}}),
    );
    // Passed through, with a canary in the arguments.
    let echo = loom.call_tool("fx_echo", json!({"text": ARG_CANARY}));
    assert_eq!(first_text(&echo), ARG_CANARY);
    // A table: an envelope.
    let orders = loom.call_tool("fx_orders", json!({"count": 3000}));
    let reference = envelope(&orders)["ref"].as_str().expect("ref").to_string();
    // A document: a long log with a canary in it.
    let log: String = (0..4000)
        .map(|i| format!("{i:05} worker {OUT_CANARY} step done\n"))
        .collect();
    let document = loom.call_tool(
        "fx_raw",
        json!({"json": json!({"content": [{"type": "text", "text": log}]}).to_string()}),
    );
    assert!(
        first_text(&document).starts_with("[loom: "),
        "{:.200}",
        document.raw
    );
    query(&mut loom, &format!("SELECT count(*) AS n FROM {reference}"));
    let read = loom.call_tool("loom_read", json!({"ref": "doc_1", "length": 500}));
    assert_ne!(read.value["result"]["isError"], true, "{:.300}", read.raw);

    let stats = loom.call_tool("loom_stats", json!({}));
    assert!(!stats.raw.contains("CANARY"), "{}", stats.raw);
    let live = structured(&stats);
    assert_eq!(live["calls"]["total"], 3);
    assert_eq!(live["calls"]["tables"], 1);
    assert_eq!(live["calls"]["documents"], 1);
    assert_eq!(live["calls"]["passedThrough"], 1);
    assert_eq!(live["loomTools"]["queries"], 1);
    assert_eq!(live["loomTools"]["reads"], 1);
    assert_eq!(live["held"]["datasets"], 1);
    assert!(live["held"]["documents"].as_u64().expect("documents") >= 1);
    let before = live["calls"]["before"]["chars"].as_i64().expect("before");
    let after = live["calls"]["after"]["chars"].as_i64().expect("after");
    let answers = live["loomTools"]["answers"]["chars"]
        .as_i64()
        .expect("answers");
    assert!(before > 150_000 && after < 20_000, "{live}");
    assert_eq!(
        live["outputSaved"]["chars"].as_i64(),
        Some(before - after - answers)
    );
    let top: Vec<&str> = live["topTools"]
        .as_array()
        .expect("top")
        .iter()
        .filter_map(|t| t["tool"].as_str())
        .collect();
    assert_eq!(top, ["fx/orders", "fx/raw"]);

    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let written = std::fs::read_to_string(&report).expect("report written");
    assert!(!written.contains("CANARY"), "{written}");
    let parsed: Value = serde_json::from_str(&written).expect("the report is JSON");
    assert_eq!(parsed["calls"], live["calls"]);
    assert_eq!(parsed["loomTools"]["queries"], 1);
    let stderr = loom.stderr_text();
    assert!(stderr.contains("loom session report"), "{stderr}");
    assert!(
        stderr.contains("3 (1 as tables, 1 reduced as documents, 1 passed through)"),
        "{stderr}"
    );
    assert!(!stderr.contains("CANARY"), "{stderr}");
}

#[test]
fn a_markdown_report_or_none_at_all() {
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().join("session.md");
    let (_cfg, mut loom) = loom_with(
        vec![fixture_server("fx", &[])],
        json!({"report": {"markdownPath": report}}),
    );
    loom.call_tool("fx_echo", json!({"text": "hi"}));
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    let written = std::fs::read_to_string(&report).expect("report written");
    assert!(written.starts_with("# loom session report"), "{written}");
    assert!(written.contains("| calls | 1 |"), "{written}");

    let off = dir.path().join("off.md");
    let (_cfg, mut loom) = loom_with(
        vec![fixture_server("fx", &[])],
        json!({"report": {"enabled": false, "path": off}}),
    );
    loom.call_tool("fx_echo", json!({"text": "hi"}));
    loom.close_stdin();
    assert!(loom.wait_exit().success());
    assert!(!off.exists());
    assert!(!loom.stderr_text().contains("loom session report"));
}

#[test]
fn a_server_list_change_reaches_the_index() {
    let (_dir, mut loom) = loom_with(
        vec![fixture_server("fx", &[])],
        json!({"tools": {"mode": "search"}}),
    );
    let before = loom.call_tool("loom_find_tools", json!({"query": "frobnicate widgets"}));
    assert!(!found_names(&before).contains(&"fx_frobnicate_widgets".to_string()));
    loom.call_tool("fx_add_tool", json!({"name": "frobnicate_widgets"}));
    eventually("the new tool is found", || {
        let line = loom.call_tool("loom_find_tools", json!({"query": "frobnicate widgets"}));
        found_names(&line).first().map(String::as_str) == Some("fx_frobnicate_widgets")
    });
    let through = loom.call_tool(
        "loom_call",
        json!({"tool": "fx_frobnicate_widgets", "arguments": {"text": "spun"}}),
    );
    assert_eq!(first_text(&through), "spun");
}

#[test]
fn the_report_is_written_on_sigterm_too() {
    let dir = tempfile::tempdir().expect("dir");
    let report = dir.path().join("session.json");
    let (_cfg, mut loom) = loom_with(
        vec![fixture_server("fx", &[])],
        json!({"report": {"path": report}}),
    );
    loom.call_tool("fx_echo", json!({"text": "hi"}));
    let pid = loom.child.id().to_string();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(status.success());
    assert!(loom.wait_exit().success());
    let parsed: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("written")).expect("json");
    assert_eq!(parsed["calls"]["total"], 1);
}

/// `tools.searchModel` through a real loom (SPEC §20.3): a request in other words finds its tool
/// first among the eight servers, where words alone rank another; a tool a server adds later is
/// embedded too (the catalog changed) and found by meaning.
#[test]
fn a_sentence_model_finds_what_words_miss() {
    let Some(model) = crate::tool_search::sentence_model_dir("search by meaning through loom")
    else {
        return;
    };
    // The fixture's own `echo` is in the catalog too: either echo is right.
    let ask = "repeat what I say";
    let echoes = ["everything_echo", "fx_echo"];
    let servers = || {
        let mut servers: Vec<Value> = SERVERS.iter().map(|s| replay(s)).collect();
        servers.push(fixture_server("fx", &[]));
        servers
    };
    let (_dir, mut words) = loom_with(servers(), json!({"tools": {"mode": "search"}}));
    let by_words = found_names(&words.call_tool("loom_find_tools", json!({"query": ask})));
    assert!(
        by_words
            .first()
            .is_none_or(|first| !echoes.contains(&first.as_str())),
        "{by_words:?}"
    );

    let (_dir, mut loom) = loom_with(
        servers(),
        json!({"tools": {"mode": "search", "searchModel": model}}),
    );
    let categories = structured(&loom.call_tool("loom_tool_categories", json!({})));
    assert_eq!(categories["searchBy"], "words and meaning", "{categories}");
    let found = found_names(&loom.call_tool("loom_find_tools", json!({"query": ask})));
    assert!(
        found
            .first()
            .is_some_and(|first| echoes.contains(&first.as_str())),
        "{found:?}"
    );

    loom.call_tool("fx_add_tool", json!({"name": "frobnicate_widgets"}));
    eventually("the new tool is found by meaning", || {
        let line = loom.call_tool(
            "loom_find_tools",
            json!({"query": "frobnication of widgets"}),
        );
        found_names(&line).first().map(String::as_str) == Some("fx_frobnicate_widgets")
    });
}

/// A folder that passes the config check (the three files are there) but is no model: loom
/// starts, says so once on stderr, and searches by words exactly as without the key.
#[test]
fn a_model_that_does_not_load_leaves_search_to_words() {
    let junk = tempfile::tempdir().expect("dir");
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::write(junk.path().join(name), "not a model").expect("written");
    }
    let (_dir, mut loom) =
        all_eight(json!({"tools": {"mode": "search", "searchModel": junk.path()}}));
    let categories = structured(&loom.call_tool("loom_tool_categories", json!({})));
    assert_eq!(categories["searchBy"], "words", "{categories}");
    let (_plain_dir, mut plain) = all_eight(json!({"tools": {"mode": "search"}}));
    for query in [
        "read a file",
        "repeat back what I type",
        "commit my changes",
    ] {
        let with_key = loom.call_tool("loom_find_tools", json!({"query": query}));
        let without = plain.call_tool("loom_find_tools", json!({"query": query}));
        assert_eq!(found_names(&with_key), found_names(&without), "{query}");
    }
    eventually("the warning is on stderr", || {
        loom.stderr_text().contains("tools.searchModel: ")
    });
    assert!(
        loom.stderr_text()
            .contains("tool search ranks by words alone"),
        "{}",
        loom.stderr_text()
    );
}
