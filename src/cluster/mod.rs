//! Several loom instances behind one URL (SPEC §25): what a client was told about is shared
//! through one object store, so any instance — or a later session of the same credential —
//! answers it.
//!
//! Layout under the store's root (the snapshot layout, partitioned by scope):
//! ```text
//! <root>/cluster.json                                   layout, loom version, a check of the secret
//! <root>/scope=<S>/blocks/<b>                            a session's claim of refs b·1000+1 … b·1000+1000
//! <root>/scope=<S>/server=<s>/tool=<t>/ref=<R>/<R>.parquet   the dataset (LZ4, Arrow schema kept)
//! <root>/scope=<S>/refs/<R>.json                         its entry, written after the file
//! ```
//! `S` is an HMAC of the credential under the cluster secret: a folder name only instances that
//! hold the secret can compute for a credential, and that names no token. A session claims a
//! block of ref numbers when it opens (one conditional create: `PutMode::Create`), so refs are
//! unique within a scope across instances and sessions without a round trip per dataset. Every
//! dataset a session mints (tables, documents, blobs) is written before the answer that names
//! it; another instance opens it on first use.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt as _, PutMode, PutOptions, PutPayload};
use serde::{Deserialize, Serialize};

use crate::snapshot::failure::{FailureKind, explain};
use crate::snapshot::{Location, ManifestColumn, ManifestProvenance, child};
use crate::store::{Dataset, NewDataset, Provenance, Store};

pub mod handoff;

/// The layout this version writes and the newest it reads.
pub const LAYOUT: u32 = 1;

/// Ref numbers one session claims at a time.
pub const BLOCK: u32 = 1000;

/// Blocks a scope may hold (a session claims one): past it, the store is full for the scope.
const MAX_BLOCKS: u32 = 4_000_000;

/// Blocks found taken in a row, from the high-water mark, before a listing finds the end.
const BLOCK_WALK: u32 = 16;

/// Refs a statement may name that loom looks up in the store, at most.
const MAX_LOOKUPS: usize = 16;

/// Datasets held elsewhere opened for one envelope's join hints, at most.
const MAX_JOIN_OPENS: usize = 3;

/// The newest entries of a scope looked at for join hints.
const JOIN_LOOKUP_ENTRIES: usize = 32;

/// How long an envelope waits for datasets held elsewhere to be opened for its join hints.
const JOIN_LOOKUP_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a lookup for join hints may go on after its envelope stopped waiting.
const JOIN_OPEN_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a listing of the scope's newest entries serves join hints.
const JOIN_LISTING_AGE: std::time::Duration = std::time::Duration::from_secs(5);

/// Datasets held elsewhere larger than this (their Parquet file) are not opened for hints.
const MAX_JOIN_OPEN_BYTES: usize = 64 * 1024 * 1024;

/// `cluster.json`: what every instance of the store must agree on.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterFile {
    layout: u32,
    loom_version: String,
    /// HMAC of a fixed text under the secret: an instance with another secret is refused.
    secret_check: String,
}

/// One dataset as the store lists it (`scope=<S>/refs/<R>.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub layout: u32,
    pub loom_version: String,
    #[serde(rename = "ref")]
    pub reference: String,
    pub kind: String,
    pub rows: usize,
    pub schema: Vec<ManifestColumn>,
    pub provenance: ManifestProvenance,
    pub created_at: String,
    pub pinned: bool,
    pub implicit: bool,
    /// Relative to the scope's folder.
    pub file: String,
    /// Bytes of the Parquet file.
    pub file_bytes: usize,
    /// A document's kind (`page`, `json`, `text`): how it is read and cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub document_kind: Option<String>,
}

