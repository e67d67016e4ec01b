//! The resolved, secret-masked view printed by `loom check`.
//!
//! The view is meant to be pasted into bug reports, so masking errs towards hiding: every `env`
//! value is hidden, and an argument is hidden when it looks like a credential or sits where a
//! credential usually goes (after `--token`, in `--password=...`, in `API_KEY=...`).

use super::model::{Config, ConfigFormat, ServerConfig};
use super::size::human_bytes;

pub const MASK: &str = "***";

/// Parts of a flag or variable name that mark its value as sensitive.
const SENSITIVE_WORDS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "pwd",
    "key",
    "auth",
    "credential",
];

/// Well-known credential prefixes: GitHub tokens, OpenAI/Anthropic-style keys, Slack tokens,
/// Stripe keys, GitLab tokens, npm and PyPI tokens, Google OAuth access tokens.
const SECRET_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "whsec_",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxs-",
    "xoxe-",
    "glpat-",
    "glptt-",
    "gldt-",
    "npm_",
    "pypi-",
    "ya29.",
];

/// Whether a flag, variable or query parameter name names a credential (`token`, `api_key`, …).
pub fn is_sensitive_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    SENSITIVE_WORDS.iter().any(|w| lower.contains(w))
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

fn is_base64url_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'=' || b == b'+' || b == b'/'
}

/// Whether `s` contains something shaped like a credential. Patterns must start at a word
/// boundary so that e.g. `task-runner` does not count as an `sk-` key.
pub fn looks_like_secret(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    if lower.contains("authorization:")
        || bearer_at(&lower)
        || basic_credentials_at(s, &lower)
        || (lower.contains("-----begin") && lower.contains("private key"))
        || lower.contains("accountkey=")
        || url_userinfo(s).is_some()
    {
        return true;
    }
    let b = s.as_bytes();
    (0..b.len()).any(|i| {
        let at_boundary = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        at_boundary && secret_starts_at(&b[i..])
    })
}

fn bearer_at(lower: &str) -> bool {
    lower
        .match_indices("bearer ")
        .any(|(i, m)| lower[i + m.len()..].starts_with(|c: char| !c.is_whitespace()))
}

