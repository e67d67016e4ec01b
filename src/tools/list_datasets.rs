//! `loom_list_datasets`: what the session holds.

use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

use super::*;
use crate::store::{Dataset, Store};

/// Entries one answer shows at most (and by default). A session may hold thousands (a page of
/// 40,000 tables made one answer 22 MB); the answer stays a page, with `nextOffset` for more.
pub(crate) const MAX_PAGE: u64 = 50;

/// The listing of what this instance holds (no cluster).
#[cfg(test)]
pub(crate) fn list(store: &Store, arguments: &Option<Map<String, Value>>) -> CallToolResult {
    list_with(store, &Ok(Vec::new()), arguments)
}

/// The listing with, after what this instance holds, the scope's datasets the cluster's store
/// holds (SPEC §25): `held: false`, opened on first use; or, when the store could not be read,
/// why (`clusterStore`), the local datasets still listed.
pub(crate) fn list_with(
    store: &Store,
    others: &Result<Vec<crate::cluster::Entry>, String>,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
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
    let stored: &[crate::cluster::Entry] = others.as_deref().unwrap_or_default();
    let total = all.len() + stored.len();
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(total);
    let end = start.saturating_add(limit as usize).min(total);
    let local_end = end.min(all.len());
    let local_start = start.min(local_end);
    let mut datasets: Vec<Value> = all[local_start..local_end]
        .iter()
        .map(|d| {
            let mut entry = json!({
                "ref": d.reference,
                "kind": d.content.kind(),
                "rows": d.rows,
                "columns": d.schema.fields().len(),
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
    let stored_start = start.saturating_sub(all.len()).min(stored.len());
    let stored_end = end.saturating_sub(all.len()).min(stored.len());
    datasets.extend(stored[stored_start..stored_end].iter().map(|e| {
        json!({
            "ref": e.reference,
            "kind": e.kind,
            "rows": e.rows,
            "columns": e.schema.len(),
            "storedBytes": e.file_bytes,
            "server": e.provenance.server,
            "tool": e.provenance.tool,
            "args": e.provenance.args,
            "createdAt": e.created_at,
            "pinned": e.pinned,
            "implicit": e.implicit,
            "held": false,
        })
    }));
    let mut answer = json!({"datasets": datasets, "total": total});
    if let Err(error) = others {
        answer["clusterStore"] =
            json!(format!("only this instance's datasets are listed: {error}"));
    }
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
