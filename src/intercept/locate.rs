//! Finding the tables in a tool result, rung by rung; the first rung that finds any wins.
//!
//! 1. `structuredContent`: any JSON value. An array of objects at the root, or as a member of
//!    objects nested up to [`NESTING_DEPTH`] levels, is a table; a string member whose content is
//!    itself a JSON table (server-filesystem returns `{"content": "<file text>"}`) is parsed like
//!    text.
//! 2. JSON in the text blocks: each block as a whole, inside a ```json fence, or after one short
//!    preamble line ("Contents of /x.json:").
//!
//! Everything around the tables (totals, cursors, `hasMore`, a preamble line) is collected as
//! `context`. When something around the tables is too big to carry in the envelope, the result is
//! not replaced: nothing may be lost.

use std::borrow::Cow;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::skim;
use crate::common::json::{Kind, kind_of, string_content_of};
use crate::ingest::RawTable;

/// How deep inside objects tables are looked for (`{"data": {"items": [...]}}` is depth 2).
pub(crate) const NESTING_DEPTH: usize = 3;

/// The most context (serialized) an envelope carries; more means the result is not replaced.
pub(crate) const MAX_CONTEXT_CHARS: usize = 1_000;

/// The longest line accepted as a preamble before JSON in a text block.
pub(crate) const MAX_PREAMBLE_CHARS: usize = 200;

/// Which rung found the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    StructuredContent,
    JsonText,
    // The formatted-text rungs (`super::text`, SPEC §16).
    /// Comma-separated values (RFC 4180).
    Csv,
    /// Tab-separated values.
    Tsv,
    /// Semicolon-separated values, quoted like RFC 4180.
    CsvSemicolon,
    /// GFM markdown tables.
    Markdown,
    /// One JSON object per line.
    Ndjson,
    /// The `repr` of a Python list of dicts.
    PythonRepr,
    /// `Key: value` lines in blocks.
    RecordBlocks,
}

impl Rung {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::StructuredContent => "structuredContent",
            Self::JsonText => "json_text",
            Self::Csv => "csv",
            Self::Tsv => "tsv",
            Self::CsvSemicolon => "csv_semicolon",
            Self::Markdown => "markdown",
            Self::Ndjson => "ndjson",
            Self::PythonRepr => "python_repr",
            Self::RecordBlocks => "record_blocks",
        }
    }

    /// Whether every cell this rung produces is a string read out of text (so decimals written
    /// as text may become Float64, SPEC §16.3). NDJSON and Python literals carry their own types.
    pub fn cells_are_text(self) -> bool {
        matches!(
            self,
            Self::Csv | Self::Tsv | Self::CsvSemicolon | Self::Markdown | Self::RecordBlocks
        )
    }
}

/// One table: where it was and its rows as JSON text.
#[derive(Debug)]
pub struct FoundTable<'a> {
    /// `$` for the root, else the member path (`data.items`).
    pub path: String,
    pub rows: Cow<'a, str>,
    /// The rows already split into objects, when locating had to parse them anyway and they
    /// borrow from the result itself (ingest then does not parse them again).
    pub parsed: Option<RawTable<'a>>,
    /// The whole string the table was read from, when it came from a string member.
    pub container: Option<String>,
}

#[derive(Debug)]
pub struct Located<'a> {
    pub rung: Rung,
    pub tables: Vec<FoundTable<'a>>,
    pub context: Map<String, Value>,
}

/// `text` read as a table, if it is a non-empty JSON array of objects.
fn rows_of(text: &str) -> Option<RawTable<'_>> {
    if !text.trim_start().starts_with('[') {
        return None;
    }
    RawTable::parse(text).ok().filter(|table| table.rows() > 0)
}

