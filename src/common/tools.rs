//! The names of loom's own tools, the page limit of `loom_read` and the URI of loom's own view,
//! which layers below the gateway (the firewall's reductions, envelopes, the session report)
//! quote.

pub(crate) const QUERY: &str = "loom_query";
pub(crate) const LIST: &str = "loom_list_datasets";
pub(crate) const DESCRIBE: &str = "loom_describe";
pub(crate) const MATERIALIZE: &str = "loom_materialize";
pub(crate) const EXPORT: &str = "loom_export";
pub(crate) const READ: &str = "loom_read";

/// The most one `loom_read` call returns, in characters.
pub(crate) const MAX_PAGE_CHARS: usize = 100_000;

/// The files of a sentence-transformers model folder tool search reads (`tools.searchModel`):
/// config checks them, the gateway loads them.
pub(crate) const SEARCH_MODEL_FILES: [&str; 3] =
    ["config.json", "tokenizer.json", "model.safetensors"];

/// loom's own MCP Apps view of a dataset (SPEC §12.1).
pub(crate) const VIEW_URI: &str = "ui://loom/dataset.html";

/// `_meta` that points hosts rendering MCP Apps at loom's view: both spellings, the current
/// `ui.resourceUri` and the older flat `ui/resourceUri`.
pub(crate) fn view_meta() -> serde_json::Map<String, serde_json::Value> {
    let mut meta = serde_json::Map::new();
    meta.insert("ui".into(), serde_json::json!({ "resourceUri": VIEW_URI }));
    meta.insert("ui/resourceUri".into(), VIEW_URI.into());
    meta
}
