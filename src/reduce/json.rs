//! The context firewall for JSON that is not a plain table (`npm view --json`, an issue payload, a
//! config dump): a summary by structure, with every reduction marked by where the whole is. The
//! document `document_ref` must hold exactly `text`: spans count its code points.
//!
//! # Markers
//!
//! Shown with `document_ref = "doc_4"`. `…` (U+2026, one token) always means "something was left
//! out here". Paths are RFC 9535 JSONPath: dot form for identifier keys, else the normalized
//! single-quoted form (`$.time['1.0.0']`), whose quotes need no escaping inside a JSON string.
//! Counts get thousands separators, call arguments never do. Spans come from one scan of the raw
//! text along the marked paths, not from searching for the value, so they are exact even when a
//! value occurs many times.
//!
//! - cut string: the first `max_string_chars` characters, then
//!   `…[+12,345 chars; loom_read("doc_4", offset: 5120, length: 12547)]`; the span is the whole
//!   literal, quotes included, so it parses back as JSON. A string at most `CUT_SLACK` (64) longer
//!   than the limit stays whole (the marker would cost more than it saves). A cut key has no span:
//!   `…[+12,345 chars]`. A span longer than one `loom_read` page (`max_read_chars`) is shown as
//!   `loom_read("doc_4", offset: 11, length: 100000) onwards, 3,000,002 chars in all`.
//! - folded array of alike items: the first `keep_examples`, then
//!   `{"…": "477 more like these (480 in all) at $.versions in doc_4; dataset ds_7 for loom_query"}`,
//!   or, when `ingest` gives no dataset, `{"…": "477 more like these (480 in all) at $.versions: loom_read(…)"}`.
//! - folded array of unlike items (no dataset):
//!   `{"…": "477 more (480 in all: 300 objects, 180 strings) at $.x: loom_read(…)"}`.
//! - folded map: the first `keep_examples` members, then the member `"…": "2,960 more keys like
//!   these (2,963 in all) at $.time in doc_4; dataset ds_8 for loom_query, keys in column key"`.
//! - map of unlike values beyond `max_keys` members: `"…": "70 more keys (120 in all) at $.c: loom_read(…)"`.
//! - container at the depth limit: `{"…": "object with 12 keys at $.a.b.c: loom_read(…)"}` or
//!   `{"…": "array of 40 items at …"}`, unless its compact JSON is under `SMALL_SUBTREE` (100) chars.
//!
//! Without a `document_ref` the markers end at the path (and dataset). Examples are summarised by
//! the same rules; folds inside them get no dataset of their own (their items are already in a
//! column of the outer dataset), only the span.
//!
//! # Similarity
//!
//! Nulls are ignored (a missing value). The rest are alike when they are all of one kind (strings,
//! numbers, booleans, arrays), or all objects whose key sets mostly agree: the common keys are those
//! in at least half of the objects, and at least 90% of the objects must have a Jaccard index ≥ 0.5
//! against them. Key sets are judged on an evenly spaced sample of at most [`SAMPLE`] objects,
//! which keeps a million-item array linear.
//!
//! An array with ≥ `fold_min_items` items is folded whether alike or not: unlike items can't go into
//! one dataset, but keeping them all would leave the output unbounded, and the first few still show
//! what is there (finding alike runs would not bound it either). A map with unlike values is a
//! record (a config section, a manifest): its keys are its content, so it is kept whole up to
//! `max_keys` members. Collections whose compact JSON is under `fold_min_chars` (1,000, about 250
//! tokens) are never folded: ten keywords cost less than a marker, and a small map like `exports`
//! reads better whole than as a dataset.
//!
//! # Bounds
//!
//! The text is parsed once, by serde_json, into a tree of its own ([`tree`]: borrowed strings, one
//! allocation per container). serde_json refuses nesting beyond 128 (so all recursion here is bounded by it), lone surrogates
//! and numbers beyond f64 (`1e400`): all give `None`. Integers beyond u64/i64 are read as f64, so
//! the summary may show `1.2345678901234568e29` where the document has 30 digits (loom does not
//! enable `arbitrary_precision`); spans point at the exact text. Duplicate keys: the last value
//! wins, as in serde_json, and spans point at that last occurrence. Every step is linear in the
//! document; when the summary is over `max_output_chars` it is redone with a smaller depth limit,
//! down to 1, each try abandoned as soon as it is over.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::interrupt::{Interrupt, Pulse};
use crate::common::text::thousands;

mod tree;
use tree::Node;

/// Objects examined for key-set similarity, at most.
pub const SAMPLE: usize = 512;

