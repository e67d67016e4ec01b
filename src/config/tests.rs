//! End-to-end tests of `parse_str`, `load` and `resolve_path`: text in, `Config` or problems out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::*;

const ORIGIN: &str = "loom.config.json";

fn test_env() -> impl Fn(&str) -> Option<String> {
    let map: HashMap<&str, &str> = [
        ("GITHUB_TOKEN", "ghp_fromTheEnvironment123"),
        ("HOME", "/home/u"),
        ("EMPTY", ""),
        ("NODE", "/usr/bin/node"),
        ("TOKEN", "t0ken"),
        ("OPENROUTER_API_KEY", "sk-or-fromTheEnvironment"),
        ("LLM_API_KEY", "sk-llm-fromTheEnvironment"),
    ]
    .into_iter()
    .collect();
    move |k| map.get(k).map(|v| (*v).to_owned())
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_str(text, ORIGIN, &test_env())
}

fn ok(text: &str) -> Config {
    match parse(text) {
        Ok(config) => config,
        Err(e) => panic!("expected the config to load, got:\n{e}"),
    }
}

fn problems(text: &str) -> Vec<Problem> {
    match parse(text) {
        Ok(config) => panic!("expected problems, got {config:#?}"),
        Err(e) => {
            assert_eq!(e.origin, ORIGIN);
            e.problems
        }
    }
}

/// Asserts exactly one problem at `path`, whose message contains every word in `words`.
#[track_caller]
fn assert_problem(all: &[Problem], path: &str, words: &[&str]) {
    let at: Vec<&Problem> = all.iter().filter(|p| p.path == path).collect();
    assert_eq!(
        at.len(),
        1,
        "expected one problem at `{path}`, got: {all:#?}"
    );
    for word in words {
        assert!(
            at[0].message.contains(word),
            "problem at `{path}` should mention {word:?}: {:?}",
            at[0].message
        );
    }
}

/// Wraps one loom-format server entry (given as JSON object contents) into a document.
fn one_server(fields: &str) -> String {
    format!(r#"{{"servers": [{{"name": "srv", "command": "run", {fields}}}]}}"#)
}

/// Wraps top-level keys into a document with one valid server.
fn with_root(fields: &str) -> String {
    format!(r#"{{"servers": [{{"name": "srv", "command": "run"}}], {fields}}}"#)
}

// ---------------------------------------------------------------- both formats load

#[test]
fn loom_format_loads_with_defaults() {
    let config = ok(r#"{"servers": [{"name": "github", "command": "npx"}]}"#);
    assert_eq!(config.format, ConfigFormat::Loom);
    assert_eq!(config.servers, vec![ServerConfig::new("github", "npx")]);
    assert_eq!(config.token_threshold, 2000);
    assert_eq!(config.memory_budget_bytes, 256 * 1024 * 1024);
    assert_eq!(config.engine_memory_limit_bytes, None);
    assert_eq!(config.export_dir, crate::config::default_export_dir());
    assert!(config.export_dir.is_absolute(), "{:?}", config.export_dir);
    assert_eq!(config.query_timeout_ms, 30_000);
    assert_eq!(
        config.restart,
        RestartPolicy {
            max_attempts: 5,
            base_delay_ms: 1000
        }
    );
    assert_eq!(config.max_tool_name_length, 64);
    let s = &config.servers[0];
    assert_eq!(s.call_timeout_ms, 60_000);
    assert!(!s.disabled);
    assert!(s.args.is_empty() && s.env.is_empty() && s.cwd.is_none());
}

#[test]
fn loom_format_reads_every_key() {
    let config = ok(r#"{
        "$schema": "https://example.com/loom.schema.json",
        "servers": [
            {
                "name": "github",
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-github"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}", "A": "1"},
                "envPassthrough": ["PATH", "HOME"],
                "provenanceDenylist": ["get_me"],
                "allowTools": ["get_*", "search_code"],
                "denyTools": ["delete_*"],
                "callTimeoutMs": 120000,
                "disabled": false,
                "cwd": "/srv/github"
            },
            {"name": "fs", "command": "fs-server", "disabled": true}
        ],
        "tokenThreshold": 500,
        "memoryBudgetBytes": 1073741824,
        "engineMemoryLimit": "512MB",
        "exportDir": "/tmp/loom-exports",
        "queryTimeoutMs": 5000,
        "restart": {"maxAttempts": 0, "baseDelayMs": 250},
        "maxToolNameLength": 128
    }"#);
    assert_eq!(config.format, ConfigFormat::Loom);
    assert_eq!(config.servers.len(), 2);
    let gh = &config.servers[0];
    assert_eq!(gh.name, "github");
    assert_eq!(gh.command, "npx");
    assert_eq!(gh.args, ["-y", "@modelcontextprotocol/server-github"]);
    assert_eq!(
        gh.env,
        vec![
            (
                "GITHUB_PERSONAL_ACCESS_TOKEN".to_owned(),
                "ghp_fromTheEnvironment123".to_owned()
            ),
            ("A".to_owned(), "1".to_owned()),
        ]
    );
    assert_eq!(gh.env_passthrough, ["PATH", "HOME"]);
    assert_eq!(gh.provenance_denylist, ["get_me"]);
    assert_eq!(gh.allow_tools, ["get_*", "search_code"]);
    assert_eq!(gh.deny_tools, ["delete_*"]);
    assert_eq!(gh.call_timeout_ms, 120_000);
    assert!(!gh.disabled);
    assert_eq!(gh.cwd.as_deref(), Some(Path::new("/srv/github")));
    assert!(config.servers[1].disabled);
    assert_eq!(config.token_threshold, 500);
    assert_eq!(config.memory_budget_bytes, 1 << 30);
    assert_eq!(config.engine_memory_limit_bytes, Some(512_000_000));
    assert_eq!(config.export_dir, PathBuf::from("/tmp/loom-exports"));
    assert_eq!(config.query_timeout_ms, 5000);
    assert_eq!(config.restart.max_attempts, 0);
    assert_eq!(config.restart.base_delay_ms, 250);
    assert_eq!(config.max_tool_name_length, 128);
    assert_eq!(config.enabled_servers().count(), 1);
}

#[test]
fn claude_desktop_file_loads_and_ignores_foreign_keys() {
    let config = ok(r#"{
        "globalShortcut": "Ctrl+Space",
        "preferences": {"theme": "dark"},
        "mcpServers": {
            "zeta": {"command": "z"},
            "github": {
                "command": "docker",
                "args": ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"],
                "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"}
            },
            "alpha": {"command": "a", "type": "stdio"}
        }
    }"#);
    assert_eq!(config.format, ConfigFormat::McpServers);
    let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["zeta", "github", "alpha"], "file order is kept");
    assert_eq!(config.servers[1].command, "docker");
    assert_eq!(config.servers[1].env[0].1, "ghp_fromTheEnvironment123");
    assert_eq!(config.token_threshold, 2000);
    assert_eq!(config.export_dir, crate::config::default_export_dir());
    assert!(config.export_dir.is_absolute(), "{:?}", config.export_dir);
}

#[test]
fn mcp_servers_entries_accept_loom_keys_and_root_accepts_loom_settings() {
    let config = ok(r#"{
        "mcpServers": {
            "github": {
                "command": "npx",
                "denyTools": ["delete_*"],
                "callTimeoutMs": 1000,
                "disabled": true,
                "cwd": "${HOME}/work"
            }
        },
        "tokenThreshold": 300,
        "restart": {"maxAttempts": 2}
    }"#);
    let s = &config.servers[0];
    assert_eq!(s.deny_tools, ["delete_*"]);
    assert_eq!(s.call_timeout_ms, 1000);
    assert!(s.disabled);
    assert_eq!(s.cwd.as_deref(), Some(Path::new("/home/u/work")));
    assert_eq!(config.token_threshold, 300);
    assert_eq!(config.restart.max_attempts, 2);
    assert_eq!(config.restart.base_delay_ms, 1000);
}

