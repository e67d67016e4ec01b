//! The Markdown writer: block containers, inline runs, escaping.

use super::*;

pub(super) enum Container {
    Quote,
    Item {
        indent: usize,
        marker: Option<String>,
    },
    /// A quote or item in a context that cannot show one (a table cell, link text).
    Invisible,
}

pub(super) enum FrameClose {
    Marker(&'static str),
    Link(String),
    Heading,
}

pub(super) struct Frame {
    pub(super) node: u32,
    pub(super) open: String,
    pub(super) close: FrameClose,
    pub(super) emitted: bool,
}

pub(super) struct ListState {
    pub(super) node: u32,
    pub(super) ordered: bool,
    pub(super) next_number: u64,
    pub(super) items: usize,
}

/// Builds Markdown from a stream of text and structure. Inline markers (`*`, `[`, `## `) are
/// written lazily before the first visible character, so empty elements leave no debris.
pub(super) struct Writer {
    pub(super) out: String,
    /// Inside a GFM table cell: no line breaks (`<br>` instead), `|` escaped.
    pub(super) cell_mode: bool,
    pub(super) containers: Vec<(u32, Container)>,
    pub(super) frames: Vec<Frame>,
    pub(super) lists: Vec<ListState>,
    pub(super) pending_break: u8,
    pub(super) pending_space: bool,
    pub(super) line_open: bool,
    pub(super) quotes_on_last_line: usize,
}

impl Writer {
    pub(super) fn new(cell_mode: bool) -> Self {
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

    pub(super) fn in_inline_context(&self) -> bool {
        !self.frames.is_empty()
    }

    /// Ends the current block: 1 = new line, 2 = blank line. Inside link text or a heading a
    /// block boundary can only be a space.
    pub(super) fn block(&mut self, lines: u8) {
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

    pub(super) fn flush_break(&mut self) {
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

    pub(super) fn write_prefix(&mut self) {
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
    pub(super) fn begin_inline(&mut self) -> bool {
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

    pub(super) fn text(&mut self, text: &str) {
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

    pub(super) fn push_escaped(&mut self, text: &str) {
        if self.cell_mode && text.contains('|') {
            self.out.push_str(&text.replace('|', "\\|"));
        } else {
            self.out.push_str(text);
        }
    }

    pub(super) fn raw_inline(&mut self, text: &str) {
        self.begin_inline();
        self.push_escaped(text);
    }

    pub(super) fn line_break(&mut self) {
        if self.in_inline_context() || self.cell_mode {
            self.pending_space = true;
        } else if self.line_open {
            self.pending_break = self.pending_break.max(1);
        }
    }

    pub(super) fn code_span(&mut self, code: &str) {
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

    pub(super) fn code_block(&mut self, code: &str, language: &str) {
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

    pub(super) fn open_frame(&mut self, node: u32, open: String, close: FrameClose) {
        self.frames.push(Frame {
            node,
            open,
            close,
            emitted: false,
        });
    }

    pub(super) fn close_frame(&mut self, node: u32) {
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

    pub(super) fn open_list(&mut self, node: u32, ordered: bool, start: u64) {
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

    pub(super) fn close_list(&mut self, node: u32) {
        if self.lists.last().is_some_and(|l| l.node == node) {
            let nested = self.lists.len() > 1;
            self.lists.pop();
            self.block(if nested { 1 } else { 2 });
        }
    }

    pub(super) fn open_item(&mut self, node: u32) {
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

    pub(super) fn open_quote(&mut self, node: u32) {
        if self.cell_mode || self.in_inline_context() {
            self.block(1);
            self.containers.push((node, Container::Invisible));
            return;
        }
        self.block(2);
        self.containers.push((node, Container::Quote));
    }

    pub(super) fn close_container(&mut self, node: u32, lines: u8) {
        if self.containers.last().is_some_and(|(n, _)| *n == node) {
            self.containers.pop();
            self.block(lines);
        }
    }

    /// A line written as-is (table rows, notes), on its own line.
    pub(super) fn raw_line(&mut self, line: &str) {
        if !self.cell_mode {
            self.block(1);
        }
        self.flush_break();
        self.out.push_str(line);
    }

    pub(super) fn finish(mut self) -> String {
        let trimmed = self.out.trim_end().len();
        self.out.truncate(trimmed);
        self.out
    }
}

pub(super) fn needs_line_start_escape(word: &str) -> bool {
    if word.starts_with('#') || word.starts_with('>') || matches!(word, "-" | "+" | "*") {
        return true;
    }
    let digits = word.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && digits == word.len() - 1 && (word.ends_with('.') || word.ends_with(')'))
}

pub(super) fn longest_run(text: &str, ch: char) -> usize {
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
