//! The context firewall for results that are not tables (SPEC §19): a large text block is
//! reduced before the model sees it, one stage per file, and its original is kept whole in the
//! store as a document (`doc_<n>`), readable with `loom_read` and queryable as a table.
//!
//! Stages, in order, each switchable by policy: binary lifted out ([`binary`]), HTML pages to
//! Markdown main content ([`html`]), JSON documents summarised by structure ([`json`]), and the
//! budget cut ([`budget`]). Where the policy says so (`llmSummary`), a text still over the budget
//! before the cut is also handed back as a [`Summarizable`]: the gateway may put a model's
//! summary in place of the cut text (SPEC §19.9). Results that look security-relevant ([`security`]) skip the
//! reductions and are only cut above a hard limit. Never worse than no proxy: any failure leaves
//! the block (or the whole result) as the server sent it.
//!
//! Every stage is linear or bounded before it starts, and checks an [`Interrupt`] (a deadline and
//! the caller's cancel flag) as it goes: past the deadline each stage takes its cheapest path (a
//! page its text, a JSON document no summary, binary lifting stops where it is; the budget cut
//! always runs), and on cancel the reduction stops and the original passes through.

pub mod binary;
pub mod budget;
pub mod html;
pub mod interrupt;
pub mod json;
pub(crate) mod security;

pub use interrupt::{DEFAULT_TIME_LIMIT, Interrupt};

use std::sync::Arc;

use serde_json::Value;

use crate::common::policy::Policy;
use crate::common::text::{now_rfc3339, thousands};
use crate::common::{MAX_DATASETS_PER_RESULT, Origin};
use crate::ingest::{IngestOptions, ingest_json_array_with};
use crate::store::document::DocumentKind;
use crate::store::{Dataset, NewDataset, Provenance, Store};

/// A text block shorter than this (in characters) is never reduced: a header line and a
/// marker would eat most of what they save.
pub const MIN_REDUCED_CHARS: usize = 1_000;
/// A security-relevant block is passed whole up to this many characters, then cut (head and
/// tail kept, with the marker).
pub const SECURITY_HARD_LIMIT_CHARS: usize = 50_000;
/// At most this many text blocks of one result go to the model (SPEC §19.9); later ones get
/// the cut.
pub const MAX_SUMMARIES_PER_RESULT: usize = 4;
/// A base64 run shorter than this stays in the text (see [`binary`]).
pub const MIN_BASE64_RUN: usize = binary::DEFAULT_MIN_RUN;

fn provenance(origin: &Origin, source: &str) -> Provenance {
    Provenance {
        server: origin.server.clone(),
        tool: origin.tool.clone(),
        args: origin.args.clone(),
        created_at: now_rfc3339(),
        source: source.to_string(),
    }
}

/// What was held for one reduced result, removed again if the reduction is given up.
#[derive(Default)]
struct Held {
    refs: Vec<String>,
}

impl Held {
    fn keep(&mut self, dataset: &Arc<Dataset>) -> String {
        self.refs.push(dataset.reference.clone());
        dataset.reference.clone()
    }

    fn undo(&self, store: &Store) {
        for reference in &self.refs {
            store.remove(reference);
        }
    }
}

/// One text block's way through the stages.
struct Block<'a> {
    store: &'a Store,
    origin: &'a Origin,
    held: &'a mut Held,
    /// What was done, for the header line.
    done: Vec<String>,
}

impl Block<'_> {
    fn document(
        &mut self,
        kind: DocumentKind,
        text: String,
        source: &str,
    ) -> Result<String, String> {
        let dataset = self
            .store
            .add_document(kind, text, provenance(self.origin, source))?;
        Ok(self.held.keep(&dataset))
    }

    /// A table found while reducing (a page's data table, a folded JSON array) as a dataset.
    /// `rows_json`: a JSON array of objects.
    fn dataset(&mut self, tool_suffix: &str, rows_json: &str, text_cells: bool) -> Option<String> {
        let ingested = ingest_json_array_with(
            rows_json,
            IngestOptions {
                decimal_strings: text_cells,
            },
        )
        .ok()?;
        let tool = match crate::store::ref_part(tool_suffix, 24) {
            Some(suffix) => format!("{}_{suffix}", self.origin.tool),
            None => self.origin.tool.clone(),
        };
        let dataset = self
            .store
            .add(NewDataset {
                server: self.origin.server.clone(),
                tool,
                schema: ingested.batch.schema(),
                batches: vec![ingested.batch],
                columns: ingested.columns,
                provenance: provenance(self.origin, "reduced"),
                pinned: false,
                implicit: false,
                passed_through: false,
                name: None,
            })
            .ok()?;
        Some(self.held.keep(&dataset))
    }
}

