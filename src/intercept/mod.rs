//! Deciding, for each tool result, whether it passes through untouched or becomes datasets and
//! an envelope. Never worse than no proxy: any doubt or failure → the original bytes.

pub(crate) mod locate;
pub(crate) mod skim;
pub mod text;

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

pub use crate::common::Origin;
use crate::common::json::string_content_of;
use crate::common::policy::Policy;
use crate::common::text::now_rfc3339;
use crate::common::tokens::{estimate_tokens, upper_bound_tokens};
use crate::envelope::{self, DatasetView};
use crate::ingest::{IngestOptions, ingest_json_array_with, ingest_table_with};
use crate::store::{NewDataset, Provenance, Store};
use locate::{FoundTable, Located, Rung};

/// A text block at most this long may be dropped from a replaced result only after it is put
/// into the envelope's `context`.
pub const MAX_TEXT_IN_CONTEXT: usize = 500;

// In common/ because the context firewall caps a page's tables by it too.
pub use crate::common::MAX_DATASETS_PER_RESULT;

/// Just the parts of a `CallToolResult` interception looks at, as spans of the raw result
/// ([`skim`]: the raw result is valid JSON already, so finding them needs no second parse).
struct ResultView<'a> {
    content: Vec<ContentView<'a>>,
    /// The raw JSON of `structuredContent` (absent or `null`: `None`).
    structured_content: Option<&'a str>,
    is_error: Option<bool>,
}

struct ContentView<'a> {
    kind: Cow<'a, str>,
    /// The raw JSON string, decoded by [`string_content_of`]: in one pass, into a buffer of its
    /// size.
    text: Option<&'a str>,
}

/// A member that may be given once.
fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
    slot.replace(value).is_none().then_some(())
}

/// `None` for `null`, else the raw value.
fn unless_null(value: &str) -> Option<&str> {
    (value != "null").then_some(value)
}

impl<'a> ResultView<'a> {
    /// The result read as `{content?: [block], structuredContent?: any, isError?: bool}`. A
    /// member given twice, a block that is not an object with a string `type`, an `isError`
    /// that is not a boolean or null → `None`, and the result passes through. So does a result
    /// or block written as an array of field values, which serde's derive would have read by
    /// position: that is not an MCP result, and passing it through costs nothing.
    fn read(raw: &'a str) -> Option<Self> {
        let (mut content, mut structured, mut is_error) = (None, None, None);
        let mut cursor = skim::Cursor::new(raw);
        let mut members = cursor.enter(b'{')?;
        while cursor.next(&mut members)? {
            match cursor.key()?.as_ref() {
                "content" => {
                    let mut blocks = cursor.enter(b'[')?;
                    let mut read = Vec::new();
                    while cursor.next(&mut blocks)? {
                        read.push(ContentView::read(&mut cursor)?);
                    }
                    once(&mut content, read)?
                }
                "structuredContent" => once(&mut structured, unless_null(cursor.value()?))?,
                "isError" => {
                    let flag = match cursor.value()? {
                        "true" => Some(true),
                        "false" => Some(false),
                        "null" => None,
                        _ => return None,
                    };
                    once(&mut is_error, flag)?
                }
                _ => {
                    cursor.value()?;
                }
            }
        }
        cursor.finish()?;
        Some(Self {
            content: content.unwrap_or_default(),
            structured_content: structured.flatten(),
            is_error: is_error.flatten(),
        })
    }
}

impl ResultView<'_> {
    /// The text of every block, decoded, when the result can hold tables: not an error, and
    /// text blocks only.
    fn texts(&self) -> Option<Vec<Cow<'_, str>>> {
        if self.is_error == Some(true) || self.content.iter().any(|c| c.kind != "text") {
            return None;
        }
        self.content
            .iter()
            .filter_map(|c| c.text)
            .map(string_content_of)
            .collect()
    }
}

impl<'a> ContentView<'a> {
    fn read(cursor: &mut skim::Cursor<'a>) -> Option<Self> {
        let (mut kind, mut text) = (None, None);
        let mut members = cursor.enter(b'{')?;
        while cursor.next(&mut members)? {
            match cursor.key()?.as_ref() {
                "type" => once(&mut kind, string_content_of(cursor.value()?)?)?,
                "text" => once(&mut text, unless_null(cursor.value()?))?,
                _ => {
                    cursor.value()?;
                }
            }
        }
        Some(Self {
            kind: kind?,
            text: text.flatten(),
        })
    }
}

