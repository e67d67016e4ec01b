//! loom's own tools: `loom_query`, `loom_list_datasets`, `loom_describe`.
//!
//! Their results carry the same JSON twice, as compact text and as `structuredContent`, because
//! some clients read only one of the two.

use std::sync::Arc;
use std::time::SystemTime;

use arrow::array::RecordBatch;
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::common::tokens::estimate_tokens;
use crate::envelope::{self, DatasetView, sample_json, schema_json};
use crate::store::values::{cell, type_name};
use crate::store::{Dataset, NewDataset, Provenance, QueryError, QueryOutput, Store};

pub use crate::common::tools::{DESCRIBE, EXPORT, LIST, MATERIALIZE, QUERY};
pub const NAMES: &[&str] = &[
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

const LIST_DESCRIPTION: &str =
    "List what loom holds (datasets, documents, blobs): ref, size, origin, age.";

const MATERIALIZE_DESCRIPTION: &str = "Keep a query's result as dataset `ds_view_<name>` (types intact, \
never evicted) to query again or export. Returns its envelope.";

const EXPORT_DESCRIPTION: &str = "Write a dataset to a file in loom's export directory: csv (RFC 4180) \
or json (typed values). Returns the path, rows and bytes.";

const DESCRIBE_DESCRIPTION: &str =
    "One dataset in full: every column's type and statistics, a sample, join hints, provenance.";

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
    let help = match error {
        QueryError::Refused(_) => String::new(),
        _ => format!("\n{}", known_datasets(store)),
    };
    error_result(format!("{tool}: {error}{help}"))
}

/// The definitions of loom's own tools, listed after every server's tools.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            QUERY,
            QUERY_DESCRIPTION,
            object_schema(
                json!({"sql": {"type": "string", "description": "One SELECT statement."}}),
                &["sql"],
            ),
        )
        .annotate(read_only()),
        Tool::new(LIST, LIST_DESCRIPTION, object_schema(json!({}), &[])).annotate(read_only()),
        Tool::new(
            DESCRIBE,
            DESCRIBE_DESCRIPTION,
            object_schema(
                json!({"ref": {"type": "string"}}),
                &["ref"],
            ),
        )
        .annotate(read_only()),
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
        super::read::tool(),
    ]
}

/// `ds_view_<name>`: the name lowercased to `[a-z0-9_]`, at most 48 characters.
pub fn view_ref(name: &str) -> Result<String, String> {
    match crate::store::ref_part(name.trim(), 48) {
        Some(clean) => Ok(format!("ds_view_{clean}")),
        None => Err(format!(
            "name {name:?} has no letters or digits; use e.g. \"top_customers\""
        )),
    }
}

pub async fn materialize(
    store: &Arc<Store>,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let (sql, name) = match (string_arg(arguments, "sql"), string_arg(arguments, "name")) {
        (Ok(sql), Ok(name)) => (sql, name),
        (Err(e), _) | (_, Err(e)) => {
            return error_result(format!(
                "loom_materialize: {e}; pass {{\"sql\": \"SELECT …\", \"name\": \"short_name\"}}"
            ));
        }
    };
    let reference = match view_ref(name) {
        Ok(r) => r,
        Err(e) => return error_result(format!("loom_materialize: {e}")),
    };
    if store.get(&reference).is_some() {
        return error_result(format!(
            "loom_materialize: `{reference}` already exists; pick another name (or query it directly)"
        ));
    }
    let output = match store.query(sql).await {
        Ok(output) => output,
        Err(error) => return query_error("loom_materialize", &error, store),
    };
    let columns = query_columns(&output.schema);
    let added = store.add(NewDataset {
        server: "view".into(),
        tool: name.to_string(),
        batches: output.batches,
        schema: output.schema,
        columns,
        provenance: Provenance {
            server: "loom".into(),
            tool: MATERIALIZE.into(),
            args: json!({"sql": crate::common::text::cut(sql, 200), "name": name}),
            created_at: crate::common::text::now_rfc3339(),
            source: "query".into(),
        },
        pinned: true,
        implicit: false,
        name: Some(reference.clone()),
    });
    match added {
        Ok(dataset) => {
            let view = DatasetView {
                dataset: &dataset,
                path: "$",
            };
            let hints = crate::hints::hints_for(&dataset, &store.list());
            json_result(envelope::build(&[view], &hints, &Map::new(), 0))
        }
        Err(e) => error_result(format!("loom_materialize: {e}")),
    }
}

/// One session's export folder and what its exports wrote so far.
#[derive(Debug, Clone)]
pub struct Exports {
    dir: std::path::PathBuf,
    written: Arc<std::sync::atomic::AtomicU64>,
}

impl Exports {
    /// The stdio session (the only one of its process) writes in `exportDir` itself; every
    /// session of `loom serve --http` in a folder of its own below it, so one client can neither
    /// replace another's files nor learn their names from an "already exists".
    pub fn new(export_dir: &std::path::Path, sole_session: bool) -> Self {
        static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = if sole_session {
            export_dir.to_path_buf()
        } else {
            let number = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            export_dir.join(format!(
                "session-{}-{}-{number}",
                chrono::Utc::now().format("%Y%m%dT%H%M%S"),
                std::process::id()
            ))
        };
        Self {
            dir,
            written: Arc::default(),
        }
    }
}

