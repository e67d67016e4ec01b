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

use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use dom_query::{Document, NodeData, NodeId};

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
}

/// `table_note(index, &table)` is called for each real data table; a Some(line) it returns is
/// inserted in the Markdown right after that table (loom uses it to say "this table is dataset
/// ds_…").
pub fn reduce_page(
    html: &str,
    table_note: &mut dyn FnMut(usize, &HtmlTable) -> Option<String>,
) -> Result<PageReduction, String> {
    if html.len() > MAX_PAGE_BYTES {
        return Err(format!(
            "page too large: {} bytes is over the {} byte limit for HTML reduction",
            html.len(),
            MAX_PAGE_BYTES
        ));
    }
    let shape = MarkupShape::scan(html);
    if shape.too_costly() {
        return Ok(flat_reduction(html));
    }

    let document = Document::from(html);
    let arena = Arena::build(&document);
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

// ---------------------------------------------------------------------------------------------
// Pre-parse scan

/// What a byte scan tells about the markup before parsing. It mimics the tree builder's stack
/// of open elements closely enough to bound the parser's cost, erring towards over-estimates:
/// implied table wrappers are counted, implicit closes only pop the top of the stack, and
/// formatting elements that the parser would re-open ("reconstruct") are re-pushed, since that
/// is how a small page makes html5ever build millions of nodes (200 unclosed `<b id=…>`
/// closed by a `</div>`, then 20,000 `<div>x</div>`: 240 KB in, 4 M nodes and 1.5 GB out).
#[derive(Debug, Default)]
struct MarkupShape {
    max_depth: usize,
    parse_work: u64,
    start_tags: usize,
    /// More unclosed formatting elements than any sane page has.
    formatting_overflow: bool,
}

/// Unclosed formatting elements beyond this make a page hostile rather than sloppy.
const MAX_ACTIVE_FORMATTING: usize = 200;

/// The scan's model of one open element.
struct OpenElement {
    name: u64,
    /// An SVG/MathML element, whose children are foreign too unless it is an integration point.
    foreign: bool,
    integration_point: bool,
    /// Identity of the active-formatting entry this element stands for.
    formatting_id: Option<u64>,
}

/// The scan's model of the active formatting elements list (markers have no name).
struct FormattingEntry {
    name: Option<u64>,
    id: u64,
    on_stack: bool,
}

/// End tags do not reach past these (the parser's "scope" boundaries).
fn is_scope_boundary(tag: &str) -> bool {
    matches!(
        tag,
        "applet" | "caption" | "html" | "table" | "td" | "th" | "marquee" | "object" | "template"
    )
}

/// Keys are hashes already; hashing them again would dominate the scan.
#[derive(Default)]
struct KeyHasher(u64);

impl std::hash::Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }
    fn write_u64(&mut self, key: u64) {
        self.0 = key;
    }
}

type KeyCounts = std::collections::HashMap<u64, usize, std::hash::BuildHasherDefault<KeyHasher>>;

/// Tag names as FNV hashes of their lower-case form: the scan allocates nothing per tag.
fn name_key(lower: &str) -> u64 {
    lower.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

struct TreeModel {
    open: Vec<OpenElement>,
    /// Per scope segment (the stack between two boundaries): how many elements of each name are
    /// open, so a stray end tag costs O(1) instead of a walk down the stack.
    segments: Vec<KeyCounts>,
    /// Stack positions of the open scope boundaries.
    boundaries: Vec<usize>,
    formatting: Vec<FormattingEntry>,
    off_stack: usize,
    next_id: u64,
}

impl TreeModel {
    fn new() -> Self {
        TreeModel {
            open: Vec::new(),
            segments: vec![Default::default()],
            boundaries: Vec::new(),
            formatting: Vec::new(),
            off_stack: 0,
            next_id: 0,
        }
    }

    fn top_is(&self, names: &[&str]) -> bool {
        self.open
            .last()
            .is_some_and(|e| names.iter().any(|n| name_key(n) == e.name))
    }

    fn push(&mut self, shape: &mut MarkupShape, name: &str, formatting_id: Option<u64>) {
        self.push_element(shape, name, formatting_id, false);
    }

    fn push_element(
        &mut self,
        shape: &mut MarkupShape,
        name: &str,
        formatting_id: Option<u64>,
        foreign: bool,
    ) {
        let integration_point = foreign
            && matches!(
                name,
                "foreignobject"
                    | "desc"
                    | "title"
                    | "annotation-xml"
                    | "mi"
                    | "mo"
                    | "mn"
                    | "ms"
                    | "mtext"
            );
        self.push_key(
            shape,
            name_key(name),
            is_scope_boundary(name),
            formatting_id,
            foreign,
            integration_point,
        );
    }

    /// Whether a start tag now would create an SVG/MathML element.
    fn in_foreign_content(&self) -> bool {
        self.open
            .last()
            .is_some_and(|e| e.foreign && !e.integration_point)
    }

    fn push_key(
        &mut self,
        shape: &mut MarkupShape,
        name: u64,
        boundary: bool,
        formatting_id: Option<u64>,
        foreign: bool,
        integration_point: bool,
    ) {
        if let Some(segment) = self.segments.last_mut() {
            *segment.entry(name).or_default() += 1;
        }
        if boundary {
            self.segments.push(Default::default());
            self.boundaries.push(self.open.len());
        }
        self.open.push(OpenElement {
            name,
            foreign,
            integration_point,
            formatting_id,
        });
        shape.max_depth = shape.max_depth.max(self.open.len());
        shape.parse_work += self.open.len() as u64;
    }

    fn pop(&mut self) -> Option<OpenElement> {
        let element = self.open.pop()?;
        if self.boundaries.last() == Some(&self.open.len()) {
            self.boundaries.pop();
            if self.segments.len() > 1 {
                self.segments.pop();
            }
        }
        if let Some(count) = self
            .segments
            .last_mut()
            .and_then(|s| s.get_mut(&element.name))
        {
            *count = count.saturating_sub(1);
        }
        if let Some(id) = element.formatting_id
            && let Some(entry) = self.formatting.iter_mut().rev().find(|e| e.id == id)
        {
            entry.on_stack = false;
            self.off_stack += 1;
        }
        Some(element)
    }

    /// Pops through the element an end tag closes, if it is open within reach.
    fn close(&mut self, name: &str) {
        let key = name_key(name);
        let in_segment =
            |segment: Option<&KeyCounts>| segment.and_then(|s| s.get(&key)).is_some_and(|c| *c > 0);
        let reachable = in_segment(self.segments.last())
            || (is_scope_boundary(name)
                && self.segments.len() >= 2
                && in_segment(self.segments.get(self.segments.len() - 2)));
        if !reachable {
            return;
        }
        while let Some(element) = self.pop() {
            if element.name == key {
                break;
            }
        }
    }

    /// The parser re-opens formatting elements that were closed implicitly before inserting
    /// text or an inline element.
    fn reconstruct(&mut self, shape: &mut MarkupShape) {
        if self.off_stack == 0 {
            return;
        }
        let after_marker = self
            .formatting
            .iter()
            .rposition(|e| e.name.is_none())
            .map_or(0, |m| m + 1);
        for i in after_marker..self.formatting.len() {
            if let (Some(name), false) = (self.formatting[i].name, self.formatting[i].on_stack) {
                self.formatting[i].on_stack = true;
                let id = self.formatting[i].id;
                self.push_key(shape, name, false, Some(id), false, false);
                shape.start_tags += 1;
            }
        }
        self.off_stack = self
            .formatting
            .iter()
            .filter(|e| e.name.is_some() && !e.on_stack)
            .count();
    }

    fn add_formatting(&mut self, name: Option<u64>, shape: &mut MarkupShape) -> u64 {
        self.next_id += 1;
        self.formatting.push(FormattingEntry {
            name,
            id: self.next_id,
            on_stack: name.is_some(),
        });
        if name.is_some()
            && self.formatting.iter().filter(|e| e.name.is_some()).count() > MAX_ACTIVE_FORMATTING
        {
            shape.formatting_overflow = true;
        }
        self.next_id
    }

    fn clear_to_marker(&mut self) {
        if let Some(marker) = self.formatting.iter().rposition(|e| e.name.is_none()) {
            self.formatting.truncate(marker);
            self.off_stack = self
                .formatting
                .iter()
                .filter(|e| e.name.is_some() && !e.on_stack)
                .count();
        }
    }
}

impl MarkupShape {
    fn scan(html: &str) -> MarkupShape {
        let mut shape = MarkupShape::default();
        let mut model = TreeModel::new();
        let mut lower = String::new();
        let mut tokens = Tokens::new(html);
        while let Some(token) = tokens.next() {
            if shape.too_costly() {
                break;
            }
            let (name, closing, self_closing) = match token {
                Token::Tag {
                    name,
                    closing,
                    self_closing,
                } => (name, closing, self_closing),
                Token::Text(_) | Token::RawText { .. } => {
                    model.reconstruct(&mut shape);
                    continue;
                }
            };
            lower.clear();
            lower.extend(name.chars().map(|c| c.to_ascii_lowercase()));
            if closing {
                if is_formatting_element(&lower) {
                    let key = name_key(&lower);
                    if let Some(pos) = model.formatting.iter().rposition(|e| e.name == Some(key)) {
                        let entry = model.formatting.remove(pos);
                        if !entry.on_stack {
                            model.off_stack = model.off_stack.saturating_sub(1);
                        }
                    }
                }
                model.close(&lower);
                if matches!(lower.as_str(), "td" | "th" | "caption") {
                    model.clear_to_marker();
                }
                shape.parse_work += model.open.len() as u64;
                continue;
            }
            shape.start_tags += 1;

            let mut in_foreign = model.in_foreign_content();
            if in_foreign && breaks_out_of_foreign_content(&lower) {
                while model.open.last().is_some_and(|e| e.foreign) {
                    model.pop();
                }
                in_foreign = false;
            }
            if in_foreign {
                // SVG/MathML: self-closing tags are honoured, and no HTML rule applies.
                if self_closing {
                    shape.parse_work += model.open.len() as u64;
                } else {
                    model.push_element(&mut shape, &lower, None, true);
                }
                continue;
            }

            // Block and table starts are inserted as they are; inline ones re-open formatting.
            if !closes_paragraph(&lower)
                && !matches!(
                    lower.as_str(),
                    "table"
                        | "caption"
                        | "colgroup"
                        | "col"
                        | "tbody"
                        | "thead"
                        | "tfoot"
                        | "tr"
                        | "td"
                        | "th"
                        | "html"
                        | "head"
                        | "body"
                )
            {
                model.reconstruct(&mut shape);
            }
            let starts_foreign = lower == "svg" || lower == "math";
            if is_void_element(&lower) || (starts_foreign && self_closing) {
                shape.parse_work += model.open.len() as u64;
                continue;
            }
            if closes_paragraph(&lower) && model.top_is(&["p"]) {
                model.pop();
            }
            if let Some(siblings) = implicitly_closed_by(&lower)
                && model.top_is(siblings)
            {
                model.pop();
            }
            // The parser inserts the wrappers a bare cell or row implies.
            if matches!(lower.as_str(), "td" | "th") && !model.top_is(&["tr"]) {
                model.push(&mut shape, "tbody", None);
                model.push(&mut shape, "tr", None);
            } else if lower == "tr" && !model.top_is(&["tbody", "thead", "tfoot"]) {
                model.push(&mut shape, "tbody", None);
            }
            let formatting_id = if is_formatting_element(&lower) {
                Some(model.add_formatting(Some(name_key(&lower)), &mut shape))
            } else {
                if matches!(lower.as_str(), "td" | "th" | "caption") {
                    model.add_formatting(None, &mut shape);
                }
                None
            };
            model.push_element(&mut shape, &lower, formatting_id, starts_foreign);
            // Only these two: whether `<textarea>`, `<title>` or `<plaintext>` hold text depends
            // on parser modes (select, frameset, template) the model does not follow, and reading
            // markup as text would hide it from the bound. Counting it instead over-estimates.
            if matches!(lower.as_str(), "script" | "style") {
                tokens.raw_text_until_end_of(name);
            }
        }
        shape
    }

    fn too_costly(&self) -> bool {
        self.formatting_overflow
            || self.max_depth > MAX_NESTING_DEPTH
            || self.parse_work > MAX_PARSE_WORK
            || self.start_tags > MAX_PAGE_ELEMENTS
    }
}

/// HTML start tags that end SVG/MathML content.
fn breaks_out_of_foreign_content(tag: &str) -> bool {
    matches!(
        tag,
        "b" | "big"
            | "blockquote"
            | "body"
            | "br"
            | "center"
            | "code"
            | "dd"
            | "div"
            | "dl"
            | "dt"
            | "em"
            | "embed"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "head"
            | "hr"
            | "i"
            | "img"
            | "li"
            | "listing"
            | "menu"
            | "meta"
            | "nobr"
            | "ol"
            | "p"
            | "pre"
            | "ruby"
            | "s"
            | "small"
            | "span"
            | "strong"
            | "strike"
            | "sub"
            | "sup"
            | "table"
            | "tt"
            | "u"
            | "ul"
            | "var"
    )
}

fn is_formatting_element(tag: &str) -> bool {
    matches!(
        tag,
        "a" | "b"
            | "big"
            | "code"
            | "em"
            | "font"
            | "i"
            | "nobr"
            | "s"
            | "small"
            | "strike"
            | "strong"
            | "tt"
            | "u"
    )
}

fn implicitly_closed_by(tag: &str) -> Option<&'static [&'static str]> {
    Some(match tag {
        "li" => &["li"],
        "dt" | "dd" => &["dt", "dd"],
        "option" => &["option"],
        "tr" => &["tr", "td", "th"],
        "td" | "th" => &["td", "th"],
        "thead" | "tbody" | "tfoot" => &["thead", "tbody", "tfoot", "tr"],
        _ => return None,
    })
}