/// How the budget cut keeps a kind of text: prose keeps its head (the start of a page or a
/// README says what it is); everything else (logs, command output, JSON) keeps head and tail,
/// because the first errors and the final summary both matter.
fn keep_for(kind: DocumentKind, text: &str) -> budget::Keep {
    match kind {
        DocumentKind::Page => budget::Keep::HeadOnly,
        DocumentKind::Json => budget::Keep::HeadAndTail,
        DocumentKind::Text if looks_like_prose(text) => budget::Keep::HeadOnly,
        DocumentKind::Text => budget::Keep::HeadAndTail,
    }
}

/// Markdown or prose: a heading at the top, or mostly long lines of words with few of the
/// marks of a log (timestamps, levels).
fn looks_like_prose(text: &str) -> bool {
    let head: Vec<&str> = text.lines().take(200).collect();
    if head
        .iter()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.starts_with("# ") || l.starts_with("## "))
    {
        return true;
    }
    let log_like = head
        .iter()
        .filter(|l| {
            let t = l.trim_start();
            t.starts_with(|c: char| c.is_ascii_digit())
                || t.starts_with('[')
                || ["ERROR", "WARN", "INFO", "DEBUG", "TRACE", "FATAL"]
                    .iter()
                    .any(|level| t.contains(level))
        })
        .count();
    let headings = head.iter().filter(|l| l.starts_with('#')).count();
    headings >= 3 && log_like * 4 < head.len().max(1)
}

/// The cut marker: what was left out and the exact call that reads it — a call that runs as
/// written, so a span longer than one `loom_read` page names the first page and says to read on.
fn cut_marker(reference: &str, omitted: &budget::Omitted) -> String {
    let page = crate::common::tools::MAX_PAGE_CHARS;
    let call = format!(
        "loom_read(\"{reference}\", offset: {}, length: {})",
        omitted.offset,
        omitted.length.min(page)
    );
    let read_on = if omitted.length > page {
        " and on from its nextOffset"
    } else {
        ""
    };
    format!(
        "[loom: {} chars (lines {}–{}) left out here; {call}{read_on}]",
        thousands(omitted.length),
        omitted.first_line,
        omitted.last_line,
    )
}

/// What became of one text block.
#[derive(Default)]
struct TextOutcome {
    /// The deterministic stages' text; `None` leaves the block as it is.
    reduced: Option<String>,
    /// Still over the budget before the cut, and the policy asks for a model's summary.
    summarizable: Option<Summarizable>,
}

impl TextOutcome {
    fn reduced(reduced: Option<String>) -> Self {
        TextOutcome {
            reduced,
            summarizable: None,
        }
    }
}

/// A text block a model may summarise (SPEC §19.9): what the deterministic stages left, still
/// over the budget, and what its header line needs.
#[derive(Debug)]
pub struct Summarizable {
    /// The text before the budget cut: what the model reads.
    text: String,
    keep: budget::Keep,
    kind: DocumentKind,
    original_chars: usize,
    original_ref: String,
    /// The deterministic stages that ran before it, for the header line.
    done: Vec<String>,
    budget_chars: usize,
    /// The block's text in the result now: replaced when a summary comes.
    current: String,
    /// Held only for the summary's header (the block is otherwise left as sent): let go when
    /// no summary is used.
    held_for_summary: Vec<String>,
    /// Held only for the cut text (the reduced text its marker reads): let go when the summary
    /// replaces it.
    held_for_cut: Vec<String>,
    /// How [`Summarizable::take_input`] shortened the text, for the header.
    input_cut: Option<InputCut>,
    used: bool,
}

/// How [`Summarizable::input`] shortened the text for the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputCut {
    /// The text's own characters sent (the marker where text was left out not counted).
    pub sent_chars: usize,
    pub total_chars: usize,
}

