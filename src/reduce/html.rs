//! STUB — replaced by the real stage.
pub fn looks_like_html(_text: &str) -> bool {
    false
}
pub struct HtmlTable {
    pub caption: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}
pub struct PageReduction {
    pub markdown: String,
    pub title: Option<String>,
    pub main_content_only: bool,
    pub page_text_chars: usize,
    pub main_text_chars: usize,
    pub tables: Vec<HtmlTable>,
}
pub fn reduce_page(
    _html: &str,
    _table_note: &mut dyn FnMut(usize, &HtmlTable) -> Option<String>,
) -> Result<PageReduction, String> {
    Err("stub".into())
}
