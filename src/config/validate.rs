//! Turns the parsed JSON tree into a [`Config`], collecting every problem on the way.
//!
//! Each check reports into one list and falls back to a default, so a single run shows the user
//! all of their mistakes. The `Config` built from fallbacks is thrown away when any problem was
//! reported.

use std::path::PathBuf;

use super::error::{Problem, ROOT_PATH};
use super::expand::expand;
use super::json::{Json, Num, json_quote};
use super::model::{
    AuditConfig, Config, ConfigFormat, DEFAULT_AUDIT_MAX_BYTES, DEFAULT_CALL_TIMEOUT_MS,
    DEFAULT_LLM_MAX_IN_FLIGHT, DEFAULT_LLM_MAX_INPUT_CHARS, DEFAULT_LLM_TIMEOUT_MS,
    DownstreamProtocol, HttpAuth, HttpConfig, KeySource, LLM_PROVIDERS, LlmConfig, LlmProvider,
    MAX_HTTP_MAX_SESSIONS, MAX_LLM_MAX_IN_FLIGHT, MAX_LLM_MAX_INPUT_CHARS, MAX_MAX_JOINED_TOOLS,
    MAX_MAX_TOOL_NAME_LENGTH, MAX_SERVER_NAME_LENGTH, MIN_AUDIT_MAX_BYTES, MIN_LLM_MAX_INPUT_CHARS,
    MIN_MAX_DESCRIPTION_CHARS, MIN_MAX_TOOL_NAME_LENGTH, MIN_MEMORY_BYTES, MIN_TOKEN_THRESHOLD,
    OAuthSettings, RESERVED_HEADERS, RESERVED_SERVER_NAME, RemoteServer, ReportConfig,
    RestartPolicy, Secret, ServerConfig, TelemetryConfig, ToolsConfig, ToolsMode, Transport,
    is_valid_env_name, is_valid_server_name,
};
use super::policy::{Compression, PolicyPatch};
use super::size::{UNIT_LIST, human_bytes, parse_size};
use super::suggest::{did_you_mean, key_list};

/// The smallest `maxOutputTokens`: below it the header line and a cut marker alone would not
/// fit.
const MIN_OUTPUT_TOKENS: u64 = 100;

const SERVERS: &str = "servers";
const MCP_SERVERS: &str = "mcpServers";
/// Context Firewall's name for the same map, so its users can point loom at the file they have.
const DOWNSTREAMS: &str = "downstreams";
const COMPRESSION: &str = "compression";
const ENGINE_MEMORY_LIMIT: &str = "engineMemoryLimit";
const DUCKDB_MEMORY_LIMIT: &str = "duckdbMemoryLimit";

/// Top-level keys loom reads, in both formats.
const ROOT_KEYS: &[&str] = &[
    "$schema",
    SERVERS,
    MCP_SERVERS,
    "tokenThreshold",
    "memoryBudgetBytes",
    ENGINE_MEMORY_LIMIT,
    DUCKDB_MEMORY_LIMIT,
    "exportDir",
    "exportMaxBytes",
    "queryTimeoutMs",
    "neutralizeCsvFormulas",
    "restart",
    "maxToolNameLength",
    "snapshot",
    DOWNSTREAMS,
    COMPRESSION,
    "callToolTimeoutMs",
    "tools",
    "report",
    "http",
    LLM,
    "telemetry",
    "audit",
    "cluster",
];

const LLM: &str = "llm";
const LLM_KEYS: &[&str] = &[
    "provider",
    "baseUrl",
    "apiKey",
    "model",
    "timeoutMs",
    "maxInputChars",
    "maxInFlight",
];

/// Keys of one `compression` entry (`default`, a `perServer` or a `perTool` value).
const POLICY_KEYS: &[&str] = &[
    "maxOutputTokens",
    "bypass",
    "stripBase64",
    "htmlToMarkdown",
    "jsonSummary",
    "truncate",
    "keepSmallTables",
    "llmSummary",
];
const COMPRESSION_KEYS: &[&str] = &["default", "perServer", "perTool"];

const SNAPSHOT_KEYS: &[&str] = &["url"];

const TOOLS_KEYS: &[&str] = &[
    "mode",
    "pinned",
    "maxJoined",
    "maxDescriptionChars",
    "searchModel",
];
const TOOLS_MODES: &str = "\"all\" (every tool listed), \"search\" (tools found with loom_find_tools) \
                           or \"pinned\" (search, plus the `tools.pinned` list)";

/// `markdownPath` is Context Firewall's name for `path`.
const REPORT_KEYS: &[&str] = &["enabled", "path", "markdownPath"];
const TELEMETRY_KEYS: &[&str] = &["otlpEndpoint"];
const AUDIT_KEYS: &[&str] = &["path", "maxBytes"];
const CLUSTER_KEYS: &[&str] = &["store", "secret", "advertise"];
/// Bytes a cluster secret has at least (SPEC §25): 256 bits, the key of HMAC-SHA-256.
pub(crate) const MIN_CLUSTER_SECRET_BYTES: usize = 32;

const RESTART_KEYS: &[&str] = &["maxAttempts", "baseDelayMs"];

/// Keys of a remote server's `oauth` object.
const OAUTH_KEYS: &[&str] = &[
    "clientId",
    "clientSecret",
    "clientMetadataUrl",
    "scopes",
    "redirectPort",
];

const HTTP_KEYS: &[&str] = &[
    "token",
    "tokens",
    "allowedOrigins",
    "sessionIdleSecs",
    "maxSessions",
    "bodyTimeoutSecs",
    "auth",
];

/// Keys of `http.auth`.
const HTTP_AUTH_KEYS: &[&str] = &["issuer", "audience", "requiredScopes", "jwksUrl"];

/// Keys of one server entry. `type`, `url` and `headers` come from the Claude Code / Cursor
/// schema, `transport` from Context Firewall's.
const SERVER_KEYS: &[&str] = &[
    "name",
    "command",
    "args",
    "env",
    "envPassthrough",
    "provenanceDenylist",
    "allowTools",
    "denyTools",
    "callTimeoutMs",
    "disabled",
    "cwd",
    "protocol",
    "type",
    "url",
    "headers",
    "oauth",
    "transport",
];

/// In the `mcpServers` format the name is the map key, so `name` is not a key of the entry.
const MCP_SERVER_KEYS: &[&str] = &[
    "command",
    "args",
    "env",
    "envPassthrough",
    "provenanceDenylist",
    "allowTools",
    "denyTools",
    "callTimeoutMs",
    "disabled",
    "cwd",
    "protocol",
    "type",
    "url",
    "headers",
    "oauth",
    // Context Firewall marks a remote entry with it (`"transport": "streamable-http"`).
    "transport",
];

/// Values of `type` / `transport` for a server loom starts itself.
const STDIO: &str = "stdio";
/// Values of `type` / `transport` for a remote server: Claude Code writes `http`, Context
/// Firewall `streamable-http`, some clients `streamableHttp`.
const HTTP_TRANSPORTS: &[&str] = &[
    "http",
    "streamable-http",
    "streamableHttp",
    "streamable_http",
];
/// Keys that only a stdio entry can have.
const STDIO_ONLY_KEYS: &[&str] = &["command", "args", "env", "envPassthrough", "cwd"];

/// The names a string's `${NAME}` / `${NAME:-default}` references use, in order, once each.
fn referenced_variables(value: &Json) -> Vec<String> {
    let Json::String(raw) = value else {
        return Vec::new();
    };
    let mut names: Vec<String> = Vec::new();
    for piece in raw.split("${").skip(1) {
        let name: String = piece
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// A path one level below `parent`: `parent.key`, or `parent["odd key"]` when the key would not
/// read unambiguously after a dot.
pub(crate) fn child(parent: &str, key: &str) -> String {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$');
    match (parent.is_empty(), plain) {
        (true, true) => key.to_owned(),
        (false, true) => format!("{parent}.{key}"),
        (_, false) => format!("{parent}[{}]", json_quote(key)),
    }
}

pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// The two transports an entry can ask for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Stdio,
    Http,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Stdio => "stdio",
            Kind::Http => "http",
        }
    }
}

/// How to treat keys an object does not know.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unknown {
    Reject,
    /// The `mcpServers` file belongs to another app, whose own top-level keys are not loom's
    /// business.
    Ignore,
}

/// The first occurrence of each known key of an object.
struct Fields<'a> {
    entries: Vec<(&'a str, &'a Json)>,
}

impl<'a> Fields<'a> {
    fn get(&self, key: &str) -> Option<&'a Json> {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }
}

