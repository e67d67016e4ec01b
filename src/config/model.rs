//! The validated configuration, as the rest of loom sees it.

use std::path::PathBuf;
use std::time::Duration;

use super::size::MIB;

pub const DEFAULT_TOKEN_THRESHOLD: usize = 2000;
pub const MIN_TOKEN_THRESHOLD: usize = 100;
pub const DEFAULT_MEMORY_BUDGET_BYTES: u64 = 256 * MIB;
/// Floor for both memory settings; anything smaller cannot hold a single large tool result.
pub const MIN_MEMORY_BYTES: u64 = MIB;
/// Where `loom_export` writes when `exportDir` is not set: a per-user data directory, because a
/// client such as Claude Desktop starts its servers in `/`, where `./exports` cannot be made.
/// `$XDG_DATA_HOME/loom/exports`, else `$HOME/.local/share/loom/exports`, else the temporary
/// directory's `loom-exports`.
pub fn default_export_dir() -> PathBuf {
    let set = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(data) = set("XDG_DATA_HOME").filter(|p| p.is_absolute()) {
        return data.join("loom").join("exports");
    }
    if let Some(home) = set("HOME").filter(|p| p.is_absolute()) {
        return home
            .join(".local")
            .join("share")
            .join("loom")
            .join("exports");
    }
    std::env::temp_dir().join("loom-exports")
}
pub const DEFAULT_QUERY_TIMEOUT_MS: u64 = 30_000;
pub const DEFAULT_CALL_TIMEOUT_MS: u64 = 60_000;
pub const DEFAULT_RESTART_MAX_ATTEMPTS: u32 = 5;
pub const DEFAULT_RESTART_BASE_DELAY_MS: u64 = 1000;
/// Backoff never waits longer than this between restarts.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(30);
pub const DEFAULT_MAX_TOOL_NAME_LENGTH: usize = 64;
/// What one session's exports may write in all, by default: 1 GiB.
pub(super) const DEFAULT_EXPORT_MAX_BYTES: u64 = 1024 * 1024 * 1024;
pub const MIN_MAX_TOOL_NAME_LENGTH: usize = 16;
pub const MAX_MAX_TOOL_NAME_LENGTH: usize = 128;
/// The longest server name; the rest of a tool name budget is left for the tool's own name.
pub const MAX_SERVER_NAME_LENGTH: usize = 32;
/// Taken by loom's own tools, so no downstream server may use it.
pub const RESERVED_SERVER_NAME: &str = "loom";

#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// In file order.
    pub servers: Vec<ServerConfig>,
    pub token_threshold: usize,
    pub memory_budget_bytes: u64,
    pub engine_memory_limit_bytes: Option<u64>,
    pub export_dir: PathBuf,
    /// What one session's exports may write in all (SPEC §15).
    pub export_max_bytes: u64,
    /// CSV exports prefix text cells that a spreadsheet would run as a formula with `'`.
    pub neutralize_csv_formulas: bool,
    pub query_timeout_ms: u64,
    pub restart: RestartPolicy,
    pub max_tool_name_length: usize,
    /// Session snapshots (off when `None`).
    pub snapshot: Option<SnapshotConfig>,
    /// How results that are not tables are reduced (SPEC §19.6).
    pub compression: super::policy::Compression,
    /// How tool definitions reach the client (SPEC §20).
    pub tools: ToolsConfig,
    /// The session savings report (SPEC §21).
    pub report: ReportConfig,
    /// `loom serve --http` (SPEC §22).
    pub http: HttpConfig,
    /// The model summary stage's endpoint (SPEC §19.9); off when `None`.
    pub llm: Option<LlmConfig>,
    /// Where traces go besides the `OTEL_*` variables (SPEC §24.1).
    pub telemetry: TelemetryConfig,
    /// The audit log (SPEC §24.3); off when `None`.
    pub audit: Option<AuditConfig>,
    /// Several instances sharing datasets through one store (SPEC §25); off when `None`.
    pub cluster: Option<ClusterConfig>,
    pub format: ConfigFormat,
    /// What is allowed but probably not meant (a literal key, `provider` beside `baseUrl`):
    /// printed by `loom check` and logged when loom starts.
    pub warnings: Vec<super::Problem>,
}

/// Key `telemetry` (SPEC §24.1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TelemetryConfig {
    /// `telemetry.otlpEndpoint`: the collector's base URL, used when no
    /// `OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT` is set.
    pub otlp_endpoint: Option<String>,
}