/// What to send back.
#[derive(Debug)]
pub enum Outcome {
    /// The original bytes, untouched.
    PassThrough(Box<RawValue>, &'static str),
    /// A replacement `CallToolResult` (text + structuredContent carrying the envelope).
    Replaced(Value),
    /// A result that is not a table, reduced by the context firewall (SPEC §19); the original
    /// is kept as a document.
    Reduced(Value),
    /// The result of a tool with a view (SPEC §8.5): the server's bytes with only `content`
    /// replaced by what loom built (an envelope's text, or the reduced text).
    Spliced(Box<RawValue>, Built),
    /// Reduced, with text still over the budget that the policy sends to a model (SPEC §19.9):
    /// the gateway asks for the summaries, then [`summarized`] decides.
    Summarize(Box<ToSummarize>),
}

/// A reduction waiting for its model summaries.
#[derive(Debug)]
pub struct ToSummarize {
    pub raw: Box<RawValue>,
    pub reduction: crate::reduce::Reduction,
    view: bool,
    small: bool,
}

/// What answers once the summaries came (or did not): the reduction with every summary that
/// came in place of its cut text.
pub fn summarized(pending: ToSummarize, store: &Store) -> Outcome {
    let ToSummarize {
        raw,
        reduction,
        view,
        small,
    } = pending;
    reduced_outcome(raw, reduction.finish(store), view, small)
}

fn reduced_outcome(raw: Box<RawValue>, result: Option<Value>, view: bool, small: bool) -> Outcome {
    match result {
        Some(result) if view => match with_server_members(&raw, &result) {
            Some(spliced) => Outcome::Spliced(spliced, Built::Document),
            None => Outcome::PassThrough(raw, "failed"),
        },
        Some(result) => Outcome::Reduced(result),
        None if small => Outcome::PassThrough(raw, "small"),
        None => Outcome::PassThrough(raw, "no table"),
    }
}

/// What replaced the `content` of a [`Outcome::Spliced`] result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Built {
    Table,
    Document,
}

/// Decide what happens to one tool result. Blocking work (parsing, ingest): call it from
/// `spawn_blocking` for large inputs.
pub fn intercept(
    raw: Box<RawValue>,
    origin: &Origin,
    store: &Arc<Store>,
    threshold: usize,
    policy: &Policy,
) -> Outcome {
    let interrupt = crate::reduce::Interrupt::after(crate::reduce::DEFAULT_TIME_LIMIT);
    intercept_with(raw, origin, store, threshold, policy, &interrupt)
}

/// [`intercept`], with the firewall's stages stopped by `interrupt` (its deadline, or its
/// cancel flag when the client cancelled the call).
pub fn intercept_with(
    raw: Box<RawValue>,
    origin: &Origin,
    store: &Arc<Store>,
    threshold: usize,
    policy: &Policy,
    interrupt: &crate::reduce::Interrupt,
) -> Outcome {
    if policy.bypass {
        return Outcome::PassThrough(raw, "bypass");
    }
    if upper_bound_tokens(raw.get().len()) <= threshold {
        return Outcome::PassThrough(raw, "small");
    }
    over_threshold(raw, origin, store, threshold, policy, interrupt)
}

/// The stages for a result its caller found may be over `threshold` by its bytes, and whose
/// tool is not bypassed: the table rungs, then the firewall. The result path makes those two
/// tests itself before it leaves the I/O thread ([`intercept_with`] makes them for the others).
pub(crate) fn over_threshold(
    raw: Box<RawValue>,
    origin: &Origin,
    store: &Arc<Store>,
    threshold: usize,
    policy: &Policy,
    interrupt: &crate::reduce::Interrupt,
) -> Outcome {
    // Never worse than no proxy: even a bug (a panic) in the data path passes the original on.
    let decided = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        replace(&raw, origin, store, threshold)
    }));
    // Under the threshold once its text is decoded: a pass-through is "small" (its tables may
    // be kept, SPEC §8.4), as for one whose bytes alone tell.
    let mut small = false;
    match decided {
        Ok(Ok(Replacement::Envelope(result))) if policy.view => {
            if let Some(spliced) = with_server_members(&raw, &result) {
                return Outcome::Spliced(spliced, Built::Table);
            }
        }
        Ok(Ok(Replacement::Envelope(result))) => return Outcome::Replaced(result),
        Ok(Ok(Replacement::UnderThreshold)) => small = true,
        Ok(Ok(Replacement::None)) => {}
        Ok(Err(reason)) => {
            tracing::warn!(server = %origin.server, tool = %origin.tool, "no envelope: {reason}");
        }
        Err(_) => {
            tracing::error!(server = %origin.server, tool = %origin.tool, "table interception panicked");
        }
    }
    // No table: the context firewall for everything else (SPEC §19).
    let reduced = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::reduce::reduce_with(raw.get(), origin, store, policy, interrupt)
    }));
    match reduced {
        Ok(Ok(Some(reduction))) if !reduction.summarizable.is_empty() => {
            Outcome::Summarize(Box::new(ToSummarize {
                raw,
                reduction,
                view: policy.view,
                small,
            }))
        }
        Ok(Ok(Some(reduction))) => {
            reduced_outcome(raw, reduction.finish(store), policy.view, small)
        }
        Ok(Ok(None)) => reduced_outcome(raw, None, policy.view, small),
        Ok(Err(reason)) => {
            tracing::warn!(server = %origin.server, tool = %origin.tool, "passed through unchanged: {reason}");
            Outcome::PassThrough(raw, "failed")
        }
        Err(_) => {
            tracing::error!(server = %origin.server, tool = %origin.tool, "reduction panicked; passed through unchanged");
            Outcome::PassThrough(raw, "failed")
        }
    }
}