fn closes_paragraph(tag: &str) -> bool {
    matches!(
        tag,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "div"
            | "dl"
            | "fieldset"
            | "figure"
            | "footer"
            | "form"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hr"
            | "main"
            | "nav"
            | "ol"
            | "p"
            | "pre"
            | "section"
            | "table"
            | "ul"
            | "details"
            | "li"
            | "dt"
            | "dd"
    )
}

fn is_void_element(tag: &str) -> bool {
    matches!(
        tag,
        "area"
            | "base"
            | "br"
            | "col"
            | "embed"
            | "hr"
            | "img"
            | "input"
            | "link"
            | "meta"
            | "param"
            | "source"
            | "track"
            | "wbr"
            | "keygen"
            | "frame"
    )
}

/// Elements whose content the tokenizer reads as text up to the matching end tag.
fn is_raw_text_element(tag: &str) -> bool {
    [
        "script",
        "style",
        "textarea",
        "title",
        "xmp",
        "iframe",
        "noembed",
        "noframes",
        "plaintext",
    ]
    .iter()
    .any(|raw| raw.eq_ignore_ascii_case(tag))
}

enum Token<'a> {
    Text(&'a str),
    Tag {
        name: &'a str,
        closing: bool,
        self_closing: bool,
    },
    RawText {
        name: &'a str,
        text: &'a str,
    },
}

/// A forgiving tokenizer for the scans that run without a parser (detection, depth bound, flat
/// text): tags, text between them, and on request the content of a raw-text element.
struct Tokens<'a> {
    src: &'a str,
    pos: usize,
    pending_raw: Option<&'a str>,
}

impl<'a> Tokens<'a> {
    fn new(src: &'a str) -> Self {
        Tokens {
            src,
            pos: 0,
            pending_raw: None,
        }
    }

    /// Reads what follows the tag just returned as text up to its end tag. Left to the caller:
    /// whether `<style>` or `<plaintext>` hold text depends on the parser's state (inside SVG
    /// they are ordinary elements), and a scan that guessed wrong would miss the markup after.
    fn raw_text_until_end_of(&mut self, name: &'a str) {
        self.pending_raw = Some(name);
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let bytes = self.src.as_bytes();
        if let Some(name) = self.pending_raw.take() {
            let end = find_end_tag(bytes, self.pos, name).unwrap_or(bytes.len());
            let text = &self.src[self.pos..end];
            self.pos = end;
            return Some(Token::RawText { name, text });
        }
        while self.pos < bytes.len() {
            let start = self.pos;
            let Some(lt) = bytes[start..]
                .iter()
                .position(|&b| b == b'<')
                .map(|p| p + start)
            else {
                self.pos = bytes.len();
                return Some(Token::Text(&self.src[start..]));
            };
            if lt > start {
                self.pos = lt;
                return Some(Token::Text(&self.src[start..lt]));
            }
            let rest = &bytes[lt..];
            if rest.starts_with(b"<!--") {
                self.pos = find_bytes(bytes, lt + 4, b"-->").map_or(bytes.len(), |p| p + 3);
                continue;
            }
            if rest.len() > 1 && (rest[1] == b'!' || rest[1] == b'?') {
                self.pos = bytes[lt..]
                    .iter()
                    .position(|&b| b == b'>')
                    .map_or(bytes.len(), |p| lt + p + 1);
                continue;
            }
            let closing = rest.get(1) == Some(&b'/');
            let name_start = lt + 1 + usize::from(closing);
            if !bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic) {
                // A lone '<' is text.
                self.pos = lt + 1;
                return Some(Token::Text(&self.src[lt..lt + 1]));
            }
            let name_end = bytes[name_start..]
                .iter()
                .position(|b| !(b.is_ascii_alphanumeric() || *b == b'-' || *b == b':'))
                .map_or(bytes.len(), |p| name_start + p);
            let tag_end = find_tag_end(bytes, name_end);
            let name = &self.src[name_start..name_end];
            let self_closing =
                tag_end >= 2 && bytes.get(tag_end - 1) == Some(&b'>') && bytes[tag_end - 2] == b'/';
            self.pos = tag_end;
            return Some(Token::Tag {
                name,
                closing,
                self_closing,
            });
        }
        None
    }
}

/// The byte after a tag's closing '>', honouring quoted attribute values.
fn find_tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote: Option<u8> = None;
    let mut previous = 0u8;
    for (i, &b) in bytes.iter().enumerate().skip(from) {
        match quote {
            Some(q) if b == q => {
                quote = None;
                previous = b;
            }
            Some(_) => {}
            None if b == b'>' => return i + 1,
            None if (b == b'"' || b == b'\'') && previous == b'=' => quote = Some(b),
            None if !b.is_ascii_whitespace() => previous = b,
            None => {}
        }
    }
    bytes.len()
}

fn find_bytes(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Start of `</name` (ASCII case-insensitive) at or after `from`.
fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let name = name.as_bytes();
    let mut i = from;
    while let Some(p) = find_bytes(bytes, i, b"</") {
        let candidate = &bytes[p + 2..];
        if candidate.len() >= name.len() && candidate[..name.len()].eq_ignore_ascii_case(name) {
            return Some(p);
        }
        i = p + 2;
    }
    None
}

fn prefix_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn skip_leading_comments(mut text: &str) -> &str {
    while let Some(rest) = text.strip_prefix("<!--") {
        text = match rest.find("-->") {
            Some(end) => rest[end + 3..].trim_start(),
            None => "",
        };
    }
    text
}

/// Tag statistics for `looks_like_html`.
#[derive(Default)]
struct TagCensus {
    known: usize,
    unknown: usize,
    distinct_known: usize,
    structural: bool,
    covered_text: usize,
    loose_text: usize,
    code_punctuation: usize,
    markdown_lines: usize,
}