/// Key `cluster` (SPEC §25): the store instances share and the secret they share.
#[derive(Clone, PartialEq)]
pub struct ClusterConfig {
    /// A directory, `file://…`, `s3://bucket/prefix` (or `memory://`, one process only).
    pub store: String,
    /// At least 32 bytes, `${VAR}` expanded.
    pub secret: String,
    /// The URL other instances reach this one's MCP endpoint at (`cluster.advertise`): where
    /// they forward a retry or a task request of a call this instance holds. Without it, the
    /// address `loom serve --http` listens on, when that is not a wildcard.
    pub advertise: Option<String>,
}

/// Never the secret.
impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterConfig")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

/// Key `audit` (SPEC §24.3): one JSON line per request handled.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditConfig {
    pub path: PathBuf,
    /// Past this size the file is renamed to `FILE.1` and a new one begun.
    pub max_bytes: u64,
}

/// The smallest `audit.maxBytes`: a few dozen lines.
pub const MIN_AUDIT_MAX_BYTES: u64 = 4096;
/// Default of `audit.maxBytes`.
pub const DEFAULT_AUDIT_MAX_BYTES: u64 = 100 * 1024 * 1024;

/// Default of `tools.maxJoined`: tools found by `loom_find_tools` that join `tools/list`.
pub const DEFAULT_MAX_JOINED_TOOLS: usize = 16;
pub const MAX_MAX_JOINED_TOOLS: usize = 1000;
/// The shortest `tools.maxDescriptionChars`: below it no sentence survives.
pub const MIN_MAX_DESCRIPTION_CHARS: usize = 40;

/// Key `tools.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsMode {
    /// Every `<server>_<tool>` listed (today's behaviour).
    All,
    /// loom's own tools, the discovery tools, `pinned` and the tools found so far.
    Search,
}

/// Key `tools`: progressive disclosure of tool definitions.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolsConfig {
    pub mode: ToolsMode,
    /// Exposed names or `*` globs (also `server/tool`) listed directly in search mode.
    pub pinned: Vec<String>,
    /// How many found tools join `tools/list`; the least recently found leave first.
    pub max_joined: usize,
    /// Downstream descriptions longer than this are cut at a sentence boundary (off when `None`).
    pub max_description_chars: Option<usize>,
    /// A sentence-transformers model folder tool search ranks with besides words (SPEC §20.3).
    pub search_model: Option<PathBuf>,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            mode: ToolsMode::All,
            pinned: Vec::new(),
            max_joined: DEFAULT_MAX_JOINED_TOOLS,
            max_description_chars: None,
            search_model: None,
        }
    }
}

/// Key `report`: what loom writes about the session when it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct ReportConfig {
    /// Off: neither the stderr summary nor the file.
    pub enabled: bool,
    /// Also written here: JSON when the name ends in `.json`, Markdown otherwise.
    pub path: Option<PathBuf>,
}

impl Default for ReportConfig {
    fn default() -> Self {
        ReportConfig {
            enabled: true,
            path: None,
        }
    }
}

/// Default of `http.sessionIdleSecs`: an HTTP session without a request this long is closed.
pub(super) const DEFAULT_HTTP_SESSION_IDLE_SECS: u64 = 1800;
/// Default of `http.bodyTimeoutSecs`.
pub(super) const DEFAULT_HTTP_BODY_TIMEOUT_SECS: u64 = 30;
/// Default of `http.maxSessions`.
pub(super) const DEFAULT_HTTP_MAX_SESSIONS: usize = 64;
pub(super) const MAX_HTTP_MAX_SESSIONS: usize = 10_000;

/// A provider preset of the `llm` block: where its OpenAI-compatible API is and which
/// environment variable conventionally holds its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlmProvider {
    pub name: &'static str,
    pub base_url: &'static str,
    pub key_var: &'static str,
}

/// The presets `llm.provider` names (Context Firewall's table).
pub const LLM_PROVIDERS: &[LlmProvider] = &[
    LlmProvider {
        name: "openai",
        base_url: "https://api.openai.com/v1",
        key_var: "OPENAI_API_KEY",
    },
    LlmProvider {
        name: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        key_var: "OPENROUTER_API_KEY",
    },
    LlmProvider {
        name: "orcarouter",
        base_url: "https://api.orcarouter.ai/v1",
        key_var: "ORCAROUTER_API_KEY",
    },
    LlmProvider {
        name: "deepseek",
        base_url: "https://api.deepseek.com/v1",
        key_var: "DEEPSEEK_API_KEY",
    },
];