/// A cut string keeps its prefix only when it saves more than the marker costs.
const CUT_SLACK: usize = 64;

/// A subtree at the depth limit this short (compact JSON) is cheaper than its marker: kept whole.
const SMALL_SUBTREE: usize = 100;

/// Longer paths are shown with their middle cut out (only hostile keys get there).
const MAX_PATH_CHARS: usize = 300;

#[derive(Debug, Clone)]
pub struct JsonOptions {
    /// Longer strings are cut, marked with their length and span.
    pub max_string_chars: usize,
    /// Items kept from a folded array or map.
    pub keep_examples: usize,
    /// Arrays, and maps of alike values, with at least this many items are folded.
    pub fold_min_items: usize,
    /// Collections whose compact JSON is shorter than this are not folded.
    pub fold_min_chars: usize,
    /// Members kept from a map of unlike values.
    pub max_keys: usize,
    /// Containers at this depth (root = 0) are replaced by a marker.
    pub max_depth: usize,
    /// The depth limit is lowered until the summary fits (or the limit is 1).
    pub max_output_chars: usize,
    /// Where the whole original is, e.g. `doc_4`.
    pub document_ref: String,
    /// The most one `loom_read` call returns (its `MAX_PAGE_CHARS`): a longer span is shown as
    /// its first page and its total.
    pub max_read_chars: usize,
    /// Checked every few thousand values: once it fires there is no summary (the budget cut
    /// applies).
    pub interrupt: Interrupt,
}