/// The shared store of a cluster, opened once per process.
pub struct Cluster {
    location: Location,
    secret: Vec<u8>,
    /// Kinds of failure already warned about (later ones are debug lines).
    warned: Mutex<HashSet<FailureKind>>,
    /// This process among the instances ([`handoff`]).
    instance: String,
    /// The key sealed `requestState`s are encrypted with.
    state_key: ring::aead::LessSafeKey,
    /// Instance URLs read from the store.
    urls: handoff::Urls,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("store", &self.location.url_base)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Open the store of `config` and check it was set up with the same secret (the first
    /// instance sets it up). Fails naming `cluster.store` or `cluster.secret`.
    pub async fn open(config: &crate::config::ClusterConfig) -> Result<Arc<Self>, String> {
        let location = crate::snapshot::open(&config.store)
            .map_err(|e| format!("cluster.store: cannot open {}: {e}", config.store))?;
        let cluster = Arc::new(Self::new(location, &config.secret)?);
        cluster.agree().await?;
        Ok(cluster)
    }

    fn new(location: Location, secret: &str) -> Result<Self, String> {
        Ok(Self {
            location,
            secret: secret.as_bytes().to_vec(),
            warned: Mutex::default(),
            instance: handoff::new_instance_id(),
            state_key: handoff::state_key(secret.as_bytes())
                .ok_or("cluster.secret: no AES-256-GCM key could be derived from it")?,
            urls: handoff::Urls::default(),
        })
    }

    /// Where the store is (for messages).
    pub fn url(&self) -> &str {
        &self.location.url_base
    }

    fn secret_check(&self) -> String {
        crate::token::keyed_hex(&self.secret, "loom/cluster-check", b"")
    }

    /// What `loom check` says of the store of `config`: it can be written, read and deleted
    /// from, and, if an instance set it up already, with the same secret. Nothing is left
    /// behind (the first instance that starts sets the store up, not the check).
    pub async fn inspect(config: &crate::config::ClusterConfig) -> Result<String, String> {
        let location = crate::snapshot::open(&config.store)
            .map_err(|e| format!("cluster.store: cannot open {}: {e}", config.store))?;
        let cluster = Self::new(location, &config.secret)?;
        cluster.probe().await?;
        let path = child(&cluster.location.root, &["cluster.json"]);
        match cluster.location.store.get(&path).await {
            Err(object_store::Error::NotFound { .. }) => Ok(format!(
                "{}: writable; not set up yet (the first instance that starts sets it up)",
                cluster.url()
            )),
            Err(error) => Err(cluster.failed("cannot read", &error)),
            Ok(_) => {
                cluster.agree().await?;
                Ok(format!(
                    "{}: writable; set up with this secret",
                    cluster.url()
                ))
            }
        }
    }

    /// `cluster.json`: written by the first instance (create only), compared by the others.
    async fn agree(&self) -> Result<(), String> {
        let path = child(&self.location.root, &["cluster.json"]);
        let mine = ClusterFile {
            layout: LAYOUT,
            loom_version: env!("CARGO_PKG_VERSION").to_string(),
            secret_check: self.secret_check(),
        };
        let body = serde_json::to_vec_pretty(&mine).map_err(|e| e.to_string())?;
        let created = self
            .location
            .store
            .put_opts(
                &path,
                PutPayload::from(body),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match created {
            Ok(_) => return Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {}
            Err(error) => return Err(self.failed("cannot write", &error)),
        }
        let theirs = self
            .location
            .store
            .get(&path)
            .await
            .map_err(|e| self.failed("cannot read", &e))?
            .bytes()
            .await
            .map_err(|e| self.failed("cannot read", &e))?;
        let theirs: ClusterFile = serde_json::from_slice(&theirs).map_err(|e| {
            format!(
                "cluster.store: {}/cluster.json is not a loom cluster file ({e}); point \
                 cluster.store at a folder of its own",
                self.url()
            )
        })?;
        if theirs.layout > LAYOUT {
            return Err(format!(
                "cluster.store: {} was set up by loom {} (layout {}); this loom ({}) reads \
                 layout {LAYOUT}: upgrade it",
                self.url(),
                theirs.loom_version,
                theirs.layout,
                env!("CARGO_PKG_VERSION")
            ));
        }
        if theirs.secret_check != mine.secret_check {
            return Err(format!(
                "cluster.secret differs from the one the store {} was set up with (by loom {}): \
                 every instance needs the same secret",
                self.url(),
                theirs.loom_version
            ));
        }
        Ok(())
    }

    /// Write, read back and delete a probe object (`loom check`).
    pub async fn probe(&self) -> Result<(), String> {
        let name = format!(
            "probe-{}",
            crate::token::random_hex().unwrap_or_else(|| std::process::id().to_string())
        );
        let path = child(&self.location.root, &["probes", &name]);
        let store = &self.location.store;
        store
            .put(&path, PutPayload::from_static(b"loom"))
            .await
            .map_err(|e| self.failed("cannot write", &e))?;
        store
            .get(&path)
            .await
            .map_err(|e| self.failed("cannot read", &e))?;
        store
            .delete(&path)
            .await
            .map_err(|e| self.failed("cannot delete from", &e))?;
        Ok(())
    }

    fn failed(&self, doing: &str, error: &dyn std::fmt::Display) -> String {
        let (_, message) = explain(&self.location, doing, error);
        format!("cluster.store: {message}")
    }

    /// A failure worth a warning the first time per kind, then a debug line.
    fn report(&self, doing: &str, error: &dyn std::fmt::Display) -> String {
        let (kind, message) = explain(&self.location, doing, error);
        let first = self
            .warned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(kind);
        if first {
            tracing::warn!("cluster store: {message}");
        } else {
            tracing::debug!("cluster store: {message}");
        }
        format!("cluster.store: {message}")
    }

    /// The folder of `credential`'s scope.
    pub fn scope(&self, credential: &str) -> String {
        let digest =
            crate::token::keyed_hex(&self.secret, "loom/cluster-scope", credential.as_bytes());
        format!("scope={}", &digest[..32])
    }

    fn path(&self, scope: &str, parts: &[&str]) -> StorePath {
        let mut all = vec![scope];
        all.extend_from_slice(parts);
        child(&self.location.root, &all)
    }

    /// Claim the next free block of ref numbers of `scope` (its number `b`: refs
    /// `b·BLOCK+1 …`): from the scope's high-water mark (`blocks/high`, the last block claimed
    /// as far as anyone wrote), one conditional create after another until one succeeds; a
    /// listing only when the mark is missing or far behind. A session start costs a few requests
    /// however many sessions the scope had.
    pub async fn claim_block(&self, scope: &str) -> Result<u32, String> {
        let high = self.path(scope, &["blocks", "high"]);
        let mut next = match self.read(&high).await? {
            Some(bytes) => std::str::from_utf8(&bytes)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok())
                .map_or(0, |b| b.saturating_add(1)),
            None => 0,
        };
        let mut taken_in_a_row = 0;
        loop {
            if next >= MAX_BLOCKS {
                return Err(format!(
                    "the scope's {MAX_BLOCKS} blocks of refs are all claimed in {}",
                    self.url()
                ));
            }
            let path = self.path(scope, &["blocks", &next.to_string()]);
            if self.create(&path).await? {
                // Another session may write a lower mark at the same moment: the next claim
                // then walks a few blocks further, nothing worse.
                let _ = self
                    .location
                    .store
                    .put(&high, PutPayload::from(next.to_string().into_bytes()))
                    .await;
                return Ok(next);
            }
            taken_in_a_row += 1;
            next += 1;
            if taken_in_a_row == BLOCK_WALK {
                next = next.max(self.past_every_block(scope).await?);
            }
        }
    }

    /// The number after every block of `scope` claimed so far (one listing).
    async fn past_every_block(&self, scope: &str) -> Result<u32, String> {
        use futures::StreamExt as _;
        let prefix = self.path(scope, &["blocks"]);
        let mut listing = self.location.store.list(Some(&prefix));
        let mut next = 0u32;
        while let Some(item) = listing.next().await {
            let item = item.map_err(|e| self.report("cannot list", &e))?;
            if let Some(b) = item
                .location
                .filename()
                .and_then(|name| name.parse::<u32>().ok())
            {
                next = next.max(b.saturating_add(1));
            }
        }
        Ok(next)
    }

    /// Claim a chosen ref (a view's name) in `scope`: `false` if it is taken.
    pub async fn claim_name(&self, scope: &str, reference: &str) -> Result<bool, String> {
        self.create(&self.path(scope, &["names", reference])).await
    }

    /// Create the object at `path` (its text: the time), unless it exists: `false` then. What
    /// claims are made of: one conditional create, whoever comes first.
    async fn create(&self, path: &StorePath) -> Result<bool, String> {
        let created = self
            .location
            .store
            .put_opts(
                path,
                PutPayload::from(crate::common::text::now_rfc3339().into_bytes()),
                PutOptions::from(PutMode::Create),
            )
            .await;
        match created {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(error) => Err(self.report("cannot write", &error)),
        }
    }

    /// Write `dataset` to `scope`: its Parquet file, then its entry.
    pub async fn publish(&self, scope: &str, dataset: &Dataset) -> Result<(), String> {
        let file = crate::snapshot::dataset_file(dataset);
        let schema = dataset.schema.clone();
        let batches = dataset.batches.clone();
        let written = tokio::task::spawn_blocking(move || {
            crate::snapshot::parquet_file_fast(&schema, &batches)
        })
        .await
        .map_err(|e| format!("the Parquet writer failed: {e}"))??;
        let file_bytes = written.bytes.len();
        let parts: Vec<&str> = file.split('/').collect();
        self.location
            .store
            .put(&self.path(scope, &parts), PutPayload::from(written.bytes))
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        let entry = Entry {
            layout: LAYOUT,
            loom_version: env!("CARGO_PKG_VERSION").to_string(),
            reference: dataset.reference.clone(),
            kind: dataset.content.kind().to_string(),
            rows: dataset.rows,
            schema: ManifestColumn::all_of(&dataset.schema),
            provenance: ManifestProvenance::of(&dataset.provenance),
            created_at: dataset.provenance.created_at.clone(),
            pinned: dataset.pinned(),
            implicit: dataset.implicit,
            file,
            file_bytes,
            document_kind: match &dataset.content {
                crate::store::document::Content::Document(document) => {
                    Some(document.kind.as_str().to_string())
                }
                _ => None,
            },
        };
        let body = serde_json::to_vec_pretty(&entry).map_err(|e| e.to_string())?;
        self.location
            .store
            .put(
                &self.path(scope, &["refs", &format!("{}.json", dataset.reference)]),
                PutPayload::from(body),
            )
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        Ok(())
    }

    /// Delete `reference` from `scope`: its entry first (so no listing or lookup finds a file
    /// half gone), then its file.
    pub async fn unpublish(&self, scope: &str, reference: &str) -> Result<(), String> {
        let Some(entry) = self.entry(scope, reference).await? else {
            return Ok(());
        };
        let gone = |result: object_store::Result<()>| match result {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(self.report("cannot delete from", &error)),
        };
        gone(
            self.location
                .store
                .delete(&self.path(scope, &["refs", &format!("{reference}.json")]))
                .await,
        )?;
        let parts: Vec<&str> = entry.file.split('/').collect();
        gone(self.location.store.delete(&self.path(scope, &parts)).await)
    }

    /// The bytes of the object at `path`; `None` when there is none.
    async fn read(&self, path: &StorePath) -> Result<Option<bytes::Bytes>, String> {
        match self.location.store.get(path).await {
            Ok(got) => got
                .bytes()
                .await
                .map(Some)
                .map_err(|e| self.report("cannot read", &e)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(error) => Err(self.report("cannot read", &error)),
        }
    }

    /// The entry of `reference` in `scope`, if the store has one.
    pub async fn entry(&self, scope: &str, reference: &str) -> Result<Option<Entry>, String> {
        let path = self.path(scope, &["refs", &format!("{reference}.json")]);
        let Some(bytes) = self.read(&path).await? else {
            return Ok(None);
        };
        let entry: Entry = serde_json::from_slice(&bytes)
            .map_err(|e| format!("the store's entry of `{reference}` does not read: {e}"))?;
        if entry.layout > LAYOUT {
            return Err(format!(
                "`{reference}` was written by loom {} (cluster layout {}); this loom ({}) reads \
                 layout {LAYOUT}: upgrade it",
                entry.loom_version,
                entry.layout,
                env!("CARGO_PKG_VERSION")
            ));
        }
        Ok(Some(entry))
    }

    /// The batches of `entry`, in the types they were written with.
    pub async fn batches(
        &self,
        scope: &str,
        entry: &Entry,
    ) -> Result<(SchemaRef, Vec<RecordBatch>), String> {
        let parts: Vec<&str> = entry.file.split('/').collect();
        let bytes = self
            .location
            .store
            .get(&self.path(scope, &parts))
            .await
            .map_err(|e| self.report("cannot read", &e))?
            .bytes()
            .await
            .map_err(|e| self.report("cannot read", &e))?;
        tokio::task::spawn_blocking(move || crate::snapshot::read_parquet(bytes))
            .await
            .map_err(|e| format!("the Parquet reader failed: {e}"))?
    }

    /// Copy an exported file to `scope=S/exports/NAME`, streamed in parts (an export may be up
    /// to `exportMaxBytes`); unless `overwrite`, a name the store has already is refused (checked
    /// before the copy: two instances exporting one name at the same moment may both succeed,
    /// the later copy kept). The object's URL.
    pub async fn store_export(
        &self,
        scope: &str,
        file: &std::path::Path,
        overwrite: bool,
    ) -> Result<String, String> {
        use tokio::io::AsyncWriteExt as _;
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("the export {} has no file name", file.display()))?;
        let path = self.path(scope, &["exports", name]);
        if !overwrite {
            match self.location.store.head(&path).await {
                Ok(_) => {
                    return Err(format!(
                        "an export named `{name}` is in the cluster store already (made on another \
                         instance or in an earlier session); pass \"overwrite\": true to replace it"
                    ));
                }
                Err(object_store::Error::NotFound { .. }) => {}
                Err(error) => return Err(self.report("cannot read", &error)),
            }
        }
        let mut source = tokio::fs::File::open(file)
            .await
            .map_err(|e| format!("cannot read the export {}: {e}", file.display()))?;
        let mut writer =
            object_store::buffered::BufWriter::new(self.location.store.clone(), path.clone());
        if let Err(error) = tokio::io::copy(&mut source, &mut writer).await {
            let _ = writer.abort().await;
            return Err(self.report("cannot write", &error));
        }
        writer
            .shutdown()
            .await
            .map_err(|e| self.report("cannot write", &e))?;
        Ok(format!(
            "{}/{}",
            self.location.url_base.trim_end_matches('/'),
            path.as_ref()
                .strip_prefix(self.location.root.as_ref())
                .unwrap_or(path.as_ref())
                .trim_start_matches('/')
        ))
    }

    /// The `limit` newest entries of `scope` (by when their entry was written), newest first;
    /// entries in `known` are not read again (an entry never changes once written).
    pub async fn recent_entries(
        &self,
        scope: &str,
        limit: usize,
        known: &std::collections::HashMap<String, Entry>,
    ) -> Result<Vec<Entry>, String> {
        use futures::StreamExt as _;
        let prefix = self.path(scope, &["refs"]);
        let mut listing = self.location.store.list(Some(&prefix));
        let mut found = Vec::new();
        while let Some(item) = listing.next().await {
            let item = item.map_err(|e| self.report("cannot list", &e))?;
            found.push((item.last_modified, item.location));
        }
        found.sort_by_key(|(written, _)| std::cmp::Reverse(*written));
        found.truncate(limit);
        // Read at once, 8 at a time (those already known are not read again), kept newest first.
        let read: Vec<Option<Entry>> = futures::stream::iter(found)
            .map(|(_, path)| async move {
                let reference = path
                    .filename()
                    .and_then(|name| name.strip_suffix(".json"))
                    .unwrap_or_default()
                    .to_string();
                if let Some(entry) = known.get(&reference) {
                    return Ok(Some(entry.clone()));
                }
                Ok::<_, String>(
                    self.read(&path)
                        .await?
                        .and_then(|bytes| serde_json::from_slice::<Entry>(&bytes).ok()),
                )
            })
            .buffered(8)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        Ok(read.into_iter().flatten().collect())
    }

    /// Every entry of `scope`, oldest first (an entry that does not read is left out).
    pub async fn entries(&self, scope: &str) -> Result<Vec<Entry>, String> {
        use futures::StreamExt as _;
        let prefix = self.path(scope, &["refs"]);
        let mut listing = self.location.store.list(Some(&prefix));
        let mut paths = Vec::new();
        while let Some(item) = listing.next().await {
            let item = item.map_err(|e| self.report("cannot list", &e))?;
            paths.push(item.location);
        }
        let store = self.location.store.clone();
        let mut entries: Vec<Entry> = futures::stream::iter(paths)
            .map(|path| {
                let store = store.clone();
                async move {
                    let bytes = store.get(&path).await.ok()?.bytes().await.ok()?;
                    serde_json::from_slice::<Entry>(&bytes).ok()
                }
            })
            .buffer_unordered(16)
            .filter_map(|entry| async move { entry })
            .collect()
            .await;
        entries.sort_by(|a, b| (&a.created_at, &a.reference).cmp(&(&b.created_at, &b.reference)));
        Ok(entries)
    }
}

/// A dataset's write to the store: its number (in the order writes started), whether it ended,
/// and the write to wait for.
type Write = (u64, Arc<AtomicBool>, Shared<BoxFuture<'static, ()>>);

/// One session's part in a cluster: its scope, its block, and the writes of its datasets that
/// an answer may have to wait for.
pub struct Membership {
    cluster: Arc<Cluster>,
    /// The scope's folder.
    scope: String,
    /// Writes started and not yet awaited by an answer.
    pending: Mutex<Vec<Write>>,
    /// Numbers the writes ([`Self::mark`]).
    writes_started: std::sync::atomic::AtomicU64,
    /// Refs opened from the store: not written again.
    opened: Mutex<HashSet<String>>,
    /// Whether this session's datasets go to the store: not when no block of refs could be
    /// claimed (the store was unreachable when the session began).
    publishing: bool,
    /// Chosen names this session claimed (a view whose query failed may be made again).
    claimed: Mutex<HashSet<String>>,
    /// The scope's newest entries as last listed for join hints, and when.
    recent: Mutex<Option<(std::time::Instant, Vec<Entry>)>>,
    /// A lookup for join hints is under way.
    joining: AtomicBool,
    runtime: tokio::runtime::Handle,
}

impl Membership {
    /// A session of `credential` in `cluster`, its refs numbered within a block it claims.
    pub async fn join(cluster: Arc<Cluster>, credential: &str, store: &Store) -> Arc<Self> {
        let scope = cluster.scope(credential);
        let publishing = claim_or_detach(&cluster, &scope, store).await;
        Arc::new(Self {
            cluster,
            scope,
            publishing,
            pending: Mutex::default(),
            writes_started: std::sync::atomic::AtomicU64::new(0),
            opened: Mutex::default(),
            claimed: Mutex::default(),
            recent: Mutex::default(),
            joining: AtomicBool::new(false),
            runtime: tokio::runtime::Handle::current(),
        })
    }

    /// The store's listener: start writing `dataset` (a table, a document or a blob). An answer
    /// naming it waits in [`Self::settled`].
    pub fn dataset_created(self: &Arc<Self>, dataset: Arc<Dataset>) {
        if !self.publishing {
            return;
        }
        if self
            .opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&dataset.reference)
        {
            return;
        }
        let cluster = self.cluster.clone();
        let scope = self.scope.clone();
        // A numbered ref that reads like a view's (`ds_view_…` from a server named `view`) takes
        // the name's claim too, so a view of another session never lands on the same ref.
        let unclaimed = dataset.reference.starts_with("ds_view_")
            && !self
                .claimed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .contains(&dataset.reference);
        self.start(async move {
            let claimed = match unclaimed {
                false => Ok(true),
                true => cluster.claim_name(&scope, &dataset.reference).await,
            };
            let written = match claimed {
                Ok(true) => cluster.publish(&scope, &dataset).await,
                Ok(false) => Err("another session of the scope holds that name".to_string()),
                Err(error) => Err(error),
            };
            if let Err(error) = written {
                tracing::debug!(dataset = %dataset.reference, "not in the cluster store: {error}");
            }
        });
    }

    /// The store's removal listener: `reference` was taken back before an answer named it (an
    /// intercept undone: its envelope was not smaller). Once the writes started so far are
    /// done, what was written of it is deleted; an answer waits for that too.
    pub fn dataset_removed(self: &Arc<Self>, reference: &str) {
        if !self.publishing {
            return;
        }
        let earlier = self.waiting(0);
        let cluster = self.cluster.clone();
        let scope = self.scope.clone();
        let reference = reference.to_string();
        self.start(async move {
            futures::future::join_all(earlier).await;
            if let Err(error) = cluster.unpublish(&scope, &reference).await {
                tracing::debug!(dataset = %reference, "left in the cluster store: {error}");
            }
        });
    }

    /// Run `work` (a write to the store) on the session's runtime, for [`Self::settled`] to
    /// wait for. Writes that ended leave the list here, whether or not an answer waited.
    fn start(&self, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let number = self.writes_started.fetch_add(1, Ordering::AcqRel);
        let done = Arc::new(AtomicBool::new(false));
        let finished = done.clone();
        let running = self.runtime.spawn(async move {
            work.await;
            finished.store(true, Ordering::Release);
        });
        let running: BoxFuture<'static, ()> = Box::pin(running.map(|_| ()));
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|(_, done, _)| !done.load(Ordering::Acquire));
        pending.push((number, done, running.shared()));
    }