/// `Basic <base64 of user:password>` (HTTP basic authentication): the word alone is common
/// English, so the token after it must decode to text with a `:`.
fn basic_credentials_at(s: &str, lower: &str) -> bool {
    use base64::Engine as _;
    lower.match_indices("basic ").any(|(i, m)| {
        let token: String = s[i + m.len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
            .collect();
        token.len() >= 8
            && base64::engine::general_purpose::STANDARD
                .decode(token.as_bytes())
                .is_ok_and(|decoded| decoded.contains(&b':'))
    })
}

/// The byte range of the password in the first `scheme://user:password@host` of `s`.
pub fn url_userinfo(s: &str) -> Option<std::ops::Range<usize>> {
    let mut from = 0;
    while let Some(at) = s[from..].find("://") {
        let start = from + at + 3;
        let authority_end = s[start..]
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .map_or(s.len(), |end| start + end);
        let authority = &s[start..authority_end];
        if let Some(at_sign) = authority.rfind('@')
            && let Some(colon) = authority[..at_sign].find(':')
            && colon + 1 < at_sign
        {
            return Some(start + colon + 1..start + at_sign);
        }
        from = start;
    }
    None
}

fn secret_starts_at(b: &[u8]) -> bool {
    for prefix in SECRET_PREFIXES {
        if let Some(rest) = b.strip_prefix(prefix.as_bytes())
            && rest.first().is_some_and(|c| is_token_byte(*c))
        {
            return true;
        }
    }
    // Google API keys: `AIza` and 35 more characters.
    if let Some(rest) = b.strip_prefix(b"AIza")
        && rest.len() >= 30
        && rest[..30].iter().all(|c| is_token_byte(*c))
    {
        return true;
    }
    // AWS access key ids: a four-letter kind, then 16 upper-case letters or digits.
    for prefix in [b"AKIA", b"ASIA"] {
        if let Some(rest) = b.strip_prefix(prefix)
            && rest.len() >= 16
            && rest[..16]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        {
            return true;
        }
    }
    is_jwt_at(b)
}

/// `eyJ` (base64 of `{"`) then header, payload and an optional signature, dot-separated.
fn is_jwt_at(b: &[u8]) -> bool {
    if !b.starts_with(b"eyJ") {
        return false;
    }
    let mut segments = b.split(|c| *c == b'.');
    let header = segments.next().unwrap_or_default();
    let payload = segments.next().unwrap_or_default();
    let signature_present = segments.next().is_some();
    header.iter().all(|c| is_base64url_byte(*c))
        && !payload.is_empty()
        && payload
            .iter()
            .take_while(|c| **c != b' ')
            .all(|c| is_base64url_byte(*c))
        && signature_present
}

/// Masks one argument on its own (without looking at its neighbours).
pub fn mask_arg(arg: &str) -> String {
    if let Some((name, value)) = arg.split_once('=') {
        let bare = name.trim_start_matches('-');
        if !bare.is_empty()
            && !bare.contains(char::is_whitespace)
            && (is_sensitive_name(bare) || looks_like_secret(value))
        {
            return format!("{name}={MASK}");
        }
    }
    // Header-shaped arguments, e.g. `X-Api-Key: abc`.
    if let Some((name, _)) = arg.split_once(": ")
        && !name.contains(char::is_whitespace)
        && is_sensitive_name(name)
    {
        return format!("{name}: {MASK}");
    }
    if looks_like_secret(arg) {
        return MASK.to_owned();
    }
    arg.to_owned()
}

/// A URL as it may be shown: a password in it and the values of query parameters that look like
/// credentials (`?api_key=…`, `?token=…`) become `***`. Text that is not a URL is masked like an
/// argument.
pub fn mask_url(url: &str) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return mask_arg(url);
    };
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(MASK));
    }
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    if pairs
        .iter()
        .any(|(k, v)| is_sensitive_name(k) || looks_like_secret(v))
    {
        let masked: Vec<String> = pairs
            .iter()
            .map(|(k, v)| {
                if is_sensitive_name(k) || looks_like_secret(v) {
                    format!("{k}={MASK}")
                } else {
                    format!("{k}={v}")
                }
            })
            .collect();
        parsed.set_query(Some(&masked.join("&")));
    }
    // The parser percent-encodes the mask; show it as typed.
    parsed.to_string().replace("%2A%2A%2A", MASK)
}

/// A flag whose next argument is its (secret) value, e.g. `--api-key`.
fn is_sensitive_flag(arg: &str) -> bool {
    let bare = arg.trim_start_matches('-');
    arg.starts_with('-') && !bare.is_empty() && !arg.contains('=') && is_sensitive_name(bare)
}

/// Masks a whole argument list: each argument by [`mask_arg`], and the argument following a
/// sensitive flag entirely — unless it is itself a `--flag`, which means the first flag took no
/// value.
pub fn mask_args(args: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(args.len());
    let mut value_expected = false;
    for arg in args {
        if value_expected && !arg.starts_with("--") {
            out.push(MASK.to_owned());
            value_expected = false;
            continue;
        }
        out.push(mask_arg(arg));
        value_expected = is_sensitive_flag(arg);
    }
    out
}

/// Quotes an argument when its boundaries would otherwise be invisible.
fn show_arg(arg: &str) -> String {
    if arg != MASK && (arg.is_empty() || arg.contains(|c: char| c.is_whitespace() || c == '"')) {
        super::json::json_quote(arg)
    } else {
        arg.to_owned()
    }
}

/// `  key:               value`, aligned so the values form a column.
fn labelled(key: &str, value: &str) -> String {
    let label = format!("{key}:");
    // A label longer than the column still gets one space before its value.
    format!(
        "  {label:<20}{}{value}",
        if label.len() >= 20 { " " } else { "" }
    )
}