#[test]
fn mcp_servers_format_still_validates_loom_settings() {
    let all = problems(r#"{"mcpServers": {"a": {"command": "x"}}, "tokenThreshold": 50}"#);
    assert_problem(&all, "tokenThreshold", &["at least 100", "found 50"]);
}

#[test]
fn mcp_servers_entries_are_strict() {
    let all = problems(r#"{"mcpServers": {"github": {"command": "x", "enviroment": {}}}}"#);
    assert_problem(
        &all,
        "mcpServers.github.enviroment",
        &["unknown key `enviroment`", "did you mean `env`?"],
    );
    let all = problems(r#"{"mcpServers": {"github": {"command": "x", "name": "gh"}}}"#);
    assert_problem(&all, "mcpServers.github.name", &["unknown key `name`"]);
}

#[test]
fn remote_servers_are_read_in_every_layout() {
    use crate::config::{RemoteServer, Transport};
    let remote = |url: &str, headers: &[(&str, &str)]| {
        let headers: Vec<(String, String)> = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        // An entry with its own Authorization header is not logged in to.
        let oauth = (!headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization")))
        .then(crate::config::OAuthSettings::default);
        Transport::Http(RemoteServer {
            url: url.into(),
            headers,
            oauth,
        })
    };
    // Cursor writes `url` (+ `headers`), Claude Code adds `"type": "http"`.
    let config = ok(r#"{"mcpServers": {
        "cursor": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "claude": {"type": "http", "url": "http://127.0.0.1:8080/mcp", "callTimeoutMs": 5000,
                   "allowTools": ["get_*"]},
        "local": {"command": "x"}
    }}"#);
    assert_eq!(
        config.servers[0].transport,
        remote(
            "https://example.com/mcp",
            &[("Authorization", "Bearer t0ken")]
        )
    );
    assert_eq!(
        config.servers[1].transport,
        remote("http://127.0.0.1:8080/mcp", &[])
    );
    assert_eq!(config.servers[1].call_timeout_ms, 5000);
    assert_eq!(config.servers[1].allow_tools, ["get_*"]);
    assert_eq!(config.servers[2].transport, Transport::Stdio);
    // Context Firewall and loom's own layout.
    let config = ok(
        r#"{"downstreams": {"r": {"url": "https://x.example/mcp", "transport": "streamable-http"}}}"#,
    );
    assert_eq!(
        config.servers[0].transport,
        remote("https://x.example/mcp", &[])
    );
    let config = ok(
        r#"{"servers": [{"name": "r", "type": "streamable-http", "url": "https://x.example/mcp"}]}"#,
    );
    assert_eq!(
        config.servers[0].transport,
        remote("https://x.example/mcp", &[])
    );
    // A disabled remote entry is kept, and a missing variable in it is no error.
    let config = ok(r#"{"mcpServers": {"r": {"url": "https://x.example/mcp",
        "headers": {"X-Key": "${NOT_SET_ANYWHERE}"}, "disabled": true}}}"#);
    assert!(config.servers[0].disabled);
}

#[test]
fn remote_entries_get_clear_errors() {
    let all = problems(r#"{"mcpServers": {"r": {"type": "sse", "url": "https://x/sse"}}}"#);
    assert_problem(
        &all,
        "mcpServers.r.type",
        &["HTTP+SSE", "not supported", "\"type\": \"http\""],
    );
    let all = problems(r#"{"mcpServers": {"r": {"type": 1, "command": "x"}}}"#);
    assert_problem(
        &all,
        "mcpServers.r.type",
        &["\"stdio\" or \"http\"", "number 1"],
    );
    let all = problems(r#"{"mcpServers": {"r": {"type": "http"}}}"#);
    assert_problem(&all, "mcpServers.r", &["missing required key `url`"]);
    let all = problems(r#"{"mcpServers": {"r": {"url": "https://x/mcp", "command": "x"}}}"#);
    assert_problem(&all, "mcpServers.r", &["either `command`", "or `url`"]);
    let all = problems(r#"{"mcpServers": {"r": {"type": "stdio", "url": "https://x/mcp"}}}"#);
    assert_problem(&all, "mcpServers.r.type", &["says stdio", "`url`"]);
    let all = problems(
        r#"{"servers": [{"name": "r", "type": "http", "transport": "stdio", "url": "https://x/mcp"}]}"#,
    );
    assert_problem(
        &all,
        "servers[0].transport",
        &["says stdio", "`type` says http"],
    );
    let all = problems(
        r#"{"mcpServers": {"r": {"url": "https://x/mcp", "args": ["a"], "env": {"A": "b"}}}}"#,
    );
    assert_problem(
        &all,
        "mcpServers.r.args",
        &["servers loom starts", "`url` and `headers`"],
    );
    assert_problem(&all, "mcpServers.r.env", &["servers loom starts"]);
    let all = problems(r#"{"mcpServers": {"r": {"command": "x", "headers": {"A": "b"}}}}"#);
    assert_problem(&all, "mcpServers.r.headers", &["remote servers", "`env`"]);
    for (url, words) in [
        ("ftp://x/mcp", &["http:// or https://", "scheme `ftp`"][..]),
        (
            "example.com/mcp",
            &["not a URL", "https://mcp.example.com/mcp"][..],
        ),
        ("", &["must not be empty"][..]),
    ] {
        let all = problems(&format!(r#"{{"mcpServers": {{"r": {{"url": "{url}"}}}}}}"#));
        assert_problem(&all, "mcpServers.r.url", words);
    }
    let all = problems(
        r#"{"mcpServers": {"r": {"url": "https://x/mcp", "headers": {
            "Bad Name": "v", "Accept": "x", "Mcp-Session-Id": "s", "X-A": "1", "x-a": "2",
            "X-B": "line\nbreak", "X-C": 3, "X-D": "${MISSING_VAR}"}}}}"#,
    );
    assert_problem(
        &all,
        "mcpServers.r.headers[\"Bad Name\"]",
        &["not a valid HTTP header name"],
    );
    assert_problem(
        &all,
        "mcpServers.r.headers.Accept",
        &["set by the Streamable HTTP transport"],
    );
    assert_problem(
        &all,
        "mcpServers.r.headers.Mcp-Session-Id",
        &["set by the Streamable HTTP transport"],
    );
    assert_problem(
        &all,
        "mcpServers.r.headers.x-a",
        &["more than once", "ignore case"],
    );
    assert_problem(&all, "mcpServers.r.headers.X-B", &["line breaks"]);
    assert_problem(&all, "mcpServers.r.headers.X-C", &["expected a string"]);
    assert_problem(&all, "mcpServers.r.headers.X-D", &["MISSING_VAR"]);
}

#[test]
fn map_key_names_must_follow_the_rule() {
    let all = problems(r#"{"mcpServers": {"Brave Search": {"command": "x"}}}"#);
    assert_problem(
        &all,
        "mcpServers[\"Brave Search\"]",
        &[
            "invalid server name \"Brave Search\"",
            "lowercase letter first",
            "`brave-search`",
        ],
    );
}

#[test]
fn both_layouts_at_once_is_one_root_problem() {
    let all = problems(r#"{"servers": [], "mcpServers": {}}"#);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_problem(&all, "(root)", &["both `servers` and `mcpServers`"]);
}

#[test]
fn no_servers_key_is_a_problem() {
    let all = problems(r#"{"tokenThreshold": 2000}"#);
    assert_problem(
        &all,
        "(root)",
        &[
            "no servers: expected `servers` (array), `mcpServers` (object) or `downstreams` (object)",
        ],
    );
}

#[test]
fn empty_and_all_disabled_server_lists_are_fine() {
    assert!(ok(r#"{"servers": []}"#).servers.is_empty());
    assert!(ok(r#"{"mcpServers": {}}"#).servers.is_empty());
    let config = ok(r#"{"servers": [{"name": "a", "command": "x", "disabled": true}]}"#);
    assert_eq!(config.enabled_servers().count(), 0);
}

// ---------------------------------------------------------------- document-level errors

#[test]
fn invalid_json_is_located_by_line_and_column() {
    let all = problems("{\n  \"servers\": []\n  \"tokenThreshold\": 1\n}");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].path, "loom.config.json:3:3");
    assert!(
        all[0]
            .message
            .contains("expected `,` or `}` at line 3 column 3")
    );
}

#[test]
fn empty_file_is_a_clear_problem() {
    let all = problems("");
    assert_problem(&all, "(root)", &["empty"]);
}

#[test]
fn root_must_be_an_object() {
    let all = problems(r#"[{"name": "a"}]"#);
    assert_problem(&all, "(root)", &["expected an object, found an array"]);
}

#[test]
fn repeated_keys_are_reported() {
    let all = problems(r#"{"servers": [], "tokenThreshold": 200, "tokenThreshold": 300}"#);
    assert_problem(&all, "tokenThreshold", &["more than once"]);
    let all = problems(r#"{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}"#);
    assert_problem(&all, "mcpServers.a", &["defined more than once"]);
    let all = problems(&one_server(r#""env": {"A": "1", "A": "2"}"#));
    assert_problem(&all, "servers[0].env.A", &["more than once"]);
}

// ---------------------------------------------------------------- unknown keys

#[test]
fn unknown_keys_suggest_the_close_one() {
    let all = problems(r#"{"servers": [], "tokenTreshold": 2000}"#);
    assert_problem(
        &all,
        "tokenTreshold",
        &["unknown key `tokenTreshold`; did you mean `tokenThreshold`?"],
    );
    let all = problems(r#"{"servers": [{"name": "a", "comand": "x"}]}"#);
    assert_problem(&all, "servers[0].comand", &["did you mean `command`?"]);
    let all = problems(&with_root(r#""restart": {"maxAtempts": 1}"#));
    assert_problem(&all, "restart.maxAtempts", &["did you mean `maxAttempts`?"]);
    let all = problems(r#"{"mcpservers": {}}"#);
    assert_problem(&all, "mcpservers", &["did you mean `mcpServers`?"]);
}

#[test]
fn unknown_keys_without_a_close_match_list_the_allowed_ones() {
    let all = problems(&with_root(r#""zzz": 1"#));
    assert_problem(
        &all,
        "zzz",
        &[
            "unknown key `zzz`",
            "allowed keys are",
            "`tokenThreshold`",
            "`restart`",
        ],
    );
    let all = problems(&one_server(r#""autoApprove": []"#));
    assert_problem(
        &all,
        "servers[0].autoApprove",
        &["`command`", "`denyTools`"],
    );
}

// ---------------------------------------------------------------- types and numbers

#[test]
fn wrong_types_name_expected_and_found() {
    let all = problems(r#"{"servers": [{"name": "a", "command": 12}]}"#);
    assert_problem(
        &all,
        "servers[0].command",
        &["expected a string, found number 12"],
    );
    let all = problems(r#"{"servers": {"a": {}}}"#);
    assert_problem(
        &all,
        "servers",
        &["expected an array, found an object", "mcpServers"],
    );
    let all = problems(r#"{"mcpServers": []}"#);
    assert_problem(&all, "mcpServers", &["expected an object, found an array"]);
    let all = problems(r#"{"servers": ["github"]}"#);
    assert_problem(
        &all,
        "servers[0]",
        &["expected an object, found string \"github\""],
    );
    let all = problems(&with_root(r#""restart": 3"#));
    assert_problem(&all, "restart", &["expected an object, found number 3"]);
    let all = problems(&with_root(r#""exportDir": null"#));
    assert_problem(&all, "exportDir", &["expected a string, found null"]);
}

#[test]
fn numbers_must_be_whole_and_in_bounds() {
    let all = problems(&with_root(r#""tokenThreshold": 50"#));
    assert_problem(&all, "tokenThreshold", &["must be at least 100, found 50"]);
    let all = problems(&with_root(r#""tokenThreshold": 1.5"#));
    assert_problem(&all, "tokenThreshold", &["whole number", "1.5"]);
    let all = problems(&with_root(r#""tokenThreshold": 200.0"#));
    assert_problem(
        &all,
        "tokenThreshold",
        &["without a decimal point", "200.0"],
    );
    let all = problems(&with_root(r#""queryTimeoutMs": -5"#));
    assert_problem(&all, "queryTimeoutMs", &["at least 1", "found -5"]);
    let all = problems(&with_root(r#""queryTimeoutMs": 0"#));
    assert_problem(&all, "queryTimeoutMs", &["at least 1, found 0"]);
    let all = problems(&with_root(r#""queryTimeoutMs": 18446744073709551616"#));
    assert_problem(&all, "queryTimeoutMs", &["at most 18446744073709551615"]);
    let all = problems(&with_root(r#""queryTimeoutMs": "30000""#));
    assert_problem(&all, "queryTimeoutMs", &["remove the quotes"]);
    let all = problems(&with_root(r#""maxToolNameLength": 8"#));
    assert_problem(&all, "maxToolNameLength", &["at least 16, found 8"]);
    let all = problems(&with_root(r#""maxToolNameLength": 129"#));
    assert_problem(&all, "maxToolNameLength", &["at most 128, found 129"]);
    let all = problems(&with_root(r#""memoryBudgetBytes": 1000"#));
    assert_problem(
        &all,
        "memoryBudgetBytes",
        &["at least 1048576 (1 MiB)", "found 1000"],
    );
    let all = problems(&with_root(
        r#""restart": {"maxAttempts": -1, "baseDelayMs": 0.5}"#,
    ));
    assert_problem(&all, "restart.maxAttempts", &["at least 0, found -1"]);
    assert_problem(&all, "restart.baseDelayMs", &["whole number", "0.5"]);
    let all = problems(&with_root(r#""restart": {"maxAttempts": 4294967296}"#));
    assert_problem(&all, "restart.maxAttempts", &["at most 4294967295"]);
    let all = problems(&one_server(r#""callTimeoutMs": 0"#));
    assert_problem(&all, "servers[0].callTimeoutMs", &["at least 1, found 0"]);
}

#[test]
fn number_bounds_are_inclusive() {
    let config = ok(&with_root(
        r#""tokenThreshold": 100, "maxToolNameLength": 16, "memoryBudgetBytes": 1048576,
           "queryTimeoutMs": 1, "restart": {"maxAttempts": 4294967295, "baseDelayMs": 0}"#,
    ));
    assert_eq!(config.token_threshold, 100);
    assert_eq!(config.max_tool_name_length, 16);
    assert_eq!(config.memory_budget_bytes, 1 << 20);
    assert_eq!(config.restart.max_attempts, u32::MAX);
}

// ---------------------------------------------------------------- memory sizes

#[test]
fn engine_memory_limit_accepts_numbers_and_size_strings() {
    let cases: &[(&str, u64)] = &[
        ("2097152", 2 << 20),
        ("\"512MB\"", 512_000_000),
        ("\"1GB\"", 1_000_000_000),
        ("\"2GiB\"", 2 << 30),
        ("\"300MiB\"", 300 << 20),
        ("\"2048KB\"", 2_048_000),
        ("\"2 gib\"", 2 << 30),
        ("\"1.5GB\"", 1_500_000_000),
    ];
    for (value, bytes) in cases {
        let config = ok(&with_root(&format!(r#""engineMemoryLimit": {value}"#)));
        assert_eq!(config.engine_memory_limit_bytes, Some(*bytes), "{value}");
    }
}

#[test]
fn engine_memory_limit_rejects_bad_sizes() {
    let all = problems(&with_root(r#""engineMemoryLimit": "12XB""#));
    assert_problem(&all, "engineMemoryLimit", &["unknown unit `XB`", "MiB"]);
    let all = problems(&with_root(r#""engineMemoryLimit": "1000KB""#));
    assert_problem(
        &all,
        "engineMemoryLimit",
        &["at least 1048576", "found 1000000"],
    );
    let all = problems(&with_root(r#""engineMemoryLimit": true"#));
    assert_problem(&all, "engineMemoryLimit", &["size string", "boolean true"]);
    let all = problems(&with_root(r#""engineMemoryLimit": -1"#));
    assert_problem(&all, "engineMemoryLimit", &["at least"]);
}

#[test]
fn memory_budget_also_accepts_size_strings() {
    let config = ok(&with_root(r#""memoryBudgetBytes": "1GiB""#));
    assert_eq!(config.memory_budget_bytes, 1 << 30);
}

#[test]
fn duckdb_memory_limit_is_an_alias() {
    let config = ok(&with_root(r#""duckdbMemoryLimit": "1GB""#));
    assert_eq!(config.engine_memory_limit_bytes, Some(1_000_000_000));
    let all = problems(&with_root(r#""duckdbMemoryLimit": "1KB""#));
    assert_problem(&all, "duckdbMemoryLimit", &["at least"]);
}

#[test]
fn alias_and_key_together_is_an_error() {
    let all = problems(&with_root(
        r#""engineMemoryLimit": "1GB", "duckdbMemoryLimit": "2GB""#,
    ));
    assert_problem(
        &all,
        "duckdbMemoryLimit",
        &["old name of `engineMemoryLimit`", "keep only"],
    );
}

// ---------------------------------------------------------------- server names

#[test]
fn server_names_follow_the_rule() {
    for bad in ["GitHub", "1st", "my server", "-x", "", &"a".repeat(33)] {
        let all = problems(&format!(
            r#"{{"servers": [{{"name": {}, "command": "x"}}]}}"#,
            serde_json::to_string(bad).unwrap()
        ));
        assert_problem(
            &all,
            "servers[0].name",
            &["invalid server name", "lowercase"],
        );
    }
    let longest = "a".repeat(32);
    ok(&format!(
        r#"{{"servers": [{{"name": "{longest}", "command": "x"}}]}}"#
    ));
}

#[test]
fn loom_is_a_reserved_name() {
    let all = problems(r#"{"servers": [{"name": "loom", "command": "x"}]}"#);
    assert_problem(
        &all,
        "servers[0].name",
        &["`loom` is reserved for loom's own tools"],
    );
    let all = problems(r#"{"mcpServers": {"loom": {"command": "x"}}}"#);
    assert_problem(&all, "mcpServers.loom", &["reserved"]);
}

#[test]
fn duplicate_names_point_at_the_first() {
    let all = problems(
        r#"{"servers": [
            {"name": "github", "command": "a"},
            {"name": "fs", "command": "b"},
            {"name": "github", "command": "c"}
        ]}"#,
    );
    assert_problem(
        &all,
        "servers[2].name",
        &["duplicate server name `github`", "`servers[0].name`"],
    );
}

#[test]
fn name_is_required_in_loom_format() {
    let all = problems(r#"{"servers": [{"command": "x"}]}"#);
    assert_problem(&all, "servers[0]", &["missing required key `name`"]);
}

// ---------------------------------------------------------------- server fields

#[test]
fn command_is_required_and_non_empty() {
    let all = problems(r#"{"servers": [{"name": "a"}]}"#);
    assert_problem(&all, "servers[0]", &["missing required key `command`"]);
    let all = problems(r#"{"servers": [{"name": "a", "command": ""}]}"#);
    assert_problem(&all, "servers[0].command", &["must not be empty"]);
    let all = problems(r#"{"servers": [{"name": "a", "command": "${EMPTY}"}]}"#);
    assert_problem(&all, "servers[0].command", &["expanded to \"\""]);
}

#[test]
fn args_must_be_an_array_of_strings() {
    let all = problems(&one_server(r#""args": "-y server""#));
    assert_problem(
        &all,
        "servers[0].args",
        &["expected an array of strings, found string \"-y server\""],
    );
    let all = problems(&one_server(r#""args": ["--port", 8080]"#));
    assert_problem(
        &all,
        "servers[0].args[1]",
        &["expected a string, found number 8080", "quote"],
    );
}

#[test]
fn env_values_must_be_strings() {
    let all = problems(r#"{"mcpServers": {"github": {"command": "x", "env": {"PORT": 8080}}}}"#);
    assert_problem(
        &all,
        "mcpServers.github.env.PORT",
        &["expected a string, found number 8080", "quote it: \"8080\""],
    );
    let all = problems(&one_server(r#""env": {"DEBUG": true, "X": null}"#));
    assert_problem(&all, "servers[0].env.DEBUG", &["quote it: \"true\""]);
    assert_problem(&all, "servers[0].env.X", &["expected a string, found null"]);
    let all = problems(&one_server(r#""env": ["A=1"]"#));
    assert_problem(
        &all,
        "servers[0].env",
        &["expected an object, found an array"],
    );
}

#[test]
fn env_keys_must_be_valid_names_and_are_not_expanded() {
    let all = problems(&one_server(
        r#""env": {"A=B": "1", "": "2", "C\u0000": "3"}"#,
    ));
    assert_problem(
        &all,
        "servers[0].env[\"A=B\"]",
        &["invalid environment variable name"],
    );
    assert_problem(&all, "servers[0].env[\"\"]", &["must not be empty"]);
    assert_problem(&all, "servers[0].env[\"C\\u0000\"]", &["NUL"]);
    let config = ok(&one_server(r#""env": {"${HOME}": "v"}"#));
    assert_eq!(config.servers[0].env[0].0, "${HOME}");
}

#[test]
fn env_passthrough_must_be_valid_names() {
    let all = problems(&one_server(r#""envPassthrough": ["PATH", "A=B", ""]"#));
    assert_problem(
        &all,
        "servers[0].envPassthrough[1]",
        &["invalid environment variable name"],
    );
    assert_problem(&all, "servers[0].envPassthrough[2]", &["must not be empty"]);
    let all = problems(&one_server(r#""envPassthrough": "PATH""#));
    assert_problem(&all, "servers[0].envPassthrough", &["array of strings"]);
}

#[test]
fn tool_lists_need_non_empty_strings() {
    let all = problems(&one_server(
        r#""allowTools": ["get_*", ""], "denyTools": [3], "provenanceDenylist": [""]"#,
    ));
    assert_problem(&all, "servers[0].allowTools[1]", &["must not be empty"]);
    assert_problem(
        &all,
        "servers[0].denyTools[0]",
        &["expected a string, found number 3"],
    );
    assert_problem(
        &all,
        "servers[0].provenanceDenylist[0]",
        &["must not be empty"],
    );
}

#[test]
fn disabled_must_be_a_boolean() {
    let all = problems(&one_server(r#""disabled": "true""#));
    assert_problem(
        &all,
        "servers[0].disabled",
        &["true or false", "remove the quotes"],
    );
    let all = problems(&one_server(r#""disabled": 1"#));
    assert_problem(
        &all,
        "servers[0].disabled",
        &["expected true or false, found number 1"],
    );
}

#[test]
fn cwd_and_export_dir_must_not_be_empty() {
    let all = problems(&one_server(r#""cwd": """#));
    assert_problem(&all, "servers[0].cwd", &["must not be empty"]);
    let all = problems(&with_root(r#""exportDir": """#));
    assert_problem(&all, "exportDir", &["must not be empty"]);
}

#[test]
fn nul_characters_are_rejected() {
    let all = problems(&one_server(r#""args": ["a\u0000b"]"#));
    assert_problem(&all, "servers[0].args[0]", &["NUL"]);
}

#[test]
fn filters_from_the_file_drive_tool_allowed() {
    let config = ok(&one_server(
        r#""allowTools": ["get_*", "*_issue"], "denyTools": ["get_secret*"]"#,
    ));
    let s = &config.servers[0];
    assert!(s.tool_allowed("get_repo"));
    assert!(s.tool_allowed("create_issue"));
    assert!(!s.tool_allowed("get_secret_key"), "deny wins");
    assert!(!s.tool_allowed("delete_repo"));
}

// ---------------------------------------------------------------- expansion

#[test]
fn variables_expand_in_every_string_value() {
    let config = ok(r#"{
        "servers": [{
            "name": "a",
            "command": "${NODE}",
            "args": ["${HOME}/server.js", "--token", "${GITHUB_TOKEN}"],
            "env": {"TOKEN": "Bearer ${GITHUB_TOKEN}"},
            "envPassthrough": ["${UNSET:-PATH}"],
            "allowTools": ["${UNSET:-get_*}"],
            "cwd": "${HOME}"
        }],
        "exportDir": "${HOME}/exports",
        "engineMemoryLimit": "${UNSET:-1GiB}"
    }"#);
    let s = &config.servers[0];
    assert_eq!(s.command, "/usr/bin/node");
    assert_eq!(
        s.args,
        ["/home/u/server.js", "--token", "ghp_fromTheEnvironment123"]
    );
    assert_eq!(s.env[0].1, "Bearer ghp_fromTheEnvironment123");
    assert_eq!(s.env_passthrough, ["PATH"]);
    assert_eq!(s.allow_tools, ["get_*"]);
    assert_eq!(s.cwd.as_deref(), Some(Path::new("/home/u")));
    assert_eq!(config.export_dir, PathBuf::from("/home/u/exports"));
    assert_eq!(config.engine_memory_limit_bytes, Some(1 << 30));
}

#[test]
fn defaults_and_literal_dollars() {
    let config = ok(&one_server(
        r#""args": ["${UNSET:-fallback}", "${EMPTY:-was-empty}", "$$HOME", "$HOME", "cost: $5", "$${X}"]"#,
    ));
    assert_eq!(
        config.servers[0].args,
        [
            "fallback",
            "was-empty",
            "$HOME",
            "$HOME",
            "cost: $5",
            "${X}"
        ]
    );
}

#[test]
fn missing_variable_is_reported_at_the_value() {
    let all = problems(
        r#"{"mcpServers": {"github": {"command": "x", "env": {"TOKEN": "${GITHUB_PAT}"}}}}"#,
    );
    assert_problem(
        &all,
        "mcpServers.github.env.TOKEN",
        &["environment variable `GITHUB_PAT` is not set (referenced as ${GITHUB_PAT})"],
    );
    let all = problems(&one_server(r#""args": ["${A}", "${B}"]"#));
    assert_problem(&all, "servers[0].args[0]", &["`A` is not set"]);
    assert_problem(&all, "servers[0].args[1]", &["`B` is not set"]);
}

#[test]
fn unterminated_reference_is_reported() {
    let all = problems(&with_root(r#""exportDir": "${HOME/x}""#));
    assert_problem(&all, "exportDir", &["invalid variable reference"]);
    let all = problems(&with_root(r#""exportDir": "/x/${HOME""#));
    assert_problem(&all, "exportDir", &["unterminated `${`", "character 4"]);
}

#[test]
fn disabled_servers_tolerate_unset_variables() {
    let config = ok(r#"{"servers": [
        {"name": "a", "command": "x", "disabled": true, "env": {"T": "${NOT_SET}"}}
    ]}"#);
    assert_eq!(config.servers[0].env[0].1, "${NOT_SET}");
    let all = problems(r#"{"servers": [{"name": "a", "command": "${X", "disabled": true}]}"#);
    assert_problem(&all, "servers[0].command", &["unterminated"]);
}

// ---------------------------------------------------------------- many problems at once

#[test]
fn every_problem_is_reported_together() {
    let err = parse(
        r#"{
            "servers": [
                {"name": "Bad Name", "command": ""},
                {"name": "ok", "command": "x", "env": {"N": 1}, "argz": []}
            ],
            "tokenThreshold": 10,
            "tokenTreshold": 10,
            "restart": {"maxAttempts": -1},
            "exportDir": "${MISSING}"
        }"#,
    )
    .unwrap_err();
    let paths: Vec<&str> = err.problems.iter().map(|p| p.path.as_str()).collect();
    for expected in [
        "servers[0].name",
        "servers[0].command",
        "servers[1].env.N",
        "servers[1].argz",
        "tokenThreshold",
        "tokenTreshold",
        "restart.maxAttempts",
        "exportDir",
    ] {
        assert!(
            paths.contains(&expected),
            "missing {expected} in {paths:#?}"
        );
    }
    assert_eq!(err.problems.len(), 8, "{err}");
    let text = err.to_string();
    assert!(text.starts_with("invalid configuration in loom.config.json: 8 problems\n  - "));
    assert!(text.contains("\n  - tokenThreshold: must be at least 100, found 10"));
}

// ---------------------------------------------------------------- masking via the parsed config

#[test]
fn describe_masked_hides_secrets_from_the_file_and_environment() {
    let config = ok(r#"{"mcpServers": {"github": {
        "command": "npx",
        "args": ["-y", "server", "ghp_literalTokenInArgs", "--api-key", "plainvalue", "--token=abc"],
        "env": {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "OTHER": "visible?"}
    }}}"#);
    let text = config.describe_masked();
    for secret in [
        "ghp_fromTheEnvironment123",
        "ghp_literalTokenInArgs",
        "plainvalue",
        "abc",
        "visible?",
    ] {
        assert!(!text.contains(secret), "{secret} leaked:\n{text}");
    }
    assert!(text.contains("GITHUB_TOKEN=***, OTHER=***"), "{text}");
    assert!(text.contains("--token=***"), "{text}");
    assert!(text.contains("-y server *** --api-key ***"), "{text}");
}

// ---------------------------------------------------------------- resolve_path and load

#[test]
fn resolve_path_precedence() {
    let cli = Path::new("/from/cli.json");
    assert_eq!(
        resolve_path(Some(cli), Some("/from/env.json".into())),
        PathBuf::from("/from/cli.json")
    );
    assert_eq!(
        resolve_path(None, Some("/from/env.json".into())),
        PathBuf::from("/from/env.json")
    );
    assert_eq!(
        resolve_path(None, Some(String::new())),
        PathBuf::from(DEFAULT_CONFIG_FILE)
    );
    assert_eq!(resolve_path(None, None), PathBuf::from("loom.config.json"));
}

#[test]
fn load_reports_an_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("loom.config.json");
    let err = load(&path).unwrap_err();
    assert!(err.is_unreadable());
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("cannot read {}: ", path.display())),
        "{text}"
    );
    assert!(
        text.contains("pass --config PATH or set LOOM_CONFIG"),
        "{text}"
    );
}

#[test]
fn load_reads_a_file_and_names_it_in_problems() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.json");
    std::fs::write(&path, r#"{"servers": [{"name": "a", "command": "x"}]}"#).unwrap();
    assert_eq!(load(&path).unwrap().servers[0].name, "a");

    std::fs::write(&path, "{\"servers\": [,]}").unwrap();
    let err = load(&path).unwrap_err();
    assert_eq!(err.origin, path.display().to_string());
    assert!(
        err.problems[0]
            .path
            .starts_with(&format!("{}:1:", path.display()))
    );
}

#[test]
fn problems_are_listed_in_file_order() {
    let err = parse(
        r#"{
            "tokenTreshold": 1,
            "servers": [{"comand": "x", "name": "Bad"}],
            "exportDir": ""
        }"#,
    )
    .unwrap_err();
    let paths: Vec<&str> = err.problems.iter().map(|p| p.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "tokenTreshold",
            "servers[0]",
            "servers[0].comand",
            "servers[0].name",
            "exportDir"
        ]
    );
}

#[test]
fn compression_block_resolves_per_tool_and_names_bad_entries() {
    let config = parse(
        r#"{"servers": [{"name": "web", "command": "x"}, {"name": "gh_api", "command": "y"}],
            "compression": {
              "default": {"maxOutputTokens": 1500, "stripBase64": false},
              "perServer": {"web": {"htmlToMarkdown": false}},
              "perTool": {"web/fetch": {"maxOutputTokens": 8000}, "gh_api_get_file": {"bypass": true}}
            }}"#,
    )
    .expect("valid");
    let fetch = config.compression.resolve("web", "fetch");
    assert_eq!(fetch.max_output_tokens, 8000);
    assert!(!fetch.html_to_markdown && !fetch.strip_base64 && fetch.json_summary);
    assert!(
        config.compression.resolve("gh_api", "get_file").bypass,
        "exposed name split at the longest server"
    );
    assert_eq!(
        config
            .compression
            .resolve("gh_api", "list")
            .max_output_tokens,
        1500
    );

    let all = problems(
        r#"{"servers": [{"name": "web", "command": "x"}],
            "compression": {
              "default": {"maxOutputToken": 10, "llmSummary": true},
              "perServer": {"webb": {}},
              "perTool": {"nope_tool": {}, "web/fetch": {"bypass": "yes", "maxOutputTokens": 5}}
            }}"#,
    );
    assert_problem(
        &all,
        "compression.default.maxOutputToken",
        &["did you mean `maxOutputTokens`?"],
    );
    assert_problem(
        &all,
        "compression",
        &["`llmSummary` is on", "no `llm` block"],
    );
    assert_problem(
        &all,
        "compression.perServer.webb",
        &["no server is named `webb`", "did you mean `web`?"],
    );
    assert_problem(
        &all,
        "compression.perTool.nope_tool",
        &["expected `server/tool`"],
    );
    assert_problem(
        &all,
        "compression.perTool[\"web/fetch\"].bypass",
        &["true or false"],
    );
    assert_problem(
        &all,
        "compression.perTool[\"web/fetch\"].maxOutputTokens",
        &["at least 100"],
    );
}

#[test]
fn context_firewall_files_are_read_as_they_are() {
    let config = parse(
        r#"{"downstreams": {"fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}},
            "callToolTimeoutMs": 30000,
            "compression": {"default": {"maxOutputTokens": 2000, "htmlToMarkdown": true,
                            "stripBase64": true, "jsonSummary": true, "llmSummary": false, "bypass": false}}}"#,
    )
    .expect("valid");
    assert_eq!(config.format, ConfigFormat::ContextFirewall);
    assert_eq!(config.servers[0].name, "fs");
    assert_eq!(config.servers[0].call_timeout_ms, 30000);
    let all = problems(
        r#"{"downstreams": {"remote": {"url": "https://x/mcp", "transport": "streamable-http"}},
            "llm": {"provider": "openrouter"}, "report": {"enabled": 1}, "colour": 1}"#,
    );
    assert_problem(&all, "llm", &["missing required key `model`"]);
    assert_problem(&all, "report.enabled", &["expected true or false"]);
    assert_problem(&all, "colour", &["unknown key `colour`"]);
    assert_eq!(all.len(), 3, "the remote entry itself is fine: {all:#?}");
}

const ONE_SERVER: &str = r#""servers": [{"name": "web", "command": "x"}]"#;

fn with_llm(llm: &str, compression: &str) -> String {
    format!(r#"{{{ONE_SERVER}, "llm": {llm}, "compression": {compression}}}"#)
}

#[test]
fn the_llm_block_as_context_firewall_documents_it() {
    let on = r#"{"default": {"llmSummary": true}}"#;
    // A preset: its URL, its key's variable.
    let config = ok(&with_llm(
        r#"{"provider": "openrouter", "model": "some/model"}"#,
        on,
    ));
    let llm = config.llm.as_ref().expect("llm");
    assert_eq!(
        llm.endpoint(),
        "https://openrouter.ai/api/v1/chat/completions"
    );
    assert_eq!(llm.api_key.expose(), "sk-or-fromTheEnvironment");
    assert_eq!(
        llm.key_source,
        KeySource::PresetVariable("OPENROUTER_API_KEY")
    );
    assert_eq!(
        (llm.timeout_ms, llm.max_input_chars, llm.max_in_flight),
        (20_000, 120_000, 4)
    );
    assert!(config.warnings.is_empty(), "{:#?}", config.warnings);
    assert!(config.compression.resolve("web", "fetch").llm_summary);
    for preset in LLM_PROVIDERS {
        assert!(preset.base_url.starts_with("https://") && preset.base_url.ends_with("/v1"));
    }

    // Any endpoint: baseUrl and apiKey, trailing slash dropped, limits set.
    let config = ok(&with_llm(
        r#"{"baseUrl": "http://127.0.0.1:4000/v1/", "apiKey": "${LLM_API_KEY}", "model": "m",
            "timeoutMs": 500, "maxInputChars": 400000, "maxInFlight": 2}"#,
        r#"{"perTool": {"web/fetch": {"llmSummary": true}}}"#,
    ));
    let llm = config.llm.as_ref().expect("llm");
    assert_eq!(llm.endpoint(), "http://127.0.0.1:4000/v1/chat/completions");
    assert_eq!(llm.api_key.expose(), "sk-llm-fromTheEnvironment");
    assert_eq!(
        llm.key_source,
        KeySource::Variables(vec!["LLM_API_KEY".into()])
    );
    assert!(
        config
            .describe_masked()
            .contains("key *** (from LLM_API_KEY)")
    );
    assert_eq!(
        (llm.timeout_ms, llm.max_input_chars, llm.max_in_flight),
        (500, 400_000, 2)
    );
    assert!(
        config.warnings.is_empty(),
        "loopback http is fine: {:#?}",
        config.warnings
    );
    assert!(config.compression.resolve("web", "fetch").llm_summary);
    assert!(
        !config.compression.resolve("web", "other").llm_summary,
        "default false"
    );

    // Allowed, with a warning: both provider and baseUrl; a literal key; plain http elsewhere.
    let config = ok(&with_llm(
        r#"{"provider": "deepseek", "baseUrl": "http://llm.example.com/v1",
            "apiKey": "sk-literal-in-the-file", "model": "m"}"#,
        on,
    ));
    let llm = config.llm.as_ref().expect("llm");
    assert_eq!(
        llm.base_url, "http://llm.example.com/v1",
        "the explicit URL wins"
    );
    assert_eq!(llm.key_source, KeySource::Literal);
    let warned: Vec<String> = config.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(warned.len(), 3, "{warned:#?}");
    assert!(warned[0].starts_with("llm.baseUrl: plain http"));
    assert!(warned[1].starts_with("llm.baseUrl: both `provider` (deepseek) and `baseUrl`"));
    assert!(warned[2].starts_with("llm.apiKey: the key is written into the file"));
    assert!(
        warned.iter().all(|w| !w.contains("sk-literal")),
        "{warned:#?}"
    );

    // An llm block nothing uses is worth a word.
    let config = ok(&format!(
        r#"{{{ONE_SERVER}, "llm": {{"provider": "openrouter", "model": "m"}}}}"#
    ));
    assert_eq!(config.warnings.len(), 1);
    assert!(config.warnings[0].message.contains("nothing is summarised"));
}

#[test]
fn llm_mistakes_are_named_with_their_path() {
    let on = r#"{"default": {"llmSummary": true}}"#;
    let one = |llm: &str| problems(&with_llm(llm, on));
    assert_problem(
        &one(r#"{"provider": "openruter", "model": "m"}"#),
        "llm.provider",
        &[
            "unknown provider `openruter`",
            "did you mean `openrouter`?",
            "baseUrl",
        ],
    );
    assert_problem(
        &one(r#"{"model": "m"}"#),
        "llm",
        &["missing `provider` or `baseUrl`"],
    );
    assert_problem(
        &one(r#"{"baseUrl": "https://x.example/v1", "model": "m"}"#),
        "llm",
        &["missing `apiKey`", "${LLM_API_KEY}"],
    );
    assert_problem(
        &one(r#"{"provider": "openai", "model": "m"}"#),
        "llm",
        &["OPENAI_API_KEY, which is not set"],
    );
    assert_problem(
        &one(r#"{"provider": "openai", "apiKey": "${NOPE}", "model": "m"}"#),
        "llm.apiKey",
        &["`NOPE` is not set"],
    );
    assert_problem(
        &one(r#"{"provider": "openai", "apiKey": "${LLM_API_KEY}"}"#),
        "llm",
        &["missing required key `model`"],
    );
    let url = |base: &str| {
        one(&format!(
            r#"{{"baseUrl": "{base}", "apiKey": "k", "model": "m"}}"#
        ))
    };
    assert_problem(&url("ftp://x/v1"), "llm.baseUrl", &["http:// or https://"]);
    assert_problem(&url("not a url"), "llm.baseUrl", &["http:// or https://"]);
    assert_problem(
        &url("https://x.example/v1/chat/completions"),
        "llm.baseUrl",
        &["names the endpoint itself", "\"https://x.example/v1\""],
    );
    assert_problem(&url("https://x.example/v1?k=1"), "llm.baseUrl", &["query"]);
    assert_problem(
        &url("https://u:p@x.example/v1"),
        "llm.baseUrl",
        &["user or password"],
    );
    let all = one(
        r#"{"provider": "openai", "apiKey": "${LLM_API_KEY}", "model": "", "timeoutMs": 0,
            "maxInputChars": 500000, "maxInFlight": 0, "temperature": 0}"#,
    );
    assert_problem(&all, "llm.model", &["must not be empty"]);
    assert_problem(&all, "llm.timeoutMs", &["at least 1"]);
    assert_problem(&all, "llm.maxInputChars", &["at most 400000"]);
    assert_problem(&all, "llm.maxInFlight", &["at least 1"]);
    assert_problem(&all, "llm.temperature", &["unknown key `temperature`"]);
    assert_problem(
        &one(r#"{"provider": "openai", "apiKey": "two words", "model": "m"}"#),
        "llm.apiKey",
        &["space or a control character"],
    );
    assert_problem(
        &problems(&with_llm(
            r#"{"provider": "openrouter", "model": "m"}"#,
            r#"{"default": {"llmSummary": "yes"}}"#,
        )),
        "compression.default.llmSummary",
        &["true or false"],
    );
}

#[test]
fn check_shows_the_endpoint_and_never_the_key() {
    let config = ok(&with_llm(
        r#"{"provider": "openrouter", "apiKey": "sk-literal-secret-value", "model": "a/b"}"#,
        r#"{"default": {"llmSummary": true}}"#,
    ));
    let text = config.describe_masked();
    assert!(
        text.contains("POST https://openrouter.ai/api/v1/chat/completions (provider openrouter), model \"a/b\", key *** (written in the file)"),
        "{text}"
    );
    assert!(
        text.contains("stages: stripBase64, htmlToMarkdown, jsonSummary, llmSummary, truncate"),
        "{text}"
    );
    assert!(
        text.contains("warnings (1)") && text.contains("llm.apiKey: the key is written"),
        "{text}"
    );
    assert!(!text.contains("sk-literal-secret-value"), "{text}");
    assert!(!format!("{config:?}").contains("sk-literal-secret-value"));
    let from_env = ok(&with_llm(
        r#"{"provider": "openrouter", "model": "a/b"}"#,
        r#"{"default": {"llmSummary": true}}"#,
    ));
    let text = from_env.describe_masked();
    assert!(text.contains("key *** (from OPENROUTER_API_KEY)"), "{text}");
    assert!(!text.contains("sk-or-fromTheEnvironment"), "{text}");
}

#[test]
fn the_tools_block_sets_disclosure() {
    let base = r#""servers": [{"name": "a", "command": "x"}]"#;
    let config = ok(&format!(r#"{{{base}}}"#));
    assert_eq!(config.tools, crate::config::ToolsConfig::default());
    assert_eq!(config.tools.mode, crate::config::ToolsMode::All);
    let config = ok(&format!(
        r#"{{{base}, "tools": {{"mode": "search", "maxJoined": 3, "maxDescriptionChars": 200}}}}"#
    ));
    assert_eq!(config.tools.mode, crate::config::ToolsMode::Search);
    assert_eq!(config.tools.max_joined, 3);
    assert_eq!(config.tools.max_description_chars, Some(200));
    let config = ok(&format!(
        r#"{{{base}, "tools": {{"mode": "pinned", "pinned": ["a_get_*", "a/list"]}}}}"#
    ));
    assert_eq!(config.tools.mode, crate::config::ToolsMode::Search);
    assert_eq!(config.tools.pinned, ["a_get_*", "a/list"]);
    // A pinned list alone means search mode.
    let config = ok(&format!(r#"{{{base}, "tools": {{"pinned": ["a_x"]}}}}"#));
    assert_eq!(config.tools.mode, crate::config::ToolsMode::Search);

    let all = problems(&format!(
        r#"{{{base}, "tools": {{"mode": "lazy", "maxJoined": -1, "maxDescriptionChars": 5, "pinned": [""], "limit": 1}}}}"#
    ));
    assert_problem(&all, "tools.mode", &["unknown mode \"lazy\"", "\"search\""]);
    assert_problem(&all, "tools.maxJoined", &["at least 0"]);
    assert_problem(&all, "tools.maxDescriptionChars", &["at least 40"]);
    assert_problem(&all, "tools.pinned[0]", &["must not be empty"]);
    assert_problem(&all, "tools.limit", &["unknown key `limit`"]);
    let all = problems(&format!(r#"{{{base}, "tools": {{"mode": "pinned"}}}}"#));
    assert_problem(&all, "tools.mode", &["needs `tools.pinned`"]);
    let all = problems(&format!(
        r#"{{{base}, "tools": {{"mode": "all", "pinned": ["a_x"]}}}}"#
    ));
    assert_problem(&all, "tools.pinned", &["no effect with mode \"all\""]);
}

#[test]
fn tools_search_model_names_a_model_folder() {
    let base = r#""servers": [{"name": "a", "command": "x"}]"#;
    let dir = tempfile::tempdir().expect("a temp dir");
    for name in ["config.json", "tokenizer.json", "model.safetensors"] {
        std::fs::write(dir.path().join(name), "{}").expect("written");
    }
    let quoted = serde_json::to_string(&dir.path().display().to_string()).expect("a JSON string");
    let config = ok(&format!(
        r#"{{{base}, "tools": {{"searchModel": {quoted}}}}}"#
    ));
    assert_eq!(config.tools.search_model.as_deref(), Some(dir.path()));
    // Search by meaning does not choose the mode.
    assert_eq!(config.tools.mode, crate::config::ToolsMode::All);

    std::fs::remove_file(dir.path().join("tokenizer.json")).expect("removed");
    let all = problems(&format!(
        r#"{{{base}, "tools": {{"searchModel": {quoted}}}}}"#
    ));
    assert_problem(
        &all,
        "tools.searchModel",
        &[
            "has no tokenizer.json",
            "config.json, tokenizer.json, model.safetensors",
        ],
    );
    let all = problems(&format!(r#"{{{base}, "tools": {{"searchModel": ""}}}}"#));
    assert_problem(&all, "tools.searchModel", &["must not be empty"]);
    let all = problems(&format!(r#"{{{base}, "tools": {{"searchModel": 3}}}}"#));
    assert_problem(&all, "tools.searchModel", &["string"]);
}

#[test]
fn the_report_block_takes_loom_and_context_firewall_names() {
    let base = r#""servers": [{"name": "a", "command": "x"}]"#;
    let config = ok(&format!(r#"{{{base}}}"#));
    assert!(config.report.enabled);
    assert_eq!(config.report.path, None);
    let config = ok(&format!(
        r#"{{{base}, "report": {{"enabled": false, "path": "/tmp/r.json"}}}}"#
    ));
    assert!(!config.report.enabled);
    assert_eq!(config.report.path, Some("/tmp/r.json".into()));
    let config = ok(&format!(
        r#"{{{base}, "report": {{"markdownPath": "./report.md"}}}}"#
    ));
    assert_eq!(config.report.path, Some("./report.md".into()));
    let all = problems(&format!(
        r#"{{{base}, "report": {{"path": "a.md", "markdownPath": "b.md", "format": "x"}}}}"#
    ));
    assert_problem(&all, "report.markdownPath", &["keep only `path`"]);
    assert_problem(&all, "report.format", &["unknown key `format`"]);
    let all = problems(&format!(r#"{{{base}, "report": {{"path": ""}}}}"#));
    assert_problem(&all, "report.path", &["must not be empty"]);
}

#[test]
fn http_tokens_are_credentials_each_and_never_shown() {
    let config = ok(
        r#"{"servers": [], "http": {"token": "first-secret", "tokens": ["second-secret", "third-secret"]}}"#,
    );
    let credentials: Vec<&str> = config.http.credentials().collect();
    assert_eq!(
        credentials,
        ["first-secret", "second-secret", "third-secret"]
    );
    assert!(config.http.wants_token());
    let shown = config.describe_masked();
    assert!(shown.contains("3 tokens"), "{shown}");
    assert!(
        !shown.contains("secret"),
        "a token shows in `loom check`: {shown}"
    );
    assert!(!format!("{:?}", config.http).contains("secret"));

    let all = problems(r#"{"servers": [], "http": {"token": "a", "tokens": ["b", "a", "b", ""]}}"#);
    assert_problem(
        &all,
        "http.tokens[1]",
        &["accepted already", "one credential"],
    );
    assert_problem(&all, "http.tokens[2]", &["accepted already"]);
    assert_problem(&all, "http.tokens[3]", &["non-empty token"]);
    let all = problems(r#"{"servers": [], "http": {"tokens": "one"}}"#);
    assert_problem(&all, "http.tokens", &["array of strings"]);
}

#[test]
fn protocol_says_how_a_started_server_is_opened() {
    use crate::config::DownstreamProtocol;
    let config = ok(r#"{"mcpServers": {
        "a": {"command": "x"},
        "b": {"command": "x", "protocol": "2026-07-28"},
        "c": {"command": "x", "protocol": "auto"},
        "d": {"command": "x", "protocol": "2025-11-25"}
    }}"#);
    let protocols: Vec<DownstreamProtocol> = config.servers.iter().map(|s| s.protocol).collect();
    assert_eq!(
        protocols,
        [
            DownstreamProtocol::Handshake,
            DownstreamProtocol::Modern,
            DownstreamProtocol::Auto,
            DownstreamProtocol::Handshake
        ]
    );
    let all = problems(r#"{"mcpServers": {"a": {"command": "x", "protocol": "2026"}}}"#);
    assert_problem(
        &all,
        "mcpServers.a.protocol",
        &["\"2026-07-28\"", "\"auto\"", "found \"2026\""],
    );
    let all = problems(r#"{"mcpServers": {"a": {"command": "x", "protocol": 2026}}}"#);
    assert_problem(&all, "mcpServers.a.protocol", &["a string"]);
    // A remote server takes it too (a server of 2026-07-28 only, behind a URL).
    let remote = ok(r#"{"mcpServers": {"r": {"url": "https://x/mcp", "protocol": "auto"}}}"#);
    assert_eq!(remote.servers[0].protocol, DownstreamProtocol::Auto);
    let all = problems(r#"{"mcpServers": {"r": {"url": "https://x/mcp", "protocol": "2026"}}}"#);
    assert_problem(&all, "mcpServers.r.protocol", &["found \"2026\""]);
}

#[test]
fn the_llm_examples_load() {
    for name in ["config.llm.json", "config.llm-any-endpoint.json"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(name);
        let text = std::fs::read_to_string(&path).expect("the example");
        let config = match parse_str(&text, name, &test_env()) {
            Ok(config) => config,
            Err(e) => panic!("{name}: {e}"),
        };
        assert!(config.llm.is_some(), "{name}");
        assert!(config.warnings.is_empty(), "{name}: {:#?}", config.warnings);
    }
}

#[test]
fn a_context_firewall_file_with_its_llm_block_switches_as_it_is() {
    // The seed's own example, in Context Firewall's layout.
    let config = ok(r#"{
        "downstreams": {"fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}},
        "llm": {"provider": "openrouter", "model": "your-model-name"},
        "compression": {"default": {"maxOutputTokens": 2000, "llmSummary": true}}
    }"#);
    assert_eq!(config.format, ConfigFormat::ContextFirewall);
    let llm = config.llm.as_ref().expect("llm");
    assert_eq!(llm.model, "your-model-name");
    assert_eq!(llm.base_url, "https://openrouter.ai/api/v1");
    assert!(config.compression.resolve("fs", "read_file").llm_summary);
    assert!(config.warnings.is_empty(), "{:#?}", config.warnings);
}

#[test]
fn oauth_settings_are_read_and_checked() {
    use crate::config::{OAuthSettings, Secret};
    let config = ok(r#"{"mcpServers": {
        "linear": {"url": "https://mcp.linear.app/mcp"},
        "github": {"url": "https://api.githubcopilot.com/mcp/", "oauth": {
            "clientId": "Iv1.abc", "clientSecret": "${TOKEN}", "scopes": ["repo", "read:org", "repo"],
            "redirectPort": 33418}},
        "cimd": {"url": "https://x.example/mcp", "oauth": {"clientMetadataUrl": "https://loom.example/client.json"}},
        "plain": {"url": "https://y.example/mcp", "oauth": false},
        "keyed": {"url": "https://z.example/mcp", "headers": {"authorization": "Bearer k"}}
    }}"#);
    let oauth = |name: &str| {
        config
            .servers
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| s.remote_server())
            .and_then(|r| r.oauth.clone())
    };
    assert_eq!(oauth("linear"), Some(OAuthSettings::default()));
    assert_eq!(
        oauth("github"),
        Some(OAuthSettings {
            client_id: Some("Iv1.abc".into()),
            client_secret: Some(Secret::new("t0ken".into())),
            client_metadata_url: None,
            scopes: vec!["repo".into(), "read:org".into()],
            redirect_port: Some(33418),
        })
    );
    assert_eq!(
        oauth("cimd").and_then(|o| o.client_metadata_url),
        Some("https://loom.example/client.json".into())
    );
    assert_eq!(oauth("plain"), None);
    assert_eq!(oauth("keyed"), None);

    let all = problems(
        r#"{"mcpServers": {
        "a": {"url": "https://x/mcp", "oauth": {"clientSecret": "s", "scope": ["x"], "redirectPort": 0}},
        "b": {"url": "https://x/mcp", "oauth": {"clientMetadataUrl": "http://x/c.json", "scopes": ["a b"]}},
        "c": {"url": "https://x/mcp", "headers": {"Authorization": "Bearer k"}, "oauth": {}},
        "d": {"url": "https://x/mcp", "oauth": "yes"}
    }}"#,
    );
    assert_problem(&all, "mcpServers.a.oauth.clientSecret", &["`clientId`"]);
    assert_problem(&all, "mcpServers.a.oauth.scope", &["did you mean `scopes`"]);
    assert_problem(&all, "mcpServers.a.oauth.redirectPort", &["1"]);
    assert_problem(
        &all,
        "mcpServers.b.oauth.clientMetadataUrl",
        &["https://", "http://x/c.json"],
    );
    assert_problem(&all, "mcpServers.b.oauth.scopes[0]", &["not a scope"]);
    assert_problem(&all, "mcpServers.c.oauth", &["`Authorization` header"]);
    assert_problem(&all, "mcpServers.d.oauth", &["an object or false"]);
}

#[test]
fn http_auth_is_read_and_checked() {
    use crate::config::HttpAuth;
    let config = ok(r#"{"mcpServers": {}, "http": {"auth": {
        "issuer": "https://login.example.com", "requiredScopes": ["mcp:read"],
        "jwksUrl": "https://login.example.com/jwks"}}}"#);
    assert_eq!(
        config.http.auth,
        Some(HttpAuth {
            issuer: "https://login.example.com".into(),
            audience: None,
            required_scopes: vec!["mcp:read".into()],
            jwks_url: Some("https://login.example.com/jwks".into()),
        })
    );
    assert!(config.http.wants_token());
    let all = problems(
        r#"{"mcpServers": {}, "http": {"auth": {"audience": "x", "requiredScopes": ["a b"], "jwks": "y"}}}"#,
    );
    assert_problem(&all, "http.auth", &["missing required key `issuer`"]);
    assert_problem(&all, "http.auth.requiredScopes[0]", &["not a scope"]);
    assert_problem(&all, "http.auth.jwks", &["unknown key", "`jwksUrl`"]);
    assert_problem(&all, "http.auth.audience", &["is not a URL"]);
    // The keys come over TLS, or from this machine.
    let all = problems(
        r#"{"mcpServers": {}, "http": {"auth": {"issuer": "http://login.example.com", "jwksUrl": "http://keys.example.com/jwks"}}}"#,
    );
    assert_problem(&all, "http.auth.issuer", &["without TLS", "use https://"]);
    assert_problem(&all, "http.auth.jwksUrl", &["without TLS"]);
    ok(r#"{"mcpServers": {}, "http": {"auth": {"issuer": "http://127.0.0.1:9000"}}}"#);
    ok(r#"{"mcpServers": {}, "http": {"auth": {"issuer": "http://localhost:9000/oidc"}}}"#);
}

// ---------------------------------------------------------------- cluster (SPEC §25)

#[test]
fn a_cluster_block_needs_a_store_and_a_secret_of_32_bytes() {
    let config = ok(&with_root(
        r#""cluster": {"store": "s3://bucket/loom", "secret": "${TOKEN}${TOKEN}${TOKEN}${TOKEN}${TOKEN}${TOKEN}${TOKEN}"}"#,
    ));
    let cluster = config.cluster.expect("cluster");
    assert_eq!(cluster.store, "s3://bucket/loom");
    assert_eq!(cluster.secret.len(), 35);
    assert!(config.warnings.is_empty(), "{:#?}", config.warnings);
    // The secret never shows in Debug output.
    assert!(!format!("{cluster:?}").contains("t0ken"));

    let all = problems(&with_root(
        r#""cluster": {"store": "/srv/loom", "secret": "${TOKEN}"}"#,
    ));
    assert_problem(
        &all,
        "cluster.secret",
        &["is 5 bytes", "at least 32", "openssl rand -hex 32"],
    );
    let all = problems(&with_root(r#""cluster": {"secret": "${TOKEN}"}"#));
    assert_problem(&all, "cluster.store", &["is required"]);
    assert_problem(&all, "cluster.secret", &["at least 32"]);
    let all = problems(&with_root(r#""cluster": {"store": "redis://x"}"#));
    assert_problem(
        &all,
        "cluster.store",
        &["unsupported scheme `redis://`", "s3://"],
    );
    assert_problem(&all, "cluster.secret", &["is required"]);
    let all = problems(&with_root(
        r#""cluster": {"store": "/x", "secret": "${TOKEN}", "ttl": 3}"#,
    ));
    assert!(all.iter().any(|p| p.path == "cluster.ttl"), "{all:#?}");
}

#[test]
fn a_cluster_instance_may_say_where_the_others_reach_it() {
    let secret = "${TOKEN}".repeat(7);
    let config = ok(&with_root(&format!(
        r#""cluster": {{"store": "/srv/loom", "secret": "{secret}", "advertise": "http://10.0.0.5:8808/mcp"}}"#
    )));
    let cluster = config.cluster.expect("cluster");
    assert_eq!(
        cluster.advertise.as_deref(),
        Some("http://10.0.0.5:8808/mcp")
    );
    for bad in ["10.0.0.5:8808", "ftp://host/mcp", "http://"] {
        let all = problems(&with_root(&format!(
            r#""cluster": {{"store": "/srv/loom", "secret": "{secret}", "advertise": "{bad}"}}"#
        )));
        assert_problem(
            &all,
            "cluster.advertise",
            &[
                "is not an http:// or https:// URL",
                "the other instances reach",
            ],
        );
    }
}

#[test]
fn a_cluster_secret_written_into_the_file_is_a_warning() {
    let literal = "0123456789abcdef0123456789abcdef";
    let config = ok(&with_root(&format!(
        r#""cluster": {{"store": "/srv/loom", "secret": "{literal}"}}"#
    )));
    let warned: Vec<String> = config.warnings.iter().map(|w| w.to_string()).collect();
    assert!(
        warned
            .iter()
            .any(|w| w.contains("cluster.secret") && w.contains("environment variable")),
        "{warned:#?}"
    );
    assert!(warned.iter().all(|w| !w.contains(literal)), "{warned:#?}");
}