/// Builds the config from the parsed document, or returns every problem found.
pub(crate) fn build(
    root: &Json,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, Vec<Problem>> {
    let mut checker = Checker {
        env,
        problems: Vec::new(),
        warnings: Vec::new(),
        keep_missing_vars: false,
        default_call_timeout_ms: DEFAULT_CALL_TIMEOUT_MS,
    };
    let config = checker.root(root);
    match config {
        Some(mut config) if checker.problems.is_empty() => {
            config.warnings = std::mem::take(&mut checker.warnings);
            config
                .warnings
                .sort_by_cached_key(|p| position(root, &p.path));
            Ok(config)
        }
        _ => {
            let mut problems = checker.problems;
            // Checks run in loom's order, not the file's; reading the list top to bottom while
            // walking down the file is easier. The sort is stable, so problems at one value keep
            // their order.
            problems.sort_by_cached_key(|p| position(root, &p.path));
            Err(problems)
        }
    }
}

/// Where a problem's path points in the document, as entry indices from the root; a parent
/// sorts before its children. Paths that do not resolve sort last.
fn position(root: &Json, path: &str) -> Vec<usize> {
    let mut out = Vec::new();
    if path == ROOT_PATH {
        return out;
    }
    let mut node = Some(root);
    let mut rest = path;
    while !rest.is_empty() {
        let Some((segment, remainder)) = next_segment(rest) else {
            out.push(usize::MAX);
            break;
        };
        rest = remainder;
        let found = match (node, segment) {
            (Some(Json::Object(entries)), Segment::Key(key)) => entries
                .iter()
                .position(|(k, _)| *k == key)
                .map(|i| (i, &entries[i].1)),
            (Some(Json::Array(items)), Segment::Index(i)) => items.get(i).map(|item| (i, item)),
            _ => None,
        };
        match found {
            Some((i, child)) => {
                out.push(i);
                node = Some(child);
            }
            None => {
                out.push(usize::MAX);
                node = None;
            }
        }
    }
    out
}

enum Segment {
    Key(String),
    Index(usize),
}

/// Splits the first segment off a path built by [`child`] and [`index`].
fn next_segment(path: &str) -> Option<(Segment, &str)> {
    if let Some(inner) = path.strip_prefix('[') {
        if inner.starts_with('"') {
            let end = json_string_end(inner)?;
            let key: String = serde_json::from_str(&inner[..end]).ok()?;
            return Some((Segment::Key(key), inner[end..].strip_prefix(']')?));
        }
        let close = inner.find(']')?;
        let i = inner[..close].parse().ok()?;
        return Some((Segment::Index(i), &inner[close + 1..]));
    }
    let plain = path.strip_prefix('.').unwrap_or(path);
    let end = plain.find(['.', '[']).unwrap_or(plain.len());
    Some((Segment::Key(plain[..end].to_owned()), &plain[end..]))
}

/// Byte length of the JSON string literal at the start of `s` (which begins with `"`).
fn json_string_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

struct Checker<'e> {
    env: &'e dyn Fn(&str) -> Option<String>,
    problems: Vec<Problem>,
    /// Allowed, but probably not what the user meant (SPEC §19.9's literal key, say).
    warnings: Vec<Problem>,
    /// Set while reading a disabled server: a variable it references may legitimately be unset.
    keep_missing_vars: bool,
    /// `callToolTimeoutMs` at the top (Context Firewall's key): the default of every server's
    /// `callTimeoutMs`.
    default_call_timeout_ms: u64,
}

