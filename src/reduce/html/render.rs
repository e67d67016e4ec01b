//! Rendering the chosen content from the arena through the Markdown writer (links, images,
//! lists, code).

use std::collections::HashSet;

use super::*;

pub(super) enum LinkKind {
    /// A heading's permalink ("¶"): page furniture.
    Permalink,
    /// In-page anchors and script links: the text matters, the target does not.
    TextOnly,
    Target(String),
}

pub(super) type TableNote<'n> = &'n mut dyn FnMut(usize, &HtmlTable) -> Option<String>;

pub(super) struct Renderer<'a, 'n> {
    pub(super) arena: &'a Arena,
    /// Links rendered as their text alone (see `LINK_TARGET_BUDGET`).
    pub(super) untargeted_links: HashSet<u32>,
    pub(super) writer: Writer,
    pub(super) tables: Vec<HtmlTable>,
    pub(super) table_note: Option<TableNote<'n>>,
}

impl<'a, 'n> Renderer<'a, 'n> {
    pub(super) fn new(
        arena: &'a Arena,
        cell_mode: bool,
        table_note: Option<TableNote<'n>>,
    ) -> Self {
        Renderer {
            arena,
            untargeted_links: HashSet::new(),
            writer: Writer::new(cell_mode),
            tables: Vec::new(),
            table_note,
        }
    }

    pub(super) fn link_kind(&self, node: u32, attrs: &Attrs) -> LinkKind {
        match self.arena.link_kind(node, attrs) {
            LinkKind::Target(_) if self.untargeted_links.contains(&node) => LinkKind::TextOnly,
            kind => kind,
        }
    }

    pub(super) fn code_language(&self, pre: u32) -> String {
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

    pub(super) fn table(&mut self, node: u32) -> bool {
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

pub(super) fn is_relative_url(href: &str) -> bool {
    let scheme_end = href.find(':');
    let path_start = href.find(['/', '?', '#']);
    !href.starts_with("//")
        && !matches!((scheme_end, path_start), (Some(c), Some(p)) if c < p)
        && !matches!((scheme_end, path_start), (Some(_), None))
}

/// A link target as Markdown accepts it: `<…>` when it holds spaces or parentheses.
pub(super) fn markdown_destination(href: &str) -> String {
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