impl Default for JsonOptions {
    fn default() -> Self {
        Self {
            max_string_chars: 200,
            keep_examples: 3,
            fold_min_items: 8,
            fold_min_chars: 1000,
            max_keys: 50,
            max_depth: 8,
            max_output_chars: 16_000,
            document_ref: String::new(),
            max_read_chars: 100_000,
            interrupt: Interrupt::none(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonSummary {
    /// Compact JSON with each top-level member (or item) on its own line: indentation costs a
    /// token or more per line at every level, while one newline per top-level entry is nearly free
    /// (it merges with the comma) and lets the model find the document's outline.
    pub json: String,
    /// Folded arrays and maps, including truncated maps of unlike values.
    pub folds: usize,
    /// Cut strings, keys included.
    pub cut_strings: usize,
    /// Subtrees replaced at the depth limit.
    pub elided: usize,
}

/// `None` when `text` is not a JSON object/array or nothing would be reduced.
///
/// `ingest(path, rows)` is called once for each folded collection of alike items that appears in
/// the summary outside another fold's examples (those items are already rows of the outer
/// dataset). Rows are the objects themselves (a null becomes `{}`), `{"value": v}` for other kinds,
/// and for maps `{"key": k, …fields}` or `{"key": k, "value": v}` (the key column is renamed
/// `_key` if a value has a field `key`).
pub fn summarize(
    text: &str,
    options: &JsonOptions,
    ingest: &mut dyn FnMut(&str, &Rows) -> Option<String>,
) -> Option<JsonSummary> {
    let root = Node::parse(text)?;
    if !matches!(root, Node::Object(_) | Node::Array(_)) {
        return None;
    }
    // Dry runs find the depth limit that fits and the spans the markers need, without calling
    // `ingest` for folds a shallower retry would drop.
    let mut depth_limit = options.max_depth.max(1);
    let needed = loop {
        let mut dry = Walk::new(options, depth_limit, None);
        let out = dry.value(&root, 0);
        if dry.stopped() {
            return None;
        }
        let fits = !dry.over_budget() && render(&out)?.len() <= options.max_output_chars;
        if fits && dry.stats.total() == 0 {
            return None;
        }
        if fits || depth_limit == 1 {
            break dry.needed;
        }
        depth_limit -= 1;
    };
    let spans = locate(text, &needed);
    let mut walk = Walk::new(options, depth_limit, Some(ingest));
    walk.spans = spans;
    let out = walk.value(&root, 0);
    if walk.stopped() {
        return None;
    }
    let json = render(&out)?;
    if json.len() >= text.len() {
        return None;
    }
    let s = walk.stats;
    Some(JsonSummary {
        json,
        folds: s.folds,
        cut_strings: s.cut_strings,
        elided: s.elided,
    })
}

fn render(v: &Value) -> Option<String> {
    let (open, close, parts) = match v {
        Value::Object(m) => {
            let parts = m
                .iter()
                .map(|(k, v)| {
                    Some(format!(
                        "{}:{}",
                        serde_json::to_string(k).ok()?,
                        serde_json::to_string(v).ok()?
                    ))
                })
                .collect::<Option<Vec<_>>>()?;
            ('{', '}', parts)
        }
        Value::Array(a) => (
            '[',
            ']',
            a.iter()
                .map(|v| serde_json::to_string(v).ok())
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return serde_json::to_string(v).ok(),
    };
    if parts.is_empty() {
        return Some(format!("{open}{close}"));
    }
    Some(format!("{open}\n{}\n{close}", parts.join(",\n")))
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A span of the document in code points, as `loom_read` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    offset: usize,
    length: usize,
}

/// Stands in for spans and dataset names in the dry runs, about as long as real ones.
const FAKE_SPAN: Span = Span {
    offset: 1_000_000,
    length: 100_000,
};
const FAKE_DATASET: &str = "ds_0000000";

#[derive(Debug, Default, Clone, Copy)]
struct Stats {
    folds: usize,
    cut_strings: usize,
    elided: usize,
}

impl Stats {
    fn total(&self) -> usize {
        self.folds + self.cut_strings + self.elided
    }
}

type Ingest<'i> = &'i mut dyn FnMut(&str, &Rows) -> Option<String>;

struct Walk<'o, 'i> {
    o: &'o JsonOptions,
    depth_limit: usize,
    /// `None` in a dry run: nothing is ingested.
    ingest: Option<Ingest<'i>>,
    spans: HashMap<Vec<Seg>, Span>,
    /// Paths whose spans the markers of a dry run asked for.
    needed: Vec<Vec<Seg>>,
    path: Vec<Seg>,
    /// Inside the examples of a fold: nested folds get no dataset of their own.
    in_example: usize,
    stats: Stats,
    /// A lower bound of the rendered size so far (each value counted once, without its children).
    emitted: usize,
    /// Counts values toward the next look at `o.interrupt`; once it fired, every value is null
    /// and the walk's result is not used.
    pulse: Pulse<'o>,
}

impl<'o, 'i> Walk<'o, 'i> {
    fn new(o: &'o JsonOptions, depth_limit: usize, ingest: Option<Ingest<'i>>) -> Self {
        Self {
            o,
            depth_limit,
            ingest,
            spans: HashMap::new(),
            needed: Vec::new(),
            path: Vec::new(),
            in_example: 0,
            stats: Stats::default(),
            emitted: 0,
            pulse: o.interrupt.pulse(),
        }
    }

    fn stopped(&self) -> bool {
        self.pulse.stopped().is_some()
    }

    fn dry(&self) -> bool {
        self.ingest.is_none()
    }

    fn span_here(&mut self) -> Option<Span> {
        if self.dry() {
            self.needed.push(self.path.clone());
            Some(FAKE_SPAN)
        } else {
            self.spans.get(&self.path).copied()
        }
    }

    /// `at $.x: loom_read(…)`, or `at $.x in doc_4` when the span is unknown or not wanted.
    fn at_here(&mut self, with_span: bool) -> String {
        let mut s = format!("at {}", display_path(&self.path));
        let doc = &self.o.document_ref;
        if doc.is_empty() {
            return s;
        }
        match if with_span { self.span_here() } else { None } {
            Some(span) => {
                let _ = write!(s, ": {}", loom_read(doc, span, self.o.max_read_chars));
            }
            None => {
                let _ = write!(s, " in {doc}");
            }
        }
        s
    }

    fn child(&mut self, seg: Seg, v: &Node, depth: usize) -> Value {
        self.path.push(seg);
        let out = self.value(v, depth);
        self.path.pop();
        out
    }

    fn value(&mut self, v: &Node, depth: usize) -> Value {
        if self.pulse.beat() {
            return Value::Null;
        }
        if self.dry() && self.over_budget() {
            // This depth limit is already too deep: stop, the next try goes shallower.
            return Value::Null;
        }
        let container = matches!(v, Node::Array(_) | Node::Object(_));
        let out = if container && depth >= self.depth_limit && !fits(v, SMALL_SUBTREE) {
            self.elide(v)
        } else {
            match v {
                Node::String(s) => self.string(s),
                Node::Array(items) => self.array(items, depth),
                Node::Object(map) => self.object(map, depth),
                other => other.to_value(),
            }
        };
        self.emitted += shallow_size(&out);
        out
    }

    fn over_budget(&self) -> bool {
        self.emitted > self.o.max_output_chars
    }

    fn elide(&mut self, v: &Node) -> Value {
        self.stats.elided += 1;
        let what = match v {
            Node::Array(a) => format!("array of {}", count(a.len(), "item")),
            Node::Object(m) => format!("object with {}", count(m.len(), "key")),
            _ => "value".to_string(),
        };
        let at = self.at_here(true);
        marker_object(format!("{what} {at}"))
    }

    fn string(&mut self, s: &str) -> Value {
        match self.cut(s) {
            None => Value::String(s.to_string()),
            Some((prefix, rest)) => {
                let doc = &self.o.document_ref;
                let tail = if doc.is_empty() {
                    String::new()
                } else {
                    let doc = doc.clone();
                    match self.span_here() {
                        Some(span) => format!("; {}", loom_read(&doc, span, self.o.max_read_chars)),
                        None => format!("; at {} in {doc}", display_path(&self.path)),
                    }
                };
                Value::String(format!("{prefix}…[+{} chars{tail}]", thousands(rest)))
            }
        }
    }

    fn key(&mut self, k: &str) -> String {
        match self.cut(k) {
            None => k.to_string(),
            Some((prefix, rest)) => format!("{prefix}…[+{} chars]", thousands(rest)),
        }
    }

    /// The prefix and the number of characters cut, when cutting saves something.
    fn cut<'s>(&mut self, s: &'s str) -> Option<(&'s str, usize)> {
        let max = self.o.max_string_chars;
        if s.len() <= max + CUT_SLACK {
            return None; // bytes ≥ chars
        }
        let total = s.chars().count();
        if total <= max + CUT_SLACK {
            return None;
        }
        let end = s.char_indices().nth(max).map_or(s.len(), |(i, _)| i);
        self.stats.cut_strings += 1;
        Some((s.get(..end)?, total - max))
    }

    fn array(&mut self, items: &[Node], depth: usize) -> Value {
        let n = items.len();
        if n >= self.o.fold_min_items
            && n > self.o.keep_examples
            && !seq_fits(items, self.o.fold_min_chars)
        {
            let shape = classify(items.iter(), n);
            return self.fold_array(items, depth, shape);
        }
        let out = items
            .iter()
            .enumerate()
            .map(|(i, v)| self.child(Seg::Index(i), v, depth + 1))
            .collect();
        Value::Array(out)
    }

    fn fold_array(&mut self, items: &[Node], depth: usize, shape: Shape) -> Value {
        let n = items.len();
        let k = self.o.keep_examples;
        self.in_example += 1;
        let mut out: Vec<Value> = items
            .iter()
            .take(k)
            .enumerate()
            .map(|(i, v)| self.child(Seg::Index(i), v, depth + 1))
            .collect();
        self.in_example -= 1;
        self.stats.folds += 1;
        let text = match &shape {
            Shape::Unlike(kinds) => {
                format!(
                    "{} more ({} in all: {kinds}) {}",
                    thousands(n - k),
                    thousands(n),
                    self.at_here(true)
                )
            }
            Shape::Objects => {
                self.alike_text(n, Rows(RowSource::Items { items, wrap: false }), None)
            }
            Shape::Values => self.alike_text(n, Rows(RowSource::Items { items, wrap: true }), None),
        };
        out.push(marker_object(text));
        Value::Array(out)
    }

    /// The marker of a fold of alike items, `map_column` naming a map's key column.
    fn alike_text(&mut self, n: usize, rows: Rows, map_column: Option<&str>) -> String {
        let k = self.o.keep_examples;
        let dataset = self.dataset(&rows);
        if self.dry() && dataset.is_some() {
            // `ingest` may decline in the final pass; the marker then needs the span.
            self.needed.push(self.path.clone());
        }
        let at = self.at_here(dataset.is_none());
        let (what, column) = match map_column {
            Some(c) => (" keys", format!(", keys in column {c}")),
            None => ("", String::new()),
        };
        let ds = dataset
            .map(|d| format!("; dataset {d} for loom_query{column}"))
            .unwrap_or_default();
        format!(
            "{} more{what} like these ({} in all) {at}{ds}",
            thousands(n - k),
            thousands(n)
        )
    }

    /// Runs the rows through `ingest`, unless this is a dry run (then a stand-in name) or the
    /// fold is inside another fold's examples.
    fn dataset(&mut self, rows: &Rows) -> Option<String> {
        if self.in_example > 0 {
            return None;
        }
        let path = display_path(&self.path);
        match self.ingest.as_mut() {
            None => Some(FAKE_DATASET.to_string()),
            Some(ingest) => ingest(&path, rows),
        }
    }

    fn object(&mut self, map: &[(Cow<str>, Node)], depth: usize) -> Value {
        let n = map.len();
        if n >= self.o.fold_min_items
            && n > self.o.keep_examples
            && !map_fits(map, self.o.fold_min_chars)
        {
            let shape = classify(map.iter().map(|(_, v)| v), n);
            if !matches!(shape, Shape::Unlike(_)) {
                return self.fold_map(map, depth, shape);
            }
        }
        let keep = n.min(self.o.max_keys);
        let mut out = Map::new();
        for (k, v) in map.iter().take(keep) {
            let summary = self.child(Seg::Key(k.to_string()), v, depth + 1);
            let key = self.key(k);
            insert_unique(&mut out, key, summary);
        }
        if n > keep {
            self.stats.folds += 1;
            let text = format!(
                "{} more keys ({} in all) {}",
                thousands(n - keep),
                thousands(n),
                self.at_here(true)
            );
            insert_unique(&mut out, "…".to_string(), Value::String(text));
        }
        Value::Object(out)
    }

    fn fold_map(&mut self, map: &[(Cow<str>, Node)], depth: usize, shape: Shape) -> Value {
        let n = map.len();
        let k = self.o.keep_examples;
        let mut out = Map::new();
        self.in_example += 1;
        for (key, v) in map.iter().take(k) {
            let summary = self.child(Seg::Key(key.to_string()), v, depth + 1);
            let key = self.key(key);
            insert_unique(&mut out, key, summary);
        }
        self.in_example -= 1;
        self.stats.folds += 1;
        let objects = matches!(shape, Shape::Objects);
        let mut column = "key".to_string();
        if objects {
            while map.iter().any(|(_, v)| {
                v.as_object()
                    .is_some_and(|o| o.iter().any(|(field, _)| *field == column))
            }) {
                column.insert(0, '_');
            }
        }
        let rows = Rows(RowSource::Members {
            members: map,
            column: &column,
            objects,
        });
        let text = self.alike_text(n, rows, Some(&column));
        insert_unique(&mut out, "…".to_string(), Value::String(text));
        Value::Object(out)
    }
}

/// The rows of a folded collection, as `ingest` receives them. Nothing is copied until the rows
/// are asked for: a summary whose folds get no dataset never serialises them.
pub struct Rows<'r, 'a>(RowSource<'r, 'a>);

enum RowSource<'r, 'a> {
    /// An array's items: objects as they are (a null is `{}`), or each as `{"value": item}`.
    Items { items: &'r [Node<'a>], wrap: bool },
    /// A map's members: `{column: key, …fields}` for objects (a null is `{column: key}`),
    /// otherwise `{column: key, "value": value}`.
    Members {
        members: &'r [(Cow<'a, str>, Node<'a>)],
        column: &'r str,
        objects: bool,
    },
}

/// One row, serialised without building it.
enum Row<'r, 'a> {
    Item(&'r Node<'a>),
    Wrapped(&'r Node<'a>),
    Member {
        column: &'r str,
        key: &'r str,
        value: &'r Node<'a>,
        objects: bool,
    },
}

impl Rows<'_, '_> {
    pub fn len(&self) -> usize {
        match &self.0 {
            RowSource::Items { items, .. } => items.len(),
            RowSource::Members { members, .. } => members.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn row(&self, i: usize) -> Option<Row<'_, '_>> {
        Some(match &self.0 {
            RowSource::Items { items, wrap: false } => Row::Item(items.get(i)?),
            RowSource::Items { items, wrap: true } => Row::Wrapped(items.get(i)?),
            RowSource::Members {
                members,
                column,
                objects,
            } => {
                let (key, value) = members.get(i)?;
                Row::Member {
                    column,
                    key,
                    value,
                    objects: *objects,
                }
            }
        })
    }

    /// Row `i` as a JSON object.
    pub fn get(&self, i: usize) -> Option<Value> {
        serde_json::to_value(self.row(i)?).ok()
    }

    /// Every row: a JSON array of objects.
    pub fn to_json(&self) -> String {
        let rows: Vec<Row> = (0..self.len()).filter_map(|i| self.row(i)).collect();
        serde_json::to_string(&rows).unwrap_or_default()
    }
}

impl serde::Serialize for Row<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        match self {
            Row::Item(Node::Null) => serializer.serialize_map(Some(0))?.end(),
            Row::Item(item) => item.serialize(serializer),
            Row::Wrapped(item) => {
                let mut map = serializer.serialize_map(Some(1))?;
                map.serialize_entry("value", item)?;
                map.end()
            }
            Row::Member {
                column,
                key,
                value,
                objects,
            } => {
                let fields = match value {
                    Node::Object(fields) if *objects => fields.as_slice(),
                    _ => &[],
                };
                let value_column = !(*objects && matches!(value, Node::Object(_) | Node::Null));
                let mut map = serializer.serialize_map(Some(1 + fields.len()))?;
                map.serialize_entry(column, key)?;
                for (field, v) in fields {
                    map.serialize_entry(field.as_ref(), v)?;
                }
                if value_column {
                    map.serialize_entry("value", value)?;
                }
                map.end()
            }
        }
    }
}

fn single(key: &str, v: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(key.to_string(), v);
    Value::Object(m)
}

fn marker_object(text: String) -> Value {
    single("…", Value::String(text))
}

/// Cut keys and the marker key can collide with real keys; neither may overwrite one.
fn insert_unique(map: &mut Map<String, Value>, mut key: String, v: Value) {
    while map.contains_key(&key) {
        key.push('…');
    }
    map.insert(key, v);
}

fn loom_read(doc: &str, span: Span, max: usize) -> String {
    let Span { offset, length } = span;
    if length <= max {
        format!("loom_read(\"{doc}\", offset: {offset}, length: {length})")
    } else {
        format!(
            "loom_read(\"{doc}\", offset: {offset}, length: {max}) onwards, {} chars in all",
            thousands(length)
        )
    }
}

fn count(n: usize, noun: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {noun}{s}", thousands(n))
}

fn display_path(path: &[Seg]) -> String {
    let mut s = String::from("$");
    for seg in path {
        match seg {
            Seg::Index(i) => {
                let _ = write!(s, "[{i}]");
            }
            Seg::Key(k) if is_identifier(k) => {
                s.push('.');
                s.push_str(k);
            }
            Seg::Key(k) => {
                s.push_str("['");
                for c in k.chars() {
                    match c {
                        '\'' => s.push_str("\\'"),
                        '\\' => s.push_str("\\\\"),
                        c if (c as u32) < 0x20 => {
                            let _ = write!(s, "\\u{:04x}", c as u32);
                        }
                        c => s.push(c),
                    }
                }
                s.push_str("']");
            }
        }
    }
    let chars = s.chars().count();
    if chars <= MAX_PATH_CHARS {
        return s;
    }
    let head: String = s.chars().take(MAX_PATH_CHARS * 2 / 3).collect();
    let tail: String = s.chars().skip(chars - MAX_PATH_CHARS / 3).collect();
    format!("{head}…{tail}")
}

fn is_identifier(k: &str) -> bool {
    let mut chars = k.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

// ---------------------------------------------------------------------------------------------
// Similarity

enum Shape {
    Objects,
    /// All scalars of one kind, all arrays, or all null.
    Values,
    /// A description of the kinds, e.g. `300 objects, 180 strings`.
    Unlike(String),
}

fn classify<'v, 'a: 'v>(items: impl Iterator<Item = &'v Node<'a>> + Clone, n: usize) -> Shape {
    const NAMES: [&str; 6] = [
        "nulls", "booleans", "numbers", "strings", "arrays", "objects",
    ];
    let mut counts = [0usize; 6];
    for v in items.clone() {
        counts[kind(v)] += 1;
    }
    let present = counts[1..].iter().filter(|&&c| c > 0).count();
    if present > 1 {
        let parts: Vec<String> = NAMES
            .iter()
            .zip(counts)
            .filter(|&(_, c)| c > 0)
            .map(|(name, c)| format!("{} {name}", thousands(c)))
            .collect();
        return Shape::Unlike(parts.join(", "));
    }
    let objects = counts[5];
    if objects == 0 {
        return Shape::Values;
    }
    let step = objects.div_ceil(SAMPLE).max(1);
    let sample = || items.clone().filter_map(Node::as_object).step_by(step);
    let mut freq: HashMap<&str, usize> = HashMap::new();
    let mut sampled = 0usize;
    for o in sample() {
        sampled += 1;
        for (k, _) in o {
            *freq.entry(k.as_ref()).or_default() += 1;
        }
    }
    freq.retain(|_, c| *c * 2 >= sampled);
    let common = freq.len();
    let alike = sample()
        .filter(|o| {
            let inter = o
                .iter()
                .filter(|(k, _)| freq.contains_key(k.as_ref()))
                .count();
            let union = o.len() + common - inter;
            union == 0 || inter * 2 >= union
        })
        .count();
    if alike * 10 >= sampled * 9 {
        Shape::Objects
    } else {
        Shape::Unlike(format!("{} objects with differing keys", thousands(n)))
    }
}

fn kind(v: &Node) -> usize {
    match v {
        Node::Null => 0,
        Node::Bool(_) => 1,
        Node::Number(_) => 2,
        Node::String(_) => 3,
        Node::Array(_) => 4,
        Node::Object(_) => 5,
    }
}

// ---------------------------------------------------------------------------------------------
// Compact size, with early exit so that asking about a huge subtree costs at most `limit`.

fn fits(v: &Node, limit: usize) -> bool {
    let mut left = limit;
    size_within(v, &mut left)
}

fn seq_fits(items: &[Node], limit: usize) -> bool {
    let mut left = limit;
    take(&mut left, 1 + items.len().max(1)) && items.iter().all(|v| size_within(v, &mut left))
}

fn map_fits(map: &[(Cow<str>, Node)], limit: usize) -> bool {
    let mut left = limit;
    take(&mut left, 1 + map.len().max(1))
        && map
            .iter()
            .all(|(k, v)| take(&mut left, k.len() + 3) && size_within(v, &mut left))
}

/// What `v` adds to the rendered JSON besides its children's own share: never more than it.
fn shallow_size(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 4,
        Value::Number(_) => 1,
        Value::String(s) => s.len() + 2,
        Value::Array(a) => 1 + a.len().max(1),
        Value::Object(m) => 1 + m.len().max(1) + m.keys().map(|k| k.len() + 3).sum::<usize>(),
    }
}

fn take(left: &mut usize, n: usize) -> bool {
    match left.checked_sub(n) {
        Some(l) => {
            *left = l;
            true
        }
        None => false,
    }
}

fn size_within(v: &Node, left: &mut usize) -> bool {
    match v {
        Node::Null | Node::Bool(_) => take(left, 5),
        Node::Number(n) => take(left, n.to_string().len()),
        Node::String(s) => take(left, s.len() + 2),
        Node::Array(a) => take(left, 1 + a.len().max(1)) && a.iter().all(|v| size_within(v, left)),
        Node::Object(m) => {
            take(left, 1 + m.len().max(1))
                && m.iter()
                    .all(|(k, v)| take(left, k.len() + 3) && size_within(v, left))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Locating: one forward pass over the raw text that follows only the wanted paths and skips
// everything else, so spans cost O(document) however many markers there are. The text is known
// to be valid JSON (serde_json accepted it); on anything unexpected the pass stops, and the
// markers fall back to path + document.

#[derive(Default)]
struct Wanted {
    want: Option<usize>,
    keys: HashMap<String, Wanted>,
    index: HashMap<usize, Wanted>,
}

fn locate(text: &str, needed: &[Vec<Seg>]) -> HashMap<Vec<Seg>, Span> {
    if needed.is_empty() {
        return HashMap::new();
    }
    let mut root = Wanted::default();
    for (i, path) in needed.iter().enumerate() {
        let mut node = &mut root;
        for seg in path {
            node = match seg {
                Seg::Key(k) => node.keys.entry(k.clone()).or_default(),
                Seg::Index(i) => node.index.entry(*i).or_default(),
            };
        }
        node.want = Some(i);
    }
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        cursor_byte: 0,
        cursor_char: 0,
        found: vec![None; needed.len()],
    };
    let _ = scanner.visit(&root);
    needed
        .iter()
        .zip(scanner.found)
        .filter_map(|(path, span)| Some((path.clone(), span?)))
        .collect()
}

struct Scanner<'t> {
    text: &'t str,
    bytes: &'t [u8],
    pos: usize,
    /// Byte → code point conversion, incremental because spans are asked for in text order.
    cursor_byte: usize,
    cursor_char: usize,
    found: Vec<Option<Span>>,
}

impl<'t> Scanner<'t> {
    fn char_at(&mut self, byte: usize) -> usize {
        if byte < self.cursor_byte {
            (self.cursor_byte, self.cursor_char) = (0, 0);
        }
        let counted = self
            .bytes
            .get(self.cursor_byte..byte)
            .map_or(0, |b| b.iter().filter(|&&c| (c as i8) >= -0x40).count());
        self.cursor_byte = byte;
        self.cursor_char += counted;
        self.cursor_char
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        self.ws();
        (self.peek()? == b).then(|| self.pos += 1)
    }

    /// At a `"`: moves past the closing quote.
    fn skip_string(&mut self) -> Option<()> {
        self.pos += 1;
        loop {
            let rest = self.bytes.get(self.pos..)?;
            let i = memchr::memchr2(b'"', b'\\', rest)?;
            self.pos += i + 1;
            if rest.get(i) == Some(&b'\\') {
                self.pos += 1;
            } else {
                return Some(());
            }
        }
    }

    fn skip_value(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            self.ws();
            match self.peek()? {
                b'"' => self.skip_string()?,
                b'{' | b'[' => {
                    depth += 1;
                    self.pos += 1;
                    continue;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    self.pos += 1;
                }
                b',' | b':' if depth > 0 => {
                    self.pos += 1;
                    continue;
                }
                b',' | b':' => return None,
                _ => {
                    self.pos += 1;
                    while !matches!(
                        self.peek(),
                        None | Some(b',' | b']' | b'}' | b' ' | b'\t' | b'\n' | b'\r')
                    ) {
                        self.pos += 1;
                    }
                }
            }
            if depth == 0 {
                return Some(());
            }
        }
    }

    fn key(&mut self) -> Option<Cow<'t, str>> {
        self.ws();
        let start = self.pos;
        if self.peek()? != b'"' {
            return None;
        }
        self.skip_string()?;
        let literal = self.text.get(start..self.pos)?;
        let inner = literal.get(1..literal.len().saturating_sub(1))?;
        if inner.contains('\\') {
            serde_json::from_str::<String>(literal).ok().map(Cow::Owned)
        } else {
            Some(Cow::Borrowed(inner))
        }
    }

    fn visit(&mut self, node: &Wanted) -> Option<()> {
        self.ws();
        let start = self.pos;
        let start_char = node.want.map(|_| self.char_at(start));
        match self.peek()? {
            b'{' if !node.keys.is_empty() => {
                self.pos += 1;
                self.ws();
                if self.peek()? == b'}' {
                    self.pos += 1;
                } else {
                    loop {
                        let child = self.key().map(|k| node.keys.get(k.as_ref()))?;
                        self.expect(b':')?;
                        match child {
                            Some(child) => self.visit(child)?,
                            None => self.skip_value()?,
                        }
                        self.ws();
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b'}' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
            }
            b'[' if !node.index.is_empty() => {
                self.pos += 1;
                self.ws();
                if self.peek()? == b']' {
                    self.pos += 1;
                } else {
                    let mut i = 0usize;
                    loop {
                        match node.index.get(&i) {
                            Some(child) => self.visit(child)?,
                            None => self.skip_value()?,
                        }
                        i += 1;
                        self.ws();
                        match self.peek()? {
                            b',' => self.pos += 1,
                            b']' => {
                                self.pos += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
            }
            _ => self.skip_value()?,
        }
        if let (Some(i), Some(offset)) = (node.want, start_char) {
            let end = self.char_at(self.pos);
            if let Some(slot) = self.found.get_mut(i) {
                *slot = Some(Span {
                    offset,
                    length: end - offset,
                });
            }
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn thousands_groups_digits() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (1_234_567, "1,234,567"),
        ];
        for (n, s) in cases {
            assert_eq!(thousands(n), s);
        }
    }

    #[test]
    fn paths_are_normalized_jsonpath() {
        let path = [
            Seg::Key("versions".into()),
            Seg::Key("1.0.0".into()),
            Seg::Index(3),
            Seg::Key("it's\\\n".into()),
        ];
        assert_eq!(
            display_path(&path),
            r"$.versions['1.0.0'][3]['it\'s\\\u000a']"
        );
        let long = display_path(&[Seg::Key("k".repeat(1000))]);
        assert_eq!(long.chars().count(), MAX_PATH_CHARS + 1);
    }

    #[test]
    fn similarity() {
        let alike = |v: Value| {
            let text = v.to_string();
            match Node::parse(&text) {
                Some(Node::Array(a)) => !matches!(classify(a.iter(), a.len()), Shape::Unlike(_)),
                _ => unreachable!(),
            }
        };
        assert!(alike(json!([{}, {}, null])));
        assert!(alike(json!([1, 2.5, null, 3])));
        assert!(alike(json!([[1], ["a", {}]])));
        assert!(!alike(json!([1, "1"])));
        // Two keys of three shared: Jaccard 0.5 against the common keys {a, b, c}.
        assert!(alike(
            json!([{"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1, "d": 1}])
        ));
        assert!(!alike(json!([{"a": 1}, {"b": 1}, {"c": 1}, {"d": 1}])));
    }

    #[test]
    fn locator_follows_escaped_keys_and_whitespace() {
        let text = "{ \"x\" : [1,{\"y\":\"}\"}] ,\n \"a\\u0062\" : [ 1 , \"é\\\"x\" ] }";
        let path = vec![Seg::Key("ab".into()), Seg::Index(1)];
        let spans = locate(text, std::slice::from_ref(&path));
        let span = spans[&path];
        let literal: String = text.chars().skip(span.offset).take(span.length).collect();
        assert_eq!(literal, "\"é\\\"x\"");
    }
}