/// Walk one JSON value for tables. Members that are not tables go to `context`.
fn walk<'a>(
    value: &'a str,
    path: &str,
    depth: usize,
    tables: &mut Vec<FoundTable<'a>>,
    context: &mut Map<String, Value>,
) {
    match kind_of(value) {
        Kind::Array => match rows_of(value) {
            Some(rows) => tables.push(FoundTable {
                path: path.to_string(),
                rows: Cow::Borrowed(value),
                parsed: Some(rows),
                container: None,
            }),
            None => insert_context(context, path, value),
        },
        Kind::Object if depth < NESTING_DEPTH => {
            let Some(members) = skim::object_members(value) else {
                return;
            };
            for (key, member) in members {
                let child = if path == "$" {
                    key.to_string()
                } else {
                    format!("{path}.{key}")
                };
                walk(member, &child, depth + 1, tables, context);
            }
        }
        Kind::String => {
            let content = string_content_of(value).unwrap_or_default();
            match json_in_text(&content) {
                // The string is unescaped into a copy here, so its rows cannot be kept parsed.
                Some((preamble, json)) if rows_of(json).is_some() => {
                    if let Some(preamble) = preamble {
                        context.insert(
                            format!("{path}.preamble"),
                            Value::String(preamble.to_string()),
                        );
                    }
                    tables.push(FoundTable {
                        path: path.to_string(),
                        rows: Cow::Owned(json.to_string()),
                        parsed: None,
                        container: Some(content.to_string()),
                    });
                }
                _ => insert_context(context, path, value),
            }
        }
        _ => insert_context(context, path, value),
    }
}

fn insert_context(context: &mut Map<String, Value>, path: &str, value: &str) {
    let parsed = serde_json::from_str(value).unwrap_or(Value::Null);
    context.insert(path.to_string(), parsed);
}

/// A text's JSON part: the whole text, a ```json fence, or everything after one short line.
/// Returns the preamble line (if any) and the JSON text.
pub(crate) fn json_in_text(text: &str) -> Option<(Option<&str>, &str)> {
    let trimmed = text.trim();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        return Some((None, trimmed));
    }
    if let Some(start) = trimmed.find("```json") {
        let preamble = trimmed[..start].trim();
        let body = &trimmed[start + "```json".len()..];
        let end = body.rfind("```")?;
        let rest = body[end + 3..].trim();
        if !rest.is_empty() || preamble.len() > MAX_PREAMBLE_CHARS || preamble.contains('\n') {
            return None;
        }
        return Some((
            (!preamble.is_empty()).then_some(preamble),
            body[..end].trim(),
        ));
    }
    let (first, rest) = trimmed.split_once('\n')?;
    let rest = rest.trim();
    if first.chars().count() <= MAX_PREAMBLE_CHARS
        && (rest.starts_with('[') || rest.starts_with('{'))
    {
        return Some((Some(first.trim()), rest));
    }
    None
}

fn context_fits(context: &Map<String, Value>) -> bool {
    serde_json::to_string(context).is_ok_and(|s| s.chars().count() <= MAX_CONTEXT_CHARS)
}

/// Rung 1 over `structuredContent` (its raw text: valid JSON, see [`skim`]).
pub(crate) fn in_structured(structured: &str) -> Option<Located<'_>> {
    let mut tables = Vec::new();
    let mut context = Map::new();
    walk(structured, "$", 0, &mut tables, &mut context);
    if tables.is_empty() || !context_fits(&context) {
        return None;
    }
    Some(Located {
        rung: Rung::StructuredContent,
        tables,
        context,
    })
}