impl Checker<'_> {
    fn report(&mut self, path: &str, message: impl Into<String>) {
        self.problems.push(Problem::new(path, message));
    }

    fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(Problem::new(path, message));
    }

    fn type_error(&mut self, path: &str, expected: &str, found: &Json) {
        self.report(
            path,
            format!("expected {expected}, found {}", found.describe()),
        );
    }

    fn object<'a>(&mut self, value: &'a Json, path: &str) -> Option<&'a [(String, Json)]> {
        match value {
            Json::Object(entries) => Some(entries),
            other => {
                self.type_error(path, "an object", other);
                None
            }
        }
    }

    /// Checks an object's keys against `known`: unknown keys (unless ignored) and repeated keys
    /// are problems. Returns the first occurrence of each known key.
    fn fields<'a>(
        &mut self,
        entries: &'a [(String, Json)],
        path: &str,
        known: &[&str],
        unknown: Unknown,
    ) -> Fields<'a> {
        let mut fields = Fields {
            entries: Vec::new(),
        };
        for (key, value) in entries {
            let key_path = child(path, key);
            if !known.contains(&key.as_str()) {
                if unknown == Unknown::Reject {
                    let message = match did_you_mean(key, known) {
                        Some(guess) => format!("unknown key `{key}`; did you mean `{guess}`?"),
                        None => {
                            format!("unknown key `{key}`; allowed keys are {}", key_list(known))
                        }
                    };
                    self.report(&key_path, message);
                }
                continue;
            }
            if fields.get(key).is_some() {
                self.report(
                    &key_path,
                    format!("key `{key}` appears more than once; keep only one"),
                );
                continue;
            }
            fields.entries.push((key, value));
        }
        fields
    }

    fn root(&mut self, root: &Json) -> Option<Config> {
        let entries = self.object(root, "")?;
        let has = |key: &str| entries.iter().any(|(k, _)| k == key);
        let format = if has(MCP_SERVERS) {
            ConfigFormat::McpServers
        } else if has(DOWNSTREAMS) {
            ConfigFormat::ContextFirewall
        } else {
            ConfigFormat::Loom
        };
        let unknown = match format {
            ConfigFormat::Loom | ConfigFormat::ContextFirewall => Unknown::Reject,
            ConfigFormat::McpServers => Unknown::Ignore,
        };
        let fields = self.fields(entries, "", ROOT_KEYS, unknown);
        let mut config = Config::with_defaults(format);
        if let Some(v) = fields.get("callToolTimeoutMs")
            && let Some(n) = self.whole(v, "callToolTimeoutMs", 1, u64::MAX, false)
        {
            self.default_call_timeout_ms = n;
        }

        let given: Vec<&str> = [SERVERS, MCP_SERVERS, DOWNSTREAMS]
            .into_iter()
            .filter(|k| fields.get(k).is_some())
            .collect();
        if given.len() > 1 {
            self.report(
                "",
                format!(
                    "{} present; keep one (`servers` is loom's own array format, \
                     `mcpServers` the Claude Desktop / Cursor object format, `downstreams` \
                     Context Firewall's)",
                    match given.as_slice() {
                        [a, b] => format!("both `{a}` and `{b}` are"),
                        _ => "`servers`, `mcpServers` and `downstreams` are all".to_string(),
                    }
                ),
            );
        }
        match (
            fields.get(SERVERS),
            fields.get(MCP_SERVERS),
            fields.get(DOWNSTREAMS),
        ) {
            (_, Some(mcp), _) => config.servers = self.mcp_servers(mcp, MCP_SERVERS),
            (_, None, Some(downstreams)) => {
                config.servers = self.mcp_servers(downstreams, DOWNSTREAMS)
            }
            (Some(servers), None, None) => config.servers = self.loom_servers(servers),
            (None, None, None) => self.report(
                "",
                "no servers: expected `servers` (array), `mcpServers` (object) or `downstreams` \
                 (object)",
            ),
        }
        if let Some(v) = fields.get(COMPRESSION) {
            config.compression = self.compression(v, &config.servers);
        }
        if let Some(v) = fields.get(LLM) {
            config.llm = self.llm_block(v);
        }
        self.llm_wanted(fields.get(LLM), fields.get(COMPRESSION), &config);

        if let Some(v) = fields.get("tokenThreshold") {
            let max = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
            if let Some(n) = self.whole(v, "tokenThreshold", MIN_TOKEN_THRESHOLD as u64, max, false)
            {
                config.token_threshold = usize::try_from(n).unwrap_or(usize::MAX);
            }
        }
        if let Some(v) = fields.get("memoryBudgetBytes")
            && let Some(n) = self.size(v, "memoryBudgetBytes")
        {
            config.memory_budget_bytes = n;
        }
        let engine = fields.get(ENGINE_MEMORY_LIMIT);
        let duckdb = fields.get(DUCKDB_MEMORY_LIMIT);
        if engine.is_some() && duckdb.is_some() {
            self.report(
                DUCKDB_MEMORY_LIMIT,
                "`duckdbMemoryLimit` is the old name of `engineMemoryLimit` and both are set; \
                 keep only `engineMemoryLimit`",
            );
        }
        if let Some((v, key)) = engine
            .map(|v| (v, ENGINE_MEMORY_LIMIT))
            .or(duckdb.map(|v| (v, DUCKDB_MEMORY_LIMIT)))
        {
            config.engine_memory_limit_bytes = self.size(v, key);
        }
        if let Some(v) = fields.get("exportDir")
            && let Some(dir) = self.non_empty_string(v, "exportDir")
        {
            config.export_dir = PathBuf::from(dir);
        }
        if let Some(v) = fields.get("exportMaxBytes")
            && let Some(n) = self.size(v, "exportMaxBytes")
        {
            config.export_max_bytes = n;
        }
        if let Some(v) = fields.get("neutralizeCsvFormulas")
            && let Some(b) = self.boolean(v, "neutralizeCsvFormulas")
        {
            config.neutralize_csv_formulas = b;
        }
        if let Some(v) = fields.get("queryTimeoutMs")
            && let Some(n) = self.whole(v, "queryTimeoutMs", 1, u64::MAX, false)
        {
            config.query_timeout_ms = n;
        }
        if let Some(v) = fields.get("restart") {
            config.restart = self.restart(v);
        }
        if let Some(v) = fields.get("snapshot") {
            config.snapshot = self.snapshot(v);
        }
        if let Some(v) = fields.get("tools") {
            config.tools = self.tools(v);
        }
        if let Some(v) = fields.get("report") {
            config.report = self.report_block(v);
        }
        if let Some(v) = fields.get("http") {
            config.http = self.http_block(v);
        }
        if let Some(v) = fields.get("telemetry") {
            config.telemetry = self.telemetry_block(v);
        }
        if let Some(v) = fields.get("cluster") {
            config.cluster = self.cluster_block(v);
        }
        if let Some(v) = fields.get("audit") {
            config.audit = self.audit_block(v);
        }
        if let Some(v) = fields.get("maxToolNameLength") {
            let (min, max) = (
                MIN_MAX_TOOL_NAME_LENGTH as u64,
                MAX_MAX_TOOL_NAME_LENGTH as u64,
            );
            if let Some(n) = self.whole(v, "maxToolNameLength", min, max, false) {
                config.max_tool_name_length = usize::try_from(n).unwrap_or(usize::MAX);
            }
        }
        Some(config)
    }

    /// The `compression` block (SPEC §19.6): every entry's keys checked, server names in
    /// `perServer` and `perTool` checked against the servers.
    fn compression(&mut self, value: &Json, servers: &[ServerConfig]) -> Compression {
        let mut compression = Compression::default();
        let Some(entries) = self.object(value, COMPRESSION) else {
            return compression;
        };
        let fields = self.fields(entries, COMPRESSION, COMPRESSION_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("default") {
            compression.default = self.policy(v, "compression.default");
        }
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        let unknown_server = |name: &str| {
            let guess = did_you_mean(name, &names)
                .map(|g| format!("; did you mean `{g}`?"))
                .unwrap_or_else(|| format!("; servers are {}", key_list(&names)));
            format!("no server is named `{name}`{guess}")
        };
        if let Some(v) = fields.get("perServer")
            && let Some(entries) = self.object(v, "compression.perServer")
        {
            for (name, entry) in entries {
                let path = child("compression.perServer", name);
                if !names.contains(&name.as_str()) {
                    let message = unknown_server(name);
                    self.report(&path, message);
                    continue;
                }
                let patch = self.policy(entry, &path);
                compression.per_server.push((name.clone(), patch));
            }
        }
        if let Some(v) = fields.get("perTool")
            && let Some(entries) = self.object(v, "compression.perTool")
        {
            for (name, entry) in entries {
                let path = child("compression.perTool", name);
                // `server/tool`, or the exposed name `server_tool` (the longest server name
                // that prefixes it: server names may contain `_`).
                let split = match name.split_once('/') {
                    Some((server, tool)) => Some((server.to_string(), tool.to_string())),
                    None => names
                        .iter()
                        .filter(|s| {
                            name.len() > s.len() + 1
                                && name.starts_with(*s)
                                && name.as_bytes().get(s.len()) == Some(&b'_')
                        })
                        .max_by_key(|s| s.len())
                        .map(|s| (s.to_string(), name[s.len() + 1..].to_string())),
                };
                let Some((server, tool)) = split else {
                    self.report(
                        &path,
                        format!(
                            "expected `server/tool` or an exposed name `server_tool` of a \
                             configured server ({}), found `{name}`",
                            key_list(&names)
                        ),
                    );
                    continue;
                };
                if !names.contains(&server.as_str()) {
                    let message = unknown_server(&server);
                    self.report(&path, message);
                    continue;
                }
                if tool.is_empty() {
                    self.report(&path, format!("`{name}` names no tool after `{server}/`"));
                    continue;
                }
                let patch = self.policy(entry, &path);
                compression.per_tool.push((server, tool, patch));
            }
        }
        compression
    }

    fn policy(&mut self, value: &Json, path: &str) -> PolicyPatch {
        let mut patch = PolicyPatch::default();
        let Some(entries) = self.object(value, path) else {
            return patch;
        };
        let fields = self.fields(entries, path, POLICY_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("maxOutputTokens") {
            let max = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
            patch.max_output_tokens = self
                .whole(
                    v,
                    &child(path, "maxOutputTokens"),
                    MIN_OUTPUT_TOKENS,
                    max,
                    false,
                )
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        }
        for (key, slot) in [
            ("bypass", &mut patch.bypass),
            ("stripBase64", &mut patch.strip_base64),
            ("htmlToMarkdown", &mut patch.html_to_markdown),
            ("jsonSummary", &mut patch.json_summary),
            ("truncate", &mut patch.truncate),
            ("keepSmallTables", &mut patch.keep_small_tables),
            ("llmSummary", &mut patch.llm_summary),
        ] {
            if let Some(v) = fields.get(key) {
                *slot = self.boolean(v, &child(path, key));
            }
        }
        patch
    }

    /// The `llm` block (SPEC §19.9): where the model summary stage sends text, with which key.
    fn llm_block(&mut self, value: &Json) -> Option<LlmConfig> {
        let entries = self.object(value, LLM)?;
        let fields = self.fields(entries, LLM, LLM_KEYS, Unknown::Reject);
        let presets: Vec<&str> = LLM_PROVIDERS.iter().map(|p| p.name).collect();
        // Each part is checked even when another is wrong, so one run names every mistake;
        // `Err(())` marks a part already reported.
        let provider: Result<Option<&LlmProvider>, ()> = match fields.get("provider") {
            None => Ok(None),
            Some(v) => match self.non_empty_string(v, "llm.provider") {
                None => Err(()),
                Some(name) => match LLM_PROVIDERS.iter().find(|p| p.name == name) {
                    Some(preset) => Ok(Some(preset)),
                    None => {
                        let guess = did_you_mean(&name, &presets)
                            .map(|g| format!("did you mean `{g}`? "))
                            .unwrap_or_default();
                        self.report(
                            "llm.provider",
                            format!(
                                "unknown provider `{name}`; {guess}presets are {} — for any other \
                                 OpenAI-compatible endpoint give `baseUrl` and `apiKey` instead",
                                key_list(&presets)
                            ),
                        );
                        Err(())
                    }
                },
            },
        };
        let base_url = match (fields.get("baseUrl"), provider) {
            (Some(v), _) => {
                let url = self.llm_base_url(v);
                if let (Some(url), Ok(Some(preset))) = (&url, provider) {
                    self.warn(
                        "llm.baseUrl",
                        format!(
                            "both `provider` ({}) and `baseUrl` are set; the explicit `baseUrl` \
                             wins ({}){}",
                            preset.name,
                            super::mask_url(url),
                            if fields.get("apiKey").is_some() {
                                String::from(" and `provider` is not used")
                            } else {
                                format!("; the key still comes from {}", preset.key_var)
                            }
                        ),
                    );
                }
                url
            }
            (None, Ok(Some(preset))) => Some(preset.base_url.to_string()),
            (None, Err(())) => None,
            (None, Ok(None)) => {
                self.report(
                    LLM,
                    format!(
                        "missing `provider` or `baseUrl`: name a preset ({}) or give the base \
                         URL of an OpenAI-compatible API (loom posts to <baseUrl>/chat/completions)",
                        key_list(&presets)
                    ),
                );
                None
            }
        };
        let key = match (fields.get("apiKey"), provider) {
            (Some(v), _) => self.non_empty_string(v, "llm.apiKey").map(|key| {
                let written = matches!(v, Json::String(raw) if !raw.contains("${"));
                if written {
                    self.warn(
                        "llm.apiKey",
                        "the key is written into the file; put it in an environment variable and \
                         write \"${NAME}\" here, so the file can be shared without it",
                    );
                }
                let source = if written {
                    KeySource::Literal
                } else {
                    KeySource::Variables(referenced_variables(v))
                };
                (key, source)
            }),
            (None, Ok(Some(preset))) => {
                match (self.env)(preset.key_var).filter(|k| !k.is_empty()) {
                    Some(key) => Some((key, KeySource::PresetVariable(preset.key_var))),
                    None => {
                        self.report(
                        LLM,
                        format!(
                            "provider `{}` reads its key from the environment variable {}, which \
                             is not set; set it, or give `apiKey` (\"${{NAME}}\")",
                            preset.name, preset.key_var
                        ),
                    );
                        None
                    }
                }
            }
            (None, Err(())) => None,
            (None, Ok(None)) => {
                if fields.get("baseUrl").is_some() {
                    self.report(
                        LLM,
                        "missing `apiKey`: with `baseUrl` and no `provider` the key must be given, \
                         e.g. \"apiKey\": \"${LLM_API_KEY}\"",
                    );
                }
                None
            }
        };
        let key = key.filter(|(key, _)| {
            let bad = key.chars().any(|c| c.is_control() || c == ' ');
            if bad {
                self.report(
                    "llm.apiKey",
                    "the key contains a space or a control character (after `${VAR}` \
                     expansion); an HTTP header cannot carry it",
                );
            }
            !bad
        });
        let model = match fields.get("model") {
            Some(v) => self.non_empty_string(v, "llm.model"),
            None => {
                self.report(
                    LLM,
                    "missing required key `model`: the model name the endpoint knows, passed as \
                     written (e.g. \"gpt-4o-mini\")",
                );
                None
            }
        };
        let mut timeout_ms = DEFAULT_LLM_TIMEOUT_MS;
        if let Some(v) = fields.get("timeoutMs")
            && let Some(n) = self.whole(v, "llm.timeoutMs", 1, 600_000, false)
        {
            timeout_ms = n;
        }
        let mut max_input_chars = DEFAULT_LLM_MAX_INPUT_CHARS;
        if let Some(v) = fields.get("maxInputChars")
            && let Some(n) = self.whole(
                v,
                "llm.maxInputChars",
                MIN_LLM_MAX_INPUT_CHARS as u64,
                MAX_LLM_MAX_INPUT_CHARS as u64,
                false,
            )
        {
            max_input_chars = usize::try_from(n).unwrap_or(MAX_LLM_MAX_INPUT_CHARS);
        }
        let mut max_in_flight = DEFAULT_LLM_MAX_IN_FLIGHT;
        if let Some(v) = fields.get("maxInFlight")
            && let Some(n) =
                self.whole(v, "llm.maxInFlight", 1, MAX_LLM_MAX_IN_FLIGHT as u64, false)
        {
            max_in_flight = usize::try_from(n).unwrap_or(MAX_LLM_MAX_IN_FLIGHT);
        }
        let (base_url, (api_key, key_source), model) = (base_url?, key?, model?);
        Some(LlmConfig {
            provider: provider.ok().flatten().map(|p| p.name),
            base_url,
            api_key: Secret::new(api_key),
            key_source,
            model,
            timeout_ms,
            max_input_chars,
            max_in_flight,
        })
    }

    /// `llm.baseUrl`: an http(s) URL without query or fragment, kept without its trailing `/`.
    fn llm_base_url(&mut self, value: &Json) -> Option<String> {
        const PATH: &str = "llm.baseUrl";
        let text = self.non_empty_string(value, PATH)?;
        let trimmed = text.trim_end_matches('/');
        let url = match reqwest::Url::parse(trimmed) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => url,
            _ => {
                self.report(
                    PATH,
                    format!(
                        "expected an http:// or https:// URL such as \"https://api.example.com/v1\", \
                         found {}",
                        json_quote(&super::mask_url(&text))
                    ),
                );
                return None;
            }
        };
        if url.query().is_some() || url.fragment().is_some() {
            self.report(
                PATH,
                "must not have a query or fragment: give the API's base, loom adds /chat/completions",
            );
            return None;
        }
        if url.path().ends_with("/chat/completions") {
            self.report(
                PATH,
                format!(
                    "names the endpoint itself; give its base ({}), loom adds /chat/completions",
                    json_quote(trimmed.trim_end_matches("/chat/completions"))
                ),
            );
            return None;
        }
        if !url.username().is_empty() || url.password().is_some() {
            self.report(
                PATH,
                "must not carry a user or password; the key goes in `apiKey`",
            );
            return None;
        }
        let loopback = url.host_str().is_some_and(|host| {
            host == "localhost"
                || host
                    .trim_matches(['[', ']'])
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        });
        if url.scheme() == "http" && !loopback {
            self.warn(
                PATH,
                "plain http to another machine: the key and the text summarised travel unencrypted; \
                 use https",
            );
        }
        Some(trimmed.to_string())
    }

    /// `llmSummary: true` needs the `llm` block; an `llm` block nothing uses is worth a word.
    fn llm_wanted(&mut self, llm: Option<&Json>, compression: Option<&Json>, config: &Config) {
        let asks = config.compression.asks_for_llm();
        if asks && llm.is_none() {
            self.report(
                COMPRESSION,
                "`llmSummary` is on but there is no `llm` block: add one with `provider` (or \
                 `baseUrl` and `apiKey`) and `model`, or set `llmSummary` to false",
            );
        }
        if !asks && llm.is_some() && config.llm.is_some() {
            let hint = if compression.is_none() {
                "add \"compression\": {\"default\": {\"llmSummary\": true}}"
            } else {
                "set `llmSummary` to true in `compression.default`, a `perServer` or a `perTool` entry"
            };
            self.warn(
                LLM,
                format!(
                    "no compression policy turns `llmSummary` on, so nothing is summarised; {hint}"
                ),
            );
        }
    }

    fn snapshot(&mut self, value: &Json) -> Option<super::model::SnapshotConfig> {
        let entries = self.object(value, "snapshot")?;
        let fields = self.fields(entries, "snapshot", SNAPSHOT_KEYS, Unknown::Reject);
        let Some(v) = fields.get("url") else {
            self.report(
                "snapshot",
                "missing required key `url` (a directory, or a file://, memory:// or s3:// URL)",
            );
            return None;
        };
        let url = self.non_empty_string(v, "snapshot.url")?;
        match url.split_once("://") {
            None => Some(super::model::SnapshotConfig { url }),
            Some(("file" | "memory" | "s3", _)) => Some(super::model::SnapshotConfig { url }),
            Some((scheme, _)) => {
                self.report(
                    "snapshot.url",
                    format!("unsupported scheme `{scheme}://`; use a directory path, file://, memory:// or s3://"),
                );
                None
            }
        }
    }

    /// The `tools` block (SPEC §20).
    fn tools(&mut self, value: &Json) -> ToolsConfig {
        let mut tools = ToolsConfig::default();
        let Some(entries) = self.object(value, "tools") else {
            return tools;
        };
        let fields = self.fields(entries, "tools", TOOLS_KEYS, Unknown::Reject);
        let mut pinned_mode = false;
        if let Some(v) = fields.get("mode")
            && let Some(mode) = self.string(v, "tools.mode")
        {
            match mode.as_str() {
                "all" => tools.mode = ToolsMode::All,
                "search" => tools.mode = ToolsMode::Search,
                "pinned" => {
                    tools.mode = ToolsMode::Search;
                    pinned_mode = true;
                }
                other => self.report(
                    "tools.mode",
                    format!("unknown mode {other:?}; use {TOOLS_MODES}"),
                ),
            }
        }
        if let Some(v) = fields.get("pinned") {
            tools.pinned = self.string_list(v, "tools.pinned", |name| {
                name.is_empty()
                    .then(|| "must not be empty; write an exposed name such as \"github_search_code\", server/tool, or a glob".to_string())
            });
            if tools.mode == ToolsMode::All && fields.get("mode").is_some() {
                self.report(
                    "tools.pinned",
                    "has no effect with mode \"all\" (every tool is listed); set `tools.mode` to \"pinned\" or remove it",
                );
            } else if fields.get("mode").is_none() {
                // A pinned list alone says what the user wants.
                tools.mode = ToolsMode::Search;
            }
        }
        if pinned_mode && tools.pinned.is_empty() && fields.get("pinned").is_none() {
            self.report(
                "tools.mode",
                "mode \"pinned\" needs `tools.pinned`: the exposed names (or globs) to keep listed",
            );
        }
        if let Some(v) = fields.get("maxJoined")
            && let Some(n) = self.whole(v, "tools.maxJoined", 0, MAX_MAX_JOINED_TOOLS as u64, false)
        {
            tools.max_joined = usize::try_from(n).unwrap_or(MAX_MAX_JOINED_TOOLS);
        }
        if let Some(v) = fields.get("maxDescriptionChars") {
            let max = u64::try_from(usize::MAX).unwrap_or(u64::MAX);
            tools.max_description_chars = self
                .whole(
                    v,
                    "tools.maxDescriptionChars",
                    MIN_MAX_DESCRIPTION_CHARS as u64,
                    max,
                    false,
                )
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX));
        }
        if let Some(v) = fields.get("searchModel")
            && let Some(dir) = self.non_empty_string(v, "tools.searchModel")
        {
            let dir = PathBuf::from(dir);
            let missing: Vec<&str> = crate::common::tools::SEARCH_MODEL_FILES
                .iter()
                .copied()
                .filter(|name| !dir.join(name).is_file())
                .collect();
            if missing.is_empty() {
                tools.search_model = Some(dir);
            } else {
                self.report(
                    "tools.searchModel",
                    format!(
                        "{} has no {}; name a sentence-transformers model folder (config.json, tokenizer.json, model.safetensors), e.g. all-MiniLM-L6-v2's",
                        dir.display(),
                        missing.join(", ")
                    ),
                );
            }
        }
        tools
    }

    /// The `report` block (SPEC §21).
    fn report_block(&mut self, value: &Json) -> ReportConfig {
        let mut report = ReportConfig::default();
        let Some(entries) = self.object(value, "report") else {
            return report;
        };
        let fields = self.fields(entries, "report", REPORT_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("enabled")
            && let Some(b) = self.boolean(v, "report.enabled")
        {
            report.enabled = b;
        }
        match (fields.get("path"), fields.get("markdownPath")) {
            (Some(_), Some(_)) => self.report(
                "report.markdownPath",
                "`markdownPath` is Context Firewall's name for `path` and both are set; keep only `path`",
            ),
            (Some(v), None) => report.path = self.non_empty_string(v, "report.path").map(PathBuf::from),
            (None, Some(v)) => {
                report.path = self
                    .non_empty_string(v, "report.markdownPath")
                    .map(PathBuf::from)
            }
            (None, None) => {}
        }
        report
    }

    /// The `telemetry` block (SPEC §24.1).
    fn telemetry_block(&mut self, value: &Json) -> TelemetryConfig {
        const PATH: &str = "telemetry.otlpEndpoint";
        let mut telemetry = TelemetryConfig::default();
        let Some(entries) = self.object(value, "telemetry") else {
            return telemetry;
        };
        let fields = self.fields(entries, "telemetry", TELEMETRY_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("otlpEndpoint")
            && let Some(text) = self.non_empty_string(v, PATH)
        {
            match reqwest::Url::parse(&text) {
                Ok(url)
                    if matches!(url.scheme(), "http" | "https")
                        && url.has_host()
                        && url.query().is_none()
                        && url.fragment().is_none() =>
                {
                    telemetry.otlp_endpoint = Some(text)
                }
                _ => self.report(
                    PATH,
                    format!(
                        "expected the collector's http:// or https:// URL without query or \
                         fragment, such as \"http://127.0.0.1:4318\" (http/protobuf) or \
                         \"http://127.0.0.1:4317\" (grpc), found {}",
                        json_quote(&super::mask_url(&text))
                    ),
                ),
            }
        }
        telemetry
    }

    /// The `cluster` block (SPEC §25): a store every instance can write, and a shared secret of
    /// at least 32 bytes given through the environment.
    fn cluster_block(&mut self, value: &Json) -> Option<super::model::ClusterConfig> {
        let entries = self.object(value, "cluster")?;
        let fields = self.fields(entries, "cluster", CLUSTER_KEYS, Unknown::Reject);
        let store = match fields.get("store") {
            Some(v) => self.non_empty_string(v, "cluster.store").and_then(|url| {
                match url.split_once("://") {
                    None | Some(("file" | "memory" | "s3", _)) => Some(url),
                    Some((scheme, _)) => {
                        self.report(
                            "cluster.store",
                            format!(
                                "unsupported scheme `{scheme}://`; use a directory path, file:// \
                                 or s3://bucket/prefix"
                            ),
                        );
                        None
                    }
                }
            }),
            None => {
                self.report(
                    "cluster.store",
                    "is required: where the instances keep what they share (a directory every \
                     instance can write, or s3://bucket/prefix)",
                );
                None
            }
        };
        let secret = match fields.get("secret") {
            Some(v) => {
                let written = matches!(v, Json::String(raw) if !raw.contains("${"));
                self.non_empty_string(v, "cluster.secret")
                    .and_then(|secret| {
                        if secret.len() < MIN_CLUSTER_SECRET_BYTES {
                            self.report(
                            "cluster.secret",
                            format!(
                                "is {} bytes; at least {MIN_CLUSTER_SECRET_BYTES} are needed (e.g. \
                                 the output of `openssl rand -hex 32`, the same on every instance)",
                                secret.len()
                            ),
                        );
                            return None;
                        }
                        if written {
                            self.warn(
                                "cluster.secret",
                                "the secret is written into the file; put it in an environment \
                             variable and write \"${NAME}\" here, so the file can be shared \
                             without it",
                            );
                        }
                        Some(secret)
                    })
            }
            None => {
                self.report(
                    "cluster.secret",
                    "is required: at least 32 bytes shared by every instance (\"${LOOM_CLUSTER_SECRET}\")",
                );
                None
            }
        };
        let advertise = fields.get("advertise").and_then(|v| {
            self.non_empty_string(v, "cluster.advertise")
                .and_then(|url| match reqwest::Url::parse(&url) {
                    Ok(parsed)
                        if matches!(parsed.scheme(), "http" | "https")
                            && parsed.host_str().is_some() =>
                    {
                        Some(url)
                    }
                    _ => {
                        self.report(
                            "cluster.advertise",
                            format!(
                                "`{url}` is not an http:// or https:// URL; give the URL the other \
                                 instances reach this one's MCP endpoint at (e.g. \
                                 \"http://10.0.0.5:8080/mcp\", or \"${{LOOM_ADVERTISE}}\")"
                            ),
                        );
                        None
                    }
                })
        });
        Some(super::model::ClusterConfig {
            store: store?,
            secret: secret?,
            advertise,
        })
    }

    /// The `audit` block (SPEC §24.3): a file (required) and its size before rotation.
    fn audit_block(&mut self, value: &Json) -> Option<AuditConfig> {
        let entries = self.object(value, "audit")?;
        let fields = self.fields(entries, "audit", AUDIT_KEYS, Unknown::Reject);
        let max_bytes = match fields.get("maxBytes") {
            Some(v) => self.whole(v, "audit.maxBytes", MIN_AUDIT_MAX_BYTES, u64::MAX, true)?,
            None => DEFAULT_AUDIT_MAX_BYTES,
        };
        let Some(v) = fields.get("path") else {
            self.report(
                "audit.path",
                "is required: the file the audit lines are appended to, such as \
                 \"/var/log/loom/audit.jsonl\"",
            );
            return None;
        };
        let path = self.non_empty_string(v, "audit.path")?;
        Some(AuditConfig {
            path: PathBuf::from(path),
            max_bytes,
        })
    }

    /// `http.auth`: the issuer (required) and what its tokens must say.
    fn http_auth(&mut self, value: &Json) -> Option<HttpAuth> {
        const PATH: &str = "http.auth";
        let entries = self.object(value, PATH)?;
        let fields = self.fields(entries, PATH, HTTP_AUTH_KEYS, Unknown::Reject);
        // Where the keys that sign tokens come from: over TLS, but on this machine.
        let url = |this: &mut Self, key: &str| -> Option<String> {
            let path = child(PATH, key);
            let v = fields.get(key)?;
            this.non_empty_string(v, &path)
                .filter(|url| this.check_url(url, &path))
                .filter(|url| {
                    let plain = reqwest::Url::parse(url).is_ok_and(|parsed| {
                        parsed.scheme() == "http"
                            && !matches!(
                                parsed.host_str(),
                                Some("localhost" | "127.0.0.1" | "[::1]")
                            )
                    });
                    if plain {
                        this.report(
                            &path,
                            format!(
                                "`{}` would be fetched without TLS, and it vouches for the keys \
                                 that sign access tokens: use https:// (http:// only for \
                                 localhost, 127.0.0.1 or [::1])",
                                super::mask::mask_url(url)
                            ),
                        );
                    }
                    !plain
                })
        };
        let issuer = url(self, "issuer");
        // The resource clients ask tokens for: loom's MCP URL as clients reach it (RFC 8707).
        let audience = match fields.get("audience") {
            Some(v) => {
                let path = child(PATH, "audience");
                self.non_empty_string(v, &path)
                    .filter(|url| self.check_url(url, &path))
            }
            None => None,
        };
        let jwks_url = url(self, "jwksUrl");
        let required_scopes = match fields.get("requiredScopes") {
            Some(v) => self.string_list(v, &child(PATH, "requiredScopes"), |scope| {
                (scope.is_empty()
                    || scope
                        .chars()
                        .any(|c| c.is_whitespace() || c == '"' || c == '\\'))
                .then(|| {
                    format!(
                        "`{scope}` is not a scope: one word without spaces, quotes or backslashes"
                    )
                })
            }),
            None => Vec::new(),
        };
        if fields.get("issuer").is_none() {
            self.report(
                PATH,
                "missing required key `issuer` (the authorization server whose tokens loom \
                 accepts, e.g. \"https://login.example.com\")",
            );
        }
        Some(HttpAuth {
            issuer: issuer?,
            audience,
            required_scopes,
            jwks_url,
        })
    }

    fn http_block(&mut self, value: &Json) -> HttpConfig {
        let mut http = HttpConfig::default();
        let Some(entries) = self.object(value, "http") else {
            return http;
        };
        let fields = self.fields(entries, "http", HTTP_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("token") {
            http.token = self.non_empty_string(v, "http.token");
        }
        if let Some(v) = fields.get("tokens") {
            let tokens = self.string_list(v, "http.tokens", |token| {
                token
                    .trim()
                    .is_empty()
                    .then(|| "expected a non-empty token (after `${VAR}` expansion)".to_string())
            });
            let mut seen: Vec<&String> = http.token.iter().collect();
            for (i, token) in tokens.iter().enumerate() {
                if seen.contains(&token) {
                    // Two equal tokens would be one credential: a mistake worth naming.
                    self.report(
                        &index("http.tokens", i),
                        "this token is accepted already (`http.token` or an earlier entry); each \
                         token is one credential"
                            .to_string(),
                    );
                }
                seen.push(token);
            }
            http.tokens = tokens;
        }
        if let Some(v) = fields.get("allowedOrigins") {
            http.allowed_origins = self.string_list(v, "http.allowedOrigins", |origin| {
                let is_origin = reqwest::Url::parse(origin).is_ok_and(|u| {
                    matches!(u.scheme(), "http" | "https")
                        && u.has_host()
                        && u.path() == "/"
                        && u.query().is_none()
                        && u.fragment().is_none()
                });
                (!is_origin).then(|| {
                    format!(
                        "expected an origin (scheme, host and optional port), e.g. \
                         \"https://app.example.com\", found {}",
                        json_quote(origin)
                    )
                })
            });
        }
        if let Some(v) = fields.get("auth") {
            http.auth = self.http_auth(v);
        }
        if let Some(v) = fields.get("sessionIdleSecs")
            && let Some(n) = self.whole(v, "http.sessionIdleSecs", 1, 7 * 24 * 3600, false)
        {
            http.session_idle_secs = n;
        }
        if let Some(v) = fields.get("maxSessions")
            && let Some(n) = self.whole(
                v,
                "http.maxSessions",
                1,
                MAX_HTTP_MAX_SESSIONS as u64,
                false,
            )
        {
            http.max_sessions = usize::try_from(n).unwrap_or(MAX_HTTP_MAX_SESSIONS);
        }
        if let Some(v) = fields.get("bodyTimeoutSecs")
            && let Some(n) = self.whole(v, "http.bodyTimeoutSecs", 1, 3600, false)
        {
            http.body_timeout_secs = n;
        }
        http
    }

    fn restart(&mut self, value: &Json) -> RestartPolicy {
        let mut policy = RestartPolicy::default();
        let Some(entries) = self.object(value, "restart") else {
            return policy;
        };
        let fields = self.fields(entries, "restart", RESTART_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("maxAttempts") {
            let max = u64::from(u32::MAX);
            if let Some(n) = self.whole(v, "restart.maxAttempts", 0, max, false) {
                policy.max_attempts = u32::try_from(n).unwrap_or(u32::MAX);
            }
        }
        if let Some(v) = fields.get("baseDelayMs")
            && let Some(n) = self.whole(v, "restart.baseDelayMs", 0, u64::MAX, false)
        {
            policy.base_delay_ms = n;
        }
        policy
    }

    fn loom_servers(&mut self, value: &Json) -> Vec<ServerConfig> {
        let items = match value {
            Json::Array(items) => items,
            Json::Object(_) => {
                self.report(
                    SERVERS,
                    "expected an array, found an object (a map of servers keyed by name is \
                     written `mcpServers`)",
                );
                return Vec::new();
            }
            other => {
                self.type_error(SERVERS, "an array", other);
                return Vec::new();
            }
        };
        let mut servers = Vec::new();
        let mut seen: Vec<(String, String)> = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let path = index(SERVERS, i);
            let Some(entries) = self.object(item, &path) else {
                continue;
            };
            let fields = self.fields(entries, &path, SERVER_KEYS, entry_unknown_keys(entries));
            let name_path = child(&path, "name");
            let name = match fields.get("name") {
                Some(v) => self.string(v, &name_path),
                None => {
                    self.report(&path, "missing required key `name`");
                    None
                }
            };
            let Some(mut server) = self.server(&fields, &path) else {
                continue;
            };
            if let Some(name) = name {
                if self.check_name(&name, &name_path) {
                    if let Some((_, first)) = seen.iter().find(|(n, _)| *n == name) {
                        let message =
                            format!("duplicate server name `{name}`; `{first}` already uses it");
                        self.report(&name_path, message);
                    } else {
                        seen.push((name.clone(), name_path));
                    }
                }
                server.name = name;
            }
            servers.push(server);
        }
        servers
    }

    fn mcp_servers(&mut self, value: &Json, key: &str) -> Vec<ServerConfig> {
        let Some(entries) = self.object(value, key) else {
            return Vec::new();
        };
        let mut servers = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (name, item) in entries {
            let path = child(key, name);
            if seen.contains(&name.as_str()) {
                self.report(
                    &path,
                    format!("server `{name}` is defined more than once; keep only one"),
                );
                continue;
            }
            seen.push(name);
            let Some(entries) = self.object(item, &path) else {
                continue;
            };
            let fields = self.fields(entries, &path, MCP_SERVER_KEYS, entry_unknown_keys(entries));
            let Some(mut server) = self.server(&fields, &path) else {
                continue;
            };
            self.check_name(name, &path);
            server.name.clone_from(name);
            servers.push(server);
        }
        servers
    }

    /// Reports a name that breaks the naming rule; true when the name is fine.
    fn check_name(&mut self, name: &str, path: &str) -> bool {
        if name == RESERVED_SERVER_NAME {
            self.report(
                path,
                "`loom` is reserved for loom's own tools; pick another name",
            );
            return false;
        }
        if is_valid_server_name(name) {
            return true;
        }
        let mut message = format!(
            "invalid server name {}: expected 1 to {MAX_SERVER_NAME_LENGTH} characters, a \
             lowercase letter first, then lowercase letters, digits, `_` or `-`",
            json_quote(name)
        );
        if let Some(better) = suggest_name(name) {
            message.push_str(&format!(" (for example `{better}`)"));
        }
        self.report(path, message);
        false
    }

    /// Reads everything of a server entry except its name. `None` means the entry is not a
    /// server loom starts: a disabled remote one, or one whose transport was just reported.
    fn server(&mut self, fields: &Fields<'_>, path: &str) -> Option<ServerConfig> {
        let disabled = fields
            .get("disabled")
            .and_then(|v| self.boolean(v, &child(path, "disabled")))
            .unwrap_or(false);

        self.keep_missing_vars = disabled;
        let server = match self.transport_kind(fields, path) {
            Some(Kind::Stdio) => Some(self.stdio_server(fields, path, disabled)),
            Some(Kind::Http) => Some(self.remote_server(fields, path, disabled)),
            None => None,
        };
        self.keep_missing_vars = false;
        server
    }

    /// Which transport an entry asks for: `type` or `transport` when given (they must agree),
    /// else `url` means remote and anything else stdio. `None` after reporting why neither.
    fn transport_kind(&mut self, fields: &Fields<'_>, path: &str) -> Option<Kind> {
        let mut named: Option<(Kind, String, String)> = None;
        let mut ok = true;
        for key in ["type", "transport"] {
            let Some(v) = fields.get(key) else { continue };
            let key_path = child(path, key);
            let kind = match v {
                Json::String(t) if t == STDIO => Kind::Stdio,
                Json::String(t) if HTTP_TRANSPORTS.contains(&t.as_str()) => Kind::Http,
                Json::String(t) if t == "sse" => {
                    self.report(
                        &key_path,
                        "the HTTP+SSE transport of protocol 2024-11-05 is not supported; loom \
                         speaks Streamable HTTP, which servers offer at an endpoint usually ending \
                         in `/mcp`: use \"type\": \"http\" with that `url`",
                    );
                    ok = false;
                    continue;
                }
                other => {
                    self.report(
                        &key_path,
                        format!(
                            "expected \"stdio\" or \"http\" (also written \"streamable-http\"), \
                             found {}",
                            other.describe()
                        ),
                    );
                    ok = false;
                    continue;
                }
            };
            match &named {
                Some((first, first_key, _)) if *first != kind => {
                    self.report(
                        &key_path,
                        format!(
                            "says {} but `{first_key}` says {}; keep one",
                            kind.label(),
                            first.label()
                        ),
                    );
                    ok = false;
                }
                Some(_) => {}
                None => named = Some((kind, key.to_owned(), key_path)),
            }
        }
        if !ok {
            return None;
        }
        let has_url = fields.get("url").is_some();
        let has_command = fields.get("command").is_some();
        match named {
            Some((Kind::Stdio, _, key_path)) if has_url => {
                self.report(
                    &key_path,
                    "says stdio, but the entry has a `url`: a remote server is \"type\": \"http\" \
                     with `url`, a stdio server has `command`",
                );
                None
            }
            Some((kind, _, _)) => Some(kind),
            None if has_url && has_command => {
                self.report(
                    path,
                    "an entry has either `command` (a server loom starts) or `url` (a remote \
                     Streamable HTTP server), not both",
                );
                None
            }
            None if has_url => Some(Kind::Http),
            None => Some(Kind::Stdio),
        }
    }

    /// A server's `protocol`: which era loom speaks to it in (SPEC §4.6).
    fn protocol(&mut self, fields: &Fields<'_>, path: &str, server: &mut ServerConfig) {
        if let Some(v) = fields.get("protocol") {
            let key = child(path, "protocol");
            server.protocol = match v {
                Json::String(text) => match text.as_str() {
                    "2025-11-25" => DownstreamProtocol::Handshake,
                    "2026-07-28" => DownstreamProtocol::Modern,
                    "auto" => DownstreamProtocol::Auto,
                    other => {
                        self.report(
                            &key,
                            format!(
                                "expected \"2025-11-25\" (the initialize handshake, the default), \
                                 \"2026-07-28\" (server/discover) or \"auto\" (discover, then the \
                                 handshake), found {}",
                                json_quote(other)
                            ),
                        );
                        DownstreamProtocol::Handshake
                    }
                },
                other => {
                    self.type_error(&key, "a string", other);
                    DownstreamProtocol::Handshake
                }
            };
        }
    }

    fn remote_server(&mut self, fields: &Fields<'_>, path: &str, disabled: bool) -> ServerConfig {
        let mut server = ServerConfig::new(String::new(), String::new());
        server.disabled = disabled;
        for key in STDIO_ONLY_KEYS {
            if fields.get(key).is_some() {
                self.report(
                    &child(path, key),
                    format!(
                        "`{key}` is for servers loom starts; a remote server has `url` and \
                         `headers`"
                    ),
                );
            }
        }
        let url = match fields.get("url") {
            Some(v) => {
                let url_path = child(path, "url");
                self.non_empty_string(v, &url_path)
                    .filter(|url| self.check_url(url, &url_path))
                    .unwrap_or_default()
            }
            None => {
                self.report(
                    path,
                    "missing required key `url` (the server's MCP endpoint)",
                );
                String::new()
            }
        };
        let headers = match fields.get("headers") {
            Some(v) => self.headers(v, &child(path, "headers")),
            None => Vec::new(),
        };
        let authorization_header = headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("authorization"));
        let oauth = match fields.get("oauth") {
            Some(Json::Bool(false)) => None,
            Some(_) if authorization_header => {
                self.report(
                    &child(path, "oauth"),
                    "the entry sends its own `Authorization` header, so loom does not log in; \
                     remove the header to log in with OAuth, or remove `oauth`",
                );
                None
            }
            Some(v) => Some(self.oauth(v, &child(path, "oauth"))),
            None if authorization_header => None,
            None => Some(OAuthSettings::default()),
        };
        self.protocol(fields, path, &mut server);
        self.common_server_keys(fields, path, &mut server);
        server.transport = Transport::Http(RemoteServer {
            url,
            headers,
            oauth,
        });
        server
    }

    /// A remote server's `oauth`: `false`, or an object of [`OAUTH_KEYS`].
    fn oauth(&mut self, value: &Json, path: &str) -> OAuthSettings {
        let mut settings = OAuthSettings::default();
        if let Json::Bool(true) = value {
            return settings;
        }
        let Json::Object(entries) = value else {
            self.type_error(path, "an object or false", value);
            return settings;
        };
        let fields = self.fields(entries, path, OAUTH_KEYS, Unknown::Reject);
        if let Some(v) = fields.get("clientId") {
            settings.client_id = self.non_empty_string(v, &child(path, "clientId"));
        }
        if let Some(v) = fields.get("clientSecret") {
            let key = child(path, "clientSecret");
            if fields.get("clientId").is_none() {
                self.report(
                    &key,
                    "a client secret belongs to a registered client: set `clientId` too",
                );
            }
            settings.client_secret = self.non_empty_string(v, &key).map(Secret::new);
        }
        if let Some(v) = fields.get("clientMetadataUrl") {
            let key = child(path, "clientMetadataUrl");
            settings.client_metadata_url = self
                .non_empty_string(v, &key)
                .filter(|url| self.check_metadata_url(url, &key));
        }
        if let Some(v) = fields.get("scopes") {
            let scopes = self.string_list(v, &child(path, "scopes"), |scope| {
                let bad = scope.is_empty()
                    || scope
                        .chars()
                        .any(|c| c.is_whitespace() || c == '"' || c == '\\');
                bad.then(|| {
                    format!(
                        "`{scope}` is not a scope: one word without spaces, quotes or \
                         backslashes (e.g. \"read\")"
                    )
                })
            });
            for scope in scopes {
                if !settings.scopes.contains(&scope) {
                    settings.scopes.push(scope);
                }
            }
        }
        if let Some(v) = fields.get("redirectPort")
            && let Some(port) = self.whole(
                v,
                &child(path, "redirectPort"),
                1,
                u64::from(u16::MAX),
                false,
            )
        {
            settings.redirect_port = u16::try_from(port).ok();
        }
        settings
    }

    /// A Client ID Metadata Document's URL: `https://` with a path (the authorization server
    /// fetches it; the URL is the client's id).
    fn check_metadata_url(&mut self, url: &str, path: &str) -> bool {
        match reqwest::Url::parse(url) {
            Ok(parsed) if parsed.scheme() == "https" && parsed.path() != "/" => true,
            _ => {
                self.report(
                    path,
                    format!(
                        "expected an https:// URL with a path (a Client ID Metadata Document, \
                         e.g. \"https://example.com/loom-client.json\"), found `{}`",
                        super::mask::mask_url(url)
                    ),
                );
                false
            }
        }
    }

    /// An absolute `http://` or `https://` URL.
    fn check_url(&mut self, url: &str, path: &str) -> bool {
        let shown = super::mask::mask_url(url);
        match reqwest::Url::parse(url) {
            Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.has_host() => true,
            Ok(parsed) => {
                self.report(
                    path,
                    format!(
                        "expected an http:// or https:// URL, found `{shown}` (scheme `{}`)",
                        parsed.scheme()
                    ),
                );
                false
            }
            Err(error) => {
                self.report(
                    path,
                    format!(
                        "`{shown}` is not a URL ({error}); expected e.g. \
                         \"https://mcp.example.com/mcp\""
                    ),
                );
                false
            }
        }
    }

    /// `headers`: names that HTTP allows and the transport does not set itself, values without
    /// line breaks, `${VAR}` expanded.
    fn headers(&mut self, value: &Json, path: &str) -> Vec<(String, String)> {
        let Some(entries) = self.object(value, path) else {
            return Vec::new();
        };
        let mut headers: Vec<(String, String)> = Vec::new();
        for (name, v) in entries {
            let key_path = child(path, name);
            if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
                self.report(
                    &key_path,
                    "not a valid HTTP header name (letters, digits and `-`, e.g. `Authorization` \
                     or `X-Api-Key`)",
                );
                continue;
            }
            if RESERVED_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
                self.report(
                    &key_path,
                    format!("`{name}` is set by the Streamable HTTP transport itself; remove it"),
                );
                continue;
            }
            if headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name)) {
                self.report(
                    &key_path,
                    format!(
                        "header `{name}` appears more than once (names ignore case); keep only one"
                    ),
                );
                continue;
            }
            let Some(text) = self.string(v, &key_path) else {
                continue;
            };
            if reqwest::header::HeaderValue::from_str(&text).is_err() {
                self.report(
                    &key_path,
                    "not a valid HTTP header value: it must not contain line breaks or other \
                     control characters",
                );
                continue;
            }
            headers.push((name.clone(), text));
        }
        headers
    }

    fn stdio_server(&mut self, fields: &Fields<'_>, path: &str, disabled: bool) -> ServerConfig {
        let mut server = ServerConfig::new(String::new(), String::new());
        server.disabled = disabled;
        match fields.get("command") {
            Some(v) => {
                if let Some(command) = self.non_empty_string(v, &child(path, "command")) {
                    server.command = command;
                }
            }
            None => self.report(path, "missing required key `command`"),
        }
        if let Some(v) = fields.get("args") {
            server.args = self.string_list(v, &child(path, "args"), |_| None);
        }
        if let Some(v) = fields.get("env") {
            server.env = self.env_map(v, &child(path, "env"));
        }
        if let Some(v) = fields.get("envPassthrough") {
            server.env_passthrough =
                self.string_list(v, &child(path, "envPassthrough"), env_name_problem);
        }
        self.protocol(fields, path, &mut server);
        self.common_server_keys(fields, path, &mut server);
        if fields.get("headers").is_some() {
            self.report(
                &child(path, "headers"),
                "`headers` is for remote servers (with `url`); a server loom starts gets `env`",
            );
        }
        if let Some(v) = fields.get("cwd") {
            server.cwd = self
                .non_empty_string(v, &child(path, "cwd"))
                .map(PathBuf::from);
        }
        server
    }

    /// Keys every server entry has, whatever its transport.
    fn common_server_keys(&mut self, fields: &Fields<'_>, path: &str, server: &mut ServerConfig) {
        for (key, slot) in [
            ("provenanceDenylist", &mut server.provenance_denylist),
            ("allowTools", &mut server.allow_tools),
            ("denyTools", &mut server.deny_tools),
        ] {
            if let Some(v) = fields.get(key) {
                *slot = self.string_list(v, &child(path, key), |s| {
                    s.is_empty().then(|| "must not be empty".to_owned())
                });
            }
        }
        server.call_timeout_ms = fields
            .get("callTimeoutMs")
            .and_then(|v| self.whole(v, &child(path, "callTimeoutMs"), 1, u64::MAX, false))
            .unwrap_or(self.default_call_timeout_ms);
    }

    fn env_map(&mut self, value: &Json, path: &str) -> Vec<(String, String)> {
        let Some(entries) = self.object(value, path) else {
            return Vec::new();
        };
        let mut env: Vec<(String, String)> = Vec::new();
        for (key, v) in entries {
            let key_path = child(path, key);
            if let Some(problem) = env_name_problem(key) {
                self.report(&key_path, problem);
                continue;
            }
            if env.iter().any(|(k, _)| k == key) {
                self.report(
                    &key_path,
                    format!("key `{key}` appears more than once; keep only one"),
                );
                continue;
            }
            let text = match v {
                Json::String(_) => self.string(v, &key_path),
                Json::Number(_) | Json::Bool(_) => {
                    let found = v.describe();
                    let literal = match v {
                        Json::Number(n) => n.to_string(),
                        Json::Bool(b) => b.to_string(),
                        _ => String::new(),
                    };
                    self.report(
                        &key_path,
                        format!(
                            "expected a string, found {found}; environment values are strings, \
                             so quote it: \"{literal}\""
                        ),
                    );
                    None
                }
                other => {
                    self.type_error(&key_path, "a string", other);
                    None
                }
            };
            if let Some(text) = text
                && self.no_nul(&text, &key_path)
            {
                env.push((key.clone(), text));
            }
        }
        env
    }

    /// An array of strings, each expanded and then checked by `item_problem`.
    fn string_list(
        &mut self,
        value: &Json,
        path: &str,
        item_problem: impl Fn(&str) -> Option<String>,
    ) -> Vec<String> {
        let items = match value {
            Json::Array(items) => items,
            other => {
                self.type_error(path, "an array of strings", other);
                return Vec::new();
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = index(path, i);
            let Some(text) = self.string(item, &item_path) else {
                continue;
            };
            if let Some(problem) = item_problem(&text) {
                self.report(&item_path, problem);
            } else if self.no_nul(&text, &item_path) {
                out.push(text);
            }
        }
        out
    }

    /// A string value with `${VAR}` references expanded.
    fn string(&mut self, value: &Json, path: &str) -> Option<String> {
        let Json::String(raw) = value else {
            let hint = match value {
                Json::Number(_) | Json::Bool(_) => " (quote it if it is meant as text)",
                _ => "",
            };
            self.report(
                path,
                format!("expected a string, found {}{hint}", value.describe()),
            );
            return None;
        };
        match expand(raw, self.env, self.keep_missing_vars) {
            Ok(text) => Some(text),
            Err(errors) => {
                for e in errors {
                    self.report(path, e.to_string());
                }
                None
            }
        }
    }

    fn non_empty_string(&mut self, value: &Json, path: &str) -> Option<String> {
        let text = self.string(value, path)?;
        if text.is_empty() {
            let message = match value {
                Json::String(raw) if !raw.is_empty() => "must not be empty (it expanded to \"\")",
                _ => "must not be empty",
            };
            self.report(path, message);
            return None;
        }
        self.no_nul(&text, path).then_some(text)
    }

    /// A process argument, variable or path cannot contain NUL; catch it here rather than as an
    /// obscure spawn failure later.
    fn no_nul(&mut self, text: &str, path: &str) -> bool {
        if text.contains('\0') {
            self.report(path, "must not contain a NUL character");
            return false;
        }
        true
    }

    fn boolean(&mut self, value: &Json, path: &str) -> Option<bool> {
        match value {
            Json::Bool(b) => Some(*b),
            Json::String(s) if s == "true" || s == "false" => {
                self.report(
                    path,
                    format!("expected true or false, found string \"{s}\" (remove the quotes)"),
                );
                None
            }
            other => {
                self.type_error(path, "true or false", other);
                None
            }
        }
    }

    /// A whole number within `min..=max`. `bytes` adds a human-readable size to the bounds.
    fn whole(&mut self, value: &Json, path: &str, min: u64, max: u64, bytes: bool) -> Option<u64> {
        let bound = |n: u64| {
            if bytes {
                format!("{n} ({})", human_bytes(n))
            } else {
                n.to_string()
            }
        };
        let at_least = |found: &dyn std::fmt::Display| {
            format!("must be at least {}, found {found}", bound(min))
        };
        let at_most = |found: &dyn std::fmt::Display| {
            format!("must be at most {}, found {found}", bound(max))
        };
        let message = match value {
            Json::Number(Num::PosInt(n)) if *n < min => at_least(n),
            Json::Number(Num::PosInt(n)) if *n > max => at_most(n),
            Json::Number(Num::PosInt(n)) => return Some(*n),
            Json::Number(Num::NegInt(n)) => at_least(n),
            Json::Number(num @ Num::Float(x)) if x.fract() != 0.0 || !x.is_finite() => {
                format!("expected a whole number, found number {num}")
            }
            Json::Number(num @ Num::Float(x)) if *x < 0.0 => at_least(num),
            // Integers past u64::MAX reach us as floats.
            Json::Number(num @ Num::Float(x)) if *x >= 18_446_744_073_709_551_616.0 => at_most(num),
            Json::Number(num @ Num::Float(_)) => format!(
                "expected a whole number written without a decimal point or exponent, found {num}"
            ),
            Json::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                format!("expected a whole number, found string \"{s}\" (remove the quotes)")
            }
            other => format!("expected a whole number, found {}", other.describe()),
        };
        self.report(path, message);
        None
    }

    /// A byte count: a whole number of bytes, or a size string such as `"512MB"`.
    fn size(&mut self, value: &Json, path: &str) -> Option<u64> {
        let bytes = match value {
            Json::Number(_) => return self.whole(value, path, MIN_MEMORY_BYTES, u64::MAX, true),
            Json::String(_) => {
                let text = self.string(value, path)?;
                match parse_size(&text) {
                    Ok(bytes) => bytes,
                    Err(message) => {
                        self.report(path, message);
                        return None;
                    }
                }
            }
            other => {
                let expected = format!(
                    "a number of bytes or a size string such as \"512MB\" (units: {UNIT_LIST})"
                );
                self.type_error(path, &expected, other);
                return None;
            }
        };
        if bytes < MIN_MEMORY_BYTES {
            self.report(
                path,
                format!(
                    "must be at least {MIN_MEMORY_BYTES} ({}), found {bytes}",
                    human_bytes(MIN_MEMORY_BYTES)
                ),
            );
            return None;
        }
        Some(bytes)
    }
}