    /// The writes started since `mark` (all: 0) and not known to have ended.
    fn waiting(&self, mark: u64) -> Vec<Shared<BoxFuture<'static, ()>>> {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|(number, _, _)| *number >= mark)
            .map(|(_, _, write)| write.clone())
            .collect()
    }

    /// Where the writes stand now: [`Self::settled_since`] of it waits only for writes started
    /// later (those of what a call minted), not for other calls' uploads still under way.
    pub fn mark(&self) -> u64 {
        self.writes_started.load(Ordering::Acquire)
    }

    /// Wait until every dataset minted since `mark` is in the store (or failed to get there).
    pub async fn settled_since(&self, mark: u64) {
        futures::future::join_all(self.waiting(mark)).await;
    }

    /// The cluster the session is part of.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// The scope's folder (`scope=S`).
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// A sealed `requestState` of this session's scope for a call `call` (SPEC §25).
    pub fn seal_state(&self, call: &str, lifetime: std::time::Duration) -> Option<String> {
        self.cluster.seal_state(&self.scope, call, lifetime)
    }

    /// Take up the sealed state `state` here: `Ok(false)` if an instance took it up before.
    pub async fn claim_state(&self, state: &handoff::SealedState) -> Result<bool, String> {
        self.cluster.claim_state(&self.scope, &state.key).await
    }

    /// Record that task `task` lives on this instance, before the answer that names it.
    pub async fn record_task(&self, task: &str) {
        if let Err(error) = self.cluster.record_task(&self.scope, task).await {
            tracing::debug!(
                task,
                "the task's instance is not in the cluster store: {error}"
            );
        }
    }

    /// Wait until every dataset minted so far is in the store (or failed to get there).
    pub async fn settled(&self) {
        self.settled_since(0).await;
    }

    /// Claim a view's chosen name in the scope: an error if another instance or session has it.
    pub async fn claim_name(&self, reference: &str) -> Result<(), String> {
        // A session that keeps its datasets to itself shares no names either.
        if !self.publishing {
            return Ok(());
        }
        let mut mine = self
            .claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(reference);
        if !mine {
            mine = self
                .cluster
                .claim_name(&self.scope.clone(), reference)
                .await?;
        }
        match mine {
            true => {
                self.claimed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(reference.to_string());
                Ok(())
            }
            false => Err(format!(
                "a dataset named `{reference}` already exists in this credential's datasets \
                 (made by another loom instance or an earlier session)"
            )),
        }
    }

    /// Open into `store` the refs `sql` names that it does not hold and the scope's store has
    /// (a ref another instance or an earlier session minted, or one evicted here). Lookups are
    /// bounded; a ref the store does not have is left to the engine's own "not found".
    pub async fn open_named(&self, store: &Arc<Store>, sql: &str) -> Result<(), String> {
        let held: HashSet<String> = store.references().into_iter().collect();
        let wanted: Vec<String> = ref_words(sql)
            .into_iter()
            .filter(|r| !held.contains(r))
            .take(MAX_LOOKUPS)
            .collect();
        for reference in wanted {
            self.open(store, &reference).await?;
        }
        Ok(())
    }

    /// Open `reference` into `store` if the scope's store has it and `store` does not hold it.
    /// `Ok(false)`: the store has no such ref. Profiling what was read (its envelope's
    /// statistics) runs on the engine's threads, like loom's own tools.
    pub async fn open(&self, store: &Arc<Store>, reference: &str) -> Result<bool, String> {
        if store.get(reference).is_some() {
            return Ok(true);
        }
        let scope = self.scope.clone();
        let cannot =
            |error: String| format!("cannot open `{reference}` from the cluster store: {error}");
        let Some(entry) = self
            .cluster
            .entry(&scope, reference)
            .await
            .map_err(cannot)?
        else {
            return Ok(false);
        };
        // A store whose names fold case (a directory on macOS) may answer another spelling.
        if entry.reference != reference {
            return Ok(false);
        }
        let (schema, batches) = self
            .cluster
            .batches(&scope, &entry)
            .await
            .map_err(|e| cannot(format!("{} ({e})", entry.file)))?;
        self.opened
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(reference.to_string());
        let ManifestProvenance {
            server,
            tool,
            args,
            source,
        } = entry.provenance;
        let new = NewDataset {
            server: server.clone(),
            tool: tool.clone(),
            batches,
            schema,
            columns: Vec::new(),
            provenance: Provenance {
                server,
                tool,
                args,
                created_at: entry.created_at,
                source,
            },
            pinned: false,
            implicit: entry.implicit,
            passed_through: false,
            name: Some(reference.to_string()),
        };
        let holder = store.clone();
        let kind = entry.kind;
        let document_kind = entry.document_kind;
        let added = store
            .on_engine(async move {
                match kind.as_str() {
                    "document" => restore_document(&holder, new, document_kind.as_deref()),
                    "blob" => restore_blob(&holder, new),
                    _ => holder.add_unprofiled(new).map(|_| ()),
                }
            })
            .await
            .and_then(|done| {
                done.unwrap_or_else(|| Err("opening it took longer than queryTimeoutMs".into()))
            });
        match added {
            Ok(()) => Ok(true),
            // Opened meanwhile by a concurrent call of the session: held, which is what counts.
            Err(_) if store.get(reference).is_some() => Ok(true),
            Err(error) => Err(format!(
                "cannot open `{reference}` from the cluster store: {error}"
            )),
        }
    }

    /// The store's hook for join hints (SPEC §25): before a new envelope's hints are chosen,
    /// datasets of the scope held by no one here whose columns' names may join a new column
    /// are opened (the newest first, at most [`MAX_JOIN_OPENS`], within [`JOIN_LOOKUP_WAIT`]).
    pub fn join_source(self: &Arc<Self>) -> crate::store::JoinSource {
        let member = Arc::downgrade(self);
        Box::new(move |store, new| {
            let Some(member) = member.upgrade() else {
                return;
            };
            let columns: Vec<(String, String)> = new
                .iter()
                .flat_map(|d| {
                    d.schema
                        .fields()
                        .iter()
                        .map(|f| (f.name().clone(), d.provenance.tool.clone()))
                        .collect::<Vec<_>>()
                })
                .collect();
            let minted: HashSet<String> = new.iter().map(|d| d.reference.clone()).collect();
            // One lookup of a session at a time: envelopes that come together share it.
            if member.joining.swap(true, Ordering::AcqRel) {
                return;
            }
            let store = store.clone();
            let (done, finished) = std::sync::mpsc::sync_channel(1);
            let runtime = member.runtime.clone();
            // Run on the session's runtime (the caller is a blocking thread): waited for a
            // bounded time; past it, the hints are chosen from what is held, and the opening
            // goes on within its own bound.
            runtime.spawn(async move {
                let work = member.open_joinable(&store, &columns, &minted);
                let _ = tokio::time::timeout(JOIN_OPEN_LIMIT, work).await;
                member.joining.store(false, Ordering::Release);
                let _ = done.send(());
            });
            let _ = finished.recv_timeout(JOIN_LOOKUP_WAIT);
        })
    }

    async fn open_joinable(
        &self,
        store: &Arc<Store>,
        columns: &[(String, String)],
        minted: &HashSet<String>,
    ) {
        if columns.is_empty() {
            return;
        }
        let Some(entries) = self.recent_entries().await else {
            return;
        };
        let held: HashSet<String> = store.references().into_iter().collect();
        let mut opened = 0;
        for entry in entries {
            if opened >= MAX_JOIN_OPENS {
                break;
            }
            if entry.kind != "dataset"
                || entry.file_bytes > MAX_JOIN_OPEN_BYTES
                || held.contains(&entry.reference)
                || minted.contains(&entry.reference)
            {
                continue;
            }
            let joins = entry.schema.iter().any(|theirs| {
                columns.iter().any(|(mine, tool)| {
                    crate::hints::name_affinity(mine, &theirs.name, &entry.provenance.tool) > 0.0
                        || crate::hints::name_affinity(&theirs.name, mine, tool) > 0.0
                })
            });
            if joins && self.open(store, &entry.reference).await.is_ok() {
                opened += 1;
            }
        }
    }

    /// The scope's newest entries, listed at most every [`JOIN_LISTING_AGE`] (an entry never
    /// changes once written: each is read once per session). `None` when the store fails.
    async fn recent_entries(&self) -> Option<Vec<Entry>> {
        let listed = self
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some((at, entries)) = listed
            && at.elapsed() < JOIN_LISTING_AGE
        {
            return Some(entries);
        }
        let known: std::collections::HashMap<String, Entry> = self
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|(_, entries)| {
                entries
                    .iter()
                    .map(|e| (e.reference.clone(), e.clone()))
                    .collect()
            })
            .unwrap_or_default();
        match self
            .cluster
            .recent_entries(&self.scope, JOIN_LOOKUP_ENTRIES, &known)
            .await
        {
            Ok(entries) => {
                *self.recent.lock().unwrap_or_else(PoisonError::into_inner) =
                    Some((std::time::Instant::now(), entries.clone()));
                Some(entries)
            }
            Err(error) => {
                tracing::debug!("join hints name only held datasets: {error}");
                None
            }
        }
    }

    /// Copy an export of this session to the scope's `exports/` in the store.
    pub async fn store_export(
        &self,
        file: &std::path::Path,
        overwrite: bool,
    ) -> Result<String, String> {
        self.cluster
            .store_export(&self.scope, file, overwrite)
            .await
    }

    /// The scope's datasets in the store that `store` does not hold.
    pub async fn others(&self, store: &Store) -> Result<Vec<Entry>, String> {
        let held: HashSet<String> = store.references().into_iter().collect();
        Ok(self
            .cluster
            .entries(&self.scope.clone())
            .await?
            .into_iter()
            .filter(|e| !held.contains(&e.reference))
            .collect())
    }
}