pub const DEFAULT_LLM_TIMEOUT_MS: u64 = 20_000;
pub const DEFAULT_LLM_MAX_INPUT_CHARS: usize = 120_000;
/// `maxInputChars` cannot be set above this: what one summary may cost is bounded whatever the
/// file says.
pub const MAX_LLM_MAX_INPUT_CHARS: usize = 400_000;
pub const MIN_LLM_MAX_INPUT_CHARS: usize = 1_000;
pub const DEFAULT_LLM_MAX_IN_FLIGHT: usize = 4;
pub const MAX_LLM_MAX_IN_FLIGHT: usize = 64;

/// A credential: its `Debug` never shows it, so no log line or panic message can.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(super::MASK)
    }
}

/// Where the `llm` key came from, for `loom check` (which never shows the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The preset's variable (no `apiKey` given).
    PresetVariable(&'static str),
    /// `apiKey` with `${VAR}` references: their names.
    Variables(Vec<String>),
    /// `apiKey` written into the file (allowed, warned).
    Literal,
}

/// Key `llm`: the OpenAI-compatible endpoint of the model summary stage (SPEC §19.9).
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// The preset named, if any.
    pub provider: Option<&'static str>,
    /// Without a trailing `/`; requests go to `<base_url>/chat/completions`.
    pub base_url: String,
    pub api_key: Secret,
    pub key_source: KeySource,
    /// Passed to the endpoint as written.
    pub model: String,
    pub timeout_ms: u64,
    pub max_input_chars: usize,
    /// Summary requests in flight at once, across every session; more wait for a slot
    /// within their `timeout_ms`.
    pub max_in_flight: usize,
}

impl LlmConfig {
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url)
    }
}

/// Key `http`: loom served over Streamable HTTP (`loom serve --http ADDR`).
#[derive(Clone, PartialEq)]
pub struct HttpConfig {
    /// Required as `Authorization: Bearer <token>` on every request when set.
    pub token: Option<String>,
    /// More accepted bearer tokens, one per client or user: each is a credential of its own,
    /// and a 2026-07-28 client's datasets live in its credential's scope (SPEC §22).
    pub tokens: Vec<String>,
    /// Browser origins allowed besides loopback ones (`Origin` is checked when present).
    pub allowed_origins: Vec<String>,
    /// Sessions idle this long are closed and their data freed.
    pub session_idle_secs: u64,
    /// Sessions open at once; an `initialize` beyond it is refused with 503.
    pub max_sessions: usize,
    /// How long a request's body may take to arrive whole once its headers are in.
    pub body_timeout_secs: u64,
    /// `http.auth`: accept OAuth access tokens (JWTs) of this issuer (SPEC §22.1).
    pub auth: Option<HttpAuth>,
}

/// `http.auth`: loom's HTTP face as an OAuth protected resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAuth {
    /// The authorization server whose tokens are accepted (`iss`, and where its keys are found).
    pub issuer: String,
    /// The `aud` a token must carry; none: loom's own `http://ADDR/mcp`.
    pub audience: Option<String>,
    /// Scopes every token must have (else 403 `insufficient_scope`).
    pub required_scopes: Vec<String>,
    /// Where the issuer's keys are; none: `jwks_uri` of its metadata.
    pub jwks_url: Option<String>,
}

impl HttpConfig {
    /// Every accepted bearer token (`token` first).
    pub fn credentials(&self) -> impl Iterator<Item = &str> {
        self.token
            .iter()
            .chain(self.tokens.iter())
            .map(String::as_str)
    }

    /// Whether requests must carry a bearer token.
    pub fn wants_token(&self) -> bool {
        self.token.is_some() || !self.tokens.is_empty() || self.auth.is_some()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            token: None,
            tokens: Vec::new(),
            allowed_origins: Vec::new(),
            session_idle_secs: DEFAULT_HTTP_SESSION_IDLE_SECS,
            max_sessions: DEFAULT_HTTP_MAX_SESSIONS,
            auth: None,
            body_timeout_secs: DEFAULT_HTTP_BODY_TIMEOUT_SECS,
        }
    }
}

/// Never prints the token.
impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("token", &self.token.as_ref().map(|_| super::MASK))
            .field("tokens", &vec![super::MASK; self.tokens.len()])
            .field("allowed_origins", &self.allowed_origins)
            .field("session_idle_secs", &self.session_idle_secs)
            .field("max_sessions", &self.max_sessions)
            .field("body_timeout_secs", &self.body_timeout_secs)
            .finish()
    }
}

