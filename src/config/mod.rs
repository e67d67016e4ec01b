//! Loading and validating loom's configuration file.
//!
//! Two layouts are accepted: loom's own (`{"servers": [...]}`) and the Claude Desktop / Cursor
//! one (`{"mcpServers": {...}}`), so an existing client config can be pointed at directly.
//! Validation never stops at the first mistake: [`ConfigError`] carries every problem, each
//! located by a path such as `servers[1].name`.
//!
//! Layout: `json` parses into a tree that keeps duplicate keys, `validate` turns it into a
//! [`Config`] (expanding `${VAR}` references via `expand` and byte sizes via `size`), `mask`
//! renders the secret-free view for `loom check`.

mod error;
mod expand;
mod json;
mod mask;
mod model;
pub mod policy;
mod size;
mod suggest;
mod validate;

use std::path::{Path, PathBuf};

pub use error::{ConfigError, FILE_PATH, Problem, ROOT_PATH};
pub use mask::{
    MASK, is_sensitive_name, looks_like_secret, mask_arg, mask_args, mask_url, url_userinfo,
};
pub use model::{
    AuditConfig, ClusterConfig, Config, ConfigFormat, DEFAULT_AUDIT_MAX_BYTES,
    DEFAULT_CALL_TIMEOUT_MS, DEFAULT_LLM_MAX_IN_FLIGHT, DEFAULT_LLM_MAX_INPUT_CHARS,
    DEFAULT_LLM_TIMEOUT_MS, DEFAULT_MAX_JOINED_TOOLS, DEFAULT_MAX_TOOL_NAME_LENGTH,
    DEFAULT_MEMORY_BUDGET_BYTES, DEFAULT_QUERY_TIMEOUT_MS, DEFAULT_RESTART_BASE_DELAY_MS,
    DEFAULT_RESTART_MAX_ATTEMPTS, DEFAULT_TOKEN_THRESHOLD, DownstreamProtocol, HttpAuth,
    HttpConfig, KeySource, LLM_PROVIDERS, LlmConfig, LlmProvider, MAX_LLM_MAX_IN_FLIGHT,
    MAX_LLM_MAX_INPUT_CHARS, MAX_MAX_JOINED_TOOLS, MAX_MAX_TOOL_NAME_LENGTH, MAX_RESTART_DELAY,
    MAX_SERVER_NAME_LENGTH, MIN_AUDIT_MAX_BYTES, MIN_LLM_MAX_INPUT_CHARS,
    MIN_MAX_DESCRIPTION_CHARS, MIN_MAX_TOOL_NAME_LENGTH, MIN_MEMORY_BYTES, MIN_TOKEN_THRESHOLD,
    OAuthSettings, RESERVED_HEADERS, RESERVED_SERVER_NAME, RemoteServer, ReportConfig,
    RestartPolicy, Secret, ServerConfig, TelemetryConfig, ToolsConfig, ToolsMode, Transport,
    default_export_dir, glob_match, is_valid_env_name, is_valid_server_name,
};

pub const DEFAULT_CONFIG_FILE: &str = "loom.config.json";
pub const CONFIG_ENV_VAR: &str = "LOOM_CONFIG";

/// Where the config file is: `--config` wins, else `LOOM_CONFIG` if set and non-empty, else
/// `loom.config.json` in the current directory.
pub fn resolve_path(cli: Option<&Path>, env_value: Option<String>) -> PathBuf {
    if let Some(path) = cli {
        return path.to_path_buf();
    }
    match env_value {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => PathBuf::from(DEFAULT_CONFIG_FILE),
    }
}

/// Reads and validates the file at `path`, expanding `${VAR}` from the process environment.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::unreadable(
            &origin,
            format!("cannot read {origin}: {e}; pass --config PATH or set {CONFIG_ENV_VAR}"),
        )
    })?;
    // A variable holding non-UTF-8 bytes cannot be written into JSON text anyway; replacing the
    // odd bytes beats treating the variable as unset.
    let env = |name: &str| std::env::var_os(name).map(|v| v.to_string_lossy().into_owned());
    parse_str(&text, &origin, &env)
}

/// Validates config text. `env` looks variables up; `origin` names the file in messages.
pub fn parse_str(
    text: &str,
    origin: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigError> {
    let fail = |problems| ConfigError {
        origin: origin.to_owned(),
        problems,
    };
    let root = json::parse(text, origin).map_err(|p| fail(vec![p]))?;
    validate::build(&root, env).map_err(fail)
}

#[cfg(test)]
mod tests;
