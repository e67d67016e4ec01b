//! The pre-parse byte scan (it bounds the parser's work by mimicking the tree builder's stack)
//! and the tree model the parse is copied into.

use super::*;

/// What a byte scan tells about the markup before parsing. It mimics the tree builder's stack
/// of open elements closely enough to bound the parser's cost, erring towards over-estimates:
/// implied table wrappers are counted, implicit closes only pop the top of the stack, and
/// formatting elements that the parser would re-open ("reconstruct") are re-pushed, since that
/// is how a small page makes html5ever build millions of nodes (200 unclosed `<b id=…>`
/// closed by a `</div>`, then 20,000 `<div>x</div>`: 240 KB in, 4 M nodes and 1.5 GB out).
#[derive(Debug, Default)]
pub(super) struct MarkupShape {
    pub(super) max_depth: usize,
    pub(super) parse_work: u64,
    pub(super) start_tags: usize,
    /// More unclosed formatting elements than any sane page has.
    pub(super) formatting_overflow: bool,
}

/// Unclosed formatting elements beyond this make a page hostile rather than sloppy.
pub(super) const MAX_ACTIVE_FORMATTING: usize = 200;

/// The scan's model of one open element.
pub(super) struct OpenElement {
    pub(super) name: u64,
    /// An SVG/MathML element, whose children are foreign too unless it is an integration point.
    pub(super) foreign: bool,
    pub(super) integration_point: bool,
    /// Identity of the active-formatting entry this element stands for.
    pub(super) formatting_id: Option<u64>,
}

/// The scan's model of the active formatting elements list (markers have no name).
pub(super) struct FormattingEntry {
    pub(super) name: Option<u64>,
    pub(super) id: u64,
    pub(super) on_stack: bool,
}

/// End tags do not reach past these (the parser's "scope" boundaries).
pub(super) fn is_scope_boundary(tag: &str) -> bool {
    matches!(
        tag,
        "applet" | "caption" | "html" | "table" | "td" | "th" | "marquee" | "object" | "template"
    )
}

/// Keys are hashes already; hashing them again would dominate the scan.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

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

pub(super) type KeyCounts =
    std::collections::HashMap<u64, usize, std::hash::BuildHasherDefault<KeyHasher>>;

/// Tag names as FNV hashes of their lower-case form: the scan allocates nothing per tag.
pub(super) fn name_key(lower: &str) -> u64 {
    lower.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

pub(super) struct TreeModel {
    pub(super) open: Vec<OpenElement>,
    /// Per scope segment (the stack between two boundaries): how many elements of each name are
    /// open, so a stray end tag costs O(1) instead of a walk down the stack.
    pub(super) segments: Vec<KeyCounts>,
    /// Stack positions of the open scope boundaries.
    pub(super) boundaries: Vec<usize>,
    pub(super) formatting: Vec<FormattingEntry>,
    pub(super) off_stack: usize,
    pub(super) next_id: u64,
}

impl TreeModel {
    pub(super) fn new() -> Self {
        TreeModel {
            open: Vec::new(),
            segments: vec![Default::default()],
            boundaries: Vec::new(),
            formatting: Vec::new(),
            off_stack: 0,
            next_id: 0,
        }
    }

    pub(super) fn top_is(&self, names: &[&str]) -> bool {
        self.open
            .last()
            .is_some_and(|e| names.iter().any(|n| name_key(n) == e.name))
    }

    pub(super) fn push(&mut self, shape: &mut MarkupShape, name: &str, formatting_id: Option<u64>) {
        self.push_element(shape, name, formatting_id, false);
    }

    pub(super) fn push_element(
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
    pub(super) fn in_foreign_content(&self) -> bool {
        self.open
            .last()
            .is_some_and(|e| e.foreign && !e.integration_point)
    }

    pub(super) fn push_key(
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

    pub(super) fn pop(&mut self) -> Option<OpenElement> {
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
    pub(super) fn close(&mut self, name: &str) {
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
    pub(super) fn reconstruct(&mut self, shape: &mut MarkupShape) {
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

    pub(super) fn add_formatting(&mut self, name: Option<u64>, shape: &mut MarkupShape) -> u64 {
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

    pub(super) fn clear_to_marker(&mut self) {
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
    pub(super) fn scan(html: &str) -> MarkupShape {
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

    pub(super) fn too_costly(&self) -> bool {
        self.formatting_overflow
            || self.max_depth > MAX_NESTING_DEPTH
            || self.parse_work > MAX_PARSE_WORK
            || self.start_tags > MAX_PAGE_ELEMENTS
    }
}

/// HTML start tags that end SVG/MathML content.
pub(super) fn breaks_out_of_foreign_content(tag: &str) -> bool {
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

pub(super) fn is_formatting_element(tag: &str) -> bool {
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

pub(super) fn implicitly_closed_by(tag: &str) -> Option<&'static [&'static str]> {
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

pub(super) fn closes_paragraph(tag: &str) -> bool {
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

pub(super) fn is_void_element(tag: &str) -> bool {
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
pub(super) fn is_raw_text_element(tag: &str) -> bool {
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

pub(super) enum Token<'a> {
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
pub(super) struct Tokens<'a> {
    pub(super) src: &'a str,
    pub(super) pos: usize,
    pub(super) pending_raw: Option<&'a str>,
}

impl<'a> Tokens<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Tokens {
            src,
            pos: 0,
            pending_raw: None,
        }
    }

    /// Reads what follows the tag just returned as text up to its end tag. Left to the caller:
    /// whether `<style>` or `<plaintext>` hold text depends on the parser's state (inside SVG
    /// they are ordinary elements), and a scan that guessed wrong would miss the markup after.
    pub(super) fn raw_text_until_end_of(&mut self, name: &'a str) {
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
pub(super) fn find_tag_end(bytes: &[u8], from: usize) -> usize {
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

pub(super) fn find_bytes(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    if from >= haystack.len() {
        return None;
    }
    haystack[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Start of `</name` (ASCII case-insensitive) at or after `from`.
pub(super) fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
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

pub(super) fn prefix_at_char_boundary(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

pub(super) fn skip_leading_comments(mut text: &str) -> &str {
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
pub(super) struct TagCensus {
    pub(super) known: usize,
    pub(super) unknown: usize,
    pub(super) distinct_known: usize,
    pub(super) structural: bool,
    pub(super) covered_text: usize,
    pub(super) loose_text: usize,
    pub(super) code_punctuation: usize,
    pub(super) markdown_lines: usize,
}

impl TagCensus {
    pub(super) fn of(text: &str) -> TagCensus {
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

pub(super) fn is_markdown_line(line: &str) -> bool {
    let l = line.trim_start();
    l.starts_with("# ")
        || l.starts_with("## ")
        || l.starts_with("```")
        || l.starts_with("- ")
        || l.starts_with("* ")
        || (l.starts_with('|') && l.ends_with('|'))
        || l.contains("](")
}

pub(super) fn is_known_html_element(tag: &str) -> bool {
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