/// Key `snapshot`: where session snapshots are written.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotConfig {
    /// A local path, or a `file://`, `memory://` or `s3://` URL.
    pub url: String,
}

/// Which of the two accepted layouts the file used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// loom's own: `{"servers": [{"name": ..., ...}]}`.
    Loom,
    /// Claude Desktop / Cursor: `{"mcpServers": {"<name>": {...}}}`.
    McpServers,
    /// Context Firewall: `{"downstreams": {"<name>": {...}}, "compression": {...}}`.
    ContextFirewall,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RestartPolicy {
    pub max_attempts: u32,
    pub base_delay_ms: u64,
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_attempts: DEFAULT_RESTART_MAX_ATTEMPTS,
            base_delay_ms: DEFAULT_RESTART_BASE_DELAY_MS,
        }
    }
}

impl RestartPolicy {
    /// Exponential backoff: `min(base · 2^(attempt−1), 30 s)`. Attempt numbers start at 1 (0 is
    /// treated as 1); the arithmetic saturates, so any attempt number is safe.
    pub fn delay_for_attempt(&self, attempt: u32) -> Duration {
        let doublings = attempt.saturating_sub(1);
        let factor = 1u64.checked_shl(doublings).unwrap_or(u64::MAX);
        let ms = self.base_delay_ms.saturating_mul(factor);
        Duration::from_millis(ms).min(MAX_RESTART_DELAY)
    }
}

/// How loom reaches a server.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Transport {
    /// A child process loom starts, speaking newline-delimited JSON-RPC on its stdio.
    #[default]
    Stdio,
    /// A remote server over Streamable HTTP.
    Http(RemoteServer),
}

/// Where a remote server is and what every request to it carries.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteServer {
    /// An `http://` or `https://` URL: the server's MCP endpoint.
    pub url: String,
    /// Sent with every request, in file order (`${VAR}` already expanded); may hold secrets.
    pub headers: Vec<(String, String)>,
    /// How loom logs in to the server when it asks for OAuth (SPEC §4.7); `None` with
    /// `"oauth": false` or an `Authorization` header (the server then gets only the headers).
    pub oauth: Option<OAuthSettings>,
}

/// Key `oauth` of a remote server: the client identity and scopes of its OAuth login. Every
/// member is optional: without `clientId` loom uses a Client ID Metadata Document when one is
/// configured and the authorization server takes them, else Dynamic Client Registration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OAuthSettings {
    /// A client registered beforehand (GitHub and Slack have neither registration kind).
    pub client_id: Option<String>,
    /// That client's secret (`${VAR}` expanded); only with `client_id`.
    pub client_secret: Option<Secret>,
    /// An `https://` URL serving this client's metadata document (CIMD).
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for; empty: the 401's `scope`, else what the server lists.
    pub scopes: Vec<String>,
    /// A fixed port for the loopback redirect `http://127.0.0.1:PORT/callback` (servers whose
    /// registered redirect must match exactly); none: any free port.
    pub redirect_port: Option<u16>,
}

/// Request headers the Streamable HTTP transport sets itself; a config may not set them.
pub const RESERVED_HEADERS: &[&str] = &[
    "accept",
    "content-type",
    "content-length",
    "host",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// `^[a-z][a-z0-9_-]{0,31}$`, unique, never `loom`.
    pub name: String,
    pub transport: Transport,
    /// Stdio servers only (empty for a remote one).
    pub command: String,
    pub args: Vec<String>,
    /// File order kept, so a later entry's effect is predictable when the child reads them.
    pub env: Vec<(String, String)>,
    /// Names of loom's own environment variables handed to the child.
    pub env_passthrough: Vec<String>,
    /// Tool names whose results carry no provenance record.
    pub provenance_denylist: Vec<String>,
    /// Exact names or `*` globs; empty means every tool.
    pub allow_tools: Vec<String>,
    /// Exact names or `*` globs; a match here wins over `allow_tools`.
    pub deny_tools: Vec<String>,
    pub call_timeout_ms: u64,
    pub disabled: bool,
    pub cwd: Option<PathBuf>,
    /// Which protocol lifecycle loom opens a child's connection with.
    pub protocol: DownstreamProtocol,
}