fn list_or(items: &[String], empty: &str) -> String {
    if items.is_empty() {
        empty.to_owned()
    } else {
        items.join(", ")
    }
}

impl Config {
    /// Human-readable resolved view for `loom check`: every server with its command, arguments,
    /// env keys, passthrough names, filters, timeout and disabled flag, then the global
    /// settings. Env values are always shown as `***`; arguments are masked as described in the
    /// module documentation.
    pub fn describe_masked(&self) -> String {
        let mut lines: Vec<String> = Vec::new();
        let format = match self.format {
            ConfigFormat::Loom => "loom (`servers` array)",
            ConfigFormat::McpServers => "Claude Desktop / Cursor (`mcpServers` object)",
            ConfigFormat::ContextFirewall => "Context Firewall (`downstreams` object)",
        };
        lines.push(format!("format: {format}"));
        let disabled = self.servers.iter().filter(|s| s.disabled).count();
        lines.push(format!(
            "servers: {} ({} enabled, {disabled} disabled)",
            self.servers.len(),
            self.servers.len() - disabled
        ));
        for server in &self.servers {
            lines.push(String::new());
            describe_server(server, &mut lines);
        }
        lines.push(String::new());
        lines.push("settings".to_owned());
        let settings = [
            ("tokenThreshold", self.token_threshold.to_string()),
            (
                "memoryBudgetBytes",
                format!(
                    "{} ({})",
                    self.memory_budget_bytes,
                    human_bytes(self.memory_budget_bytes)
                ),
            ),
            (
                "engineMemoryLimit",
                self.engine_memory_limit_bytes
                    .map_or("(engine default)".to_owned(), |b| {
                        format!("{b} ({})", human_bytes(b))
                    }),
            ),
            ("exportDir", self.export_dir.display().to_string()),
            (
                "exportMaxBytes",
                format!(
                    "{} ({})",
                    self.export_max_bytes,
                    human_bytes(self.export_max_bytes)
                ),
            ),
            (
                "neutralizeCsvFormulas",
                self.neutralize_csv_formulas.to_string(),
            ),
            ("queryTimeoutMs", self.query_timeout_ms.to_string()),
            (
                "restart",
                format!(
                    "maxAttempts {}, baseDelayMs {}",
                    self.restart.max_attempts, self.restart.base_delay_ms
                ),
            ),
            ("maxToolNameLength", self.max_tool_name_length.to_string()),
            (
                "snapshot",
                self.snapshot
                    .as_ref()
                    .map_or("off".to_string(), |s| s.url.clone()),
            ),
            (
                "cluster",
                self.cluster.as_ref().map_or("off".to_string(), |c| {
                    format!("store {}, secret {MASK}", c.store)
                }),
            ),
            ("tools", describe_tools(&self.tools)),
            (
                "report",
                match (&self.report.enabled, &self.report.path) {
                    (false, _) => "off".to_string(),
                    (true, None) => "on stderr at shutdown".to_string(),
                    (true, Some(path)) => {
                        format!("on stderr at shutdown, and written to {}", path.display())
                    }
                },
            ),
            (
                "http (serve --http)",
                format!(
                    "token {}, allowed origins {}, sessions idle after {} s, at most {} sessions, \
                     bodies within {} s",
                    match self.http.credentials().count() {
                        0 => "(none)".to_string(),
                        1 => MASK.to_string(),
                        n => format!("{n} tokens, each {MASK}"),
                    },
                    list_or(&self.http.allowed_origins, "loopback only"),
                    self.http.session_idle_secs,
                    self.http.max_sessions,
                    self.http.body_timeout_secs
                ),
            ),
            ("llm", describe_llm(self.llm.as_ref())),
        ];
        for (key, value) in settings {
            lines.push(labelled(key, &value));
        }
        // The resolved reduction policy: every server, then every tool named in `perTool`
        // (other tools of a server have the server's).
        lines.push(String::new());
        lines.push("compression (resolved: default < perServer < perTool)".to_owned());
        for server in &self.servers {
            let policy = self.compression.resolve(&server.name, "");
            lines.push(labelled(
                &format!("{} (its tools)", server.name),
                &describe_policy(&policy),
            ));
            for (s, tool, _) in &self.compression.per_tool {
                if s == &server.name {
                    let policy = self.compression.resolve(s, tool);
                    lines.push(labelled(&format!("{s}/{tool}"), &describe_policy(&policy)));
                }
            }
        }
        if !self.warnings.is_empty() {
            lines.push(String::new());
            lines.push(format!("warnings ({})", self.warnings.len()));
            for warning in &self.warnings {
                lines.push(format!("  {warning}"));
            }
        }
        let mut out = lines.join("\n");
        out.push('\n');
        out
    }
}

