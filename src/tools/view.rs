//! loom's own view of a dataset (SPEC §12.1): one self-contained page (view.html, no network:
//! hosts apply a strict CSP) that hosts rendering MCP Apps show beside `loom_query`,
//! `loom_describe` and envelopes. The page is written by hand rather than built on the ext-apps
//! App SDK: its bundle with dependencies is half a megabyte, the page's whole conversation with
//! the host is five JSON-RPC messages over postMessage, and everything it shows comes from
//! `loom_query` and `loom_describe` calls through the host.

use rmcp::model::{ReadResourceResult, Resource, ResourceContents};

pub(crate) use crate::common::tools::VIEW_URI;

/// The MIME type hosts render as an MCP App.
pub(crate) const VIEW_MIME: &str = "text/html;profile=mcp-app";

const VIEW_HTML: &str = include_str!("view.html");

/// The view as `resources/list` lists it.
pub(crate) fn resource() -> Resource {
    Resource::new(VIEW_URI, "loom dataset view")
        .with_description(
            "loom's view of a dataset: its rows with sorting, filtering and paging, its column \
             statistics and a chart (MCP Apps)",
        )
        .with_mime_type(VIEW_MIME)
}

/// `resources/read` of the view.
pub(crate) fn read() -> ReadResourceResult {
    ReadResourceResult::new(vec![
        ResourceContents::text(VIEW_HTML, VIEW_URI).with_mime_type(VIEW_MIME),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_nothing_and_stays_small() {
        for needle in [
            "http://",
            "https://",
            "src=",
            "import ",
            "fetch(",
            "XMLHttpRequest",
            "innerHTML",
        ] {
            let found = VIEW_HTML
                .lines()
                .filter(|line| !line.contains("http://www.w3.org/2000/svg"))
                .any(|line| line.contains(needle));
            assert!(!found, "view.html contains `{needle}`");
        }
        assert!(VIEW_HTML.len() < 32 * 1024, "{} bytes", VIEW_HTML.len());
    }
}