/// How loom opens the connection to a server it starts (`protocol`, SPEC §4.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DownstreamProtocol {
    /// The `initialize` handshake, offering 2025-11-25 (`"2025-11-25"`, the default).
    #[default]
    Handshake,
    /// `server/discover` and 2026-07-28 (`"2026-07-28"`): for servers that speak it.
    Modern,
    /// `server/discover` first, the handshake when the server does not answer it (`"auto"`).
    Auto,
}

impl ServerConfig {
    /// A server with `command` and every other field at its default; handy for callers' tests.
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        ServerConfig {
            name: name.into(),
            transport: Transport::Stdio,
            command: command.into(),
            args: Vec::new(),
            env: Vec::new(),
            env_passthrough: Vec::new(),
            provenance_denylist: Vec::new(),
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            call_timeout_ms: DEFAULT_CALL_TIMEOUT_MS,
            disabled: false,
            cwd: None,
            protocol: DownstreamProtocol::Handshake,
        }
    }

    /// A remote server at `url` with every other field at its default.
    pub fn remote(name: impl Into<String>, url: impl Into<String>) -> Self {
        let mut server = ServerConfig::new(name, String::new());
        server.transport = Transport::Http(RemoteServer {
            url: url.into(),
            headers: Vec::new(),
            oauth: Some(OAuthSettings::default()),
        });
        server
    }

    /// The remote endpoint, when the server is reached over HTTP.
    pub fn remote_server(&self) -> Option<&RemoteServer> {
        match &self.transport {
            Transport::Http(remote) => Some(remote),
            Transport::Stdio => None,
        }
    }

    /// Whether a downstream tool is exposed: a `deny_tools` match hides it; otherwise an empty
    /// `allow_tools` lets everything through and a non-empty one requires a match.
    pub fn tool_allowed(&self, tool: &str) -> bool {
        if self.deny_tools.iter().any(|p| glob_match(p, tool)) {
            return false;
        }
        self.allow_tools.is_empty() || self.allow_tools.iter().any(|p| glob_match(p, tool))
    }
}

impl Config {
    /// A config with no servers and every global setting at its default.
    pub fn with_defaults(format: ConfigFormat) -> Self {
        Config {
            servers: Vec::new(),
            token_threshold: DEFAULT_TOKEN_THRESHOLD,
            memory_budget_bytes: DEFAULT_MEMORY_BUDGET_BYTES,
            engine_memory_limit_bytes: None,
            export_dir: default_export_dir(),
            export_max_bytes: DEFAULT_EXPORT_MAX_BYTES,
            neutralize_csv_formulas: true,
            query_timeout_ms: DEFAULT_QUERY_TIMEOUT_MS,
            restart: RestartPolicy::default(),
            max_tool_name_length: DEFAULT_MAX_TOOL_NAME_LENGTH,
            snapshot: None,
            compression: Default::default(),
            tools: ToolsConfig::default(),
            report: ReportConfig::default(),
            http: HttpConfig::default(),
            llm: None,
            telemetry: TelemetryConfig::default(),
            audit: None,
            cluster: None,
            format,
            warnings: Vec::new(),
        }
    }

    /// Servers that are not `disabled`, in file order.
    pub fn enabled_servers(&self) -> impl Iterator<Item = &ServerConfig> {
        self.servers.iter().filter(|s| !s.disabled)
    }
}

