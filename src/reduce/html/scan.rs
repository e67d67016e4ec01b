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
    /// An upper bound of the tokenizer's attribute name comparisons (see [`attribute_work`]).
    pub(super) attribute_work: u64,
    /// Attributes, and their bytes, the parser copies when it re-opens formatting elements: each
    /// copy is a new element with all of them (one `<b>` of 3,000 attributes re-opened in 50,000
    /// paragraphs is 150 M attributes from 0.66 MB, and minutes of parsing).
    pub(super) cloned_attributes: u64,
    pub(super) cloned_bytes: u64,
    /// The scan stopped before the end (deadline or cancel): nothing it found bounds the page.
    pub(super) stopped: Option<Stop>,
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
    /// What re-opening it copies: its start tag's attributes and bytes.
    pub(super) attributes: u32,
    pub(super) bytes: u32,
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
                shape.cloned_attributes += u64::from(self.formatting[i].attributes);
                shape.cloned_bytes += u64::from(self.formatting[i].bytes);
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

    /// `copied`: the start tag's attributes and bytes (nothing for a marker).
    pub(super) fn add_formatting(
        &mut self,
        name: Option<u64>,
        copied: (u32, u32),
        shape: &mut MarkupShape,
    ) -> u64 {
        self.next_id += 1;
        self.formatting.push(FormattingEntry {
            name,
            id: self.next_id,
            on_stack: name.is_some(),
            attributes: copied.0,
            bytes: copied.1,
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
    /// The bounds of `html`, checking `interrupt` as it goes (a stopped scan says so in
    /// `stopped`, and bounds nothing).
    pub(super) fn scan(html: &str, interrupt: &Interrupt) -> MarkupShape {
        let mut shape = MarkupShape::default();
        match attribute_work(html, MAX_ATTRIBUTE_WORK, interrupt) {
            Ok(work) => shape.attribute_work = work.comparisons,
            Err(stop) => {
                shape.stopped = Some(stop);
                return shape;
            }
        }
        let mut pulse = interrupt.pulse();
        let mut model = TreeModel::new();
        let mut lower = String::new();
        let mut tokens = Tokens::new(html);
        loop {
            // CDATA sections exist only in SVG and MathML.
            tokens.cdata = model.open.last().is_some_and(|e| e.foreign);
            let Some(token) = tokens.next() else { break };
            if shape.too_costly() {
                break;
            }
            if pulse.beat() {
                shape.stopped = pulse.stopped();
                break;
            }
            let (name, closing, self_closing, copied) = match token {
                Token::Tag {
                    name,
                    closing,
                    self_closing,
                    attributes,
                    len,
                } => (
                    name,
                    closing,
                    self_closing,
                    (attributes, u32::try_from(len).unwrap_or(u32::MAX)),
                ),
                Token::RawText { name, text } => {
                    if is_escapable_raw_text(name) {
                        shape.charge_raw_text(text, model.open.len());
                    }
                    model.reconstruct(&mut shape);
                    continue;
                }
                Token::Text(_) => {
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
                        // Closed out of order, the element is copied by the adoption agency
                        // algorithm (up to eight rounds).
                        let on_top = model.open.last().and_then(|e| e.formatting_id);
                        if on_top != Some(entry.id) {
                            shape.cloned_attributes += 8 * u64::from(entry.attributes);
                            shape.cloned_bytes += 8 * u64::from(entry.bytes);
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
                Some(model.add_formatting(Some(name_key(&lower)), copied, &mut shape))
            } else {
                if matches!(lower.as_str(), "td" | "th" | "caption") {
                    model.add_formatting(None, (0, 0), &mut shape);
                }
                None
            };
            model.push_element(&mut shape, &lower, formatting_id, starts_foreign);
            // The parser reads these elements' content as text (outside SVG/MathML, which the
            // model follows), so the scan does: reading it as markup would let a quote in it
            // swallow the end tag and the markup after. Whether `<title>`, `<textarea>` and the
            // like hold text also depends on modes the model does not follow (a frameset
            // ignores them), so their text is charged as if each `<` in it opened an element.
            if matches!(lower.as_str(), "script" | "style") || is_escapable_raw_text(&lower) {
                tokens.raw_text_until_end_of(name);
            }
        }
        shape
    }

    /// Raw text that the parser might read as markup after all: every `<` followed by a letter
    /// counted as a start tag nested in the one before, the most it could cost.
    pub(super) fn charge_raw_text(&mut self, text: &str, depth: usize) {
        let bytes = text.as_bytes();
        let tags = memchr::memchr_iter(b'<', bytes)
            .filter(|&at| bytes.get(at + 1).is_some_and(u8::is_ascii_alphabetic))
            .count();
        if tags == 0 {
            return;
        }
        let (n, depth) = (tags as u64, depth as u64);
        self.start_tags += tags;
        self.parse_work = self
            .parse_work
            .saturating_add(n.saturating_mul(depth))
            .saturating_add(n.saturating_mul(n + 1) / 2);
        self.max_depth = self.max_depth.max(depth as usize + tags);
    }

    pub(super) fn too_costly(&self) -> bool {
        self.formatting_overflow
            || self.max_depth > MAX_NESTING_DEPTH
            || self.parse_work > MAX_PARSE_WORK
            || self.start_tags > MAX_PAGE_ELEMENTS
            || self.attribute_work > MAX_ATTRIBUTE_WORK
            || self.cloned_attributes > MAX_CLONED_ATTRIBUTES
            || self.cloned_bytes > MAX_CLONED_BYTES
    }
}

/// Elements whose content the parser reads as text (RCDATA, RAWTEXT, PLAINTEXT) in the body,
/// other than `<script>` and `<style>`.
pub(super) fn is_escapable_raw_text(tag: &str) -> bool {
    [
        "title",
        "textarea",
        "xmp",
        "iframe",
        "noembed",
        "noframes",
        "plaintext",
    ]
    .iter()
    .any(|raw| raw.eq_ignore_ascii_case(tag))
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
        /// Attributes as the parser counts them (duplicates included).
        attributes: u32,
        /// Bytes of the whole tag, `<` to `>`.
        len: usize,
    },
    RawText {
        name: &'a str,
        text: &'a str,
    },
}

/// A tokenizer for the scans that run without a parser (detection, the bounds, flat text): tags,
/// text between them, and on request the content of a raw-text element. Tags, comments and the
/// ends of raw text are found as html5ever finds them, so what the scans count is what the
/// parser sees: a scan that ended a comment or a tag elsewhere would read the rest of the page
/// differently (a `<textarea>` whose text holds `<p a="` made a scan take 50,000 nested `<div>`s
/// after it for one quoted value, and the parser spent minutes on them).
pub(super) struct Tokens<'a> {
    pub(super) src: &'a str,
    pub(super) pos: usize,
    pub(super) pending_raw: Option<&'a str>,
    /// `<![CDATA[` opens a CDATA section (inside SVG/MathML) rather than a bogus comment.
    pub(super) cdata: bool,
}

impl<'a> Tokens<'a> {
    pub(super) fn new(src: &'a str) -> Self {
        Tokens {
            src,
            pos: 0,
            pending_raw: None,
            cdata: false,
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
            let end = if name.eq_ignore_ascii_case("plaintext") {
                // Nothing ends it: the rest of the page is its text.
                None
            } else if name.eq_ignore_ascii_case("script") {
                find_script_end(bytes, self.pos)
            } else {
                find_end_tag(bytes, self.pos, name)
            }
            .unwrap_or(bytes.len());
            let text = &self.src[self.pos..end];
            self.pos = end;
            return Some(Token::RawText { name, text });
        }
        while self.pos < bytes.len() {
            let start = self.pos;
            let Some(lt) = memchr::memchr(b'<', &bytes[start..]).map(|p| p + start) else {
                self.pos = bytes.len();
                return Some(Token::Text(&self.src[start..]));
            };
            if lt > start {
                self.pos = lt;
                return Some(Token::Text(&self.src[start..lt]));
            }
            let rest = &bytes[lt..];
            if rest.starts_with(b"<!--") {
                self.pos = comment_end(bytes, lt + 4);
                continue;
            }
            if self.cdata && rest.starts_with(b"<![CDATA[") {
                self.pos = find_bytes(bytes, lt + 9, b"]]>").map_or(bytes.len(), |p| p + 3);
                continue;
            }
            let next = rest.get(1).copied();
            let closing = next == Some(b'/');
            let name_start = lt + 1 + usize::from(closing);
            let letter = bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic);
            match next {
                // A doctype, a bogus comment (`<!x`, `<?x`, `</1`): up to the next `>`, which
                // no quote can hide.
                Some(b'!' | b'?') => {}
                Some(b'/') if !letter && bytes.get(name_start) == Some(&b'>') => {
                    // `</>` is dropped.
                    self.pos = lt + 3;
                    continue;
                }
                Some(b'/') if !letter && name_start < bytes.len() => {}
                _ if letter => {
                    let tag = read_tag(bytes, name_start);
                    self.pos = tag.end;
                    return Some(Token::Tag {
                        name: &self.src[name_start..tag.name_end],
                        closing,
                        self_closing: tag.self_closing,
                        attributes: tag.attributes,
                        len: tag.end - lt,
                    });
                }
                _ => {
                    // A lone '<' (or `</` at the very end) is text.
                    self.pos = lt + 1;
                    return Some(Token::Text(&self.src[lt..lt + 1]));
                }
            }
            self.pos = memchr::memchr(b'>', &bytes[lt..]).map_or(bytes.len(), |p| lt + p + 1);
        }
        None
    }
}

/// The byte after a comment whose text starts at `from` (after `<!--`): `<!-->` and `<!--->`
/// end at once, others at the first `-->` or `--!>`.
pub(super) fn comment_end(bytes: &[u8], from: usize) -> usize {
    let rest = bytes.get(from..).unwrap_or_default();
    if rest.starts_with(b">") {
        return from + 1;
    }
    if rest.starts_with(b"->") {
        return from + 2;
    }
    let plain = memchr::memmem::find(rest, b"-->").map(|p| p + 3);
    // Only before the first `-->`: searching the whole rest for every comment would make a page
    // of many comments quadratic.
    let bang = memchr::memmem::find(&rest[..plain.unwrap_or(rest.len())], b"--!>").map(|p| p + 4);
    // The tokenizer stops at whichever ending it completes first.
    let end = match (plain, bang) {
        (Some(a), Some(b)) => a.min(b),
        (Some(end), None) | (None, Some(end)) => end,
        (None, None) => rest.len(),
    };
    from + end
}

pub(super) fn find_bytes(haystack: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    memchr::memmem::find(haystack.get(from..)?, needle).map(|p| p + from)
}

/// Whether `</name` at `at` ends raw text named `name`: the parser wants the whole name, any
/// case, then whitespace, `/` or `>` (`</titles>` is text).
fn is_end_tag_at(bytes: &[u8], at: usize, name: &[u8]) -> bool {
    let after = at + 2 + name.len();
    bytes
        .get(at + 2..after)
        .is_some_and(|n| n.eq_ignore_ascii_case(name))
        && bytes
            .get(after)
            .is_some_and(|&b| matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ' | b'/' | b'>'))
}

/// Start of the end tag `</name` (ASCII case-insensitive) that ends raw text, at or after `from`.
pub(super) fn find_end_tag(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let name = name.as_bytes();
    let mut i = from;
    while let Some(p) = find_bytes(bytes, i, b"</") {
        if is_end_tag_at(bytes, p, name) {
            return Some(p);
        }
        i = p + 2;
    }
    None
}

/// Start of the `</script` that ends a script's text, following the tokenizer's escape states: in
/// `<!-- <script> … </script>` the inner end tag does not end it (it ends the "double escaped"
/// part), and a scan that stopped there would read the script's text as markup.
pub(super) fn find_script_end(bytes: &[u8], from: usize) -> Option<usize> {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Escape {
        None,
        /// After `<!--`; `dashes` counts the `-` just read (a `>` after two ends the escape).
        Escaped,
        Double,
    }
    let script = b"script";
    let delimiter = |b: u8| matches!(b, b'\t' | b'\n' | b'\x0C' | b'\r' | b' ' | b'/' | b'>');
    let mut escape = Escape::None;
    let mut dashes = 0usize;
    let mut i = from;
    while i < bytes.len() {
        let b = bytes[i];
        match (escape, b) {
            (_, b'-') => {
                dashes += 1;
                i += 1;
                continue;
            }
            (Escape::Escaped | Escape::Double, b'>') if dashes >= 2 => escape = Escape::None,
            (Escape::None, b'<') if bytes[i + 1..].starts_with(b"!--") => {
                escape = Escape::Escaped;
                // `<!--` counts its own dashes: `<!-->` leaves the escape at once.
                dashes = 2;
                i += 4;
                continue;
            }
            (Escape::None | Escape::Escaped, b'<') if is_end_tag_at(bytes, i, script) => {
                return Some(i);
            }
            (Escape::Escaped, b'<')
                if bytes
                    .get(i + 1..i + 1 + script.len())
                    .is_some_and(|n| n.eq_ignore_ascii_case(script))
                    && bytes
                        .get(i + 1 + script.len())
                        .is_some_and(|&b| delimiter(b)) =>
            {
                escape = Escape::Double;
                i += 1 + script.len();
                dashes = 0;
                continue;
            }
            (Escape::Double, b'<') if is_end_tag_at(bytes, i, script) => {
                escape = Escape::Escaped;
                i += 2 + script.len();
                dashes = 0;
                continue;
            }
            _ => {}
        }
        dashes = 0;
        i += 1;
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
