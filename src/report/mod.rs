//! What a session saved (SPEC §21): counters kept while loom runs, read live by `loom_stats` and
//! written once at shutdown (stderr, and a Markdown or JSON file with `report.path`).
//!
//! Only names and sizes are ever recorded — never arguments, never output content — so neither
//! the live figures nor the report can leak what a tool was asked or answered.

mod render;

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Instant, SystemTime};

use serde::Serialize;

pub(crate) use render::{markdown, stderr_summary};

use crate::common::tokens::estimate_tokens;

/// What loom did with one downstream tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Replaced by a dataset envelope.
    Table,
    /// Reduced by the context firewall; the original kept as a document.
    Document,
    /// Passed through as the server sent it.
    PassedThrough,
}

/// Characters (Unicode code points) and estimated tokens of one text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Size {
    pub chars: u64,
    #[serde(rename = "estimatedTokens")]
    pub tokens: u64,
}

impl Size {
    pub fn of(text: &str) -> Self {
        Size {
            chars: count_chars(text),
            tokens: estimate_tokens(text) as u64,
        }
    }

    fn add(&mut self, other: Size) {
        self.chars += other.chars;
        self.tokens += other.tokens;
    }

    fn minus(self, other: Size) -> SignedSize {
        SignedSize {
            chars: self.chars as i64 - other.chars as i64,
            tokens: self.tokens as i64 - other.tokens as i64,
        }
    }
}

/// A saving; negative when loom cost more than it saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SignedSize {
    pub chars: i64,
    #[serde(rename = "estimatedTokens")]
    pub tokens: i64,
}

/// Code points, counted at each character's first byte (a pass the compiler vectorises).
pub(crate) fn count_chars(text: &str) -> u64 {
    text.as_bytes()
        .iter()
        .filter(|&&b| (b & 0xC0) != 0x80)
        .count() as u64
}

#[derive(Debug, Default, Clone)]
struct ToolCounts {
    calls: u64,
    tables: u64,
    documents: u64,
    passed: u64,
    before: Size,
    after: Size,
}

#[derive(Debug, Default, Clone)]
struct Listing {
    /// How many `tools/list` answers were sent.
    count: u64,
    /// Every downstream tool, full descriptions: what a client would see without loom's help.
    direct_tools: usize,
    direct: Size,
    /// What the client was last sent.
    seen_tools: usize,
    seen: Size,
}

#[derive(Debug, Default)]
struct Counters {
    listing: Listing,
    /// Downstream tools by `server/tool`.
    tools: HashMap<String, ToolCounts>,
    /// loom's own tools by name: calls and what their answers cost.
    own: HashMap<String, (u64, Size)>,
    summaries: SummaryFigures,
}

/// The session's counters. Cheap to update: one uncontended lock per call.
pub struct SessionStats {
    started: Instant,
    started_at: SystemTime,
    counters: Mutex<Counters>,
}

impl Default for SessionStats {
    fn default() -> Self {
        Self::new()
    }
}

/// What the store holds at the moment of the report.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Held {
    pub datasets: usize,
    pub documents: usize,
    pub blobs: usize,
    pub bytes: u64,
}

