//! loom's own data tools, in one room: `loom_query`, `loom_list_datasets`, `loom_describe`,
//! `loom_materialize`, `loom_export` (here) and `loom_read` ([`read`]) — their definitions,
//! argument checks and answers. The gateway dispatches calls to them. (The tool-search tools
//! `loom_find_tools`, `loom_call`, `loom_tool_categories` and `loom_stats` stay in
//! gateway/discovery.rs: they answer from the gateway's own catalog.)
//!
//! Their results carry the same JSON twice, as compact text and as `structuredContent`, because
//! some clients read only one of the two.

use std::sync::Arc;
use std::time::SystemTime;

use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::envelope;
use crate::store::{QueryError, Store};

pub(crate) use crate::common::tools::{DESCRIBE, EXPORT, LIST, MATERIALIZE, QUERY};

mod describe;
mod export;
mod list_datasets;
mod materialize;
mod query;
pub(crate) mod read;
pub(crate) mod view;

pub(crate) use describe::*;
pub(crate) use export::*;
pub(crate) use list_datasets::*;
pub(crate) use materialize::*;
pub(crate) use query::*;

/// Every tool of this room, by name.
pub(crate) const NAMES: &[&str] = &[
    QUERY,
    LIST,
    DESCRIBE,
    MATERIALIZE,
    EXPORT,
    crate::common::tools::READ,
];

const QUERY_DESCRIPTION: &str = "Run one read-only SQL query (DataFusion dialect) over what loom holds. \
A large tabular tool result comes back as an envelope: its `ref` is a table name, with schema, statistics \
and a `usage` query that runs as is. Ask for what you need: filters, aggregates, ORDER BY … LIMIT, window \
functions, CTEs, JOINs across servers (see `joinHints`). Quote identifiers that are not lowercase (\"ID\"). \
A large answer becomes a new dataset. No files, URLs, DDL, DML or settings.";

const LIST_DESCRIPTION: &str = "List what loom holds (datasets, documents, blobs): ref, size, \
origin, age; in the order they were made, 50 at a time (pass the answer's `nextOffset` as \
`offset` for more).";

const MATERIALIZE_DESCRIPTION: &str = "Keep a query's result as dataset `ds_view_<name>` (types intact, \
never evicted) to query again or export. Returns its envelope.";

const EXPORT_DESCRIPTION: &str = "Write a dataset to a file in loom's export directory: csv (RFC 4180) \
or json (typed values). Returns the path, rows and bytes.";

// Short: every byte here is in every tools/list (search mode keeps loom's own tools within 12%
// of a full listing); the answer's `columns` and `nextOffset` say the rest.
const DESCRIBE_DESCRIPTION: &str = "One dataset in full, by pages of columns (`nextOffset`): types, \
statistics, a sample, join hints, provenance.";

pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required,
                        "additionalProperties": false});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

/// loom's own tools never destroy anything and never reach outside loom.
fn annotations(read_only: bool, idempotent: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(read_only)
        .destructive(false)
        .idempotent(idempotent)
        .open_world(false)
}

pub(crate) fn read_only() -> ToolAnnotations {
    annotations(true, true)
}

/// A failed query as the `isError` result of `tool`: a refusal speaks for itself, an engine
/// error comes with the datasets and columns that do exist.
fn query_error(tool: &str, error: &QueryError, store: &Store) -> CallToolResult {
    crate::telemetry::metrics::query_refused(match error {
        QueryError::Refused(_) => "refused",
        QueryError::Timeout(_) => "timeout",
        QueryError::TooLarge { .. } => "too_large",
        QueryError::Sql(message) if message.contains("Resources exhausted") => "memory",
        QueryError::Sql(_) => "sql",
    });
    let help = match error {
        QueryError::Refused(_) => String::new(),
        _ => format!("\n{}", known_datasets(store)),
    };
    error_result(format!("{tool}: {error}{help}"))
}

/// The definitions of loom's own tools, listed after every server's tools.
/// `_meta` of the tools whose results loom's view shows (SPEC §12.1).
fn view() -> rmcp::model::MetaObject {
    rmcp::model::MetaObject(crate::common::tools::view_meta())
}