impl TagCensus {
    fn of(text: &str) -> TagCensus {
        let mut census = TagCensus::default();
        let mut seen: Vec<String> = Vec::new();
        let mut depth = 0usize;
        let mut tokens = Tokens::new(text);
        while let Some(token) = tokens.next() {
            match token {
                Token::Tag { name, closing, .. } => {
                    if !closing && is_raw_text_element(name) {
                        tokens.raw_text_until_end_of(name);
                    }
                    let lower = name.to_ascii_lowercase();
                    if !is_known_html_element(&lower) {
                        census.unknown += 1;
                        continue;
                    }
                    census.known += 1;
                    if !seen.contains(&lower) && seen.len() < 64 {
                        seen.push(lower.clone());
                    }
                    if !closing && matches!(lower.as_str(), "html" | "head" | "body") {
                        census.structural = true;
                    }
                    if is_void_element(&lower) {
                        continue;
                    }
                    if closing {
                        depth = depth.saturating_sub(1);
                    } else {
                        depth += 1;
                    }
                }
                Token::Text(t) => {
                    let chars = t.chars().filter(|c| !c.is_whitespace()).count();
                    if depth > 0 {
                        census.covered_text += chars;
                    } else {
                        census.loose_text += chars;
                    }
                    census.code_punctuation +=
                        t.chars().filter(|c| matches!(c, '{' | '}' | ';')).count();
                    census.markdown_lines += t.lines().filter(|l| is_markdown_line(l)).count();
                }
                Token::RawText { .. } => {}
            }
        }
        census.distinct_known = seen.len();
        census
    }
}

fn is_markdown_line(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("# ")
        || l.starts_with("## ")
        || l.starts_with("```")
        || l.starts_with("- ")
        || l.starts_with("* ")
        || (l.starts_with('|') && l.ends_with('|'))
        || l.contains("](")
}

fn is_known_html_element(tag: &str) -> bool {
    matches!(
        tag,
        "a" | "abbr"
            | "address"
            | "article"
            | "aside"
            | "audio"
            | "b"
            | "blockquote"
            | "body"
            | "br"
            | "button"
            | "caption"
            | "cite"
            | "code"
            | "col"
            | "colgroup"
            | "dd"
            | "del"
            | "details"
            | "dfn"
            | "div"
            | "dl"
            | "dt"
            | "em"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "head"
            | "header"
            | "hr"
            | "html"
            | "i"
            | "iframe"
            | "img"
            | "input"
            | "ins"
            | "kbd"
            | "label"
            | "li"
            | "link"
            | "main"
            | "mark"
            | "meta"
            | "nav"
            | "noscript"
            | "ol"
            | "option"
            | "p"
            | "picture"
            | "pre"
            | "q"
            | "s"
            | "samp"
            | "script"
            | "section"
            | "select"
            | "small"
            | "source"
            | "span"
            | "strong"
            | "style"
            | "sub"
            | "summary"
            | "sup"
            | "svg"
            | "table"
            | "tbody"
            | "td"
            | "template"
            | "textarea"
            | "tfoot"
            | "th"
            | "thead"
            | "time"
            | "title"
            | "tr"
            | "u"
            | "ul"
            | "var"
            | "video"
            | "wbr"
            | "center"
            | "font"
            | "tt"
    )
}

// ---------------------------------------------------------------------------------------------
// Degraded path: tag stripping without a parser

fn flat_reduction(html: &str) -> PageReduction {
    let mut out = String::new();
    let mut title = None;
    let mut pending_space = false;
    let mut pending_break = false;
    let mut tokens = Tokens::new(html);
    while let Some(token) = tokens.next() {
        match token {
            Token::Tag { name, closing, .. } => {
                if !closing && is_raw_text_element(name) {
                    tokens.raw_text_until_end_of(name);
                }
                let lower = name.to_ascii_lowercase();
                if lower == "br"
                    || closes_paragraph(&lower)
                    || matches!(lower.as_str(), "li" | "tr" | "td" | "th" | "dt" | "dd")
                {
                    pending_break = true;
                }
            }
            Token::RawText { name, text } => {
                if title.is_none() && name.eq_ignore_ascii_case("title") {
                    title =
                        Some(collapse_whitespace(&decode_entities(text))).filter(|t| !t.is_empty());
                }
            }
            Token::Text(t) => {
                let decoded = decode_entities(t);
                for (i, word) in decoded.split_whitespace().enumerate() {
                    if !out.is_empty() {
                        if pending_break {
                            out.push('\n');
                        } else if pending_space || i > 0 {
                            out.push(' ');
                        }
                    }
                    pending_break = false;
                    pending_space = false;
                    out.push_str(word);
                }
                if decoded.ends_with(char::is_whitespace) {
                    pending_space = true;
                }
            }
        }
    }
    let chars = out.chars().count();
    PageReduction {
        markdown: out,
        title,
        main_content_only: false,
        page_text_chars: chars,
        main_text_chars: chars,
        tables: Vec::new(),
        method: ReductionMethod::FlatText,
    }
}

/// Entity decoding for the parser-less path: numeric references and the common named ones.
fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let end = rest.bytes().take(12).position(|b| b == b';');
        let decoded = end.and_then(|end| {
            let entity = &rest[1..end];
            let ch = if let Some(num) = entity.strip_prefix('#') {
                let value = match num.strip_prefix(['x', 'X']) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok(),
                    None => num.parse::<u32>().ok(),
                };
                value.and_then(char::from_u32)
            } else {
                named_entity(entity)
            };
            ch.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "para" => '¶',
        "sect" => '§',
        "middot" => '·',
        "bull" => '•',
        "times" => '×',
        _ => return None,
    })
}

fn collapse_whitespace(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Arena

const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    A,
    Article,
    Aside,
    Blockquote,
    Body,
    Br,
    Button,
    Caption,
    Code,
    Dd,
    Dialog,
    Div,
    Dl,
    Dt,
    Em,
    Footer,
    Heading(u8),
    Header,
    Hr,
    Img,
    Li,
    Main,
    Nav,
    Ol,
    P,
    Pre,
    Strong,
    Table,
    TableHead,
    TableSection,
    Td,
    Th,
    Tr,
    Ul,
    /// Rendered as its own paragraph.
    Paragraph,
    /// Rendered on its own line.
    Block,
    Inline,
}

/// Elements that never show text to a reader, or are form and media chrome.
fn is_invisible_element(tag: &str) -> bool {
    matches!(
        tag,
        "script"
            | "style"
            | "noscript"
            | "template"
            | "svg"
            | "canvas"
            | "iframe"
            | "object"
            | "embed"
            | "video"
            | "audio"
            | "map"
            | "head"
            | "meta"
            | "link"
            | "base"
            | "input"
            | "select"
            | "option"
            | "optgroup"
            | "datalist"
            | "textarea"
            | "frame"
            | "frameset"
            | "param"
            | "source"
            | "track"
            | "title"
    )
}

fn classify_tag(tag: &str) -> Tag {
    match tag {
        "a" => Tag::A,
        "article" => Tag::Article,
        "aside" => Tag::Aside,
        "blockquote" => Tag::Blockquote,
        "body" => Tag::Body,
        "br" => Tag::Br,
        "button" => Tag::Button,
        "caption" => Tag::Caption,
        "code" | "kbd" | "samp" | "tt" => Tag::Code,
        "dd" => Tag::Dd,
        "dialog" => Tag::Dialog,
        "div" => Tag::Div,
        "dl" => Tag::Dl,
        "dt" => Tag::Dt,
        "em" | "i" | "cite" | "dfn" | "var" => Tag::Em,
        "footer" => Tag::Footer,
        "h1" => Tag::Heading(1),
        "h2" => Tag::Heading(2),
        "h3" => Tag::Heading(3),
        "h4" => Tag::Heading(4),
        "h5" => Tag::Heading(5),
        "h6" => Tag::Heading(6),
        "header" => Tag::Header,
        "hr" => Tag::Hr,
        "img" => Tag::Img,
        "li" => Tag::Li,
        "main" => Tag::Main,
        "nav" => Tag::Nav,
        "ol" => Tag::Ol,
        "p" => Tag::P,
        "pre" | "listing" | "xmp" | "plaintext" => Tag::Pre,
        "strong" | "b" => Tag::Strong,
        "table" => Tag::Table,
        "thead" => Tag::TableHead,
        "tbody" | "tfoot" => Tag::TableSection,
        "td" => Tag::Td,
        "th" => Tag::Th,
        "tr" => Tag::Tr,
        "ul" | "menu" | "dir" => Tag::Ul,
        "figure" | "details" | "address" | "fieldset" | "center" | "hgroup" => Tag::Paragraph,
        "section" | "form" | "figcaption" | "summary" | "legend" | "search" | "html" => Tag::Block,
        _ => Tag::Inline,
    }
}

#[derive(Debug, Default)]
struct Attrs {
    /// Lower-cased `id` and `class`, space separated, for chrome patterns.
    id_class: String,
    class: String,
    role: String,
    href: Option<String>,
    src: Option<String>,
    alt: Option<String>,
    colspan: usize,
    rowspan: usize,
    start: Option<u64>,
    article_body: bool,
    modal: bool,
    open: bool,
}

#[derive(Debug)]
enum NodeKind {
    Element { tag: Tag, attrs: Box<Attrs> },
    Text(String),
}