/// Rung 2 over the text blocks. Every block must be a table-bearing JSON text or small enough
/// to go to `context`.
pub(crate) fn in_texts<'a>(texts: &[&'a str]) -> Option<Located<'a>> {
    let mut tables = Vec::new();
    let mut context = Map::new();
    for (index, text) in texts.iter().enumerate() {
        let label = if texts.len() == 1 {
            "$".to_string()
        } else {
            format!("text{index}")
        };
        let found = json_in_text(text).and_then(|(preamble, json)| {
            // The common case, a text that is one array of objects, is parsed once, for good.
            if let Some(rows) = rows_of(json) {
                let table = FoundTable {
                    path: label.clone(),
                    rows: Cow::Borrowed(json),
                    parsed: Some(rows),
                    container: None,
                };
                return Some((preamble, vec![table], Map::new()));
            }
            // A text is not known to be JSON: serde_json checks it before it is skimmed.
            let raw: &RawValue = serde_json::from_str(json).ok()?;
            let mut block_tables = Vec::new();
            let mut block_context = Map::new();
            walk(raw.get(), &label, 0, &mut block_tables, &mut block_context);
            (!block_tables.is_empty()).then_some((preamble, block_tables, block_context))
        });
        match found {
            Some((preamble, block_tables, block_context)) => {
                if let Some(preamble) = preamble {
                    context.insert(
                        format!("{label}.preamble"),
                        Value::String(preamble.to_string()),
                    );
                }
                tables.extend(block_tables);
                context.extend(block_context);
            }
            None => {
                // Checked before copying: a large text that is not a table ends the search.
                if text.chars().count() > MAX_CONTEXT_CHARS {
                    return None;
                }
                context.insert(label, Value::String((*text).to_string()));
            }
        }
    }
    if tables.is_empty() || !context_fits(&context) {
        return None;
    }
    Some(Located {
        rung: Rung::JsonText,
        tables,
        context,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        serde_json::from_str(text).expect("json")
    }

    #[test]
    fn a_root_array_of_objects_is_a_table() {
        let value = raw(r#"[{"a": 1}, {"a": 2}]"#);
        let found = in_structured(value.get()).expect("found");
        assert_eq!(found.tables.len(), 1);
        assert_eq!(found.tables[0].path, "$");
        assert!(found.context.is_empty());
    }

    #[test]
    fn several_tables_and_scalars_around_them() {
        let value = raw(
            r#"{"entities": [{"name": "a"}], "relations": [{"from": "a", "to": "b"}],
                "total": 2, "hasMore": false, "page": {"cursor": "abc", "rows": [{"x": 1}]}}"#,
        );
        let found = in_structured(value.get()).expect("found");
        let paths: Vec<&str> = found.tables.iter().map(|t| t.path.as_str()).collect();
        assert_eq!(paths, vec!["entities", "relations", "page.rows"]);
        assert_eq!(found.context["total"], 2);
        assert_eq!(found.context["hasMore"], false);
        assert_eq!(found.context["page.cursor"], "abc");
    }

    #[test]
    fn a_string_member_holding_json_is_parsed_like_text() {
        let inner = r#"Contents of /data/users.json:\n[{\"id\": 1}, {\"id\": 2}]"#;
        let value = raw(&format!(r#"{{"content": "{inner}"}}"#));
        let found = in_structured(value.get()).expect("found");
        assert_eq!(found.tables[0].path, "content");
        assert_eq!(
            found.context["content.preamble"],
            "Contents of /data/users.json:"
        );
    }

    #[test]
    fn no_tables_or_too_much_context_means_no_replacement() {
        assert!(in_structured(raw(r#"{"a": 1}"#).get()).is_none());
        assert!(in_structured(raw(r#"[1, 2, 3]"#).get()).is_none());
        let long = "x".repeat(2000);
        let value = raw(&format!(r#"{{"rows": [{{"a": 1}}], "note": "{long}"}}"#));
        assert!(in_structured(value.get()).is_none());
    }

    #[test]
    fn text_blocks_plain_fenced_and_after_a_preamble() {
        let plain = r#"[{"a": 1}]"#;
        assert_eq!(in_texts(&[plain]).expect("plain").tables.len(), 1);
        let fenced = "Here you go:\n```json\n[{\"a\": 1}]\n```";
        let found = in_texts(&[fenced]).expect("fenced");
        assert_eq!(found.context["$.preamble"], "Here you go:");
        let preamble = "Query results (2 rows):\n[{\"a\": 1}, {\"a\": 2}]";
        assert!(in_texts(&[preamble]).is_some());
        let two = ["[{\"a\": 1}]", "[{\"b\": 2}]"];
        assert_eq!(in_texts(&two).expect("two").tables.len(), 2);
        assert!(in_texts(&["just words, no data"]).is_none());
        let too_much = format!("[{{\"a\": 1}}]\n\n{}", "trailing prose ".repeat(10));
        assert!(in_texts(&[too_much.as_str()]).is_none());
    }
}