pub(crate) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            QUERY,
            QUERY_DESCRIPTION,
            object_schema(
                json!({"sql": {"type": "string", "description": "One SELECT statement."}}),
                &["sql"],
            ),
        )
        .annotate(read_only())
        .with_meta(view()),
        Tool::new(
            LIST,
            LIST_DESCRIPTION,
            object_schema(
                json!({
                    "offset": {"type": "integer", "minimum": 0, "description": "Entries to skip."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": list_datasets::MAX_PAGE, "description": "Entries to show (default and at most 50)."}
                }),
                &[],
            ),
        )
        .annotate(read_only()),
        Tool::new(
            DESCRIBE,
            DESCRIBE_DESCRIPTION,
            object_schema(
                json!({
                    "ref": {"type": "string"},
                    "offset": {"type": "integer", "minimum": 0},
                    "limit": {"type": "integer", "minimum": 1, "maximum": describe::MAX_DESCRIBE_COLUMNS}
                }),
                &["ref"],
            ),
        )
        .annotate(read_only())
        .with_meta(view()),
        Tool::new(
            MATERIALIZE,
            MATERIALIZE_DESCRIPTION,
            object_schema(
                json!({"sql": {"type": "string"}, "name": {"type": "string"}}),
                &["sql", "name"],
            ),
        )
        .annotate(annotations(false, false)),
        Tool::new(
            EXPORT,
            EXPORT_DESCRIPTION,
            object_schema(
                json!({"ref": {"type": "string"},
                       "format": {"type": "string", "enum": ["csv", "json"]},
                       "filename": {"type": "string", "description": "Plain file name (default <ref>.<format>)."},
                       "overwrite": {"type": "boolean", "default": false}}),
                &["ref", "format"],
            ),
        )
        .annotate(annotations(false, true)),
        read::tool(),
    ]
}

/// A result carrying `value` as text and as structured content.
pub(crate) fn json_result(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// An `isError` result with `message`.
pub(crate) fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}

/// A text answer of loom's own that is not an error.
pub(crate) fn text_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(message.into())])
}

fn string_arg<'a>(
    arguments: &'a Option<Map<String, Value>>,
    name: &str,
) -> Result<&'a str, String> {
    match arguments.as_ref().and_then(|a| a.get(name)) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s),
        Some(other) => Err(format!(
            "`{name}` must be a non-empty string, found {other}"
        )),
        None => Err(format!("missing argument `{name}`")),
    }
}

/// What an empty session says when a ref is asked for.
pub(crate) const NO_DATASETS: &str = "this session holds no datasets: a ref belongs to the session \
     whose tool call made it, and is gone when that session ends (a client that opens a new \
     session for every tool call loses its refs between calls: keep one session open, or call \
     the tool again in this one); datasets appear when a tool returns a large table";

/// An optional whole-number argument of 0 or more.
fn number(arguments: &Map<String, Value>, name: &str) -> Result<Option<u64>, String> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) => Ok(Some(v)),
            None => Err(format!(
                "`{name}` must be a whole number of 0 or more, found {n}"
            )),
        },
        Some(other) => Err(format!("`{name}` must be a whole number, found {other}")),
    }
}

/// The optional `offset` and `limit` of a paged tool: `limit` 1 to `max` (`default` when not
/// given), each a whole number; the error names what was wrong, `unit` after the range (" columns").
fn paging(
    arguments: &Map<String, Value>,
    default: u64,
    max: u64,
    unit: &str,
) -> Result<(u64, u64), String> {
    let offset = number(arguments, "offset")?.unwrap_or(0);
    let limit = number(arguments, "limit")?.unwrap_or(default);
    if !(1..=max).contains(&limit) {
        return Err(format!(
            "`limit` must be from 1 to {max}{unit}, found {limit}"
        ));
    }
    Ok((offset, limit))
}

fn known_datasets(store: &Store) -> String {
    let list = store.list();
    if list.is_empty() {
        // Most often the ref came from another session: a client that opens a session per tool
        // call (langchain-mcp-adapters' default) loses its datasets between the calls.
        return NO_DATASETS.into();
    }
    let refs: Vec<String> = list
        .iter()
        .take(20)
        .map(|d| {
            // From the schema: naming columns computes no statistics (SPEC §25).
            let columns: Vec<String> = d
                .schema
                .fields()
                .iter()
                .take(12)
                .map(|f| crate::common::text::cut(f.name(), envelope::MAX_NAME_CHARS))
                .collect();
            format!("{} ({})", d.reference, columns.join(", "))
        })
        .collect();
    format!("known datasets: {}", refs.join("; "))
}