#[derive(Debug)]
struct Node {
    parent: u32,
    first_child: u32,
    next_sibling: u32,
    last_child: u32,
    /// Non-whitespace characters in the subtree, for size tests that must not walk it.
    solid_chars: u32,
    /// Whether a `<table>` is somewhere below: a data table has none, and knowing it up front
    /// keeps table analysis linear on nested layout tables.
    table_below: bool,
    /// Precomputed, as every walk asks it of every element.
    chrome: Chrome,
    landmark: bool,
    kind: NodeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chrome {
    Never,
    Always,
    /// Site chrome unless inside `<main>`/`<article>` (where a header is the article's own).
    OutsideContent,
}

struct Arena {
    nodes: Vec<Node>,
    title: Option<String>,
    /// Depth and element count of the whole parse tree, hidden parts included: what the
    /// readability scorer will walk (it recurses per level in places).
    parse_tree_depth: usize,
    parse_tree_elements: usize,
}

enum Built {
    Skip,
    /// An element left out of the arena (its subtree too).
    SkipElement,
    Text(String),
    Element(Tag, Box<Attrs>),
}

impl Arena {
    /// Copies the parsed document into the arena, leaving out what no reader sees (scripts,
    /// styles, SVG, hidden elements, form controls). Iterative: the parse tree may be deep.
    fn build(document: &Document) -> Arena {
        let tree = &document.tree;
        let title = document
            .select("head > title")
            .iter()
            .next()
            .map(|t| collapse_whitespace(&t.text()))
            .filter(|t| !t.is_empty());
        let mut nodes = vec![Node {
            parent: NONE,
            first_child: NONE,
            next_sibling: NONE,
            last_child: NONE,
            solid_chars: 0,
            table_below: false,
            chrome: Chrome::Never,
            landmark: false,
            kind: NodeKind::Element {
                tag: Tag::Block,
                attrs: Box::default(),
            },
        }];
        // (parse-tree node, arena parent or NONE inside a left-out subtree, depth)
        let mut stack: Vec<(NodeId, u32, usize)> = Vec::new();
        let mut children: Vec<NodeId> = Vec::new();
        let mut parse_tree_depth = 0;
        let mut parse_tree_elements = 0;
        let push_children = |stack: &mut Vec<(NodeId, u32, usize)>,
                             children: &mut Vec<NodeId>,
                             id: NodeId,
                             parent: u32,
                             depth: usize| {
            children.clear();
            let mut child = tree.query_node(&id, |n| n.first_child).flatten();
            while let Some(c) = child {
                children.push(c);
                child = tree.query_node(&c, |n| n.next_sibling).flatten();
            }
            stack.extend(children.iter().rev().map(|&c| (c, parent, depth + 1)));
        };
        push_children(&mut stack, &mut children, document.root().id, 0, 0);
        while let Some((id, parent, depth)) = stack.pop() {
            parse_tree_depth = parse_tree_depth.max(depth);
            if parent == NONE {
                // Left-out subtrees still count for the readability scorer, which sees them.
                if tree.query_node(&id, |n| matches!(n.data, NodeData::Element(_))) == Some(true) {
                    parse_tree_elements += 1;
                    push_children(&mut stack, &mut children, id, NONE, depth);
                }
                continue;
            }
            let built = tree.query_node(&id, |n| match &n.data {
                NodeData::Text { contents } => Built::Text(contents.to_string()),
                NodeData::Element(e) => {
                    let name = e.name.local.as_ref();
                    if is_invisible_element(name) {
                        return Built::SkipElement;
                    }
                    let mut attrs = Attrs {
                        colspan: 1,
                        rowspan: 1,
                        ..Attrs::default()
                    };
                    for a in &e.attrs {
                        let value: &str = a.value.as_ref();
                        match a.name.local.as_ref() {
                            "hidden" => return Built::SkipElement,
                            "aria-hidden" if value.trim().eq_ignore_ascii_case("true") => {
                                return Built::SkipElement;
                            }
                            "style" if hides_element(value) => return Built::SkipElement,
                            "id" => {
                                attrs.id_class.push_str(&value.to_ascii_lowercase());
                                attrs.id_class.push(' ');
                            }
                            "class" => {
                                attrs.id_class.push_str(&value.to_ascii_lowercase());
                                attrs.id_class.push(' ');
                                attrs.class = value.to_string();
                            }
                            "role" => {
                                attrs.role = value
                                    .split_whitespace()
                                    .next()
                                    .unwrap_or("")
                                    .to_ascii_lowercase();
                            }
                            "href" => attrs.href = Some(value.trim().to_string()),
                            "src" => attrs.src = Some(value.trim().to_string()),
                            "alt" => attrs.alt = Some(collapse_whitespace(value)),
                            "colspan" => attrs.colspan = parse_span(value, 1000),
                            "rowspan" => attrs.rowspan = parse_span(value, 65_534),
                            "start" => attrs.start = value.trim().parse().ok(),
                            "itemprop" => {
                                attrs.article_body =
                                    value.split_whitespace().any(|v| v == "articleBody")
                            }
                            "aria-modal" => attrs.modal = value.trim().eq_ignore_ascii_case("true"),
                            "open" => attrs.open = true,
                            _ => {}
                        }
                    }
                    let tag = classify_tag(name);
                    if tag == Tag::Dialog && !attrs.open {
                        return Built::SkipElement;
                    }
                    Built::Element(tag, Box::new(attrs))
                }
                _ => Built::Skip,
            });
            let kind = match built {
                Some(Built::Text(text)) => NodeKind::Text(text),
                Some(Built::Element(tag, attrs)) => NodeKind::Element { tag, attrs },
                Some(Built::SkipElement) => {
                    parse_tree_elements += 1;
                    push_children(&mut stack, &mut children, id, NONE, depth);
                    continue;
                }
                Some(Built::Skip) | None => continue,
            };
            if matches!(kind, NodeKind::Element { .. }) {
                parse_tree_elements += 1;
            }
            let is_element = matches!(kind, NodeKind::Element { .. });
            let solid_chars = match &kind {
                NodeKind::Text(t) => {
                    u32::try_from(t.chars().filter(|c| !c.is_whitespace()).count())
                        .unwrap_or(u32::MAX)
                }
                NodeKind::Element { .. } => 0,
            };
            let Ok(index) = u32::try_from(nodes.len()) else {
                break;
            };
            nodes.push(Node {
                parent,
                first_child: NONE,
                next_sibling: NONE,
                last_child: NONE,
                solid_chars,
                table_below: false,
                chrome: Chrome::Never,
                landmark: false,
                kind,
            });
            let previous_last = nodes[parent as usize].last_child;
            if previous_last == NONE {
                nodes[parent as usize].first_child = index;
            } else {
                nodes[previous_last as usize].next_sibling = index;
            }
            nodes[parent as usize].last_child = index;
            if is_element {
                push_children(&mut stack, &mut children, id, index, depth);
            }
        }
        // Children come after their parent in pre-order, so one backward pass sums subtrees.
        for i in (1..nodes.len()).rev() {
            let parent = nodes[i].parent as usize;
            let is_table = matches!(
                nodes[i].kind,
                NodeKind::Element {
                    tag: Tag::Table,
                    ..
                }
            );
            let (chars, below) = (nodes[i].solid_chars, nodes[i].table_below || is_table);
            nodes[parent].solid_chars = nodes[parent].solid_chars.saturating_add(chars);
            nodes[parent].table_below |= below;
        }
        let mut arena = Arena {
            nodes,
            title,
            parse_tree_depth,
            parse_tree_elements,
        };
        for i in 0..arena.nodes.len() {
            let (chrome, landmark) = (
                arena.classify_chrome(i as u32),
                arena.classify_landmark(i as u32),
            );
            arena.nodes[i].chrome = chrome;
            arena.nodes[i].landmark = landmark;
        }
        arena
    }

    fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    fn tag(&self, i: u32) -> Option<Tag> {
        match &self.node(i).kind {
            NodeKind::Element { tag, .. } => Some(*tag),
            NodeKind::Text(_) => None,
        }
    }

    fn attrs(&self, i: u32) -> Option<&Attrs> {
        match &self.node(i).kind {
            NodeKind::Element { attrs, .. } => Some(attrs),
            NodeKind::Text(_) => None,
        }
    }

    fn children(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        let mut next = self.node(i).first_child;
        std::iter::from_fn(move || {
            if next == NONE {
                return None;
            }
            let current = next;
            next = self.node(current).next_sibling;
            Some(current)
        })
    }

    fn ancestors(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
        let mut next = self.node(i).parent;
        std::iter::from_fn(move || {
            if next == NONE {
                return None;
            }
            let current = next;
            next = self.node(current).parent;
            Some(current)
        })
    }

    fn body(&self) -> u32 {
        (0..self.nodes.len() as u32)
            .find(|&i| self.tag(i) == Some(Tag::Body))
            .unwrap_or(0)
    }

    /// Elements that hold the page's own content, inside which headers, footers and asides
    /// belong to the article (bylines, footnotes) rather than to the site.
    fn is_content_landmark(&self, i: u32) -> bool {
        self.node(i).landmark
    }

    fn classify_landmark(&self, i: u32) -> bool {
        match &self.node(i).kind {
            NodeKind::Element { tag, attrs } => {
                matches!(tag, Tag::Main | Tag::Article)
                    || attrs.role == "main"
                    || attrs.role == "article"
                    || attrs.article_body
            }
            NodeKind::Text(_) => false,
        }
    }

    fn within_content(&self, i: u32) -> bool {
        self.ancestors(i).any(|a| self.is_content_landmark(a))
    }

    fn is_chrome(&self, i: u32, inside_content: bool) -> bool {
        match self.node(i).chrome {
            Chrome::Never => false,
            Chrome::Always => true,
            Chrome::OutsideContent => !inside_content,
        }
    }

    /// Obvious chrome: navigation, search, dialogs and cookie banners anywhere; site headers,
    /// footers and sidebars outside the content landmarks.
    fn classify_chrome(&self, i: u32) -> Chrome {
        let NodeKind::Element { tag, attrs } = &self.node(i).kind else {
            return Chrome::Never;
        };
        let role = attrs.role.as_str();
        if matches!(tag, Tag::Nav)
            || matches!(
                role,
                "navigation"
                    | "search"
                    | "menubar"
                    | "menu"
                    | "dialog"
                    | "alertdialog"
                    | "toolbar"
                    | "tooltip"
            )
            || attrs.modal
            || (*tag == Tag::Button && self.node(i).solid_chars < 40)
            || self.is_cookie_banner(i, attrs)
            || (*tag == Tag::A && attrs.id_class.contains("skip"))
        {
            return Chrome::Always;
        }
        if matches!(tag, Tag::Header | Tag::Footer | Tag::Aside | Tag::Dialog)
            || matches!(role, "banner" | "contentinfo" | "complementary")
        {
            return Chrome::OutsideContent;
        }
        Chrome::Never
    }

