//! The arena every later pass walks iteratively, and the choice of the main content in it:
//! landmarks, the readability scorer's pick widened to whole elements, chrome removal.

use std::cell::Cell;
use std::collections::HashSet;
use std::panic::{AssertUnwindSafe, catch_unwind};

use dom_query::{Document, NodeData, NodeId};

use super::*;

pub(super) const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tag {
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
pub(super) fn is_invisible_element(tag: &str) -> bool {
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

pub(super) fn classify_tag(tag: &str) -> Tag {
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
pub(super) struct Attrs {
    /// Lower-cased `id` and `class`, space separated, for chrome patterns.
    pub(super) id_class: String,
    pub(super) class: String,
    pub(super) role: String,
    pub(super) href: Option<String>,
    pub(super) src: Option<String>,
    pub(super) alt: Option<String>,
    pub(super) colspan: usize,
    pub(super) rowspan: usize,
    pub(super) start: Option<u64>,
    pub(super) article_body: bool,
    pub(super) modal: bool,
    pub(super) open: bool,
}

#[derive(Debug)]
pub(super) enum NodeKind {
    Element { tag: Tag, attrs: Box<Attrs> },
    Text(String),
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) parent: u32,
    pub(super) first_child: u32,
    pub(super) next_sibling: u32,
    pub(super) last_child: u32,
    /// Non-whitespace characters in the subtree, for size tests that must not walk it.
    pub(super) solid_chars: u32,
    /// Whether a `<table>` is somewhere below: a data table has none, and knowing it up front
    /// keeps table analysis linear on nested layout tables.
    pub(super) table_below: bool,
    /// Precomputed, as every walk asks it of every element.
    pub(super) chrome: Chrome,
    pub(super) landmark: bool,
    pub(super) kind: NodeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Chrome {
    Never,
    Always,
    /// Site chrome unless inside `<main>`/`<article>` (where a header is the article's own).
    OutsideContent,
}

pub(super) struct Arena {
    pub(super) nodes: Vec<Node>,
    pub(super) title: Option<String>,
    /// Depth and element count of the whole parse tree, hidden parts included: what the
    /// readability scorer will walk (it recurses per level in places).
    pub(super) parse_tree_depth: usize,
    pub(super) parse_tree_elements: usize,
    /// Checked every `STRIDE` nodes the walks visit: every pass after the parse is a walk, or
    /// linear in the nodes between two.
    interrupt: Interrupt,
    countdown: Cell<u32>,
    /// Set when the interrupt fired: walks return at once from then on, and what they made is
    /// not to be used.
    stopped: Cell<Option<Stop>>,
}

pub(super) enum Built {
    Skip,
    /// An element left out of the arena (its subtree too).
    SkipElement,
    Text(String),
    Element(Tag, Box<Attrs>),
}

impl Arena {
    /// Copies the parsed document into the arena, leaving out what no reader sees (scripts,
    /// styles, SVG, hidden elements, form controls). Iterative: the parse tree may be deep.
    pub(super) fn build(document: &Document, interrupt: &Interrupt) -> Arena {
        let mut pulse = interrupt.pulse();
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
            if pulse.beat() {
                break;
            }
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
            interrupt: interrupt.clone(),
            countdown: Cell::new(1),
            stopped: Cell::new(pulse.stopped()),
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

    /// Why a walk (or the build) stopped early, if one did.
    pub(super) fn stopped(&self) -> Option<Stop> {
        self.stopped.get()
    }

    /// One node visited; `true` once the walks must stop.
    fn beat(&self) -> bool {
        if self.stopped.get().is_some() {
            return true;
        }
        let left = self.countdown.get() - 1;
        if left == 0 {
            self.countdown.set(STRIDE);
            self.stopped.set(self.interrupt.check());
        } else {
            self.countdown.set(left);
        }
        self.stopped.get().is_some()
    }

    pub(super) fn node(&self, i: u32) -> &Node {
        &self.nodes[i as usize]
    }

    pub(super) fn tag(&self, i: u32) -> Option<Tag> {
        match &self.node(i).kind {
            NodeKind::Element { tag, .. } => Some(*tag),
            NodeKind::Text(_) => None,
        }
    }

    pub(super) fn attrs(&self, i: u32) -> Option<&Attrs> {
        match &self.node(i).kind {
            NodeKind::Element { attrs, .. } => Some(attrs),
            NodeKind::Text(_) => None,
        }
    }

    pub(super) fn children(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
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

    pub(super) fn ancestors(&self, i: u32) -> impl Iterator<Item = u32> + '_ {
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

    pub(super) fn body(&self) -> u32 {
        (0..self.nodes.len() as u32)
            .find(|&i| self.tag(i) == Some(Tag::Body))
            .unwrap_or(0)
    }

    /// Elements that hold the page's own content, inside which headers, footers and asides
    /// belong to the article (bylines, footnotes) rather than to the site.
    pub(super) fn is_content_landmark(&self, i: u32) -> bool {
        self.node(i).landmark
    }

    pub(super) fn classify_landmark(&self, i: u32) -> bool {
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

    pub(super) fn within_content(&self, i: u32) -> bool {
        self.ancestors(i).any(|a| self.is_content_landmark(a))
    }

    pub(super) fn is_chrome(&self, i: u32, inside_content: bool) -> bool {
        match self.node(i).chrome {
            Chrome::Never => false,
            Chrome::Always => true,
            Chrome::OutsideContent => !inside_content,
        }
    }

    /// Obvious chrome: navigation, search, dialogs and cookie banners anywhere; site headers,
    /// footers and sidebars outside the content landmarks.
    pub(super) fn classify_chrome(&self, i: u32) -> Chrome {
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

    pub(super) fn is_cookie_banner(&self, i: u32, attrs: &Attrs) -> bool {
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

    pub(super) fn under_chrome(&self, i: u32) -> bool {
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
    pub(super) fn landmark_candidate(&self) -> Option<u32> {
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
    pub(super) fn readability_candidate(&self, document: Document) -> Option<u32> {
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

    pub(super) fn link_kind(&self, node: u32, attrs: &Attrs) -> LinkKind {
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

    pub(super) fn has_image(&self, node: u32) -> bool {
        let end = self.subtree_end(node);
        (node..end).any(|i| self.tag(i) == Some(Tag::Img))
    }

    /// Decides which link targets to leave out so that targets stay within `budget` characters:
    /// repeats of a target already given go first, then relative links whose text is code (API
    /// cross-references: the identifier names the target), then other relative links, then
    /// absolute ones; longest first within each group.
    pub(super) fn links_over_budget(&self, root: u32, budget: usize) -> HashSet<u32> {
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
    pub(super) fn text_is_code(&self, link: u32) -> bool {
        let mut elements = self.children(link).filter(|&c| self.tag(c).is_some());
        let only = elements.next();
        elements.next().is_none()
            && only.is_some_and(|c| {
                self.tag(c) == Some(Tag::Code)
                    && self.node(c).solid_chars == self.node(link).solid_chars
            })
    }

    pub(super) fn common_ancestor(&self, a: u32, b: u32) -> u32 {
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

    pub(super) fn first_heading_text(&self, root: u32) -> Option<String> {
        let end = self.subtree_end(root);
        (root..end)
            .find(|&i| self.tag(i) == Some(Tag::Heading(1)))
            .map(|h| collapse_whitespace(&self.gather_text(h, false)))
            .filter(|t| !t.is_empty())
    }

    /// One past the last node of `root`'s subtree (nodes are in pre-order).
    pub(super) fn subtree_end(&self, root: u32) -> u32 {
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
    pub(super) fn walk<V: Visitor>(&self, root: u32, skip_chrome: bool, visitor: &mut V) {
        let mut stack = vec![Visit::Enter {
            node: root,
            inside: self.within_content(root),
        }];
        while let Some(visit) = stack.pop() {
            if self.beat() {
                return;
            }
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

    pub(super) fn text_stats(&self, root: u32, skip_chrome: bool) -> TextStats {
        let mut counter = TextCounter::default();
        self.walk(root, skip_chrome, &mut counter);
        counter.boundary();
        counter.stats
    }

    /// Text of a subtree; `verbatim` keeps whitespace and turns `<br>` into a newline (for code).
    pub(super) fn gather_text(&self, root: u32, verbatim: bool) -> String {
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

pub(super) fn parse_span(value: &str, max: usize) -> usize {
    value.trim().parse::<usize>().map_or(1, |v| v.clamp(1, max))
}

pub(super) fn hides_element(style: &str) -> bool {
    let compact: String = style
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    compact.contains("display:none") || compact.contains("visibility:hidden")
}

pub(super) enum Visit {
    Enter { node: u32, inside: bool },
    Exit(u32),
}

pub(super) trait Visitor {
    fn enter(&mut self, arena: &Arena, node: u32) -> bool;
    fn exit(&mut self, arena: &Arena, node: u32);
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct TextStats {
    /// Plain-text length: whitespace runs count as one, preformatted text verbatim.
    pub(super) chars: usize,
    /// Characters in prose-like text blocks.
    pub(super) prose: usize,
}

#[derive(Default)]
pub(super) struct TextCounter {
    pub(super) stats: TextStats,
    pub(super) last_was_space: bool,
    pub(super) pre_depth: usize,
    pub(super) link_depth: usize,
    pub(super) block_chars: usize,
    pub(super) block_link_chars: usize,
    pub(super) block_has_sentence: bool,
}

impl TextCounter {
    pub(super) fn boundary(&mut self) {
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

pub(super) fn is_block(tag: Tag) -> bool {
    !matches!(
        tag,
        Tag::A | Tag::Code | Tag::Em | Tag::Strong | Tag::Img | Tag::Inline | Tag::Button | Tag::Br
    )
}