impl Summarizable {
    /// The text for the model, within `max_chars`: a longer text keeps what its cut would
    /// keep (a log its head and tail, a page its head), with a marker where text was left out.
    /// Taken out of the block: nothing but the input is held while the endpoint answers.
    pub fn take_input(&mut self, max_chars: usize) -> (String, Option<InputCut>) {
        let text = std::mem::take(&mut self.text);
        let total_chars = text.chars().count();
        // What was left out, so the header counts the text's own characters the model read
        // (the marker is loom's, not the text's).
        let left_out = std::cell::Cell::new(0usize);
        let marker = |omitted: &budget::Omitted| {
            left_out.set(omitted.length);
            format!(
                "[… {} characters (lines {}–{}) left out here …]",
                thousands(omitted.length),
                omitted.first_line,
                omitted.last_line
            )
        };
        let (input, cut) = match budget::cut_to_budget(&text, max_chars, self.keep, &marker) {
            None => (text, None),
            Some(cut) => (
                cut,
                Some(InputCut {
                    sent_chars: total_chars.saturating_sub(left_out.get()),
                    total_chars,
                }),
            ),
        };
        self.input_cut = cut;
        (input, cut)
    }

    /// The budget the summary must fit, in characters.
    pub fn budget_chars(&self) -> usize {
        self.budget_chars
    }

    /// The block's text with `summary` (made by `model`): the header line says it is a model's
    /// summary and where the whole original is. `None` when the summary is empty, over the
    /// budget, or would make the block no shorter than the original.
    pub fn compose(&self, summary: &str, model: &str) -> Option<String> {
        let summary = summary.trim();
        let summary_chars = summary.chars().count();
        if summary.is_empty() || summary_chars > self.budget_chars {
            return None;
        }
        let mut done = self.done.clone();
        if let Some(cut) = self.input_cut {
            done.push(format!(
                "the model read {} of its {} chars",
                thousands(cut.sent_chars),
                thousands(cut.total_chars)
            ));
        }
        let stages = if done.is_empty() {
            String::new()
        } else {
            format!("; {}", done.join("; "))
        };
        let model = serde_json::to_string(model).unwrap_or_default();
        let composed = format!(
            "[loom: {} summarised by the model {model}, {} → {} chars{stages}; a summary can miss \
             details: the whole original is loom_read(\"{}\")]\n{summary}",
            self.kind.as_str(),
            thousands(self.original_chars),
            thousands(summary_chars),
            self.original_ref,
        );
        // Never longer than what the server sent (the rule of the deterministic stages).
        (composed.chars().count() < self.original_chars).then_some(composed)
    }
}

/// Fails once the caller gave up on the result: nothing more is worth doing for it.
fn not_cancelled(interrupt: &Interrupt) -> Result<(), String> {
    match interrupt.cancelled() {
        true => Err(interrupt::CANCELLED.to_string()),
        false => Ok(()),
    }
}