fn age(created: SystemTime) -> String {
    let secs = created.elapsed().map(|d| d.as_secs()).unwrap_or(0);
    match secs {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    use crate::intercept::{Origin, Outcome, intercept};
    use crate::store::{Store, StoreSettings};

    /// What a result holds inside its values and names does not make the answers about it large:
    /// three rows of 200,000-element lists, lists of 100 KB strings and a 60,000-character column
    /// name give an envelope and a `loom_describe` of a few kilobytes (they were 2.6 MB, 4.0 MB and
    /// 1.3 MB), with what is cut marked.
    #[test]
    fn nested_values_and_long_names_are_bounded_in_every_answer() {
        let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
        let origin = Origin {
            server: "s".into(),
            tool: "t".into(),
            args: json!({}),
        };
        let long_name = "n".repeat(60_000);
        let big_string = "x".repeat(100_000);
        let rows: Vec<Value> = (0..3)
            .map(|i| {
                json!({
                    "id": i,
                    "numbers": (0..200_000).collect::<Vec<i64>>(),
                    "texts": [big_string.clone(), big_string.clone(), big_string.clone()],
                    long_name.clone(): i * 2,
                })
            })
            .collect();
        let result = json!({"structuredContent": {"rows": rows}, "content": []});
        let raw = RawValue::from_string(result.to_string()).expect("raw");
        let envelope = match intercept(
            raw,
            &origin,
            &store,
            2000,
            &crate::common::policy::Policy::tables_only(),
        ) {
            Outcome::Replaced(value) => value["structuredContent"].clone(),
            Outcome::PassThrough(_, why) => panic!("passed through: {why}"),
            Outcome::Reduced(v) => panic!("reduced as a document: {v}"),
            Outcome::Spliced(raw, _) => panic!("spliced: {}", raw.get()),
            Outcome::Summarize(_) => panic!("sent to a model"),
        };
        let text = envelope.to_string();
        assert!(text.len() < 16_000, "envelope of {} bytes", text.len());
        assert!(text.contains("… 199990 more"), "{text:.2000}");
        let reference = envelope["ref"].as_str().expect("ref");
        let dataset = store.get(reference).expect("held");
        let described = super::describe_dataset(&dataset, &store.list());
        let text = described.to_string();
        assert!(text.len() < 64_000, "describe of {} bytes", text.len());
        assert!(!text.contains(&"n".repeat(201)), "the long name is cut");
        assert!(!text.contains(&"x".repeat(201)), "long strings are cut");
    }

    /// A session of many datasets is listed a page at a time: at most 50 entries an answer,
    /// `total` and `nextOffset` to go on, bad paging arguments named.
    #[test]
    fn the_listing_is_paged() {
        let store = Arc::new(Store::new(StoreSettings::default()).expect("store"));
        for i in 0..120 {
            let origin = Origin {
                server: "s".into(),
                tool: format!("t{i}"),
                args: json!({}),
            };
            let result = json!({"content": [{"type": "text", "text": "[{\"a\": 1}, {\"a\": 2}]"}]});
            let raw = RawValue::from_string(result.to_string()).expect("raw");
            crate::intercept::keep_passed_through(&raw, &origin, &store).expect("kept");
        }
        assert_eq!(store.list().len(), 120);
        let page = |arguments: Value| {
            let result = super::list(&store, &arguments.as_object().cloned());
            serde_json::to_value(&result).expect("json")
        };
        let first = page(json!({}));
        let answer = &first["structuredContent"];
        assert_eq!(answer["datasets"].as_array().map(Vec::len), Some(50));
        assert_eq!(answer["total"], 120);
        assert_eq!(answer["nextOffset"], 50);
        let last = page(json!({"offset": 100, "limit": 50}));
        let answer = &last["structuredContent"];
        assert_eq!(answer["datasets"].as_array().map(Vec::len), Some(20));
        assert!(answer.get("nextOffset").is_none(), "{answer}");
        assert_eq!(answer["datasets"][0]["tool"], "t100");
        for (arguments, says) in [
            (
                json!({"limit": 500}),
                "`limit` must be from 1 to 50, found 500",
            ),
            (
                json!({"offset": -1}),
                "`offset` must be a whole number of 0 or more",
            ),
            (json!({"page": 2}), "unknown argument `page`"),
        ] {
            let text = page(arguments)["content"][0]["text"].to_string();
            assert!(text.contains(says), "{text}");
        }
    }
}