/// The summary endpoint as `loom check` shows it: where, which model, whose key — never the key.
fn describe_llm(llm: Option<&super::LlmConfig>) -> String {
    let Some(llm) = llm else {
        return "off (no model summary stage)".to_owned();
    };
    let key = match &llm.key_source {
        super::KeySource::PresetVariable(var) => format!("{MASK} (from {var})"),
        super::KeySource::Variables(names) => format!("{MASK} (from {})", names.join(", ")),
        super::KeySource::Literal => format!("{MASK} (written in the file)"),
    };
    format!(
        "POST {}{}, model {}, key {key}, timeout {} ms, input up to {} chars, {} request(s) in flight",
        mask_url(&llm.endpoint()),
        llm.provider
            .map(|p| format!(" (provider {p})"))
            .unwrap_or_default(),
        json_string(&llm.model),
        llm.timeout_ms,
        llm.max_input_chars,
        llm.max_in_flight
    )
}

fn json_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn describe_tools(tools: &super::ToolsConfig) -> String {
    let mode = match (tools.mode, tools.pinned.is_empty()) {
        (super::ToolsMode::All, _) => "all (every tool listed)".to_string(),
        (super::ToolsMode::Search, true) => format!(
            "search (found tools join tools/list, at most {})",
            tools.max_joined
        ),
        (super::ToolsMode::Search, false) => format!(
            "pinned {} (found tools join tools/list, at most {})",
            tools.pinned.join(", "),
            tools.max_joined
        ),
    };
    let mode = match tools.max_description_chars {
        Some(max) => format!("{mode}; descriptions cut at {max} chars"),
        None => mode,
    };
    match &tools.search_model {
        Some(dir) => format!("{mode}; search by meaning with {}", dir.display()),
        None => mode,
    }
}

