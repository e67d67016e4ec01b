//! `loom_list_datasets`: what the session holds.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::store::{Dataset, Store};

/// Entries one answer shows at most (and by default). A session may hold thousands (a page of
/// 40,000 tables made one answer 22 MB); the answer stays a page, with `nextOffset` for more.
pub(crate) const MAX_PAGE: u64 = 50;

pub(crate) fn list(store: &Store, arguments: &Option<Map<String, Value>>) -> CallToolResult {
    let empty = Map::new();
    let arguments = arguments.as_ref().unwrap_or(&empty);
    if let Some(unknown) = arguments
        .keys()
        .find(|key| !matches!(key.as_str(), "offset" | "limit"))
    {
        return error_result(format!(
            "{LIST}: unknown argument `{unknown}`; it takes `offset` and `limit` (both optional)"
        ));
    }
    let (offset, limit) = match paging(arguments, MAX_PAGE, MAX_PAGE, "") {
        Ok(paged) => paged,
        Err(e) => return error_result(format!("{LIST}: {e}")),
    };
    let all = store.list();
    let total = all.len();
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
    let end = start.saturating_add(limit as usize).min(total);
    let datasets: Vec<Value> = all[start..end]
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
    let mut answer = json!({"datasets": datasets, "total": total});
    if end < total {
        answer["nextOffset"] = json!(end);
    }
    json_result(answer)
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