pub fn export(
    store: &Store,
    config: &crate::config::Config,
    exports: &Exports,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let usage = "pass {\"ref\": \"ds_…\", \"format\": \"csv\" | \"json\", \"filename\"?: \"name.csv\", \"overwrite\"?: false}";
    let (reference, format) = match (
        string_arg(arguments, "ref"),
        string_arg(arguments, "format"),
    ) {
        (Ok(r), Ok(f)) => (r, f),
        (Err(e), _) | (_, Err(e)) => return error_result(format!("loom_export: {e}; {usage}")),
    };
    let format = match crate::export::Format::parse(format) {
        Ok(f) => f,
        Err(e) => return error_result(format!("loom_export: {e}")),
    };
    let filename = match arguments.as_ref().and_then(|a| a.get("filename")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            return error_result(format!(
                "loom_export: `filename` must be a string, found {other}"
            ));
        }
    };
    let overwrite = match arguments.as_ref().and_then(|a| a.get("overwrite")) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return error_result(format!(
                "loom_export: `overwrite` must be true or false, found {other}"
            ));
        }
    };
    let Some(dataset) = store.get(reference) else {
        return error_result(format!(
            "loom_export: no dataset `{reference}`; {}",
            known_datasets(store)
        ));
    };
    let name = match crate::export::filename::resolve(filename, reference, format.extension()) {
        Ok(n) => n,
        Err(e) => return error_result(format!("loom_export: {e}")),
    };
    use std::sync::atomic::Ordering;
    let left = config
        .export_max_bytes
        .saturating_sub(exports.written.load(Ordering::Acquire));
    match crate::export::export_with(
        &dataset,
        format,
        &exports.dir,
        &name,
        overwrite,
        config.neutralize_csv_formulas,
        left,
    ) {
        Ok(written) => {
            exports.written.fetch_add(written.bytes, Ordering::AcqRel);
            json_result(serde_json::to_value(&written).unwrap_or(Value::Null))
        }
        Err(e) => error_result(format!("loom_export: {e}")),
    }
}

/// Column infos for a dataset made by a query: names are the query's, types are Arrow's own.
fn query_columns(schema: &arrow::datatypes::SchemaRef) -> Vec<crate::ingest::ColumnInfo> {
    schema
        .fields()
        .iter()
        .map(|f| crate::ingest::ColumnInfo {
            name: f.name().clone(),
            source: f.name().clone(),
            typing: crate::ingest::ColumnType::Text,
        })
        .collect()
}

/// A result carrying `value` as text and as structured content.
pub fn json_result(value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    result
}

