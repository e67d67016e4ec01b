//! Rung 3: tables written as formatted text (SPEC §16). After `structuredContent` and JSON in the
//! text found nothing, each text block goes through these rungs:
//!
//! - [`delimited`]: CSV (RFC 4180), TSV, semicolon-separated;
//! - [`markdown`]: GFM tables, several per text;
//! - [`ndjson`]: one JSON object per line;
//! - [`pyrepr`]: the `repr` of a Python list of dicts, read like `ast.literal_eval`;
//! - [`records`]: `Key: value` blocks.
//!
//! The rule over all of them: a rung either reproduces the text it captured exactly, as
//! rows × columns, or declines. The orchestration here adds what no single rung can judge:
//! every rung runs, and two that accept must agree; what the tables did not capture (a
//! preamble, a truncation marker, headings between tables) is kept in `context` as `residue`
//! and may be at most [`frame::MAX_RESIDUE_CHARS`] characters and 20% of the text's
//! non-whitespace characters; a last row cut by truncation is dropped and reported in
//! `context.dropped`, never silently.

pub(crate) mod delimited;
pub mod frame;
pub(crate) mod markdown;
pub(crate) mod ndjson;
pub(crate) mod pyrepr;
pub(crate) mod records;

use std::borrow::Cow;
use std::ops::Range;

use serde_json::{Map, Value, json};

use super::locate::{FoundTable, Located, MAX_CONTEXT_CHARS, Rung};

/// The share of a text's non-whitespace characters the tables must cover.
pub const MIN_COVERAGE: f64 = 0.8;

/// How much of a dropped (torn) row is quoted in `context.dropped.text`.
pub const MAX_DROPPED_CHARS: usize = 200;

/// One table a rung read: its rows as a JSON array of objects (keys distinct, in column order).
#[derive(Debug, Clone, PartialEq)]
pub struct TextTable {
    /// Where in the text it was, when a text holds several (`table2`, or a member path of a
    /// Python dict); `None` for the one table of a text.
    pub path: Option<String>,
    pub rows: String,
}

/// The last row, cut off by truncation: dropped and reported.
#[derive(Debug, Clone, PartialEq)]
pub struct Torn {
    /// The bytes of the text it occupied (not captured by any table).
    pub span: Range<usize>,
    /// Rows dropped: 1, or 0 when only a closing bracket was missing.
    pub rows: usize,
    pub reason: &'static str,
}

/// What one rung found in one text, before the checks every rung shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub rung: Rung,
    /// The byte ranges the tables were read from, in order and disjoint.
    pub spans: Vec<Range<usize>>,
    pub tables: Vec<TextTable>,
    /// Values around the tables the rung itself found (scalars beside a Python list).
    pub context: Map<String, Value>,
    pub torn: Option<Torn>,
}

/// A rung: the text without its truncation marker (`body`, a prefix of the text) and whether a
/// marker was cut off (then a last row that may be incomplete is dropped and reported).
pub type RungFn = fn(body: &str, truncated: bool) -> Option<Found>;

/// Every formatted-text rung, in the order their names are reported.
pub const RUNGS: [(Rung, RungFn); 7] = [
    (Rung::Csv, delimited::find_csv),
    (Rung::Tsv, delimited::find_tsv),
    (Rung::CsvSemicolon, delimited::find_semicolon),
    (Rung::Markdown, markdown::find),
    (Rung::Ndjson, ndjson::find),
    (Rung::PythonRepr, pyrepr::find),
    (Rung::RecordBlocks, records::find),
];

/// The tables of one text and what surrounds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub rung: Rung,
    pub tables: Vec<TextTable>,
    pub context: Map<String, Value>,
}