impl SessionStats {
    pub fn new() -> Self {
        SessionStats {
            started: Instant::now(),
            started_at: SystemTime::now(),
            counters: Mutex::new(Counters::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The catalog was (re)built: `direct` is every downstream tool's full definition list (what
    /// a client would be sent without disclosure or cuts).
    pub fn exposed(&self, direct_tools: usize, direct: Size) {
        let mut c = self.lock();
        c.listing.direct_tools = direct_tools;
        c.listing.direct = direct;
    }

    /// A `tools/list` answer and what it carried.
    pub fn listed(&self, seen_tools: usize, seen: Size) {
        let mut c = self.lock();
        c.listing.count += 1;
        c.listing.seen_tools = seen_tools;
        c.listing.seen = seen;
    }

    /// One downstream tool call's result (`tool` is `server/tool`): its size as the server sent
    /// it and as the client got it.
    pub fn called(&self, tool: &str, handling: Handling, before: Size, after: Size) {
        let mut c = self.lock();
        let entry = c.tools.entry(tool.to_string()).or_default();
        entry.calls += 1;
        match handling {
            Handling::Table => entry.tables += 1,
            Handling::Document => entry.documents += 1,
            Handling::PassedThrough => entry.passed += 1,
        }
        entry.before.add(before);
        entry.after.add(after);
    }

    /// One call of loom's own tools (`loom_query`, `loom_read`, …) and what its answer cost: this
    /// traffic exists only because loom held something back, so it counts against the saving.
    pub fn own_call(&self, tool: &str, answer: Size) {
        let mut c = self.lock();
        let entry = c.own.entry(tool.to_string()).or_default();
        entry.0 += 1;
        entry.1.add(answer);
    }

    /// The endpoint answered a summary request (SPEC §19.9): its own token counts, spent
    /// whether or not the summary is used.
    pub fn model_tokens(&self, prompt_tokens: u64, completion_tokens: u64) {
        let mut c = self.lock();
        // The endpoint's numbers: summed without trusting them not to overflow.
        c.summaries.prompt_tokens = c.summaries.prompt_tokens.saturating_add(prompt_tokens);
        c.summaries.completion_tokens = c
            .summaries
            .completion_tokens
            .saturating_add(completion_tokens);
    }

    /// A text answered by a model's summary (`used`), or by the deterministic result because
    /// no summary came or it did not fit.
    pub fn summarized(&self, used: bool) {
        let mut c = self.lock();
        match used {
            true => c.summaries.summarized += 1,
            false => c.summaries.fell_back += 1,
        }
    }

    /// The figures as of now.
    pub fn report(&self, held: Held) -> Report {
        let c = self.lock();
        let mut calls = CallFigures::default();
        let mut top: Vec<ToolSaving> = Vec::new();
        for (name, t) in &c.tools {
            calls.total += t.calls;
            calls.tables += t.tables;
            calls.documents += t.documents;
            calls.passed_through += t.passed;
            calls.before.add(t.before);
            calls.after.add(t.after);
            if t.before != t.after {
                top.push(ToolSaving {
                    tool: name.clone(),
                    calls: t.calls,
                    before: t.before,
                    after: t.after,
                    saved: t.before.minus(t.after),
                });
            }
        }
        top.sort_by(|a, b| {
            b.saved
                .chars
                .cmp(&a.saved.chars)
                .then_with(|| a.tool.cmp(&b.tool))
        });
        top.truncate(TOP_TOOLS);
        let mut own = OwnFigures::default();
        let mut own_tools: Vec<(String, u64, Size)> = c
            .own
            .iter()
            .map(|(name, (n, size))| (name.clone(), *n, *size))
            .collect();
        own_tools.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, n, size) in &own_tools {
            own.calls += n;
            own.answers.add(*size);
            if name == crate::common::tools::QUERY {
                own.queries += n;
            }
            if name == crate::common::tools::READ {
                own.reads += n;
            }
        }
        let gross = calls.before.minus(calls.after);
        let net = SignedSize {
            chars: gross.chars - own.answers.chars as i64,
            tokens: gross.tokens - own.answers.tokens as i64,
        };
        let l = &c.listing;
        Report {
            started_at: chrono::DateTime::<chrono::Utc>::from(self.started_at)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            duration_secs: self.started.elapsed().as_secs(),
            tools: ToolFigures {
                listings: l.count,
                direct_tools: l.direct_tools,
                seen_tools: l.seen_tools,
                direct: l.direct,
                seen: l.seen,
                saved_per_listing: l.direct.minus(l.seen),
            },
            calls,
            own,
            output_saved: net,
            top_tools: top,
            model_summaries: c.summaries.clone(),
            held,
        }
    }
}

/// How many tools the report names by saving.
pub(crate) const TOP_TOOLS: usize = 5;

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub started_at: String,
    pub duration_secs: u64,
    pub tools: ToolFigures,
    pub calls: CallFigures,
    #[serde(rename = "loomTools")]
    pub own: OwnFigures,
    /// Output saved by interception and reduction, less what loom's own tools answered.
    pub output_saved: SignedSize,
    pub top_tools: Vec<ToolSaving>,
    /// The model summary stage (SPEC §19.9).
    pub model_summaries: SummaryFigures,
    pub held: Held,
}

/// What the model summary stage did in a session.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SummaryFigures {
    /// Texts answered by a model's summary.
    pub summarized: u64,
    /// Texts that got the deterministic result instead (no answer, or one over the budget).
    pub fell_back: u64,
    /// The endpoint's own token counts (`usage`), summed.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolFigures {
    pub listings: u64,
    pub direct_tools: usize,
    pub seen_tools: usize,
    pub direct: Size,
    pub seen: Size,
    pub saved_per_listing: SignedSize,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallFigures {
    pub total: u64,
    pub tables: u64,
    pub documents: u64,
    pub passed_through: u64,
    pub before: Size,
    pub after: Size,
}

#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnFigures {
    pub calls: u64,
    pub queries: u64,
    pub reads: u64,
    pub answers: Size,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolSaving {
    pub tool: String,
    pub calls: u64,
    pub before: Size,
    pub after: Size,
    pub saved: SignedSize,
}

impl Report {
    pub fn json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|_| "{}".to_string())
    }
}

/// Write the report where `path` says: JSON when it ends in `.json`, Markdown otherwise. Written
/// to a temporary file beside it and renamed, so a reader never sees half a report.
pub(crate) fn write(report: &Report, path: &std::path::Path) -> std::io::Result<()> {
    let json = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let text = if json {
        report.json()
    } else {
        markdown(report)
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    let mut temp = path.as_os_str().to_owned();
    temp.push(".tmp");
    let temp = std::path::PathBuf::from(temp);
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests;