/// Reduce one text block.
fn reduce_text(
    block: &mut Block<'_>,
    text: &str,
    policy: &Policy,
    security: bool,
    interrupt: &Interrupt,
) -> Result<TextOutcome, String> {
    let original_chars = text.chars().count();
    if original_chars < MIN_REDUCED_CHARS {
        return Ok(TextOutcome::default());
    }
    if security {
        // Never shortened in silence: whole up to the hard limit, then head and tail with the
        // marker, so the model sees how the message starts and knows there is more.
        if original_chars <= SECURITY_HARD_LIMIT_CHARS {
            return Ok(TextOutcome::default());
        }
        let reference = block.document(DocumentKind::Text, text.to_string(), "security")?;
        let cut = budget::cut_to_budget(
            text,
            SECURITY_HARD_LIMIT_CHARS,
            budget::Keep::HeadAndTail,
            &|omitted| cut_marker(&reference, omitted),
        );
        return Ok(TextOutcome::reduced(cut.map(|cut| {
            format!(
                "[loom: security-relevant output cut at the hard limit, {} → {} chars; full original: loom_read(\"{reference}\")]\n{cut}",
                thousands(original_chars),
                thousands(SECURITY_HARD_LIMIT_CHARS)
            )
        })));
    }

    let is_html = policy.html_to_markdown && html::looks_like_html(text);
    let trimmed = text.trim_start();
    let is_json = !is_html && (trimmed.starts_with('{') || trimmed.starts_with('['));
    let kind = if is_html {
        DocumentKind::Page
    } else if is_json {
        DocumentKind::Json
    } else {
        DocumentKind::Text
    };
    let budget_chars = policy.max_output_chars();
    let original_ref = block.document(kind, text.to_string(), kind.as_str())?;

    // Stage 1: binary lifted out.
    let mut current: std::borrow::Cow<'_, str> = std::borrow::Cow::Borrowed(text);
    if policy.strip_base64 {
        let mut lifted = 0usize;
        let mut lifted_bytes = 0usize;
        let store = block.store;
        let origin = block.origin;
        let mut refs: Vec<Arc<Dataset>> = Vec::new();
        let replaced =
            binary::lift_binary_with(&current, MIN_BASE64_RUN, interrupt, &mut |found| {
                let size = found.bytes.len();
                let dataset = store
                    .add_blob(&found.mime, found.bytes, provenance(origin, "blob"))
                    .ok()?;
                lifted += 1;
                lifted_bytes += size;
                let reference = dataset.reference.clone();
                refs.push(dataset);
                Some(reference)
            });
        for dataset in &refs {
            block.held.keep(dataset);
        }
        if let Some(replaced) = replaced {
            block.done.push(format!(
                "{lifted} base64 blob{} ({} bytes) lifted out",
                if lifted == 1 { "" } else { "s" },
                thousands(lifted_bytes)
            ));
            current = std::borrow::Cow::Owned(replaced);
        }
        not_cancelled(interrupt)?;
    }

    // Stage 2 or 3: a page to Markdown, a JSON document to its summary.
    if is_html {
        // Placeholders carry a nonce the page cannot know: text on the page that looks like one
        // is left as it is, and each placeholder is found once.
        let nonce = crate::token::random_hex()
            .unwrap_or_else(|| crate::token::digest_hex("loom-table", current.as_bytes()));
        let prefix = format!("{{loom-table-{nonce}-");
        // (the table's place on the page, its rows): at most MAX_DATASETS_PER_RESULT of them, as
        // for a JSON result; the page's other tables stay Markdown tables only, counted.
        let mut tables: Vec<(usize, Vec<Value>)> = Vec::new();
        let mut past_cap = 0usize;
        let page = html::reduce_page_with(
            &current,
            &mut |index, table| {
                if table.rows.len() < 2 {
                    return None;
                }
                if tables.len() >= MAX_DATASETS_PER_RESULT {
                    past_cap += 1;
                    return None;
                }
                tables.push((index, html_table_rows(table)));
                // The dataset's ref is not known yet: a placeholder, filled in below.
                Some(format!("{prefix}{}}}", tables.len() - 1))
            },
            interrupt,
        );
        not_cancelled(interrupt)?;
        if let Ok(page) = page {
            let mut made: Vec<String> = Vec::new();
            let mut tables: Vec<Option<(usize, Vec<Value>)>> =
                tables.into_iter().map(Some).collect();
            // One pass in order. A page the deadline sent to its text after some tables were
            // rendered has no placeholders: no dataset nobody is told about.
            let markdown = fill_placeholders(&page.markdown, &prefix, |k| {
                let Some((index, rows)) = tables.get_mut(k).and_then(Option::take) else {
                    return String::new();
                };
                match block.dataset(
                    &format!("table{}", index + 1),
                    &serde_json::to_string(&rows).unwrap_or_default(),
                    true,
                ) {
                    Some(reference) => {
                        let line = format!(
                            "[loom: this table is dataset {reference} ({} rows): loom_query \"SELECT * FROM {reference} LIMIT 20\"]",
                            rows.len()
                        );
                        made.push(reference);
                        line
                    }
                    None => String::new(),
                }
            });
            let rendered = !matches!(
                page.method,
                html::ReductionMethod::FlatText | html::ReductionMethod::OutOfTime
            );
            block.done.push(format!(
                "{}{}{}",
                match page.method {
                    html::ReductionMethod::FlatText => "its text (markup too costly to render)",
                    html::ReductionMethod::OutOfTime => {
                        "its text (the page took too long to render)"
                    }
                    _ if page.main_content_only => "main content as Markdown",
                    _ => "whole page as Markdown",
                },
                match made.len() {
                    0 => String::new(),
                    // Named in the header too: the tables may sit past the budget cut.
                    1 => format!(", 1 table as dataset {}", made[0]),
                    n => format!(
                        ", {n} tables as datasets {}{}",
                        made.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                        if n > 3 { ", …" } else { "" }
                    ),
                },
                match (rendered, past_cap) {
                    (false, _) | (_, 0) => String::new(),
                    (true, n) => format!(
                        ", {} more table{} as Markdown only (at most \
                         {MAX_DATASETS_PER_RESULT} datasets of one page)",
                        thousands(n),
                        if n == 1 { "" } else { "s" }
                    ),
                }
            ));
            current = std::borrow::Cow::Owned(markdown);
        }
    } else if is_json && policy.json_summary {
        // The summary's `loom_read` offsets point into the text it reads: when base64 was lifted
        // out first, that text is kept whole too, and the offsets name it.
        let document_ref = match &current {
            std::borrow::Cow::Borrowed(_) => original_ref.clone(),
            std::borrow::Cow::Owned(lifted) => block.document(kind, lifted.clone(), "reduced")?,
        };
        // One parse: the summary lowers its own depth limit until it fits the budget, and only
        // its last pass makes datasets of the folds it keeps.
        let options = json::JsonOptions {
            document_ref,
            max_output_chars: budget_chars,
            interrupt: interrupt.clone(),
            ..Default::default()
        };
        let best = json::summarize(&current, &options, &mut |path, rows| {
            block.dataset(path.trim_start_matches("$."), &rows.to_json(), false)
        });
        not_cancelled(interrupt)?;
        if let Some(summary) = best {
            block.done.push(format!(
                "JSON summarised by structure ({} folds, {} strings cut)",
                summary.folds, summary.cut_strings
            ));
            current = std::borrow::Cow::Owned(summary.json);
        }
    }

    // Stage 4 (opt-in): a model's summary of what is still over the budget; made by the
    // gateway, which awaits the endpoint. Everything below still runs: the cut text is what
    // answers whenever the summary does not come.
    let mut text_out = current.into_owned();
    let over_budget = text_out.chars().count() > budget_chars;
    let summary_text = (policy.llm_summary && over_budget).then(|| text_out.clone());
    let stages_done = match summary_text {
        Some(_) => block.done.clone(),
        None => Vec::new(),
    };
    let held_before_cut = block.held.refs.len();

    // Stage 5: the budget cut, over the text as it now is. When an earlier stage changed it,
    // that text is kept whole too, so the marker's offsets read exactly what was left out.
    if policy.truncate && over_budget {
        let cut_ref = if block.done.is_empty() {
            original_ref.clone()
        } else {
            block.document(kind, text_out.clone(), "reduced")?
        };
        let keep = keep_for(kind, &text_out);
        if let Some(cut) = budget::cut_to_budget(&text_out, budget_chars, keep, &|omitted| {
            cut_marker(&cut_ref, omitted)
        }) {
            block.done.push(match keep {
                budget::Keep::HeadOnly => {
                    format!("cut to {} chars (head kept)", thousands(budget_chars))
                }
                budget::Keep::HeadAndTail => {
                    format!(
                        "cut to {} chars (head and tail kept)",
                        thousands(budget_chars)
                    )
                }
            });
            if cut_ref != original_ref {
                block
                    .done
                    .push(format!("the whole reduced text: loom_read(\"{cut_ref}\")"));
            }
            text_out = cut;
        }
    }
    let summarizable = summary_text.map(|text| Summarizable {
        keep: keep_for(kind, &text),
        text,
        kind,
        original_chars,
        original_ref: original_ref.clone(),
        done: stages_done,
        budget_chars,
        current: String::new(),
        held_for_summary: Vec::new(),
        held_for_cut: block.held.refs[held_before_cut..].to_vec(),
        input_cut: None,
        used: false,
    });
    let reduced = (|| {
        if block.done.is_empty() {
            return None;
        }
        let reduced_chars = text_out.chars().count();
        let header = format!(
            "[loom: {} reduced {} → {} chars; {}; full original: loom_read(\"{original_ref}\")]",
            kind.as_str(),
            thousands(original_chars),
            thousands(reduced_chars),
            block.done.join("; "),
        );
        if reduced_chars + header.chars().count() >= original_chars {
            return None;
        }
        Some(format!("{header}\n{text_out}"))
    })();
    Ok(TextOutcome {
        reduced,
        summarizable,
    })
}