fn describe_policy(policy: &super::policy::Policy) -> String {
    if policy.bypass {
        return "bypass (results untouched, outputSchema kept)".to_owned();
    }
    let stages: Vec<&str> = [
        (policy.strip_base64, "stripBase64"),
        (policy.html_to_markdown, "htmlToMarkdown"),
        (policy.json_summary, "jsonSummary"),
        (policy.llm_summary, "llmSummary"),
        (policy.truncate, "truncate"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| *name)
    .collect();
    format!(
        "maxOutputTokens {} (~{} chars); stages: {}{}",
        policy.max_output_tokens,
        policy.max_output_chars(),
        if stages.is_empty() {
            "none".to_owned()
        } else {
            stages.join(", ")
        },
        if policy.keep_small_tables {
            ""
        } else {
            "; small tables not kept"
        }
    )
}

/// How loom would log in to a remote server, for `loom check` (the secret only as masked).
fn describe_oauth(oauth: Option<&super::OAuthSettings>) -> String {
    let Some(oauth) = oauth else {
        return "off".to_owned();
    };
    let mut parts = vec![match (&oauth.client_id, &oauth.client_metadata_url) {
        (Some(id), _) => format!("client {id}"),
        (None, Some(url)) => format!("client metadata {}", mask_url(url)),
        (None, None) => "when the server asks (dynamic client registration)".to_owned(),
    }];
    if oauth.client_secret.is_some() {
        parts.push(format!("secret {MASK}"));
    }
    if !oauth.scopes.is_empty() {
        parts.push(format!("scopes {}", oauth.scopes.join(" ")));
    }
    if let Some(port) = oauth.redirect_port {
        parts.push(format!("redirect port {port}"));
    }
    parts.join(", ")
}

fn describe_server(server: &ServerConfig, lines: &mut Vec<String>) {
    let state = if server.disabled { " (disabled)" } else { "" };
    lines.push(format!("server {}{state}", server.name));
    if let Some(remote) = server.remote_server() {
        // Header values are credentials more often than not: every value is hidden, as env
        // values are.
        let headers: Vec<String> = remote
            .headers
            .iter()
            .map(|(k, _)| format!("{k}: {MASK}"))
            .collect();
        let fields = [
            ("transport", "streamable HTTP".to_owned()),
            ("url", mask_url(&remote.url)),
            ("headers", list_or(&headers, "(none)")),
            ("oauth", describe_oauth(remote.oauth.as_ref())),
        ];
        for (key, value) in fields {
            lines.push(labelled(key, &value));
        }
        describe_common(server, lines);
        return;
    }
    let command = if looks_like_secret(&server.command) {
        MASK.to_owned()
    } else {
        show_arg(&server.command)
    };
    let args: Vec<String> = mask_args(&server.args)
        .iter()
        .map(|a| show_arg(a))
        .collect();
    let env: Vec<String> = server
        .env
        .iter()
        .map(|(k, _)| format!("{k}={MASK}"))
        .collect();
    let fields = [
        ("command", command),
        (
            "args",
            if args.is_empty() {
                "(none)".to_owned()
            } else {
                args.join(" ")
            },
        ),
        ("env", list_or(&env, "(none)")),
        ("envPassthrough", list_or(&server.env_passthrough, "(none)")),
        (
            "cwd",
            server
                .cwd
                .as_ref()
                .map_or("(loom's working directory)".to_owned(), |p| {
                    p.display().to_string()
                }),
        ),
    ];
    for (key, value) in fields {
        lines.push(labelled(key, &value));
    }
    describe_common(server, lines);
}

/// The lines every server has, whatever its transport.
fn describe_common(server: &ServerConfig, lines: &mut Vec<String>) {
    let fields = [
        ("allowTools", list_or(&server.allow_tools, "(all tools)")),
        ("denyTools", list_or(&server.deny_tools, "(none)")),
        (
            "provenanceDenylist",
            list_or(&server.provenance_denylist, "(none)"),
        ),
        ("callTimeoutMs", server.call_timeout_ms.to_string()),
        (
            "disabled",
            if server.disabled { "yes" } else { "no" }.to_owned(),
        ),
    ];
    for (key, value) in fields {
        lines.push(labelled(key, &value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn recognises_credential_shapes() {
        for secret in [
            "ghp_abcdefghijklmnop",
            "gho_x",
            "github_pat_11ABC",
            "sk-ant-api03-xyz",
            "xoxb-123-456",
            "xoxp-1",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig",
            "eyJhbGciOiJub25lIn0.eyJzdWIiOiIxIn0.",
            "Bearer abc.def",
            "bearer xyz",
            "Authorization: Basic dXNlcjpwYXNz",
            "https://x-access-token:ghp_abc@github.com/o/r",
            "prefix/sk-live",
        ] {
            assert!(looks_like_secret(secret), "{secret}");
        }
    }

    #[test]
    fn ordinary_arguments_are_not_secrets() {
        for plain in [
            "-y",
            "@modelcontextprotocol/server-github",
            "task-runner",
            "--disk-cache",
            "/home/u/projects",
            "ghp_",
            "AKIA1234",
            "akiaiosfodnn7example",
            "eyJhbGciOiJIUzI1NiJ9",
            "bearer",
            "skeleton",
            "xoxo-gossip",
        ] {
            assert!(!looks_like_secret(plain), "{plain}");
        }
    }

    #[test]
    fn masks_value_after_sensitive_flag() {
        let args = strings(&["--api-key", "abc123", "--port", "8080", "--token", "t"]);
        assert_eq!(
            mask_args(&args),
            strings(&["--api-key", MASK, "--port", "8080", "--token", MASK])
        );
    }

    #[test]
    fn flag_without_value_does_not_mask_the_next_flag() {
        let args = strings(&["--no-auth", "--verbose", "x"]);
        assert_eq!(mask_args(&args), args);
    }

    #[test]
    fn masks_inline_flag_values_and_assignments() {
        let args = strings(&[
            "--token=abc",
            "--Client-Secret=xyz",
            "-e",
            "API_KEY=abc",
            "--name=ghp_zzz",
            "--port=8080",
            "X-Api-Key: abc",
            "Content-Type: json",
        ]);
        assert_eq!(
            mask_args(&args),
            strings(&[
                "--token=***",
                "--Client-Secret=***",
                "-e",
                "API_KEY=***",
                "--name=***",
                "--port=8080",
                "X-Api-Key: ***",
                "Content-Type: json",
            ])
        );
    }

    #[test]
    fn masks_whole_secret_arguments() {
        let args = strings(&["run", "ghp_abcdef", "Bearer xyz"]);
        assert_eq!(mask_args(&args), strings(&["run", MASK, MASK]));
    }

    fn sample() -> Config {
        let mut gh = ServerConfig::new("github", "npx");
        gh.args = strings(&[
            "-y",
            "@modelcontextprotocol/server-github",
            "ghp_SECRETSECRETSECRET",
            "--password",
            "hunter2",
            "two words",
        ]);
        gh.env = vec![
            ("GITHUB_TOKEN".into(), "ghp_ENVSECRET".into()),
            ("PLAIN".into(), "not-secret-but-hidden".into()),
        ];
        gh.env_passthrough = strings(&["PATH"]);
        gh.deny_tools = strings(&["delete_*"]);
        let mut fs = ServerConfig::new("fs", "/usr/bin/fs-server");
        fs.disabled = true;
        fs.cwd = Some(PathBuf::from("/srv"));
        let mut config = Config::with_defaults(ConfigFormat::McpServers);
        config.servers = vec![gh, fs];
        config.engine_memory_limit_bytes = Some(512_000_000);
        config
    }

    #[test]
    fn describe_hides_every_secret() {
        let text = sample().describe_masked();
        for secret in [
            "ghp_ENVSECRET",
            "not-secret-but-hidden",
            "ghp_SECRETSECRETSECRET",
            "hunter2",
        ] {
            assert!(!text.contains(secret), "{secret} leaked:\n{text}");
        }
        assert!(text.contains("GITHUB_TOKEN=***"), "{text}");
        assert!(text.contains("PLAIN=***"), "{text}");
        assert!(text.contains("--password ***"), "{text}");
    }

    #[test]
    fn urls_hide_passwords_and_credential_parameters() {
        assert_eq!(
            mask_url("https://user:pa55@example.com/mcp?api_key=abc&region=eu"),
            "https://user:***@example.com/mcp?api_key=***&region=eu"
        );
        assert_eq!(
            mask_url("http://127.0.0.1:8080/mcp"),
            "http://127.0.0.1:8080/mcp"
        );
        assert_eq!(mask_url("not a url ghp_abcdefghijklmnop"), MASK);
    }

    #[test]
    fn describe_shows_a_remote_server_without_its_header_values() {
        let mut config = Config::with_defaults(ConfigFormat::McpServers);
        let mut remote = ServerConfig::remote("web", "https://mcp.example.com/mcp?token=abc");
        if let super::super::Transport::Http(r) = &mut remote.transport {
            r.headers = vec![("Authorization".into(), "Bearer s3cret".into())];
        }
        config.servers.push(remote);
        let text = config.describe_masked();
        assert!(
            text.contains("transport:          streamable HTTP"),
            "{text}"
        );
        assert!(
            text.contains("url:                https://mcp.example.com/mcp?token=***"),
            "{text}"
        );
        assert!(
            text.contains("headers:            Authorization: ***"),
            "{text}"
        );
        assert!(!text.contains("s3cret") && !text.contains("abc"), "{text}");
        assert!(!text.contains("command"), "{text}");
        // This entry's test sets the header but kept the default login settings.
        assert!(
            text.contains("oauth:              when the server asks"),
            "{text}"
        );

        let mut config = Config::with_defaults(ConfigFormat::McpServers);
        let mut remote = ServerConfig::remote("gh", "https://api.example.com/mcp");
        if let super::super::Transport::Http(r) = &mut remote.transport {
            r.oauth = Some(super::super::OAuthSettings {
                client_id: Some("Iv1.abc".into()),
                client_secret: Some(super::super::Secret::new("hunter2".into())),
                scopes: vec!["repo".into(), "read:org".into()],
                redirect_port: Some(33418),
                ..Default::default()
            });
        }
        config.servers.push(remote);
        let text = config.describe_masked();
        assert!(
            text.contains(
                "oauth:              client Iv1.abc, secret ***, scopes repo read:org, redirect port 33418"
            ),
            "{text}"
        );
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn describe_shows_servers_and_settings() {
        let text = sample().describe_masked();
        for needle in [
            "format: Claude Desktop / Cursor",
            "servers: 2 (1 enabled, 1 disabled)",
            "server github",
            "server fs (disabled)",
            "@modelcontextprotocol/server-github",
            "\"two words\"",
            "envPassthrough:     PATH",
            "denyTools:          delete_*",
            "allowTools:         (all tools)",
            "cwd:                /srv",
            "callTimeoutMs:      60000",
            "disabled:           yes",
            "tokenThreshold:     2000",
            "memoryBudgetBytes:  268435456 (256 MiB)",
            "engineMemoryLimit:  512000000 (512 MB)",
            &format!(
                "exportDir:          {}",
                crate::config::default_export_dir().display()
            ),
            "exportMaxBytes:     1073741824 (1 GiB)",
            "neutralizeCsvFormulas: true",
            "queryTimeoutMs:     30000",
            "restart:            maxAttempts 5, baseDelayMs 1000",
            "maxToolNameLength:  64",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
        }
    }

    #[test]
    fn describe_with_no_servers() {
        let text = Config::with_defaults(ConfigFormat::Loom).describe_masked();
        assert!(text.contains("servers: 0 (0 enabled, 0 disabled)"));
        assert!(text.contains("engineMemoryLimit:  (engine default)"));
        assert!(text.contains("all (every tool listed)"), "{text}");
        assert!(text.contains("on stderr at shutdown"), "{text}");
    }

    #[test]
    fn describe_shows_tool_disclosure_and_the_report() {
        let mut config = Config::with_defaults(ConfigFormat::Loom);
        config.tools.mode = crate::config::ToolsMode::Search;
        config.tools.pinned = vec!["git_*".into()];
        config.tools.max_description_chars = Some(200);
        config.report.path = Some("/tmp/r.md".into());
        let text = config.describe_masked();
        assert!(
            text.contains("pinned git_* (found tools join tools/list, at most 16); descriptions cut at 200 chars"),
            "{text}"
        );
        assert!(text.contains("written to /tmp/r.md"), "{text}");
        config.report.enabled = false;
        let off = config.describe_masked();
        assert!(
            off.lines()
                .any(|l| l.trim_start().starts_with("report:") && l.ends_with(" off")),
            "{off}"
        );
    }
}
