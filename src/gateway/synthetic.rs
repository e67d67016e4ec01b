//! loom's own tools: `loom_query`, `loom_list_datasets`, `loom_describe`.
//!
//! Their results carry the same JSON twice, as compact text and as `structuredContent`, because
//! some clients read only one of the two.

use std::sync::Arc;
use std::time::SystemTime;

use arrow::array::RecordBatch;
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Map, Value, json};

use crate::envelope::{self, DatasetView, sample_json, schema_json};
use crate::intercept::estimate::estimate_tokens;
use crate::store::values::{cell, type_name};
use crate::store::{Dataset, NewDataset, Provenance, QueryError, QueryOutput, Store};

pub const QUERY: &str = "loom_query";
pub const LIST: &str = "loom_list_datasets";
pub const DESCRIBE: &str = "loom_describe";
pub const NAMES: &[&str] = &[QUERY, LIST, DESCRIBE];

const QUERY_DESCRIPTION: &str = "Run one read-only SQL query (DataFusion dialect) over the datasets loom holds.\n\
Workflow: when a tool result is large and tabular, loom returns an envelope with `kind: \"loom_dataset_ref\"` \
instead of the raw rows: its `ref` is a table name, its `schema` lists the columns with statistics, and \
`usage` is a query that runs as is. Ask for exactly what you need: filters, aggregates, GROUP BY, ORDER BY \
... LIMIT, window functions, CTEs, and JOINs across datasets from different servers (the envelope's \
`joinHints` say which columns match).\n\
Quote identifiers that are not lowercase (\"ID\"). Small results come back inline as typed JSON rows; a \
large result becomes a new dataset with its own envelope.\n\
Only SELECT-style queries over loom datasets run: no files, URLs, DDL, DML or settings.";

const LIST_DESCRIPTION: &str = "List the datasets loom holds: ref, rows, columns, where each came from \
(server, tool, arguments) and when. Use a ref as a table name in loom_query.";

const DESCRIBE_DESCRIPTION: &str = "Describe one dataset in full: every column with its type, source key \
and statistics (null fraction, distinct values, min/max), a 10-row sample, join hints and provenance.";

fn object_schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({"type": "object", "properties": properties, "required": required,
                        "additionalProperties": false});
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

/// The definitions of loom's own tools, listed after every server's tools.
pub fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            QUERY,
            QUERY_DESCRIPTION,
            object_schema(
                json!({"sql": {"type": "string", "description": "One SELECT statement; datasets are tables named by their ref."}}),
                &["sql"],
            ),
        )
        .annotate(read_only()),
        Tool::new(LIST, LIST_DESCRIPTION, object_schema(json!({}), &[])).annotate(read_only()),
        Tool::new(
            DESCRIBE,
            DESCRIBE_DESCRIPTION,
            object_schema(
                json!({"ref": {"type": "string", "description": "A dataset ref, e.g. ds_github_list_issues_1."}}),
                &["ref"],
            ),
        )
        .annotate(read_only()),
    ]
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
            let columns: Vec<&str> = d.profile.iter().take(12).map(|p| p.name.as_str()).collect();
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
fn rows_json(batches: &[RecordBatch]) -> Vec<Value> {
    let mut out = Vec::new();
    for batch in batches {
        let schema = batch.schema();
        for row in 0..batch.num_rows() {
            out.push(Value::Object(
                schema
                    .fields()
                    .iter()
                    .zip(batch.columns())
                    .map(|(f, a)| (f.name().clone(), cell(a, row)))
                    .collect(),
            ));
        }
    }
    out
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
        Err(error) => {
            let help = match &error {
                QueryError::Refused(_) => String::new(),
                _ => format!("\n{}", known_datasets(store)),
            };
            return error_result(format!("loom_query: {error}{help}"));
        }
    };
    let QueryOutput {
        schema,
        batches,
        rows,
    } = output;
    let columns: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| json!({"name": f.name(), "type": type_name(f.data_type())}))
        .collect();
    let inline = json!({"columns": columns, "rowCount": rows, "rows": rows_json(&batches)});
    let text = inline.to_string();
    let tokens = estimate_tokens(&text);
    if tokens <= threshold {
        return json_result(inline);
    }
    // Too large to show: keep it as an implicit dataset and describe it instead.
    let infos = schema
        .fields()
        .iter()
        .map(|f| crate::ingest::ColumnInfo {
            name: f.name().clone(),
            source: f.name().clone(),
            typing: crate::ingest::ColumnType::Text,
        })
        .collect();
    let added = store.add(NewDataset {
        server: "query".into(),
        tool: "result".into(),
        batches,
        schema,
        columns: infos,
        provenance: Provenance {
            server: "loom".into(),
            tool: QUERY.into(),
            args: json!({"sql": crate::store::values::cut(sql, 200)}),
            created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
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
            json!({
                "ref": d.reference,
                "rows": d.rows,
                "columns": d.profile.len(),
                "bytes": d.bytes,
                "server": d.provenance.server,
                "tool": d.provenance.tool,
                "args": d.provenance.args,
                "createdAt": d.provenance.created_at,
                "age": age(d.created),
                "pinned": d.pinned,
                "implicit": d.implicit,
            })
        })
        .collect();
    json_result(json!({"datasets": datasets}))
}

fn describe_dataset(d: &Dataset, held: &[Arc<Dataset>]) -> Value {
    let mut schema = schema_json(d, true, d.profile.len());
    for (entry, info) in schema.iter_mut().zip(&d.columns) {
        if let (Value::Object(entry), true) = (entry, info.source != info.name) {
            entry.insert("source".into(), json!(info.source));
        }
    }
    for (entry, field) in schema.iter_mut().zip(d.schema.fields()) {
        if let (Value::Object(entry), Some(note)) =
            (entry, field.metadata().get(crate::ingest::TYPING_KEY))
        {
            entry.insert("note".into(), json!(note));
        }
    }
    json!({
        "ref": d.reference,
        "rows": d.rows,
        "bytes": d.bytes,
        "schema": schema,
        "sample": sample_json(d, 10, 200),
        // Recomputed against what is live now, not what was live at creation.
        "joinHints": crate::hints::hints_for(d, held),
        "provenance": d.provenance,
        "age": age(d.created),
        "pinned": d.pinned,
        "implicit": d.implicit,
        "usage": envelope::sql::usage(&[d]),
    })
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