/// `markdown` with each `{<prefix><k>}` replaced by `line(k)`, in one pass: a page of 40,000
/// tables was substituted one `replacen` over the whole text per table (quadratic). Text that
/// starts like a placeholder but is not one is copied as it is.
fn fill_placeholders(
    markdown: &str,
    prefix: &str,
    mut line: impl FnMut(usize) -> String,
) -> String {
    let mut out = String::with_capacity(markdown.len());
    let mut rest = markdown;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        match (
            after[..digits].parse::<usize>(),
            after[digits..].starts_with('}'),
        ) {
            (Ok(k), true) => {
                out.push_str(&line(k));
                rest = &after[digits + 1..];
            }
            _ => {
                out.push_str(prefix);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// An HTML table as rows of objects keyed by its header (repeated or empty names made unique).
fn html_table_rows(table: &html::HtmlTable) -> Vec<Value> {
    let width = table
        .rows
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(table.header.len());
    let mut names: Vec<String> = Vec::with_capacity(width);
    for i in 0..width {
        let base = table
            .header
            .get(i)
            .map(|h| h.trim())
            .filter(|h| !h.is_empty())
            .map_or_else(|| format!("column_{}", i + 1), str::to_string);
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        names.push(name);
    }
    table
        .rows
        .iter()
        .map(|row| {
            let mut object = serde_json::Map::new();
            for (i, name) in names.iter().enumerate() {
                let cell = row.get(i).cloned().unwrap_or_default();
                object.insert(name.clone(), Value::String(cell));
            }
            Value::Object(object)
        })
        .collect()
}

/// What [`reduce`] made of a result.
#[derive(Debug)]
pub struct Reduction {
    /// The result with every block the deterministic stages reduced replaced.
    result: Value,
    /// Whether `result` differs from what the server sent.
    changed: bool,
    /// `structuredContent` copies the text blocks: a block's replacement goes there too.
    structured_copy: bool,
    /// Blocks a model may summarise (SPEC §19.9), in the result's order.
    pub summarizable: Vec<Summarizable>,
    /// Everything the reduction holds in the store (documents, blobs, datasets).
    held: Vec<String>,
}

impl Reduction {
    /// Everything this reduction put in the store: what to let go if its result is never sent
    /// (the call was cancelled while a summary was awaited).
    pub fn held(&self) -> &[String] {
        &self.held
    }

    /// Block `index`'s text becomes `composed` (from [`Summarizable::compose`]).
    pub fn summarized(&mut self, index: usize, composed: String) {
        let Some(block) = self.summarizable.get_mut(index) else {
            return;
        };
        replace_texts(
            &mut self.result,
            &[(block.current.as_str(), composed.as_str())],
            self.structured_copy,
        );
        block.used = true;
        self.changed = true;
    }

    /// Let go what the unused alternative held; the result to send, or `None` when it is what
    /// the server sent.
    pub fn finish(self, store: &Store) -> Option<Value> {
        for block in &self.summarizable {
            let unused = if block.used {
                &block.held_for_cut
            } else {
                &block.held_for_summary
            };
            for reference in unused {
                store.remove(reference);
            }
        }
        self.changed.then_some(self.result)
    }
}

/// Every text block (and every member of a `structuredContent` that copies them) equal to a
/// `from` becomes its `to`, in one pass: a replacement is never replaced again.
fn replace_texts(result: &mut Value, pairs: &[(&str, &str)], structured_copy: bool) {
    let replace = |value: &mut Value| {
        if let Some(s) = value.as_str()
            && let Some((_, to)) = pairs.iter().find(|(from, _)| *from == s)
        {
            *value = Value::String((*to).to_string());
        }
    };
    if let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) {
        for block in blocks {
            if block.get("type").and_then(Value::as_str) == Some("text")
                && let Some(text) = block.get_mut("text")
            {
                replace(text);
            }
        }
    }
    if structured_copy && let Some(structured) = result.get_mut("structuredContent") {
        match structured {
            Value::Object(members) => members.values_mut().for_each(replace),
            other => replace(other),
        }
    }
}

/// Reduce the text blocks of a `CallToolResult`; `None` when nothing was reduced and nothing
/// may be summarised (the result then passes through as sent). Other blocks stay in their
/// positions. The stages give up [`DEFAULT_TIME_LIMIT`] from now (see [`reduce_with`]).
pub fn reduce(
    raw: &str,
    origin: &Origin,
    store: &Store,
    policy: &Policy,
) -> Result<Option<Reduction>, String> {
    reduce_with(
        raw,
        origin,
        store,
        policy,
        &Interrupt::after(DEFAULT_TIME_LIMIT),
    )
}

/// [`reduce`] under `interrupt`: past its deadline each stage takes its cheapest path (SPEC
/// §19.3); once its cancel flag is set the reduction stops with an error, what it held is let go,
/// and the caller passes the original through (or, having answered the client already, drops it).
pub fn reduce_with(
    raw: &str,
    origin: &Origin,
    store: &Store,
    policy: &Policy,
    interrupt: &Interrupt,
) -> Result<Option<Reduction>, String> {
    not_cancelled(interrupt)?;
    if !policy.reduces() {
        return Ok(None);
    }
    let mut result: Value =
        serde_json::from_str(raw).map_err(|e| format!("the result is not JSON: {e}"))?;
    let Some(object) = result.as_object() else {
        return Ok(None);
    };
    let is_error = object.get("isError").and_then(Value::as_bool) == Some(true);
    let texts: Vec<String> = object
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| {
                    (b.get("type").and_then(Value::as_str) == Some("text"))
                        .then(|| b.get("text").and_then(Value::as_str).map(str::to_string))
                        .flatten()
                })
                .collect()
        })
        .unwrap_or_default();
    // structuredContent that is more than a copy of the text would stay at full size beside
    // the reduced text: such a result passes through.
    let structured_copy = match object.get("structuredContent") {
        None | Some(Value::Null) => false,
        Some(value) => {
            let copies = |v: &Value| v.as_str().is_some_and(|s| texts.iter().any(|t| t == s));
            let copy = copies(value)
                || value
                    .as_object()
                    .is_some_and(|o| !o.is_empty() && o.values().all(copies));
            if !copy {
                return Ok(None);
            }
            true
        }
    };
    let mut held = Held::default();
    let mut reduced: Vec<(String, String)> = Vec::new();
    let mut summarizable: Vec<Summarizable> = Vec::new();
    let outcome = (|| -> Result<(), String> {
        for text in &texts {
            if reduced.iter().any(|(original, _)| original == text)
                || summarizable.iter().any(|s| &s.current == text)
            {
                continue;
            }
            let security = is_error || security::looks_security_relevant(text);
            let before = held.refs.len();
            let mut block = Block {
                store,
                origin,
                held: &mut held,
                done: Vec::new(),
            };
            let outcome = reduce_text(&mut block, text, policy, security, interrupt)?;
            // What one result can cost at the endpoint is bounded too.
            let candidate = outcome
                .summarizable
                .filter(|_| summarizable.len() < MAX_SUMMARIES_PER_RESULT);
            match (outcome.reduced, candidate) {
                (reduced_text, Some(mut candidate)) => {
                    if reduced_text.is_none() {
                        // Left as sent unless a summary comes: what the cut held goes now, the
                        // rest (the original, for the summary's pointer) is the summary's.
                        for reference in candidate.held_for_cut.drain(..) {
                            store.remove(&reference);
                            held.refs.retain(|r| r != &reference);
                        }
                        candidate.held_for_summary = held.refs[before..].to_vec();
                    }
                    candidate.current = reduced_text.clone().unwrap_or_else(|| text.clone());
                    if let Some(new) = reduced_text {
                        reduced.push((text.clone(), new));
                    }
                    summarizable.push(candidate);
                }
                (Some(new), None) => reduced.push((text.clone(), new)),
                // Left as it was: what was held for it goes (another block may still be reduced).
                (None, None) => {
                    for reference in held.refs.split_off(before) {
                        store.remove(&reference);
                    }
                }
            }
        }
        Ok(())
    })();
    if let Err(reason) = outcome {
        held.undo(store);
        return Err(reason);
    }
    if reduced.is_empty() && summarizable.is_empty() {
        held.undo(store);
        return Ok(None);
    }
    let pairs: Vec<(&str, &str)> = reduced
        .iter()
        .map(|(original, new)| (original.as_str(), new.as_str()))
        .collect();
    replace_texts(&mut result, &pairs, structured_copy);
    Ok(Some(Reduction {
        result,
        changed: !reduced.is_empty(),
        structured_copy,
        summarizable,
        held: held.refs,
    }))
}

#[cfg(test)]
mod tests;