/// `*` matches any run of characters, including none; every other character matches itself.
///
/// The classic greedy matcher with one backtrack point: on a mismatch, retry from the last `*`
/// with it swallowing one more character. Linear in practice, never exponential.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            backtrack = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((star, matched)) = backtrack {
            pi = star + 1;
            ti = matched + 1;
            backtrack = Some((star, matched + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The server-name rule, `^[a-z][a-z0-9_-]{0,31}$`.
pub fn is_valid_server_name(name: &str) -> bool {
    let Some((first, rest)) = name.as_bytes().split_first() else {
        return false;
    };
    name.len() <= MAX_SERVER_NAME_LENGTH
        && first.is_ascii_lowercase()
        && rest
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// An environment variable name the OS will accept: non-empty, no `=`, no NUL.
pub fn is_valid_env_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('=') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(allow: &[&str], deny: &[&str]) -> ServerConfig {
        let mut s = ServerConfig::new("gh", "npx");
        s.allow_tools = allow.iter().map(|s| (*s).to_owned()).collect();
        s.deny_tools = deny.iter().map(|s| (*s).to_owned()).collect();
        s
    }

    #[test]
    fn glob_star_anywhere() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("get_*", "get_issue"));
        assert!(glob_match("get_*", "get_"));
        assert!(!glob_match("get_*", "list_issues"));
        assert!(glob_match("*_issue", "create_issue"));
        assert!(glob_match("*issue*", "list_issues_all"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(glob_match("a*b*c", "abc"));
        assert!(!glob_match("a*b*c", "aXXbYY"));
        assert!(glob_match("**x", "x"));
        assert!(glob_match("a*a*a", "aaaaa"));
        assert!(!glob_match("a*ab", "aaaa"));
    }

    #[test]
    fn glob_other_characters_are_literal() {
        assert!(glob_match("get_issue", "get_issue"));
        assert!(!glob_match("get_issue", "get_issues"));
        assert!(!glob_match("get?issue", "get_issue"));
        assert!(glob_match("get?issue", "get?issue"));
        assert!(!glob_match("[ab]", "a"));
        assert!(!glob_match("", "a"));
        assert!(glob_match("", ""));
        assert!(glob_match("é*", "éclair"));
    }

    #[test]
    fn glob_pathological_pattern_finishes() {
        let text = "a".repeat(2000);
        let pattern = format!("{}b", "a*".repeat(50));
        assert!(!glob_match(&pattern, &text));
    }

    #[test]
    fn empty_allow_list_means_all() {
        let s = server(&[], &[]);
        assert!(s.tool_allowed("anything"));
    }

    #[test]
    fn allow_list_restricts() {
        let s = server(&["get_*", "search"], &[]);
        assert!(s.tool_allowed("get_issue"));
        assert!(s.tool_allowed("search"));
        assert!(!s.tool_allowed("search_code"));
        assert!(!s.tool_allowed("delete_repo"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let s = server(&["*"], &["delete_*"]);
        assert!(s.tool_allowed("get_issue"));
        assert!(!s.tool_allowed("delete_repo"));
        let s = server(&["delete_repo"], &["delete_repo"]);
        assert!(!s.tool_allowed("delete_repo"));
        let s = server(&[], &["*_write*"]);
        assert!(!s.tool_allowed("file_write"));
        assert!(s.tool_allowed("file_read"));
    }

    #[test]
    fn delay_doubles_from_the_base() {
        let p = RestartPolicy {
            max_attempts: 5,
            base_delay_ms: 1000,
        };
        assert_eq!(p.delay_for_attempt(1), Duration::from_millis(1000));
        assert_eq!(p.delay_for_attempt(2), Duration::from_millis(2000));
        assert_eq!(p.delay_for_attempt(3), Duration::from_millis(4000));
        assert_eq!(p.delay_for_attempt(0), Duration::from_millis(1000));
    }

    #[test]
    fn delay_caps_at_thirty_seconds() {
        let p = RestartPolicy::default();
        assert_eq!(p.delay_for_attempt(6), Duration::from_secs(30));
        assert_eq!(p.delay_for_attempt(64), Duration::from_secs(30));
        assert_eq!(p.delay_for_attempt(65), Duration::from_secs(30));
        assert_eq!(p.delay_for_attempt(u32::MAX), Duration::from_secs(30));
        let huge = RestartPolicy {
            max_attempts: 1,
            base_delay_ms: u64::MAX,
        };
        assert_eq!(huge.delay_for_attempt(1), Duration::from_secs(30));
        assert_eq!(huge.delay_for_attempt(u32::MAX), Duration::from_secs(30));
    }

    #[test]
    fn zero_base_delay_stays_zero() {
        let p = RestartPolicy {
            max_attempts: 3,
            base_delay_ms: 0,
        };
        assert_eq!(p.delay_for_attempt(u32::MAX), Duration::ZERO);
    }

    #[test]
    fn server_name_rule() {
        for ok in ["a", "github", "brave-search", "fs_2", &"a".repeat(32)] {
            assert!(is_valid_server_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Github",
            "1abc",
            "-abc",
            "_abc",
            "brave search",
            "a.b",
            "ünï",
            &"a".repeat(33),
        ] {
            assert!(!is_valid_server_name(bad), "{bad}");
        }
    }

    #[test]
    fn env_name_rule() {
        assert!(is_valid_env_name("GITHUB_TOKEN"));
        assert!(is_valid_env_name("lower.dots-ok"));
        assert!(!is_valid_env_name(""));
        assert!(!is_valid_env_name("A=B"));
        assert!(!is_valid_env_name("A\0B"));
    }
}