    fn is_cookie_banner(&self, i: u32, attrs: &Attrs) -> bool {
        let names = attrs.id_class.as_str();
        if names.is_empty() || self.node(i).solid_chars > 3_000 {
            return false;
        }
        const COOKIE_WORDS: [&str; 12] = [
            "banner",
            "consent",
            "notice",
            "bar",
            "popup",
            "modal",
            "policy",
            "law",
            "warning",
            "alert",
            "message",
            "notification",
        ];
        (names.contains("cookie") && COOKIE_WORDS.iter().any(|w| names.contains(w)))
            || [
                "consent",
                "gdpr",
                "onetrust",
                "cookiebot",
                "cc-window",
                "cc-banner",
                "qc-cmp",
            ]
            .iter()
            .any(|w| names.contains(w))
    }

    fn under_chrome(&self, i: u32) -> bool {
        self.ancestors(i).any(|a| match &self.node(a).kind {
            NodeKind::Element { tag, attrs } => {
                matches!(tag, Tag::Nav | Tag::Aside | Tag::Footer)
                    || matches!(
                        attrs.role.as_str(),
                        "navigation" | "complementary" | "contentinfo" | "search"
                    )
            }
            NodeKind::Text(_) => false,
        })
    }

    /// `<main>`/`role=main` (the largest, if several), else the one dominant top-level
    /// `<article>`, else the element holding all top-level articles (a listing).
    fn landmark_candidate(&self) -> Option<u32> {
        let count = self.nodes.len() as u32;
        let mains: Vec<u32> = (0..count)
            .filter(|&i| {
                matches!(&self.node(i).kind, NodeKind::Element { tag, attrs } if *tag == Tag::Main || attrs.role == "main")
            })
            .filter(|&i| !self.under_chrome(i))
            .take(64)
            .collect();
        match mains.as_slice() {
            [] => {}
            [only] => return Some(*only),
            many => {
                return many
                    .iter()
                    .copied()
                    .max_by_key(|&i| self.text_stats(i, true).chars);
            }
        }
        let articles: Vec<u32> = (0..count)
            .filter(|&i| self.is_content_landmark(i))
            .filter(|&i| {
                !self.ancestors(i).any(|a| self.is_content_landmark(a)) && !self.under_chrome(i)
            })
            .take(1_000)
            .collect();
        match articles.as_slice() {
            [] => None,
            [only] => Some(*only),
            many => {
                let sizes: Vec<usize> = many
                    .iter()
                    .map(|&i| self.text_stats(i, true).chars)
                    .collect();
                let total: usize = sizes.iter().sum();
                let (best, best_size) = many
                    .iter()
                    .copied()
                    .zip(sizes.iter().copied())
                    .max_by_key(|&(_, s)| s)?;
                if best_size * 2 >= total {
                    Some(best)
                } else {
                    many.iter()
                        .copied()
                        .reduce(|a, b| self.common_ancestor(a, b))
                }
            }
        }
    }

    /// Runs the readability scorer and returns the smallest element that holds the first and the
    /// last text it chose, so every paragraph in between is kept even where the scorer's
    /// cleaning would have dropped it.
    fn readability_candidate(&self, document: Document) -> Option<u32> {
        let config = dom_smoothie::Config {
            max_elements_to_parse: READABILITY_MAX_ELEMENTS,
            ..Default::default()
        };
        // A third-party heuristic must not take loom down with it on some odd page.
        let text = catch_unwind(AssertUnwindSafe(move || {
            let mut readability =
                dom_smoothie::Readability::with_document(document, None, Some(config)).ok()?;
            readability
                .parse()
                .ok()
                .map(|article| article.text_content.to_string())
        }))
        .ok()
        .flatten()?;
        let chosen = collapse_whitespace(&text);
        if chosen.is_empty() {
            return None;
        }
        const MIN_ANCHOR_CHARS: usize = 30;
        // Each probe searches the whole chosen text, so a few hundred bound the cost.
        const MAX_PROBES: usize = 256;
        let found_in_choice = |i: &u32| match &self.node(*i).kind {
            NodeKind::Text(t) => {
                let t = collapse_whitespace(t);
                t.len() >= MIN_ANCHOR_CHARS && chosen.contains(&t)
            }
            NodeKind::Element { .. } => false,
        };
        let count = self.nodes.len() as u32;
        // Short texts (menu items) cannot anchor and must not use up the probes.
        let long_text = |i: &u32| {
            matches!(self.node(*i).kind, NodeKind::Text(_))
                && self.node(*i).solid_chars as usize >= MIN_ANCHOR_CHARS * 3 / 4
        };
        let first = (0..count)
            .filter(long_text)
            .take(MAX_PROBES)
            .find(found_in_choice)?;
        let last = (first..count)
            .rev()
            .filter(long_text)
            .take(MAX_PROBES)
            .find(found_in_choice)
            .unwrap_or(first);
        let common = self.common_ancestor(first, last);
        // A single text node's parent is a paragraph at best; its container is the article.
        let element = if matches!(self.node(common).kind, NodeKind::Text(_)) {
            self.node(common).parent
        } else {
            common
        };
        Some(self.node(element).parent)
            .filter(|&p| p != NONE && first == last)
            .or(Some(element))
    }

    fn link_kind(&self, node: u32, attrs: &Attrs) -> LinkKind {
        let href = attrs.href.as_deref().unwrap_or("");
        if attrs.id_class.split_whitespace().any(|c| c == "headerlink") {
            return LinkKind::Permalink;
        }
        if self.node(node).solid_chars <= 2 && !self.has_image(node) {
            let text = self.gather_text(node, false);
            let text = text.trim();
            if text.is_empty() || matches!(text, "¶" | "#" | "§" | "🔗" | "⚓" | "†") {
                return LinkKind::Permalink;
            }
        }
        let lower = href.get(..11).unwrap_or(href).to_ascii_lowercase();
        if href.is_empty()
            || href.starts_with('#')
            || lower.starts_with("javascript:")
            || lower.starts_with("data:")
        {
            return LinkKind::TextOnly;
        }
        LinkKind::Target(markdown_destination(href))
    }

    fn has_image(&self, node: u32) -> bool {
        let end = self.subtree_end(node);
        (node..end).any(|i| self.tag(i) == Some(Tag::Img))
    }

    /// Decides which link targets to leave out so that targets stay within `budget` characters:
    /// repeats of a target already given go first, then relative links whose text is code (API
    /// cross-references: the identifier names the target), then other relative links, then
    /// absolute ones; longest first within each group.
    fn links_over_budget(&self, root: u32, budget: usize) -> HashSet<u32> {
        struct Collector {
            links: Vec<(u32, String)>,
        }
        impl Visitor for Collector {
            fn enter(&mut self, arena: &Arena, node: u32) -> bool {
                match &arena.node(node).kind {
                    NodeKind::Element {
                        tag: Tag::Pre | Tag::Code,
                        ..
                    } => false,
                    NodeKind::Element { tag: Tag::A, attrs } => {
                        match arena.link_kind(node, attrs) {
                            LinkKind::Permalink => false,
                            LinkKind::TextOnly => true,
                            LinkKind::Target(href) => {
                                self.links.push((node, href));
                                true
                            }
                        }
                    }
                    _ => true,
                }
            }
            fn exit(&mut self, _: &Arena, _: u32) {}
        }
        let mut collector = Collector { links: Vec::new() };
        self.walk(root, true, &mut collector);
        let cost = |href: &str| href.len() + 4;
        let mut total: usize = collector.links.iter().map(|(_, href)| cost(href)).sum();
        if total <= budget {
            return HashSet::new();
        }
        let mut seen: HashSet<&str> = HashSet::new();
        let mut ranked: Vec<(u8, usize, u32)> = collector
            .links
            .iter()
            .map(|(node, href)| {
                let group = if !seen.insert(href.as_str()) {
                    0
                } else if is_relative_url(href) && self.text_is_code(*node) {
                    1
                } else if is_relative_url(href) {
                    2
                } else {
                    3
                };
                (group, cost(href), *node)
            })
            .collect();
        ranked.sort_by_key(|&(group, cost, node)| (group, std::cmp::Reverse(cost), node));
        let mut dropped = HashSet::new();
        for (_, cost, node) in ranked {
            if total <= budget {
                break;
            }
            total -= cost;
            dropped.insert(node);
        }
        dropped
    }

    /// A link whose only content is inline code.
    fn text_is_code(&self, link: u32) -> bool {
        let mut elements = self.children(link).filter(|&c| self.tag(c).is_some());
        let only = elements.next();
        elements.next().is_none()
            && only.is_some_and(|c| {
                self.tag(c) == Some(Tag::Code)
                    && self.node(c).solid_chars == self.node(link).solid_chars
            })
    }

    fn common_ancestor(&self, a: u32, b: u32) -> u32 {
        let chain_a: Vec<u32> = std::iter::once(a).chain(self.ancestors(a)).collect();
        let mut current = b;
        loop {
            if chain_a.contains(&current) {
                return current;
            }
            let parent = self.node(current).parent;
            if parent == NONE {
                return 0;
            }
            current = parent;
        }
    }

    fn first_heading_text(&self, root: u32) -> Option<String> {
        let end = self.subtree_end(root);
        (root..end)
            .find(|&i| self.tag(i) == Some(Tag::Heading(1)))
            .map(|h| collapse_whitespace(&self.gather_text(h, false)))
            .filter(|t| !t.is_empty())
    }

    /// One past the last node of `root`'s subtree (nodes are in pre-order).
    fn subtree_end(&self, root: u32) -> u32 {
        let mut i = root;
        loop {
            let n = self.node(i);
            if n.next_sibling != NONE {
                return n.next_sibling;
            }
            if n.parent == NONE {
                return self.nodes.len() as u32;
            }
            i = n.parent;
        }
    }

