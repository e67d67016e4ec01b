//! Reduces an HTML page to its main content, rendered as Markdown, for loom's context firewall.
//!
//! Pipeline: a cheap byte scan bounds the parser's work (html5ever's tree builder is quadratic in
//! nesting depth), html5ever (through `dom_query`) parses, and the tree is copied into a small
//! arena that every later pass walks iteratively, so no pass recurses per nesting level. The main
//! content is found from landmarks (`<main>`, `role=main`, `<article>`) first, and only when a
//! page has none from a readability scorer (`dom_smoothie`), whose choice is widened to the
//! smallest element holding all of it: the scorer picks *where* the article is, never which of
//! its paragraphs to keep. A guard falls back to the whole body (less obvious chrome) when the
//! choice would drop more prose than it keeps. The original page is kept by loom, so dropping
//! chrome is fine; dropping article text is not.
//!
//! Every pass is linear or bounded before it starts: the scan bounds the parser's depth work,
//! element count, re-opened formatting and attribute comparisons (html5ever's duplicate check is
//! quadratic in a tag's attributes), and a page past a bound is reduced to its text without a
//! parser. The scan, the arena's build and every walk over it check an [`Interrupt`] every few
//! thousand steps; the parser and the readability scorer cannot be stopped inside, so they are
//! checked before and after. Past the deadline the page is reduced to its text; on cancel the
//! reduction ends with an error.

use dom_query::Document;

use crate::reduce::interrupt::{CANCELLED, Interrupt, STRIDE, Stop};

mod arena;
mod attrs;
mod flat;
mod markdown;
mod render;
mod scan;
mod tables;

use arena::*;
use attrs::*;
use flat::*;
use markdown::*;
use render::*;
use scan::*;
use tables::*;

/// Pages above this are refused; loom then cuts the text plainly. Parsing is linear at ordinary
/// depths (about 15 ms per MB), so this bounds a reduction to well under a second.
pub const MAX_PAGE_BYTES: usize = 20 * 1024 * 1024;

/// Deeper markup is not parsed: html5ever spends time proportional to the open-element stack on
/// every tag, and real pages stay far below this (Python's docs: ~15, heavy web apps: ~60).
const MAX_NESTING_DEPTH: usize = 1_000;

/// Sum over all tags of the open-element depth when each is seen: the unit html5ever's quadratic
/// behaviour is paid in (~16 ns each on this machine), so 32 M units caps the parse near 0.5 s.
const MAX_PARSE_WORK: u64 = 32_000_000;

/// Each element costs ~0.5 KB across the parse tree and the arena: this caps a reduction near
/// 0.5 GB (a 20 MB documentation page has ~450 k elements).
const MAX_PAGE_ELEMENTS: usize = 1_000_000;

/// Attribute name comparisons the parser may make (see `attrs`): a comparison is a few
/// nanoseconds, so 32 M keep the tokenizer's duplicate checks well under a second, and still
/// allow a tag of 8,000 attributes. Python's documentation pages need under 3,000, a 3 MB
/// rustdoc source page 66,000.
const MAX_ATTRIBUTE_WORK: u64 = 32_000_000;

/// Attributes the parser may copy into re-opened formatting elements, and their bytes: about
/// 100 bytes each in the parse tree, so these cap the copies near 100 MB. A sloppy page that
/// leaves `<font face=… size=…>` open over 10,000 paragraphs copies 20,000.
const MAX_CLONED_ATTRIBUTES: u64 = 1_000_000;
const MAX_CLONED_BYTES: u64 = 64 * 1024 * 1024;

/// The readability scorer's time grows with nodes × depth (25k paragraphs under 150 nested
/// tables: 0.37 s) and with the cube of a bare chain's depth (1,000 nested divs: 0.4 s), so
/// pages beyond these bounds skip it and keep the whole body instead. Python's 750 KB `os` page
/// has a parse work of 0.39 M (depth 19); 1.5 M bounds the scorer near 80 ms.
const READABILITY_MAX_DEPTH: usize = 300;
const READABILITY_MAX_WORK: u64 = 1_500_000;
const READABILITY_MAX_ELEMENTS: usize = 60_000;

/// Main content below this share of the page text is suspicious when the rest is prose.
const MIN_MAIN_SHARE: f64 = 0.25;

