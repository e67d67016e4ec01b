//! Small items several layers share, kept below all of them so that no module imports one above
//! it (DataFusion's `*-common` crates are the model): the token estimate, SQL identifier
//! quoting, text and number formatting, timestamps, who produced a result, and the names and
//! page limit of loom's own tools. Nothing here imports another module of loom.

pub mod sql;
pub mod text;
pub mod tokens;
pub mod tools;

/// Who produced a result: the server, its tool and the (already redacted) arguments.
#[derive(Debug, Clone)]
pub struct Origin {
    pub server: String,
    pub tool: String,
    /// Arguments, already redacted.
    pub args: serde_json::Value,
}