    /// Depth-first walk with an explicit stack; `visitor.enter` returns whether to descend (and
    /// then `exit` is called after the children).
    fn walk<V: Visitor>(&self, root: u32, skip_chrome: bool, visitor: &mut V) {
        let mut stack = vec![Visit::Enter {
            node: root,
            inside: self.within_content(root),
        }];
        while let Some(visit) = stack.pop() {
            match visit {
                Visit::Enter { node, inside } => {
                    let n = self.node(node);
                    if node != root && n.next_sibling != NONE {
                        stack.push(Visit::Enter {
                            node: n.next_sibling,
                            inside,
                        });
                    }
                    if node != root && skip_chrome && self.is_chrome(node, inside) {
                        continue;
                    }
                    if visitor.enter(self, node) {
                        stack.push(Visit::Exit(node));
                        if n.first_child != NONE {
                            let inside = inside || self.is_content_landmark(node);
                            stack.push(Visit::Enter {
                                node: n.first_child,
                                inside,
                            });
                        }
                    }
                }
                Visit::Exit(node) => visitor.exit(self, node),
            }
        }
    }

    fn text_stats(&self, root: u32, skip_chrome: bool) -> TextStats {
        let mut counter = TextCounter::default();
        self.walk(root, skip_chrome, &mut counter);
        counter.boundary();
        counter.stats
    }

    /// Text of a subtree; `verbatim` keeps whitespace and turns `<br>` into a newline (for code).
    fn gather_text(&self, root: u32, verbatim: bool) -> String {
        struct Gather {
            out: String,
            verbatim: bool,
        }
        impl Visitor for Gather {
            fn enter(&mut self, arena: &Arena, node: u32) -> bool {
                match &arena.node(node).kind {
                    NodeKind::Text(t) => self.out.push_str(t),
                    NodeKind::Element { tag: Tag::Br, .. } => {
                        self.out.push(if self.verbatim { '\n' } else { ' ' })
                    }
                    NodeKind::Element { .. } => {}
                }
                true
            }
            fn exit(&mut self, _: &Arena, _: u32) {}
        }
        let mut gather = Gather {
            out: String::new(),
            verbatim,
        };
        self.walk(root, false, &mut gather);
        gather.out
    }
}

fn parse_span(value: &str, max: usize) -> usize {
    value.trim().parse::<usize>().map_or(1, |v| v.clamp(1, max))
}

fn hides_element(style: &str) -> bool {
    let compact: String = style
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    compact.contains("display:none") || compact.contains("visibility:hidden")
}

enum Visit {
    Enter { node: u32, inside: bool },
    Exit(u32),
}

trait Visitor {
    fn enter(&mut self, arena: &Arena, node: u32) -> bool;
    fn exit(&mut self, arena: &Arena, node: u32);
}

#[derive(Debug, Default, Clone, Copy)]
struct TextStats {
    /// Plain-text length: whitespace runs count as one, preformatted text verbatim.
    chars: usize,
    /// Characters in prose-like text blocks.
    prose: usize,
}

#[derive(Default)]
struct TextCounter {
    stats: TextStats,
    last_was_space: bool,
    pre_depth: usize,
    link_depth: usize,
    block_chars: usize,
    block_link_chars: usize,
    block_has_sentence: bool,
}

impl TextCounter {
    fn boundary(&mut self) {
        if !self.last_was_space && self.stats.chars > 0 {
            self.stats.chars += 1;
            self.last_was_space = true;
        }
        if self.block_chars >= PROSE_MIN_CHARS
            && self.block_has_sentence
            && self.block_link_chars * 2 < self.block_chars
        {
            self.stats.prose += self.block_chars;
        }
        self.block_chars = 0;
        self.block_link_chars = 0;
        self.block_has_sentence = false;
    }
}

impl Visitor for TextCounter {
    fn enter(&mut self, arena: &Arena, node: u32) -> bool {
        match &arena.node(node).kind {
            NodeKind::Text(text) => {
                // Byte-wise: this runs over every character of the page several times.
                let mut counted = 0;
                let verbatim = self.pre_depth > 0;
                for &b in text.as_bytes() {
                    if b.is_ascii_whitespace() && !verbatim {
                        if !self.last_was_space {
                            counted += 1;
                            self.last_was_space = true;
                        }
                    } else if b & 0xC0 != 0x80 {
                        // Non-ASCII spaces count as characters: close enough for a length.
                        counted += 1;
                        self.last_was_space = false;
                        if matches!(b, b'.' | b'!' | b'?') {
                            self.block_has_sentence = true;
                        }
                    }
                }
                self.stats.chars += counted;
                self.block_chars += counted;
                if self.link_depth > 0 {
                    self.block_link_chars += counted;
                }
            }
            NodeKind::Element { tag, .. } => {
                if is_block(*tag) {
                    self.boundary();
                }
                match tag {
                    Tag::Pre => self.pre_depth += 1,
                    Tag::A => self.link_depth += 1,
                    _ => {}
                }
            }
        }
        true
    }

    fn exit(&mut self, arena: &Arena, node: u32) {
        if let Some(tag) = arena.tag(node) {
            if is_block(tag) {
                self.boundary();
            }
            match tag {
                Tag::Pre => self.pre_depth = self.pre_depth.saturating_sub(1),
                Tag::A => self.link_depth = self.link_depth.saturating_sub(1),
                _ => {}
            }
        }
    }
}

fn is_block(tag: Tag) -> bool {
    !matches!(
        tag,
        Tag::A | Tag::Code | Tag::Em | Tag::Strong | Tag::Img | Tag::Inline | Tag::Button | Tag::Br
    )
}

// ---------------------------------------------------------------------------------------------
// Markdown writer

enum Container {
    Quote,
    Item {
        indent: usize,
        marker: Option<String>,
    },
    /// A quote or item in a context that cannot show one (a table cell, link text).
    Invisible,
}

enum FrameClose {
    Marker(&'static str),
    Link(String),
    Heading,
}

struct Frame {
    node: u32,
    open: String,
    close: FrameClose,
    emitted: bool,
}

struct ListState {
    node: u32,
    ordered: bool,
    next_number: u64,
    items: usize,
}

/// Builds Markdown from a stream of text and structure. Inline markers (`*`, `[`, `## `) are
/// written lazily before the first visible character, so empty elements leave no debris.
struct Writer {
    out: String,
    /// Inside a GFM table cell: no line breaks (`<br>` instead), `|` escaped.
    cell_mode: bool,
    containers: Vec<(u32, Container)>,
    frames: Vec<Frame>,
    lists: Vec<ListState>,
    pending_break: u8,
    pending_space: bool,
    line_open: bool,
    quotes_on_last_line: usize,
}

impl Writer {
    fn new(cell_mode: bool) -> Self {
        Writer {
            out: String::new(),
            cell_mode,
            containers: Vec::new(),
            frames: Vec::new(),
            lists: Vec::new(),
            pending_break: 0,
            pending_space: false,
            line_open: false,
            quotes_on_last_line: 0,
        }
    }

    fn in_inline_context(&self) -> bool {
        !self.frames.is_empty()
    }

    /// Ends the current block: 1 = new line, 2 = blank line. Inside link text or a heading a
    /// block boundary can only be a space.
    fn block(&mut self, lines: u8) {
        if self.in_inline_context() {
            self.pending_space = true;
        } else if matches!(
            self.containers.last(),
            Some((
                _,
                Container::Item {
                    marker: Some(_),
                    ..
                }
            ))
        ) {
            // The item's marker starts a line already; a paragraph opening the item must not
            // push the marker a blank line away.
        } else {
            self.pending_break = self.pending_break.max(lines);
        }
    }

    fn flush_break(&mut self) {
        if self.pending_break > 0 {
            if !self.out.is_empty() {
                if self.cell_mode {
                    self.out.push_str("<br>");
                } else {
                    if self.line_open {
                        self.out.push('\n');
                    }
                    if self.pending_break >= 2 {
                        // A quote opened after the previous line does not reach back over the
                        // blank line before it.
                        let quotes = self
                            .containers
                            .iter()
                            .filter(|(_, c)| matches!(c, Container::Quote))
                            .count()
                            .min(self.quotes_on_last_line);
                        let marker = vec![">"; quotes.min(MAX_PREFIX_WIDTH / 2)].join(" ");
                        self.out.push_str(&marker);
                        self.out.push('\n');
                    }
                    self.line_open = false;
                }
            }
            self.pending_break = 0;
            self.pending_space = false;
        }
        if !self.line_open {
            self.write_prefix();
            self.line_open = true;
            self.pending_space = false;
        }
    }

    fn write_prefix(&mut self) {
        if self.cell_mode {
            return;
        }
        self.quotes_on_last_line = self
            .containers
            .iter()
            .filter(|(_, c)| matches!(c, Container::Quote))
            .count();
        let mut width = 0;
        for (_, container) in &mut self.containers {
            match container {
                Container::Quote => {
                    if width < MAX_PREFIX_WIDTH {
                        self.out.push_str("> ");
                        width += 2;
                    }
                }
                Container::Item { indent, marker } => {
                    if let Some(marker) = marker.take() {
                        self.out.push_str(&marker);
                        width += marker.len();
                    } else if width < MAX_PREFIX_WIDTH {
                        self.out.extend(std::iter::repeat_n(' ', *indent));
                        width += *indent;
                    }
                }
                Container::Invisible => {}
            }
        }
    }

    /// Prepares for visible inline content: line start, pending markers, separating space.
    /// Returns whether the content starts a line (where Markdown syntax could be misread).
    fn begin_inline(&mut self) -> bool {
        let was_open = self.line_open && self.pending_break == 0;
        self.flush_break();
        let mut at_line_start = !was_open;
        for i in 0..self.frames.len() {
            if self.frames[i].emitted {
                continue;
            }
            if self.pending_space {
                self.out.push(' ');
                self.pending_space = false;
            }
            let open = std::mem::take(&mut self.frames[i].open);
            if !open.is_empty() {
                at_line_start = false;
            }
            self.out.push_str(&open);
            self.frames[i].emitted = true;
        }
        if self.pending_space {
            self.out.push(' ');
            self.pending_space = false;
        }
        at_line_start
    }