/// A document as its table holds it, one row per line: the original is its lines joined by
/// `\n` (which belongs to no line), byte for byte.
fn restore_document(store: &Store, new: NewDataset, kind: Option<&str>) -> Result<(), String> {
    use arrow::array::{Array as _, AsArray as _};
    let kind = kind
        .and_then(crate::store::document::DocumentKind::parse)
        .unwrap_or(crate::store::document::DocumentKind::Text);
    let mut text = String::new();
    let mut first = true;
    for batch in &new.batches {
        let column = batch
            .column_by_name("text")
            .ok_or("the document's table has no `text` column")?;
        let lines = arrow::compute::cast(column, &arrow::datatypes::DataType::Utf8)
            .map_err(|e| format!("the document's lines do not read: {e}"))?;
        let lines = lines.as_string::<i32>();
        for i in 0..lines.len() {
            if !first {
                text.push('\n');
            }
            first = false;
            text.push_str(lines.value(i));
        }
    }
    let reference = new.name.clone();
    store
        .add_document_as(kind, text, new.provenance, reference)
        .map(|_| ())
}

/// A blob as its table holds it: one row of `(mime, bytes, data)`.
fn restore_blob(store: &Store, new: NewDataset) -> Result<(), String> {
    use arrow::array::AsArray as _;
    let batch = new
        .batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .ok_or("the blob's table has no row")?;
    let mime = batch
        .column_by_name("mime")
        .and_then(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::Utf8).ok())
        .ok_or("the blob's table has no `mime` column")?;
    let data = batch
        .column_by_name("data")
        .and_then(|c| arrow::compute::cast(c, &arrow::datatypes::DataType::Binary).ok())
        .ok_or("the blob's table has no `data` column")?;
    let mime = mime.as_string::<i32>().value(0).to_string();
    let data = data.as_binary::<i32>().value(0).to_vec();
    let reference = new.name.clone();
    store
        .add_blob_as(&mime, data, new.provenance, reference)
        .map(|_| ())
}

