//! `loom_query`: one read-only statement; a small answer inline, a large one kept as a dataset.

use std::sync::Arc;

use arrow::array::RecordBatch;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::common::tokens::estimate_tokens;
use crate::envelope::{self, DatasetView};
use crate::store::values::{cell, type_name};
use crate::store::{NewDataset, Provenance, QueryOutput, Store};

/// Rows of a query result as typed JSON objects — or `None` as soon as they would cost more
/// than `budget` tokens (a `SELECT *` over a large dataset is never serialized whole just to be
/// measured).
pub(super) fn rows_within(batches: &[RecordBatch], budget: usize) -> Option<Vec<Value>> {
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

pub(crate) async fn query(
    store: &Arc<Store>,
    threshold: usize,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let sql = match string_arg(arguments, "sql") {
        Ok(sql) => sql,
        Err(e) => return error_result(format!("loom_query: {e}; pass {{\"sql\": \"SELECT …\"}}")),
    };
    // The engine's time is this span's (SPEC §24.1); rows and bytes answered are set on it.
    let span = crate::telemetry::child("loom.query");
    let output = match store.query(sql).await {
        Ok(output) => output,
        Err(error) => return query_error("loom_query", &error, store),
    };
    let answered = answer_query(store, threshold, sql, output);
    if !span.is_none() {
        let bytes = serde_json::to_string(&answered).map_or(0, |text| text.len() as u64);
        crate::telemetry::queried(&span, rows_answered(&answered), bytes);
    }
    answered
}

/// `rowCount` of an inline answer (an envelope's rows are the dataset's).
fn rows_answered(answer: &CallToolResult) -> u64 {
    answer
        .structured_content
        .as_ref()
        .and_then(|content| {
            content
                .get("rowCount")
                .or_else(|| content.get("datasets")?.get(0)?.get("rows"))
        })
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// A query's output as loom_query's answer: inline rows, or an envelope of a kept dataset.
fn answer_query(
    store: &Arc<Store>,
    threshold: usize,
    sql: &str,
    output: QueryOutput,
) -> CallToolResult {
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
    let infos = crate::ingest::ColumnInfo::of_schema(&schema, false);
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
        passed_through: false,
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