    fn text(&mut self, text: &str) {
        if text.starts_with(char::is_whitespace) {
            self.pending_space = true;
        }
        for word in text.split_whitespace() {
            let at_line_start = self.begin_inline();
            if at_line_start && !self.cell_mode && needs_line_start_escape(word) {
                self.out.push('\\');
            }
            self.push_escaped(word);
            self.pending_space = true;
        }
        if !text.ends_with(char::is_whitespace) && !text.is_empty() {
            self.pending_space = false;
        }
    }

    fn push_escaped(&mut self, text: &str) {
        if self.cell_mode && text.contains('|') {
            self.out.push_str(&text.replace('|', "\\|"));
        } else {
            self.out.push_str(text);
        }
    }

    fn raw_inline(&mut self, text: &str) {
        self.begin_inline();
        self.push_escaped(text);
    }

    fn line_break(&mut self) {
        if self.in_inline_context() || self.cell_mode {
            self.pending_space = true;
        } else if self.line_open {
            self.pending_break = self.pending_break.max(1);
        }
    }

    fn code_span(&mut self, code: &str) {
        let code = collapse_whitespace(code);
        if code.is_empty() {
            return;
        }
        let fence = "`".repeat(longest_run(&code, '`') + 1);
        let pad = if code.starts_with('`') || code.ends_with('`') {
            " "
        } else {
            ""
        };
        self.raw_inline(&format!("{fence}{pad}{code}{pad}{fence}"));
    }

    fn code_block(&mut self, code: &str, language: &str) {
        let code = code
            .strip_suffix('\n')
            .unwrap_or(code)
            .replace("\r\n", "\n");
        if code.trim().is_empty() {
            return;
        }
        if self.cell_mode || self.in_inline_context() {
            self.code_span(&code);
            return;
        }
        self.block(2);
        self.flush_break();
        let fence = "`".repeat(longest_run(&code, '`').max(2) + 1);
        self.out.push_str(&fence);
        self.out.push_str(language);
        for line in code.split('\n') {
            self.out.push('\n');
            self.write_prefix();
            self.out.push_str(line);
        }
        self.out.push('\n');
        self.write_prefix();
        self.out.push_str(&fence);
        self.block(2);
    }

    fn open_frame(&mut self, node: u32, open: String, close: FrameClose) {
        self.frames.push(Frame {
            node,
            open,
            close,
            emitted: false,
        });
    }

    fn close_frame(&mut self, node: u32) {
        if self.frames.last().is_none_or(|f| f.node != node) {
            return;
        }
        let Some(frame) = self.frames.pop() else {
            return;
        };
        match frame.close {
            FrameClose::Marker(marker) if frame.emitted => self.out.push_str(marker),
            FrameClose::Link(href) if frame.emitted => {
                self.out.push_str("](");
                self.push_escaped(&href);
                self.out.push(')');
            }
            FrameClose::Heading => self.block(2),
            _ => {}
        }
    }

    fn open_list(&mut self, node: u32, ordered: bool, start: u64) {
        let nested = self
            .containers
            .iter()
            .any(|(_, c)| matches!(c, Container::Item { .. }));
        self.block(if nested { 1 } else { 2 });
        self.lists.push(ListState {
            node,
            ordered,
            next_number: start,
            items: 0,
        });
    }

    fn close_list(&mut self, node: u32) {
        if self.lists.last().is_some_and(|l| l.node == node) {
            let nested = self.lists.len() > 1;
            self.lists.pop();
            self.block(if nested { 1 } else { 2 });
        }
    }

    fn open_item(&mut self, node: u32) {
        if self.cell_mode || self.in_inline_context() {
            self.block(1);
            self.containers.push((node, Container::Invisible));
            return;
        }
        let marker = match self.lists.last_mut() {
            Some(list) => {
                list.items += 1;
                if list.ordered {
                    let marker = format!("{}. ", list.next_number);
                    list.next_number = list.next_number.saturating_add(1);
                    marker
                } else {
                    "- ".to_string()
                }
            }
            None => "- ".to_string(),
        };
        // Items follow each other on consecutive lines even when they hold paragraphs.
        let first_item = self.lists.last().is_none_or(|l| l.items == 1);
        if first_item {
            self.block(1);
        } else {
            self.pending_break = 1;
        }
        let indent = marker.len();
        self.containers.push((
            node,
            Container::Item {
                indent,
                marker: Some(marker),
            },
        ));
    }

    fn open_quote(&mut self, node: u32) {
        if self.cell_mode || self.in_inline_context() {
            self.block(1);
            self.containers.push((node, Container::Invisible));
            return;
        }
        self.block(2);
        self.containers.push((node, Container::Quote));
    }

    fn close_container(&mut self, node: u32, lines: u8) {
        if self.containers.last().is_some_and(|(n, _)| *n == node) {
            self.containers.pop();
            self.block(lines);
        }
    }

    /// A line written as-is (table rows, notes), on its own line.
    fn raw_line(&mut self, line: &str) {
        if !self.cell_mode {
            self.block(1);
        }
        self.flush_break();
        self.out.push_str(line);
    }

    fn finish(mut self) -> String {
        let trimmed = self.out.trim_end().len();
        self.out.truncate(trimmed);
        self.out
    }
}

fn needs_line_start_escape(word: &str) -> bool {
    if word.starts_with('#') || word.starts_with('>') || matches!(word, "-" | "+" | "*") {
        return true;
    }
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && digits == word.len() - 1 && (word.ends_with('.') || word.ends_with(')'))
}

fn longest_run(text: &str, ch: char) -> usize {
    let (mut best, mut current) = (0, 0);
    for c in text.chars() {
        if c == ch {
            current += 1;
            best = best.max(current);
        } else {
            current = 0;
        }
    }
    best
}

// ---------------------------------------------------------------------------------------------
// Rendering

enum LinkKind {
    /// A heading's permalink ("¶"): page furniture.
    Permalink,
    /// In-page anchors and script links: the text matters, the target does not.
    TextOnly,
    Target(String),
}

type TableNote<'n> = &'n mut dyn FnMut(usize, &HtmlTable) -> Option<String>;

struct Renderer<'a, 'n> {
    arena: &'a Arena,
    /// Links rendered as their text alone (see `LINK_TARGET_BUDGET`).
    untargeted_links: HashSet<u32>,
    writer: Writer,
    tables: Vec<HtmlTable>,
    table_note: Option<TableNote<'n>>,
}

impl<'a, 'n> Renderer<'a, 'n> {
    fn new(arena: &'a Arena, cell_mode: bool, table_note: Option<TableNote<'n>>) -> Self {
        Renderer {
            arena,
            untargeted_links: HashSet::new(),
            writer: Writer::new(cell_mode),
            tables: Vec::new(),
            table_note,
        }
    }

    fn link_kind(&self, node: u32, attrs: &Attrs) -> LinkKind {
        match self.arena.link_kind(node, attrs) {
            LinkKind::Target(_) if self.untargeted_links.contains(&node) => LinkKind::TextOnly,
            kind => kind,
        }
    }

    fn code_language(&self, pre: u32) -> String {
        let mut candidates = vec![pre];
        candidates.extend(
            self.arena
                .children(pre)
                .filter(|&c| self.arena.tag(c) == Some(Tag::Code))
                .take(1),
        );
        candidates.extend(self.arena.ancestors(pre).take(2));
        for node in candidates {
            let Some(attrs) = self.arena.attrs(node) else {
                continue;
            };
            for class in attrs.class.split_whitespace() {
                let name = ["language-", "lang-", "highlight-"]
                    .iter()
                    .find_map(|p| class.strip_prefix(p));
                if let Some(name) = name.filter(|n| {
                    !n.is_empty()
                        && n.len() <= 20
                        && n.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '+' | '-'))
                        && !matches!(*n, "none" | "default" | "text")
                }) {
                    return name.to_string();
                }
            }
        }
        String::new()
    }

    fn table(&mut self, node: u32) -> bool {
        let Some(grid) = TableGrid::analyze(self.arena, node) else {
            return false;
        };
        let cell_markdown = |cell: Option<u32>| -> String {
            cell.map_or_else(String::new, |c| {
                let mut renderer = Renderer::new(self.arena, true, None);
                self.arena.walk(c, true, &mut renderer);
                renderer.writer.finish()
            })
        };
        let cell_text = |cell: Option<u32>| -> String {
            cell.map_or_else(String::new, |c| {
                collapse_whitespace(&self.arena.gather_text(c, false))
            })
        };
        let table = HtmlTable {
            caption: grid
                .caption
                .map(|c| collapse_whitespace(&self.arena.gather_text(c, false)))
                .filter(|c| !c.is_empty()),
            header: grid.header.iter().map(|&c| cell_text(c)).collect(),
            rows: grid
                .rows
                .iter()
                .map(|row| row.iter().map(|&c| cell_text(c)).collect())
                .collect(),
        };
        let format_row = |cells: Vec<String>| -> String {
            let mut line = String::from("|");
            for cell in cells {
                line.push(' ');
                line.push_str(&cell);
                line.push_str(" |");
            }
            line
        };
        let w = &mut self.writer;
        w.block(2);
        if let Some(caption) = &table.caption {
            w.text(caption);
            w.block(2);
        }
        w.raw_line(&format_row(
            grid.header.iter().map(|&c| cell_markdown(c)).collect(),
        ));
        w.raw_line(&format_row(vec!["---".to_string(); grid.width]));
        for row in &grid.rows {
            self.writer
                .raw_line(&format_row(row.iter().map(|&c| cell_markdown(c)).collect()));
        }
        self.writer.block(2);
        let index = self.tables.len();
        if let Some(note) = self.table_note.as_mut().and_then(|f| f(index, &table)) {
            self.writer.text(&note);
            self.writer.block(2);
        }
        self.tables.push(table);
        true
    }
}