/// Claim a block of ref numbers of `scope` for `store`'s session; `false` when the store could
/// not be written: the session then numbers its refs in a block of its own past every block a
/// store can hand out (so none shadows a ref of the store), and keeps its datasets to itself.
/// A session is never refused for the store: local datasets keep working (SPEC §25).
async fn claim_or_detach(cluster: &Cluster, scope: &str, store: &Store) -> bool {
    match cluster.claim_block(scope).await {
        Ok(block) => {
            store.number_within(block.saturating_mul(BLOCK), BLOCK);
            true
        }
        Err(error) => {
            tracing::warn!("{error}; this session's datasets stay on this instance");
            let spare = u32::MAX / BLOCK - MAX_BLOCKS;
            let pick = crate::token::random_hex()
                .and_then(|hex| u32::from_str_radix(&hex[..8.min(hex.len())], 16).ok())
                .unwrap_or_else(std::process::id);
            store.number_within((MAX_BLOCKS + pick % spare) * BLOCK, BLOCK);
            false
        }
    }
}

/// Before one of loom's own tools runs in a cluster: open what it names that this instance does
/// not hold (and, for a view, claim its name); for `loom_list_datasets`, the scope's datasets
/// held elsewhere (or why the store could not say).
pub async fn prepare(
    member: &Membership,
    store: &Arc<Store>,
    tool: &str,
    arguments: &Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<Result<Vec<Entry>, String>, String> {
    use crate::common::tools::{DESCRIBE, EXPORT, LIST, MATERIALIZE, QUERY, READ};
    let text = |key: &str| {
        arguments
            .as_ref()
            .and_then(|a| a.get(key))
            .and_then(serde_json::Value::as_str)
    };
    match tool {
        LIST => return Ok(member.others(store).await),
        QUERY => {
            if let Some(sql) = text("sql") {
                member.open_named(store, sql).await?;
            }
        }
        MATERIALIZE => {
            if let Some(sql) = text("sql") {
                member.open_named(store, sql).await?;
            }
            if let Some(Ok(reference)) = text("name").map(crate::store::view_ref)
                && store.get(&reference).is_none()
            {
                member.claim_name(&reference).await?;
            }
        }
        DESCRIBE | EXPORT | READ => {
            if let Some(reference) = text("ref") {
                member.open(store, reference).await?;
            }
        }
        _ => {}
    }
    Ok(Ok(Vec::new()))
}

/// Words of `sql` outside string literals and comments that have the shape of a ref — `ds_…_N`,
/// `ds_view_…`, `doc_N`, `blob_N` (so columns such as `doc_id` are not looked up) — each once,
/// in order; double-quoted names included. A statement longer than the engine takes names
/// nothing (the engine refuses it); at most [`MAX_WORDS`] are returned.
pub fn ref_words(sql: &str) -> Vec<String> {
    if sql.len() > crate::store::guard::MAX_SQL_BYTES {
        return Vec::new();
    }
    let text = crate::snapshot::catalog::without_literals(sql);
    let mut seen = HashSet::new();
    let mut words = Vec::new();
    for word in text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        let word = word.to_ascii_lowercase();
        if has_ref_shape(&word) && seen.insert(word.clone()) {
            words.push(word);
            if words.len() == MAX_WORDS {
                break;
            }
        }
    }
    words
}

/// Words of one statement looked at, at most: the held ones are dropped after, then
/// [`MAX_LOOKUPS`] of the rest are looked up.
const MAX_WORDS: usize = 256;

fn has_ref_shape(word: &str) -> bool {
    let numbered = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = word.strip_prefix("doc_") {
        return numbered(rest);
    }
    if let Some(rest) = word.strip_prefix("blob_") {
        return numbered(rest);
    }
    if let Some(rest) = word.strip_prefix("ds_view_") {
        return !rest.is_empty();
    }
    word.strip_prefix("ds_")
        .and_then(|rest| rest.rsplit_once('_'))
        .is_some_and(|(base, number)| !base.is_empty() && numbered(number))
}

#[cfg(test)]
mod tests;