/// An `isError` result with `message`.
pub fn error_result(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
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

fn known_datasets(store: &Store) -> String {
    let list = store.list();
    if list.is_empty() {
        return "loom holds no datasets yet: they appear when a tool returns a large table".into();
    }
    let refs: Vec<String> = list
        .iter()
        .take(20)
        .map(|d| {
            let columns: Vec<String> = d
                .profile
                .iter()
                .take(12)
                .map(|p| crate::common::text::cut(&p.name, envelope::MAX_NAME_CHARS))
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

/// Rows of a query result as typed JSON objects.
/// Rows of a query result as typed JSON objects — or `None` as soon as they would cost more
/// than `budget` tokens (a `SELECT *` over a large dataset is never serialized whole just to be
/// measured).
fn rows_within(batches: &[RecordBatch], budget: usize) -> Option<Vec<Value>> {
    let mut out = Vec::new();
    let mut tokens = 0;
    for batch in batches {
        let schema = batch.schema();
        for row in 0..batch.num_rows() {
            let value = Value::Object(
                schema
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, a)| (f.name().clone(), cell(a, row)))
                    .collect(),
            );
            tokens += estimate_tokens(&value.to_string());
            if tokens > budget {
                return None;
            }
            out.push(value);
        }
    }
    Some(out)
}

pub async fn query(
    store: &Arc<Store>,
    threshold: usize,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let sql = match string_arg(arguments, "sql") {
        Ok(sql) => sql,
        Err(e) => return error_result(format!("loom_query: {e}; pass {{\"sql\": \"SELECT …\"}}")),
    };
    let output = match store.query(sql).await {
        Ok(output) => output,
        Err(error) => return query_error("loom_query", &error, store),
    };
    let QueryOutput {
        schema,
        batches,
        rows,
    } = output;
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| {
            json!({"name": crate::common::text::cut(f.name(), envelope::MAX_NAME_CHARS),
                   "type": type_name(f.data_type())})
        })
        .collect();
    let header_tokens = estimate_tokens(&json!(columns).to_string());
    if let Some(inline_rows) = rows_within(&batches, threshold.saturating_sub(header_tokens)) {
        return json_result(json!({"columns": columns, "rowCount": rows, "rows": inline_rows}));
    }
    // The envelope reports what the full result would have cost: bytes/4 is enough here.
    let tokens = batches
        .iter()
        .map(RecordBatch::get_array_memory_size)
        .sum::<usize>()
        / 4;
    // Too large to show: keep it as an implicit dataset and describe it instead.
    let infos = query_columns(&schema);
    let added = store.add(NewDataset {
        server: "query".into(),
        tool: "result".into(),
        batches,
        schema,
        columns: infos,
        provenance: Provenance {
            server: "loom".into(),
            tool: QUERY.into(),
            args: json!({"sql": crate::common::text::cut(sql, 200)}),
            created_at: crate::common::text::now_rfc3339(),
            source: "query".into(),
        },
        pinned: false,
        implicit: true,
        name: None,
    });
    match added {
        Ok(dataset) => {
            let view = DatasetView {
                dataset: &dataset,
                path: "$",
            };
            let hints = crate::hints::hints_for(&dataset, &store.list());
            json_result(envelope::build(&[view], &hints, &Map::new(), tokens))
        }
        Err(e) => error_result(format!(
            "loom_query: the result ({rows} rows) is too large to return inline and could not be kept: {e}; add a LIMIT or aggregate"
        )),
    }
}

pub fn list(store: &Store) -> CallToolResult {
    let datasets: Vec<Value> = store
        .list()
        .iter()
        .map(|d| {
            let mut entry = json!({
                "ref": d.reference,
                "kind": d.content.kind(),
                "rows": d.rows,
                "columns": d.profile.len(),
                "bytes": d.bytes,
                "server": d.provenance.server,
                "tool": d.provenance.tool,
                "args": d.provenance.args,
                "createdAt": d.provenance.created_at,
                "age": age(d.created),
                "pinned": d.pinned(),
                "implicit": d.implicit,
            });
            kind_details(d, &mut entry);
            entry
        })
        .collect();
    json_result(json!({"datasets": datasets}))
}

/// What a document or blob adds to its entry: what it holds and how to read it.
fn kind_details(d: &Dataset, entry: &mut Value) {
    use crate::store::document::Content;
    let Value::Object(entry) = entry else { return };
    match &d.content {
        Content::Table => {}
        Content::Document(doc) => {
            entry.insert("documentKind".into(), json!(doc.kind.as_str()));
            entry.insert("chars".into(), json!(doc.chars));
            entry.insert("lines".into(), json!(doc.lines()));
            entry.insert(
                "read".into(),
                json!(format!("loom_read {{\"ref\": \"{}\"}}", d.reference)),
            );
        }
        Content::Blob(blob) => {
            entry.insert("mime".into(), json!(blob.mime));
            entry.insert(
                "read".into(),
                json!(format!("loom_read {{\"ref\": \"{}\"}}", d.reference)),
            );
        }
    }
}

/// The full description `loom_describe` (and `loom query --describe`) shows.
pub fn describe_dataset(d: &Dataset, held: &[Arc<Dataset>]) -> Value {
    let mut schema = schema_json(d, true, d.profile.len());
    for (entry, info) in schema.iter_mut().zip(&d.columns) {
        if let (Value::Object(entry), true) = (entry, info.source != info.name) {
            entry.insert(
                "source".into(),
                json!(crate::common::text::cut(
                    &info.source,
                    envelope::MAX_NAME_CHARS
                )),
            );
        }
    }
    for (entry, field) in schema.iter_mut().zip(d.schema.fields()) {
        if let (Value::Object(entry), Some(note)) =
            (entry, field.metadata().get(crate::ingest::TYPING_KEY))
        {
            entry.insert("note".into(), json!(note));
        }
    }
    let mut described = json!({
        "ref": d.reference,
        "kind": d.content.kind(),
        "rows": d.rows,
        "bytes": d.bytes,
        "schema": schema,
        "sample": sample_json(d, 10, 200),
        // Recomputed against what is live now, not what was live at creation.
        "joinHints": crate::hints::hints_for(d, held),
        "provenance": d.provenance,
        "age": age(d.created),
        "pinned": d.pinned(),
        "implicit": d.implicit,
        "usage": envelope::sql::usage(&[d]),
    });
    kind_details(d, &mut described);
    described
}

pub fn describe(store: &Store, arguments: &Option<Map<String, Value>>) -> CallToolResult {
    let reference = match string_arg(arguments, "ref") {
        Ok(r) => r,
        Err(e) => return error_result(format!("loom_describe: {e}; {}", known_datasets(store))),
    };
    match store.get(reference) {
        Some(dataset) => json_result(describe_dataset(&dataset, &store.list())),
        None if store.was_evicted(reference) => error_result(format!(
            "loom_describe: `{reference}` was evicted to stay within memoryBudgetBytes; call the tool again to get it back; {}",
            known_datasets(store)
        )),
        None => error_result(format!(
            "loom_describe: no dataset `{reference}`; {}",
            known_datasets(store)
        )),
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
            &crate::config::policy::Policy::tables_only(),
        ) {
            Outcome::Replaced(value) => value["structuredContent"].clone(),
            Outcome::PassThrough(_, why) => panic!("passed through: {why}"),
            Outcome::Reduced(v) => panic!("reduced as a document: {v}"),
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
}
