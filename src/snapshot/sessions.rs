//! Housekeeping and reading back: the sessions under a root, their usage, deletion, manifests
//! and datasets.

use arrow::array::RecordBatch;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt};

use super::*;

/// The sessions under a root, oldest first.
pub async fn sessions(location: &Location) -> Result<Vec<Session>, String> {
    let listing = location
        .store
        .list_with_delimiter(Some(&location.root))
        .await
        .map_err(|e| failure::explain(location, "cannot list", &e).1)?;
    let mut found: Vec<Session> = listing
        .common_prefixes
        .iter()
        .filter_map(|p| p.filename())
        .filter_map(Session::from_folder)
        .collect();
    found.sort_by(|a, b| a.id.cmp(&b.id).then_with(|| b.folder.cmp(&a.folder)));
    // The same id in both layouts (a copy): the Hive-style folder wins.
    found.dedup_by(|later, kept| later.id == kept.id);
    Ok(found)
}

/// What a session holds in the store.
#[derive(Debug, Clone, Default)]
pub struct Usage {
    pub objects: usize,
    pub bytes: u64,
    /// The newest object's time: when the session last wrote (a running session is never
    /// older than its last write).
    pub newest: Option<chrono::DateTime<chrono::Utc>>,
    pub paths: Vec<StorePath>,
}

/// Every object under a session's folder.
pub async fn usage(location: &Location, session: &Session) -> Result<Usage, String> {
    use futures::TryStreamExt;
    let prefix = child(&location.root, &[&session.folder]);
    let objects: Vec<object_store::ObjectMeta> = location
        .store
        .list(Some(&prefix))
        .try_collect()
        .await
        .map_err(|e| failure::explain(location, "cannot list", &e).1)?;
    Ok(Usage {
        objects: objects.len(),
        bytes: objects.iter().map(|o| o.size).sum(),
        newest: objects.iter().map(|o| o.last_modified).max(),
        paths: objects.into_iter().map(|o| o.location).collect(),
    })
}

/// Deletes a session: its manifest first (so a half-deleted session is never read as one with
/// missing files), then everything else under its folder.
pub async fn delete_session(location: &Location, session: &Session) -> Result<usize, String> {
    use futures::TryStreamExt;
    let found = usage(location, session).await?;
    let manifest = child(&location.root, &[&session.folder, "manifest.json"]);
    let (first, rest): (Vec<StorePath>, Vec<StorePath>) =
        found.paths.into_iter().partition(|p| *p == manifest);
    let mut deleted = 0;
    for batch in [first, rest] {
        let stream = futures::stream::iter(batch.into_iter().map(Ok)).boxed();
        let done: Vec<StorePath> = location
            .store
            .delete_stream(stream)
            .try_collect()
            .await
            .map_err(|e| failure::explain(location, "cannot delete from", &e).1)?;
        deleted += done.len();
    }
    // A directory root keeps the emptied folders (object stores have none): remove them, and
    // anything the store does not list (a staging file left by a kill), so the session is gone.
    if let Some(dir) = location.url_base.strip_prefix("file://") {
        let folder = std::path::Path::new(dir).join(&session.folder);
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot remove {}: {e}", folder.display())),
        }
    }
    Ok(deleted)
}

/// Read a session's manifest.
pub async fn manifest(location: &Location, session: &Session) -> Result<Manifest, String> {
    let path = child(&location.root, &[&session.folder, "manifest.json"]);
    let session = &session.id;
    let bytes = location
        .store
        .get(&path)
        .await
        .map_err(|e| {
            let doing = format!("session `{session}` has no readable manifest.json under");
            failure::explain(location, &doing, &e).1
        })?
        .bytes()
        .await
        .map_err(|e| failure::explain(location, "cannot read a manifest.json under", &e).1)?;
    serde_json::from_slice(&bytes)
        .map_err(|e| format!("manifest.json of `{session}` is not valid: {e}"))
}

/// Read one dataset's Parquet file.
pub async fn dataset_batches(
    location: &Location,
    session: &Session,
    entry: &ManifestDataset,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), String> {
    let path = file_path(location, session, &entry.file);
    let missing = |e: object_store::Error| {
        let doing = format!(
            "cannot read {} of session `{}` under",
            entry.file, session.id
        );
        match failure::explain(location, &doing, &e) {
            (failure::FailureKind::NotFound, _) => format!(
                "session `{}` is partial: its manifest lists {} ({}), which is not in {}",
                session.id, entry.file, entry.reference, location.url_base
            ),
            (_, message) => message,
        }
    };
    let bytes = location
        .store
        .get(&path)
        .await
        .map_err(missing)?
        .bytes()
        .await
        .map_err(missing)?;
    read_parquet(bytes).map_err(|e| format!("{} of session `{}`: {e}", entry.file, session.id))
}
