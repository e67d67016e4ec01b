//! `loom_materialize`: a query's result kept as a pinned view.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::envelope::{self, DatasetView};
use crate::store::{NewDataset, Provenance, Store, view_ref};

pub(crate) async fn materialize(
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
    let columns = crate::ingest::ColumnInfo::of_schema(&output.schema, false);
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
        passed_through: false,
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