/// Text blocks at least this long, with sentence punctuation and few links, count as prose.
const PROSE_MIN_CHARS: usize = 80;

/// Link targets may take this share of the kept text; past it, the least useful targets are
/// dropped (their text stays). Python's "What's New" carries 900 links whose targets would add
/// 55% to the text; most are repeats and relative API cross-references whose text already names
/// the target.
const LINK_TARGET_BUDGET: f64 = 0.12;
/// Pages with little text keep all their links.
const MIN_LINK_TARGET_BUDGET: usize = 2_000;

/// GFM tables wider than this are unreadable; such tables are rendered as text blocks instead.
const MAX_TABLE_COLUMNS: usize = 64;

/// Nested lists and quotes deeper than this stop adding indentation, so a hostile page cannot
/// make every line carry kilobytes of spaces.
const MAX_PREFIX_WIDTH: usize = 32;

/// `looks_like_html` only reads this much: the start of a document decides what it is.
const DETECTION_WINDOW: usize = 256 * 1024;

/// Whether `text` is an HTML page/fragment worth reducing: decided by its markup (a doctype, an
/// <html>/<body>/<head>, or a high density of real tags), not by a guess on one or two tags; false
/// for Markdown/XML-ish/JSON/code that merely contains a few tags.
pub fn looks_like_html(text: &str) -> bool {
    let window = prefix_at_char_boundary(text, DETECTION_WINDOW);
    let start = skip_leading_comments(
        window.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}'),
    );
    if start.starts_with('{') || start.starts_with('[') {
        return false;
    }
    let opening = prefix_at_char_boundary(start, 1024).to_ascii_lowercase();
    if opening.starts_with("<!doctype html") || opening.starts_with("<html") {
        return true;
    }
    if opening.starts_with("<?xml") {
        // XHTML is HTML; any other XML vocabulary is not a page.
        return opening.contains("<!doctype html") || opening.contains("<html");
    }
    let census = TagCensus::of(window);
    let tags = census.known + census.unknown;
    if census.known < 4 || census.known * 5 < tags * 4 {
        return false;
    }
    if census.structural && census.known >= 6 {
        return true;
    }
    let text_chars = census.covered_text + census.loose_text;
    if text_chars == 0 {
        return census.distinct_known >= 2;
    }
    // Markup encloses the text of an HTML fragment; in Markdown or code with a few tags most text
    // sits outside any element, and code is full of braces and semicolons.
    let covered = census.covered_text as f64 / text_chars as f64;
    let code_punctuation = census.code_punctuation as f64 / text_chars as f64;
    census.distinct_known >= 2
        && covered >= 0.7
        && code_punctuation < 0.02
        && census.markdown_lines < 3
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HtmlTable {
    pub caption: Option<String>,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct PageReduction {
    /// Main content as Markdown: headings, lists, links, GFM tables, fenced code blocks.
    pub markdown: String,
    pub title: Option<String>,
    /// True if chrome was stripped; false if it fell back to the whole page.
    pub main_content_only: bool,
    /// Plain-text length of the whole page (code points).
    pub page_text_chars: usize,
    /// Plain-text length of what was kept.
    pub main_text_chars: usize,
    /// The real data tables found in the kept content, in order.
    pub tables: Vec<HtmlTable>,
    /// Why the page was reduced the way it was, for loom's logs.
    pub method: ReductionMethod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReductionMethod {
    /// A `<main>`/`role=main`/`<article>` landmark held the content.
    Landmark,
    /// The readability scorer located the content.
    Readability,
    /// No trustworthy main content: the whole body less obvious chrome.
    WholeBody,
    /// Markup too deep or costly to parse: tags stripped, text kept.
    FlatText,
    /// The deadline passed before the page was rendered: tags stripped, text kept.
    OutOfTime,
}

/// `table_note(index, &table)` is called for each real data table; a Some(line) it returns is
/// inserted in the Markdown right after that table (loom uses it to say "this table is dataset
/// ds_…").
pub fn reduce_page(
    html: &str,
    table_note: &mut dyn FnMut(usize, &HtmlTable) -> Option<String>,
) -> Result<PageReduction, String> {
    reduce_page_with(html, table_note, &Interrupt::none())
}

/// [`reduce_page`] that stops when `interrupt` fires: past its deadline the page is reduced to
/// its text ([`ReductionMethod::OutOfTime`]: the parser-less path is linear and cheap, and the
/// model is better served by the text than by markup cut at the budget); on cancel it returns
/// an error.
pub fn reduce_page_with(
    html: &str,
    table_note: &mut dyn FnMut(usize, &HtmlTable) -> Option<String>,
    interrupt: &Interrupt,
) -> Result<PageReduction, String> {
    if html.len() > MAX_PAGE_BYTES {
        return Err(format!(
            "page too large: {} bytes is over the {} byte limit for HTML reduction",
            html.len(),
            MAX_PAGE_BYTES
        ));
    }
    let stopped = |stop: Stop| match stop {
        Stop::Cancelled => Err(CANCELLED.to_string()),
        Stop::Deadline => flat_reduction(html, ReductionMethod::OutOfTime, interrupt),
    };
    let shape = MarkupShape::scan(html, interrupt);
    if let Some(stop) = shape.stopped {
        return stopped(stop);
    }
    if shape.too_costly() {
        return flat_reduction(html, ReductionMethod::FlatText, interrupt);
    }

    // The parser cannot be stopped once it runs; the scan bounded what it will do.
    if let Some(stop) = interrupt.check() {
        return stopped(stop);
    }
    let document = Document::from(html);
    let arena = Arena::build(&document, interrupt);
    if let Some(stop) = arena.stopped() {
        return stopped(stop);
    }
    let body = arena.body();
    let page = arena.text_stats(body, false);
    let body_without_chrome = arena.text_stats(body, true);

    let mut method = ReductionMethod::Landmark;
    let mut candidate = arena.landmark_candidate();
    if candidate.is_none()
        && arena.parse_tree_depth <= READABILITY_MAX_DEPTH
        && arena.parse_tree_elements <= READABILITY_MAX_ELEMENTS
        && shape.parse_work <= READABILITY_MAX_WORK
    {
        method = ReductionMethod::Readability;
        // Bounded by the gate above, and not interruptible inside: checked on both sides.
        if let Some(stop) = interrupt.check() {
            return stopped(stop);
        }
        candidate = arena.readability_candidate(document);
    }
    let chosen = candidate
        .filter(|&node| node != body)
        .map(|node| (node, arena.text_stats(node, true)))
        .filter(|(_, kept)| !over_stripped(kept, &page, &body_without_chrome));
    let (root, kept) = match chosen {
        Some(chosen) => chosen,
        None => {
            method = ReductionMethod::WholeBody;
            (body, body_without_chrome)
        }
    };

    let budget = MIN_LINK_TARGET_BUDGET.max((kept.chars as f64 * LINK_TARGET_BUDGET) as usize);
    let mut renderer = Renderer::new(&arena, false, Some(table_note));
    renderer.untargeted_links = arena.links_over_budget(root, budget);
    arena.walk(root, true, &mut renderer);
    // A walk cut short by the interrupt rendered part of the page: its text is given instead.
    if let Some(stop) = arena.stopped().or_else(|| interrupt.check()) {
        return stopped(stop);
    }
    let tables = std::mem::take(&mut renderer.tables);
    let markdown = renderer.writer.finish();
    let title = arena
        .title
        .clone()
        .or_else(|| arena.first_heading_text(root));
    Ok(PageReduction {
        markdown,
        title,
        main_content_only: method != ReductionMethod::WholeBody,
        page_text_chars: page.chars,
        main_text_chars: kept.chars,
        tables,
        method,
    })
}

/// The guard against over-stripping. Main content normally holds most of a page's text (the
/// Python docs pages: 94–98%, the news layout in testdata: 73%), so under a quarter is
/// suspicious; but a portal page's text can be mostly menus and link lists, so a small share
/// alone proves nothing. It is over-stripping when what the choice drops (outside obvious
/// chrome) is mostly prose: more prose than it keeps when the share is small, or twice as much
/// at any share (the landmark then missed the article).
fn over_stripped(kept: &TextStats, page: &TextStats, body_without_chrome: &TextStats) -> bool {
    let dropped_prose = body_without_chrome.prose.saturating_sub(kept.prose);
    let small_share = (kept.chars as f64) < MIN_MAIN_SHARE * page.chars as f64;
    kept.chars == 0 || (small_share && dropped_prose > kept.prose) || dropped_prose > 2 * kept.prose
}

#[cfg(test)]
mod tests;
