//! Small items several layers share, kept below all of them so that no module imports one above
//! it (DataFusion's `*-common` crates are the model): the token estimate, SQL identifier
//! quoting, text and number formatting, timestamps, who produced a result, how many datasets one
//! result may become, a tool's resolved compression policy, the process's TLS provider, a raw JSON lexer, the
//! cores this process may use, and the names and page limit of loom's own tools (plus, for tests and benches, hostile inputs).
//! Nothing here imports another module of loom.

#[cfg(any(test, feature = "fixture"))]
pub mod hostile;
pub(crate) mod json;
pub(crate) mod policy;
pub(crate) mod sql;
pub(crate) mod text;
pub(crate) mod tls;
pub(crate) mod tokens;
pub(crate) mod tools;

/// Datasets one result may become, and tables one page reduced by the context firewall may. A
/// JSON object of 6,000 arrays made 6,000 datasets, a 1.35 MB envelope and 34 s of work, and a
/// page of 40,000 tables took 81 s and made every later listing 22 MB. Past this a JSON result
/// is no table result (the firewall reduces it as a document, its original kept whole for
/// `loom_read`, SPEC §19); a page's further tables stay Markdown tables only.
pub const MAX_DATASETS_PER_RESULT: usize = 32;

/// Who produced a result: the server, its tool and the (already redacted) arguments.
#[derive(Debug, Clone)]
pub struct Origin {
    pub server: String,
    pub tool: String,
    /// Arguments, already redacted.
    pub args: serde_json::Value,
}

/// The cores this process may use, asked once (the answer reads cgroup files on Linux).
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