/// For a tool with an MCP Apps view (SPEC §8.5): the server's result with only its `content`
/// replaced by the one loom built; `structuredContent` (what the view draws), `_meta` and every
/// other member stay as the server wrote them, byte for byte (spliced, never parsed and written
/// again). `None` when the original is not an object.
fn with_server_members(raw: &RawValue, built: &Value) -> Option<Box<RawValue>> {
    let content = serde_json::to_string(built.get("content")?).ok()?;
    let mut out = String::with_capacity(raw.get().len() + content.len());
    out.push('{');
    let mut replaced = false;
    for (key, value) in skim::object_members(raw.get())? {
        if !out.ends_with('{') {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(&key).ok()?);
        out.push(':');
        if key == "content" && !replaced {
            out.push_str(&content);
            replaced = true;
        } else if key != "content" {
            out.push_str(value);
        } else {
            // A second `content` member: the result would not have read (ResultView::read).
            return None;
        }
    }
    if !replaced {
        if !out.ends_with('{') {
            out.push(',');
        }
        out.push_str("\"content\":");
        out.push_str(&content);
    }
    out.push('}');
    RawValue::from_string(out).ok()
}

/// What [`replace`] came to.
enum Replacement {
    /// The envelope that answers in the result's place.
    Envelope(Value),
    /// The result is under the threshold once its text is decoded.
    UnderThreshold,
    /// No envelope (no table, or one that could not replace the result without loss).
    None,
}

fn replace(
    raw: &RawValue,
    origin: &Origin,
    store: &Arc<Store>,
    threshold: usize,
) -> Result<Replacement, String> {
    let Some(view) = ResultView::read(raw.get()) else {
        return Ok(Replacement::None);
    };
    let Some(decoded) = view.texts() else {
        return Ok(Replacement::None);
    };
    let texts: Vec<&str> = decoded.iter().map(|t| t.as_ref()).collect();
    let original_tokens = texts.iter().map(|t| estimate_tokens(t)).sum::<usize>()
        + view.structured_content.map_or(0, estimate_tokens);
    if original_tokens <= threshold {
        return Ok(Replacement::UnderThreshold);
    }
    let located = match view.structured_content.and_then(locate::in_structured) {
        Some(mut found) => {
            if !absorb_texts(
                &texts,
                &found.tables,
                view.structured_content,
                &mut found.context,
            ) {
                return Ok(Replacement::None);
            }
            found
        }
        None => {
            let found = locate::in_texts(&texts).or_else(|| text::in_texts(&texts));
            match found.and_then(|f| keep_structured(f, &texts, view.structured_content)) {
                Some(found) => found,
                None => return Ok(Replacement::None),
            }
        }
    };
    let Located {
        rung,
        mut tables,
        context,
    } = located;

    let added = ingest_all(&mut tables, origin, rung, store, false)?;
    let undo = |added: &[Arc<crate::store::Dataset>]| {
        for dataset in added {
            store.remove(&dataset.reference);
        }
    };
    let views: Vec<DatasetView<'_>> = added
        .iter()
        .zip(&tables)
        .map(|(dataset, table)| DatasetView {
            dataset,
            path: &table.path,
        })
        .collect();
    let new: Vec<&crate::store::Dataset> = added.iter().map(|d| d.as_ref()).collect();
    let hints = crate::hints::hints_for_all(&new, &store.join_candidates(&new));
    let envelope = envelope::build(&views, &hints, &context, original_tokens);
    let text = envelope.to_string();
    if text.len() >= raw.get().len() {
        undo(&added);
        return Ok(Replacement::None);
    }
    // Hosts that render MCP Apps may show the dataset in loom's own view (SPEC §12.1).
    Ok(Replacement::Envelope(json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": envelope,
        "_meta": crate::common::tools::view_meta(),
    })))
}