/// Run every rung over one text; `None` unless exactly one reading of the text exists.
pub fn extract(text: &str) -> Option<Extracted> {
    let (body, truncated) = frame::peel_marker(text);
    let mut accepted: Vec<Extracted> = Vec::new();
    for (_, rung) in RUNGS {
        if let Some(extracted) =
            rung(body, truncated).and_then(|found| settle(text, body.len(), found))
        {
            accepted.push(extracted);
        }
    }
    let first = accepted.first()?;
    // Two readings of one text that differ mean neither can be trusted.
    if accepted[1..]
        .iter()
        .any(|other| other.tables != first.tables)
    {
        return None;
    }
    accepted.into_iter().next()
}

fn non_whitespace(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// The checks every rung shares: spans inside the text, residue small and kept, coverage of the
/// content (the text before a truncation marker: the marker is loom's to read, not data).
fn settle(text: &str, content_end: usize, found: Found) -> Option<Extracted> {
    let Found {
        rung,
        spans,
        tables,
        mut context,
        torn,
    } = found;
    if tables.is_empty() || spans.is_empty() {
        return None;
    }
    let mut at = 0;
    for span in &spans {
        if span.start < at || span.end < span.start || span.end > text.len() {
            return None;
        }
        at = span.end;
    }
    if let Some(torn) = &torn
        && (torn.span.start < at || torn.span.end > text.len())
    {
        return None;
    }
    // What lies outside the tables, piece by piece: before each table, and after the last.
    let single = spans.len() == 1;
    let mut pieces: Vec<(String, Range<usize>)> = Vec::new();
    let mut previous = 0;
    for (index, span) in spans.iter().enumerate() {
        let key = if single {
            "before".to_string()
        } else {
            let path = tables
                .get(index)
                .and_then(|t| t.path.clone())
                .unwrap_or_else(|| format!("table{}", index + 1));
            format!("before {path}")
        };
        pieces.push((key, previous..span.start));
        previous = span.end;
    }
    match &torn {
        Some(torn) => {
            pieces.push(("after".to_string(), previous..torn.span.start));
            pieces.push(("after".to_string(), torn.span.end..text.len()));
        }
        None => pieces.push(("after".to_string(), previous..text.len())),
    }
    let mut residue = Map::new();
    let mut residue_chars = 0;
    for (key, range) in pieces {
        let part = text.get(range).unwrap_or_default().trim();
        if part.is_empty() {
            continue;
        }
        residue_chars += part.chars().count();
        match residue.get_mut(&key) {
            Some(Value::String(kept)) => {
                kept.push('\n');
                kept.push_str(part);
            }
            _ => {
                residue.insert(key, Value::String(part.to_string()));
            }
        }
    }
    if residue_chars > frame::MAX_RESIDUE_CHARS {
        return None;
    }
    let captured: usize = spans.iter().map(|s| non_whitespace(&text[s.clone()])).sum();
    let total = non_whitespace(text.get(..content_end).unwrap_or(text));
    if total == 0 || (captured as f64) < MIN_COVERAGE * total as f64 {
        return None;
    }
    if !residue.is_empty() {
        context.insert("residue".into(), Value::Object(residue));
    }
    if let Some(torn) = torn {
        let cut = text[torn.span.clone()].trim();
        let mut shown: String = cut.chars().take(MAX_DROPPED_CHARS).collect();
        if shown.len() < cut.len() {
            shown.push('…');
        }
        context.insert(
            "dropped".into(),
            json!({"rows": torn.rows, "reason": torn.reason, "text": shown}),
        );
    }
    Some(Extracted {
        rung,
        tables,
        context,
    })
}

/// Rung 3 over the text blocks of a result: every block must hold tables found by the same
/// formatted-text rung, or be small enough to go to `context` whole.
pub fn in_texts(texts: &[&str]) -> Option<Located<'static>> {
    let mut rung: Option<Rung> = None;
    let mut tables = Vec::new();
    let mut context = Map::new();
    for (index, text) in texts.iter().enumerate() {
        let label = (texts.len() > 1).then(|| format!("text{index}"));
        match extract(text) {
            Some(found) => {
                if rung.is_some_and(|r| r != found.rung) {
                    return None;
                }
                rung = Some(found.rung);
                for table in found.tables {
                    let path = match (&label, table.path) {
                        (None, None) => "$".to_string(),
                        (None, Some(path)) => path,
                        (Some(label), None) => label.clone(),
                        (Some(label), Some(path)) if path == "$" => label.clone(),
                        (Some(label), Some(path)) => format!("{label}.{path}"),
                    };
                    tables.push(FoundTable {
                        path,
                        rows: Cow::Owned(table.rows),
                        parsed: None,
                        container: None,
                    });
                }
                for (key, value) in found.context {
                    let key = match &label {
                        Some(label) => format!("{label}.{key}"),
                        None => key,
                    };
                    context.insert(key, value);
                }
            }
            None => {
                if text.chars().count() > MAX_CONTEXT_CHARS {
                    return None;
                }
                context.insert(
                    label.unwrap_or_else(|| "$".to_string()),
                    Value::String((*text).to_string()),
                );
            }
        }
    }
    let rung = rung?;
    let fits =
        serde_json::to_string(&context).is_ok_and(|s| s.chars().count() <= MAX_CONTEXT_CHARS);
    if tables.is_empty() || !fits {
        return None;
    }
    Some(Located {
        rung,
        tables,
        context,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv_text(rows: usize) -> String {
        let mut text = String::from("id,name,score\n");
        for i in 0..rows {
            text.push_str(&format!("{i},user-{i},{}.5\n", i % 7));
        }
        text
    }

    #[test]
    fn a_csv_block_becomes_a_table_with_its_rung() {
        let text = csv_text(50);
        let located = in_texts(&[text.as_str()]).expect("table");
        assert_eq!(located.rung, Rung::Csv);
        assert_eq!(located.tables.len(), 1);
        assert_eq!(located.tables[0].path, "$");
        assert!(located.context.is_empty(), "{:?}", located.context);
        let rows: Value = serde_json::from_str(&located.tables[0].rows).expect("rows");
        assert_eq!(
            rows[3],
            json!({"id": "3", "name": "user-3", "score": "3.5"})
        );
    }

    #[test]
    fn preamble_and_marker_go_to_residue_and_a_torn_row_is_reported() {
        let text = format!(
            "Contents of https://example.com/data.csv:\n{}7,user-7,1.\n\n<error>Content truncated. Call the fetch tool with a start_index of 900 to get more content.</error>",
            csv_text(40)
        );
        let found = extract(&text).expect("table");
        assert_eq!(found.rung, Rung::Csv);
        assert_eq!(
            found.context["residue"]["before"],
            "Contents of https://example.com/data.csv:"
        );
        assert!(
            found.context["residue"]["after"]
                .as_str()
                .expect("after")
                .starts_with("<error>Content truncated")
        );
        assert_eq!(found.context["dropped"]["rows"], 1);
        assert_eq!(found.context["dropped"]["text"], "7,user-7,1.");
        let rows: Vec<Value> = serde_json::from_str(&found.tables[0].rows).expect("rows");
        assert_eq!(rows.len(), 40);
    }

    #[test]
    fn too_much_prose_around_a_table_passes_through() {
        let prose = "This paragraph explains the table below at some length. ".repeat(12);
        let text = format!("{prose}\n\n{}", csv_text(5));
        assert!(extract(&text).is_none());
    }

    #[test]
    fn blocks_mix_tables_and_short_notes() {
        let table = csv_text(20);
        let located = in_texts(&["Found 20 users.", table.as_str()]).expect("table");
        assert_eq!(located.tables[0].path, "text1");
        assert_eq!(located.context["text0"], "Found 20 users.");
        let long_note = "no table here. ".repeat(100);
        assert!(in_texts(&[long_note.as_str(), table.as_str()]).is_none());
    }

    fn intercept_result(result: Value) -> Option<Value> {
        use crate::intercept::{Origin, Outcome, intercept};
        use crate::store::{Store, StoreSettings};
        let store = std::sync::Arc::new(Store::new(StoreSettings::default()).expect("store"));
        let origin = Origin {
            server: "fx".into(),
            tool: "export".into(),
            args: json!({}),
        };
        let raw = serde_json::value::RawValue::from_string(result.to_string()).expect("raw");
        match intercept(
            raw,
            &origin,
            &store,
            500,
            &crate::common::policy::Policy::tables_only(),
        ) {
            Outcome::Replaced(value) => Some(value["structuredContent"].clone()),
            Outcome::PassThrough(..)
            | Outcome::Reduced(_)
            | Outcome::Spliced(..)
            | Outcome::Summarize(_) => None,
        }
    }

    #[test]
    fn structured_content_beside_a_text_table_is_never_lost() {
        let text = csv_text(400);
        // FastMCP's `{"result": "<the text>"}` is a copy of the text block: dropped.
        let copy = json!({"content": [{"type": "text", "text": text}],
                          "structuredContent": {"result": text}});
        let envelope = intercept_result(copy).expect("replaced");
        assert_eq!(envelope["provenance"]["source"], "csv");
        assert!(envelope.get("context").is_none(), "{envelope}");
        // A small one goes to context; a large one that is not a copy keeps the result whole.
        let small = json!({"content": [{"type": "text", "text": text}],
                           "structuredContent": {"exportedAt": "2024-01-01"}});
        let envelope = intercept_result(small).expect("replaced");
        assert_eq!(
            envelope["context"]["structuredContent"],
            json!({"exportedAt": "2024-01-01"})
        );
        let large = json!({"content": [{"type": "text", "text": text}],
                           "structuredContent": {"note": "x".repeat(2000)}});
        assert!(intercept_result(large).is_none());
        // The same holds for JSON rows in the text (rung 2).
        let rows: Vec<Value> = (0..300).map(|i| json!({"id": i})).collect();
        let rows = Value::Array(rows).to_string();
        let small = json!({"content": [{"type": "text", "text": rows}],
                           "structuredContent": {"page": 1}});
        let envelope = intercept_result(small).expect("replaced");
        assert_eq!(envelope["provenance"]["source"], "json_text");
        assert_eq!(envelope["context"]["structuredContent"], json!({"page": 1}));
        let large = json!({"content": [{"type": "text", "text": rows}],
                           "structuredContent": {"note": "x".repeat(2000)}});
        assert!(intercept_result(large).is_none());
    }

    #[test]
    fn text_cells_are_typed_conservatively() {
        let mut text = String::from("id,score,code,day\n");
        for i in 0..400 {
            text.push_str(&format!(
                "{i},{}.25,{:03},2024-01-{:02}\n",
                i % 9,
                i % 50,
                i % 28 + 1
            ));
        }
        let envelope = intercept_result(json!({"content": [{"type": "text", "text": text}]}))
            .expect("replaced");
        let types: Vec<&str> = envelope["schema"]
            .as_array()
            .expect("schema")
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, vec!["Int64", "Float64", "Utf8", "Date32"]);
        // The same decimals in JSON strings stay text: only text-sourced cells are read so.
        let rows: Vec<Value> = (0..400)
            .map(|i| json!({"id": i, "score": format!("{}.25", i % 9)}))
            .collect();
        let envelope = intercept_result(
            json!({"content": [{"type": "text", "text": Value::Array(rows).to_string()}]}),
        )
        .expect("replaced");
        assert_eq!(envelope["schema"][1]["type"], "Utf8");
    }

    #[test]
    fn prose_and_noise_pass_through() {
        for text in [
            "",
            "   \n\n",
            "Hello, world. This is a sentence, with commas, and more.",
            "a | b\nc | d",
            "Note: nothing here\nStatus: fine",
        ] {
            assert!(extract(text).is_none(), "{text}");
        }
    }
}
