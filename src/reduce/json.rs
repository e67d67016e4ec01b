//! STUB — replaced by the real stage.
#[derive(Default)]
pub struct JsonOptions {
    pub max_string_chars: usize,
    pub keep_examples: usize,
    pub fold_min_items: usize,
    pub max_depth: usize,
    pub document_ref: String,
}
pub struct JsonSummary {
    pub json: String,
    pub folds: usize,
    pub cut_strings: usize,
    pub elided: usize,
}
pub fn summarize(
    _text: &str,
    _options: &JsonOptions,
    _ingest: &mut dyn FnMut(&str, &[serde_json::Value]) -> Option<String>,
) -> Option<JsonSummary> {
    None
}