/// Ingest every table of one result, or none: a failure, or the memory budget evicting an
/// earlier table of this very result to make room for a later one (an envelope would name a
/// ref that is gone), removes what was added.
fn ingest_all(
    tables: &mut [FoundTable<'_>],
    origin: &Origin,
    rung: Rung,
    store: &Arc<Store>,
    passed_through: bool,
) -> Result<Vec<Arc<crate::store::Dataset>>, String> {
    if tables.len() > MAX_DATASETS_PER_RESULT {
        return Err(format!(
            "the result holds {} tables; loom makes at most {MAX_DATASETS_PER_RESULT} datasets \
             of one result",
            tables.len()
        ));
    }
    let mut added: Vec<Arc<crate::store::Dataset>> = Vec::new();
    let undo = |added: &[Arc<crate::store::Dataset>]| {
        for dataset in added {
            store.remove(&dataset.reference);
        }
    };
    for table in tables.iter_mut() {
        match ingest_table(table, origin, rung, store, passed_through) {
            Ok(dataset) => added.push(dataset),
            Err(reason) => {
                undo(&added);
                return Err(format!("table at `{}`: {reason}", table.path));
            }
        }
    }
    if added.iter().any(|d| store.get(&d.reference).is_none()) {
        undo(&added);
        return Err("the tables of this result do not fit memoryBudgetBytes together".into());
    }
    Ok(added)
}

/// Whether a result could hold a table at all, decided in a few hundred nanoseconds on the
/// answer's path so that results that cannot (an echo, a sentence, an error) never reach the
/// keeper (SPEC §8.4): a table is an array in `structuredContent`, or a text block with a
/// bracket (JSON, a Python repr) or more than one line (CSV, Markdown, aligned columns; in the
/// raw JSON a line break is an escape, so any escape counts).
pub fn may_hold_table(raw: &RawValue) -> bool {
    let Some(view) = ResultView::read(raw.get()) else {
        return false;
    };
    if view.is_error == Some(true) || view.content.iter().any(|c| c.kind != "text") {
        return false;
    }
    view.structured_content.is_some_and(|s| s.contains('['))
        || view
            .content
            .iter()
            .filter_map(|c| c.text)
            .any(|text| memchr::memchr3(b'[', b'{', b'\\', text.as_bytes()).is_some())
}

/// The tables of a result that passed through to the client whole, kept as datasets so SQL
/// can reach them (SPEC §8.4): found by the same rungs as for an envelope, its bytes not
/// touched, nothing built for the client. A result with no table keeps nothing.
pub fn keep_passed_through(
    raw: &RawValue,
    origin: &Origin,
    store: &Arc<Store>,
) -> Result<Vec<Arc<crate::store::Dataset>>, String> {
    let Some(view) = ResultView::read(raw.get()) else {
        return Ok(Vec::new());
    };
    let Some(decoded) = view.texts() else {
        return Ok(Vec::new());
    };
    let texts: Vec<&str> = decoded.iter().map(|t| t.as_ref()).collect();
    // Nothing is replaced, so nothing beside the tables needs accounting for: the client has
    // every byte.
    let found = match view.structured_content.and_then(locate::in_structured) {
        Some(found) => Some(found),
        None => locate::in_texts(&texts).or_else(|| text::in_texts(&texts)),
    };
    let Some(Located {
        rung, mut tables, ..
    }) = found
    else {
        return Ok(Vec::new());
    };
    ingest_all(&mut tables, origin, rung, store, true)
}

/// Tables found in the text blocks (rungs 2 and 3): `structuredContent` without a table (rung 1
/// found none) must not vanish with the replaced result. A copy of a text block (FastMCP wraps a
/// returned string as `{"result": "<text>"}`) is dropped, a short one goes to `context`,
/// anything else means no replacement.
fn keep_structured<'a>(
    mut found: Located<'a>,
    texts: &[&str],
    structured: Option<&str>,
) -> Option<Located<'a>> {
    if let Some(structured) = structured {
        let value: Value = serde_json::from_str(structured).ok()?;
        let copies = |v: &Value| v.as_str().is_some_and(|s| texts.contains(&s));
        let copy = copies(&value)
            || value
                .as_object()
                .is_some_and(|o| !o.is_empty() && o.values().all(copies));
        if !copy && !value.is_null() {
            if structured.chars().count() > MAX_TEXT_IN_CONTEXT {
                return None;
            }
            found.context.insert("structuredContent".into(), value);
        }
    }
    let fits = serde_json::to_string(&found.context)
        .is_ok_and(|s| s.chars().count() <= locate::MAX_CONTEXT_CHARS);
    fits.then_some(found)
}

