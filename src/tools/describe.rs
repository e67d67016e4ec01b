//! `loom_describe`: every column, statistics, a sample, join hints and provenance of one dataset.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::envelope::{self, sample_json, schema_json};
use crate::store::{Dataset, Store};

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
                "passedThrough": d.passed_through,
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