fn is_relative_url(href: &str) -> bool {
    let scheme_end = href.find(':');
    let path_start = href.find(['/', '?', '#']);
    !href.starts_with("//")
        && !matches!((scheme_end, path_start), (Some(c), Some(p)) if c < p)
        && !matches!((scheme_end, path_start), (Some(_), None))
}

/// A link target as Markdown accepts it: `<…>` when it holds spaces or parentheses.
fn markdown_destination(href: &str) -> String {
    let href = href.trim();
    if href.contains([' ', '(', ')', '<', '>']) {
        format!("<{}>", href.replace('<', "%3C").replace('>', "%3E"))
    } else {
        href.to_string()
    }
}

impl Visitor for Renderer<'_, '_> {
    fn enter(&mut self, arena: &Arena, node: u32) -> bool {
        let (tag, attrs) = match &arena.node(node).kind {
            NodeKind::Text(text) => {
                self.writer.text(text);
                return true;
            }
            NodeKind::Element { tag, attrs } => (*tag, attrs.as_ref()),
        };
        let w = &mut self.writer;
        match tag {
            Tag::Br => {
                w.line_break();
                return false;
            }
            Tag::Hr => {
                if !w.cell_mode && !w.in_inline_context() {
                    w.block(2);
                    w.raw_line("---");
                    w.block(2);
                }
                return false;
            }
            Tag::Pre => {
                let language = self.code_language(node);
                let code = arena.gather_text(node, true);
                self.writer.code_block(&code, &language);
                return false;
            }
            Tag::Code => {
                self.writer.code_span(&arena.gather_text(node, false));
                return false;
            }
            Tag::Img => {
                let alt = attrs.alt.as_deref().unwrap_or("");
                let src = attrs.src.as_deref().unwrap_or("");
                if !alt.is_empty() {
                    if src.is_empty() || src.starts_with("data:") {
                        w.text(alt);
                    } else {
                        w.raw_inline(&format!(
                            "![{}]({})",
                            alt.replace(['[', ']'], ""),
                            markdown_destination(src)
                        ));
                    }
                }
                return false;
            }
            Tag::A => match self.link_kind(node, attrs) {
                LinkKind::Permalink => return false,
                LinkKind::TextOnly => {}
                LinkKind::Target(href) => {
                    self.writer
                        .open_frame(node, "[".into(), FrameClose::Link(href))
                }
            },
            Tag::Em | Tag::Strong => {
                let marker = if tag == Tag::Em { "*" } else { "**" };
                let already = w
                    .frames
                    .iter()
                    .any(|f| matches!(f.close, FrameClose::Marker(m) if m == marker));
                if already {
                    w.open_frame(node, String::new(), FrameClose::Marker(""));
                } else {
                    w.open_frame(node, marker.into(), FrameClose::Marker(marker));
                }
            }
            Tag::Heading(level) => {
                let open = if w.cell_mode || w.in_inline_context() {
                    String::new()
                } else {
                    w.block(2);
                    format!("{} ", "#".repeat(usize::from(level)))
                };
                w.open_frame(node, open, FrameClose::Heading);
            }
            Tag::Ul | Tag::Ol => {
                let start = if tag == Tag::Ol {
                    attrs.start.unwrap_or(1)
                } else {
                    1
                };
                w.open_list(node, tag == Tag::Ol, start);
            }
            Tag::Li => w.open_item(node),
            Tag::Blockquote => w.open_quote(node),
            Tag::Table => {
                if !w.cell_mode
                    && !w.in_inline_context()
                    && !arena.node(node).table_below
                    && self.table(node)
                {
                    return false;
                }
                self.writer.block(2);
            }
            Tag::P | Tag::Dl | Tag::Paragraph => w.block(2),
            Tag::Inline | Tag::Button => {}
            _ => w.block(1),
        }
        true
    }

    fn exit(&mut self, arena: &Arena, node: u32) {
        let Some(tag) = arena.tag(node) else { return };
        let w = &mut self.writer;
        match tag {
            Tag::A | Tag::Em | Tag::Strong | Tag::Heading(_) => w.close_frame(node),
            Tag::Ul | Tag::Ol => w.close_list(node),
            Tag::Li => w.close_container(node, 1),
            Tag::Blockquote => w.close_container(node, 2),
            Tag::P | Tag::Dl | Tag::Paragraph | Tag::Table => w.block(2),
            Tag::Inline | Tag::Button => {}
            _ => w.block(1),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tables

/// A table's cells laid on a grid (colspans padded, rowspans filled down), when it is a real
/// data table.
struct TableGrid {
    caption: Option<u32>,
    width: usize,
    header: Vec<Option<u32>>,
    rows: Vec<Vec<Option<u32>>>,
}

impl TableGrid {
    fn analyze(arena: &Arena, table: u32) -> Option<TableGrid> {
        let attrs = arena.attrs(table)?;
        if matches!(attrs.role.as_str(), "presentation" | "none") || arena.node(table).table_below {
            return None;
        }
        let mut caption = None;
        let mut rows: Vec<(u32, bool)> = Vec::new();
        for child in arena.children(table) {
            match arena.tag(child) {
                Some(Tag::Caption) => caption = caption.or(Some(child)),
                Some(Tag::Tr) => rows.push((child, false)),
                Some(tag @ (Tag::TableHead | Tag::TableSection)) => {
                    let in_head = tag == Tag::TableHead;
                    rows.extend(
                        arena
                            .children(child)
                            .filter(|&r| arena.tag(r) == Some(Tag::Tr))
                            .map(|r| (r, in_head)),
                    );
                }
                _ => {}
            }
        }

        let mut grid: Vec<(Vec<Option<u32>>, bool, bool)> = Vec::new();
        // Per column: rows still covered by a rowspan above, and the cell that covers them.
        let mut carried: Vec<(usize, Option<u32>)> = Vec::new();
        let (mut cells_seen, mut blocky_cells, mut long_cells) = (0usize, 0usize, 0usize);
        let mut carried_placements = 0usize;
        for (row, in_head) in rows {
            if !arena
                .children(row)
                .any(|c| matches!(arena.tag(c), Some(Tag::Td | Tag::Th)))
            {
                continue;
            }
            let mut line: Vec<Option<u32>> = Vec::new();
            let mut all_th = true;
            let take_carried = |line: &mut Vec<Option<u32>>,
                                carried: &mut Vec<(usize, Option<u32>)>,
                                placements: &mut usize| {
                while let Some(slot) = carried.get_mut(line.len()).filter(|slot| slot.0 > 0) {
                    slot.0 -= 1;
                    line.push(slot.1);
                    *placements += 1;
                }
            };
            for cell in arena
                .children(row)
                .filter(|&c| matches!(arena.tag(c), Some(Tag::Td | Tag::Th)))
            {
                take_carried(&mut line, &mut carried, &mut carried_placements);
                all_th &= arena.tag(cell) == Some(Tag::Th);
                let cell_attrs = arena.attrs(cell)?;
                cells_seen += 1;
                if arena.node(cell).solid_chars > 300 {
                    long_cells += 1;
                }
                if has_block_layout(arena, cell) {
                    blocky_cells += 1;
                }
                for offset in 0..cell_attrs.colspan {
                    if line.len() >= MAX_TABLE_COLUMNS {
                        return None;
                    }
                    let value = if offset == 0 { Some(cell) } else { None };
                    let column = line.len();
                    if carried.len() <= column {
                        carried.resize(column + 1, (0, None));
                    }
                    // Short labels are repeated down their span; long text is given once.
                    let repeated = value.filter(|&c| arena.node(c).solid_chars <= 40);
                    carried[column] = (cell_attrs.rowspan - 1, repeated);
                    line.push(value);
                }
            }
            take_carried(&mut line, &mut carried, &mut carried_placements);
            // Spans that fill far more of the grid than the cells themselves are not data, and
            // repeating them would let a small page expand into a huge one.
            if carried_placements > 2 * cells_seen + 64 {
                return None;
            }
            if !line.is_empty() {
                grid.push((line, in_head, all_th));
            }
        }

        let width = grid.first()?.0.len();
        if width < 2 || grid.iter().any(|(line, _, _)| line.len() != width) {
            return None;
        }
        if blocky_cells * 4 > cells_seen || long_cells * 2 > cells_seen {
            return None;
        }
        // A header spread over several rows has no lossless GFM form: such tables stay text.
        if grid.iter().filter(|(_, in_head, _)| *in_head).count() > 1 || grid.len() < 3 {
            return None;
        }
        let mut grid_rows = grid.into_iter().map(|(line, _, _)| line);
        let header = grid_rows.next()?;
        Some(TableGrid {
            caption,
            width,
            header,
            rows: grid_rows.collect(),
        })
    }
}

/// Whether a cell holds page layout rather than a value: headings, code blocks, quotes, or more
/// than one paragraph (counting innermost text blocks, so `<div><p>x</p></div>` is one).
fn has_block_layout(arena: &Arena, cell: u32) -> bool {
    let end = arena.subtree_end(cell);
    let mut paragraphs = 0;
    // Open text blocks as (subtree end, innermost so far, has text).
    let mut open: Vec<(u32, bool, bool)> = Vec::new();
    let mut close_until = |open: &mut Vec<(u32, bool, bool)>, at: u32| -> bool {
        while let Some(&(block_end, innermost, has_text)) = open.last() {
            if at < block_end {
                break;
            }
            open.pop();
            if innermost && has_text {
                paragraphs += 1;
            }
        }
        paragraphs > 1
    };
    for i in cell + 1..end {
        if close_until(&mut open, i) {
            return true;
        }
        match arena.tag(i) {
            Some(
                Tag::Heading(_) | Tag::Pre | Tag::Blockquote | Tag::Nav | Tag::Article | Tag::Aside,
            ) => return true,
            Some(Tag::P | Tag::Div | Tag::Paragraph) => {
                if let Some(parent_block) = open.last_mut() {
                    parent_block.1 = false;
                }
                open.push((arena.subtree_end(i), true, arena.node(i).solid_chars > 0));
            }
            _ => {}
        }
    }
    close_until(&mut open, u32::MAX)
}

#[cfg(test)]
mod tests;