/// With tables found in `structuredContent`, the text blocks must be accounted for: a block that
/// repeats the structured content (or the text a table was read from) is dropped; a short one
/// goes to `context`; anything else means the result cannot be replaced without loss.
fn absorb_texts(
    texts: &[&str],
    tables: &[FoundTable<'_>],
    structured: Option<&str>,
    context: &mut Map<String, Value>,
) -> bool {
    // Each side is parsed at most once, and only if a text block could be a copy in another
    // spelling (server-memory sends `read_graph` and `create_entities` pretty-printed as text
    // and compact as `structuredContent`).
    let mut structured_value = structured.map(Parsed::new);
    let mut table_values: Vec<Parsed<'_>> = tables.iter().map(|t| Parsed::new(&t.rows)).collect();
    for (index, text) in texts.iter().enumerate() {
        let trimmed = text.trim();
        let mut text_value = Parsed::new(trimmed);
        let duplicate = structured.is_some_and(|s| s.trim() == trimmed)
            || tables.iter().any(|t| {
                t.rows.trim() == trimmed
                    || t.container.as_deref().is_some_and(|c| c.trim() == trimmed)
            })
            || structured_value
                .as_mut()
                .is_some_and(|s| text_value.equals(s))
            || table_values.iter_mut().any(|t| text_value.equals(t));
        if duplicate {
            continue;
        }
        if trimmed.chars().count() <= MAX_TEXT_IN_CONTEXT {
            context.insert(format!("text{index}"), Value::String((*text).to_string()));
            continue;
        }
        return false;
    }
    true
}

/// A JSON text and, once asked for, its value: equal values are copies in another spelling —
/// object members compared as maps, numbers by value.
struct Parsed<'a> {
    raw: &'a str,
    value: Option<Option<Value>>,
}

impl<'a> Parsed<'a> {
    fn new(raw: &'a str) -> Self {
        Self { raw, value: None }
    }

    fn value(&mut self) -> Option<&Value> {
        let raw = self.raw.trim_start();
        let container = raw.starts_with('{') || raw.starts_with('[');
        self.value
            .get_or_insert_with(|| container.then(|| serde_json::from_str(raw).ok()).flatten())
            .as_ref()
    }

    fn equals(&mut self, other: &mut Parsed<'_>) -> bool {
        // Cheap refusals first: different kinds of container, or nothing to parse.
        let kind = |raw: &str| raw.trim_start().chars().next();
        if kind(self.raw) != kind(other.raw) {
            return false;
        }
        match (self.value(), other.value()) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => false,
        }
    }
}

fn ingest_table(
    table: &mut FoundTable<'_>,
    origin: &Origin,
    rung: Rung,
    store: &Arc<Store>,
    passed_through: bool,
) -> Result<Arc<crate::store::Dataset>, String> {
    let options = IngestOptions {
        decimal_strings: rung.cells_are_text(),
    };
    let ingested = match table.parsed.take() {
        Some(parsed) => ingest_table_with(parsed, options),
        None => ingest_json_array_with(&table.rows, options),
    }
    .map_err(|e| e.to_string())?;
    let tool = if table.path == "$" {
        origin.tool.clone()
    } else {
        format!(
            "{}_{}",
            origin.tool,
            table.path.rsplit('.').next().unwrap_or("rows")
        )
    };
    store.add(NewDataset {
        server: origin.server.clone(),
        tool,
        schema: ingested.batch.schema(),
        batches: vec![ingested.batch],
        columns: ingested.columns,
        provenance: Provenance {
            server: origin.server.clone(),
            tool: origin.tool.clone(),
            args: origin.args.clone(),
            created_at: now_rfc3339(),
            source: rung.as_str().to_string(),
        },
        pinned: false,
        implicit: false,
        passed_through,
        name: None,
    })
}

#[cfg(test)]
mod envelope_tests;
#[cfg(test)]
mod tests;
