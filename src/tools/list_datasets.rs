//! `loom_list_datasets`: what the session holds.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};

use super::*;
use crate::store::{Dataset, Store};

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
                "passedThrough": d.passed_through,
            });
            kind_details(d, &mut entry);
            entry
        })
        .collect();
    json_result(json!({"datasets": datasets}))
}

/// What a document or blob adds to its entry: what it holds and how to read it.
pub(super) fn kind_details(d: &Dataset, entry: &mut Value) {
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