/// Unknown keys of a remote (`url` or non-stdio `type`) entry are that transport's own, like
/// `headers`; complaining about them would bury the one problem that matters.
fn entry_unknown_keys(entries: &[(String, Json)]) -> Unknown {
    let remote = entries.iter().any(|(k, v)| match (k.as_str(), v) {
        ("url", _) => true,
        ("type", Json::String(t)) => t != STDIO,
        _ => false,
    });
    if remote {
        Unknown::Ignore
    } else {
        Unknown::Reject
    }
}

fn env_name_problem(name: &str) -> Option<String> {
    if is_valid_env_name(name) {
        None
    } else if name.is_empty() {
        Some("environment variable names must not be empty".to_owned())
    } else {
        Some(format!(
            "invalid environment variable name {}: names must not contain `=` or a NUL character",
            json_quote(name)
        ))
    }
}

/// A valid name close to an invalid one, e.g. `brave-search` for `Brave Search`.
fn suggest_name(name: &str) -> Option<String> {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        if out.is_empty() && !c.is_ascii_lowercase() {
            continue;
        }
        out.push(c);
    }
    let mut out: String = out.chars().take(MAX_SERVER_NAME_LENGTH).collect();
    while out.ends_with('-') {
        out.pop();
    }
    (is_valid_server_name(&out) && out != RESERVED_SERVER_NAME).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_keys_that_are_not_plain() {
        assert_eq!(child("", "servers"), "servers");
        assert_eq!(child("mcpServers", "github"), "mcpServers.github");
        assert_eq!(
            child("mcpServers", "Brave Search"),
            "mcpServers[\"Brave Search\"]"
        );
        assert_eq!(child("env", "A=B"), "env[\"A=B\"]");
        assert_eq!(child("env", ""), "env[\"\"]");
        assert_eq!(child("", "$schema"), "$schema");
        assert_eq!(index("servers", 3), "servers[3]");
    }

    #[test]
    fn positions_follow_the_document() {
        let root = super::super::json::parse(
            r#"{"b": 1, "servers": [{"x": 1, "odd key": {"k": 2}}], "a": 2}"#,
            "t",
        )
        .unwrap();
        assert_eq!(position(&root, "(root)"), Vec::<usize>::new());
        assert_eq!(position(&root, "a"), [2]);
        assert_eq!(position(&root, "servers[0]"), [1, 0]);
        assert_eq!(position(&root, "servers[0][\"odd key\"].k"), [1, 0, 1, 0]);
        assert_eq!(position(&root, "servers[0].missing"), [1, 0, usize::MAX]);
        assert_eq!(position(&root, "t:1:2"), [usize::MAX]);
        assert_eq!(position(&root, "servers[\"unterminated"), [1, usize::MAX]);
    }

    #[test]
    fn suggested_names_follow_the_rule() {
        assert_eq!(
            suggest_name("Brave Search").as_deref(),
            Some("brave-search")
        );
        assert_eq!(suggest_name("GitHub").as_deref(), Some("github"));
        assert_eq!(suggest_name("1password").as_deref(), Some("password"));
        assert_eq!(suggest_name("my.server!").as_deref(), Some("my-server"));
        assert_eq!(suggest_name("LOOM"), None);
        assert_eq!(suggest_name("123"), None);
        assert_eq!(suggest_name(&"X".repeat(40)).map(|s| s.len()), Some(32));
    }
}
