//! The background writer: each dataset's file, then the manifest, retried with backoff.

use std::sync::Arc;

use object_store::path::Path as StorePath;
use object_store::{ObjectStoreExt, PutPayload};
use tokio::sync::mpsc;

use super::*;
use crate::store::Dataset;

/// Writes one session's datasets in the background.
#[derive(Clone)]
pub struct SnapshotWriter {
    pub(super) jobs: mpsc::UnboundedSender<Arc<Dataset>>,
    /// Datasets sent and not yet taken by the writer: while any is, the manifest is incomplete.
    pub(super) queued: Arc<std::sync::atomic::AtomicUsize>,
}

/// How a failed dataset write is tried again: after `first_wait`, then twice as long each time up
/// to `max_wait`, `attempts` times in all before it is listed as missing.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub first_wait: std::time::Duration,
    pub max_wait: std::time::Duration,
    pub attempts: u32,
}

impl Default for RetryPolicy {
    /// 1, 2, 4, … 60 s, eight attempts (about two minutes).
    fn default() -> Self {
        Self {
            first_wait: std::time::Duration::from_secs(1),
            max_wait: std::time::Duration::from_secs(60),
            attempts: 8,
        }
    }
}
/// Datasets waiting for another try, at most: each holds its batches in memory (possibly after
/// the store evicted them), so beyond this the oldest is given up on.
pub(super) const MAX_PENDING: usize = 32;

pub(super) struct Pending {
    pub(super) dataset: Arc<Dataset>,
    pub(super) attempts: u32,
    pub(super) next: tokio::time::Instant,
    pub(super) error: String,
}

/// The writer's state: the manifest as written, what waits for a retry, which kinds of failure
/// have been logged (each kind is a warning once, then only a debug line).
pub(super) struct Writer {
    pub(super) location: Location,
    pub(super) session: Session,
    pub(super) manifest: Manifest,
    pub(super) pending: Vec<Pending>,
    pub(super) logged: std::collections::HashSet<failure::FailureKind>,
    pub(super) retry: RetryPolicy,
    pub(super) queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Writer {
    /// Whether anything of the session is not (yet) in the snapshot: a retry waiting, a dataset
    /// given up on, or one still queued behind the one being written.
    pub(super) fn incomplete(&self) -> bool {
        !self.pending.is_empty()
            || !self.manifest.missing.is_empty()
            || self.queued.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    pub(super) async fn attempt(&mut self, dataset: Arc<Dataset>, attempts: u32) {
        if self.manifest.complete {
            // Said first: a kill during this write leaves a manifest that does not claim to be
            // whole (one small object more per dataset).
            self.manifest.complete = false;
            self.settle_as_is().await;
        }
        let retries_waiting = !self.pending.is_empty();
        let queued = self.queued.clone();
        // Asked again right before the manifest is written: a dataset made during this write
        // is queued behind it.
        let others_waiting =
            move || retries_waiting || queued.load(std::sync::atomic::Ordering::SeqCst) > 0;
        match write_one(
            &self.location,
            &self.session,
            &mut self.manifest,
            &dataset,
            &others_waiting,
        )
        .await
        {
            Ok(()) => {
                if attempts > 0 {
                    tracing::info!(dataset = %dataset.reference, "snapshot written after {attempts} failed attempt(s)");
                }
            }
            Err(WriteError::Encode(error)) => {
                // The same data fails the same way every time: no retry.
                self.give_up(dataset, format!("cannot be written as Parquet: {error}"))
                    .await;
            }
            Err(WriteError::Store(error)) => {
                let (kind, message) = failure::explain(&self.location, "snapshot write to", &error);
                if self.logged.insert(kind) {
                    tracing::warn!(dataset = %dataset.reference, "{message}; the session goes on, the write is retried");
                } else {
                    tracing::debug!(dataset = %dataset.reference, "{message}");
                }
                let attempts = attempts + 1;
                if attempts >= self.retry.attempts {
                    self.give_up(dataset, message).await;
                    return;
                }
                let wait = self
                    .retry
                    .first_wait
                    .saturating_mul(1 << (attempts - 1).min(16))
                    .min(self.retry.max_wait);
                self.pending.push(Pending {
                    dataset,
                    attempts,
                    next: tokio::time::Instant::now() + wait,
                    error: message,
                });
                if self.pending.len() > MAX_PENDING {
                    let oldest = self.pending.remove(0);
                    let why = format!(
                        "{} (more than {MAX_PENDING} writes were waiting)",
                        oldest.error
                    );
                    self.give_up(oldest.dataset, why).await;
                }
            }
        }
    }

    pub(super) async fn give_up(&mut self, dataset: Arc<Dataset>, error: String) {
        tracing::warn!(dataset = %dataset.reference, "snapshot write given up: {error}");
        // Its file may be in place while a catalog or the manifest failed: it is missing, not
        // listed.
        self.manifest
            .datasets
            .retain(|d| d.reference != dataset.reference);
        self.manifest
            .missing
            .retain(|m| m.reference != dataset.reference);
        self.manifest.missing.push(MissingDataset {
            reference: dataset.reference.clone(),
            error,
        });
        self.settle().await;
    }

    /// The manifest again, `complete` as things now stand (a failure here is left for the next
    /// write or retry to fix).
    pub(super) async fn settle(&mut self) {
        self.manifest.complete = !self.incomplete();
        self.settle_as_is().await;
    }

    pub(super) async fn settle_as_is(&mut self) {
        if let Err(error) = put_manifest(&self.location, &self.session, &self.manifest).await {
            let (_, message) = failure::explain(&self.location, "manifest not updated in", &error);
            tracing::debug!("{message}");
        }
    }

    /// The pending dataset due first, once its time has come.
    pub(super) async fn next_due(&mut self) -> Option<Pending> {
        let at = self.pending.iter().map(|p| p.next).min()?;
        tokio::time::sleep_until(at).await;
        let index = self.pending.iter().position(|p| p.next == at)?;
        Some(self.pending.remove(index))
    }
}

impl SnapshotWriter {
    /// Start the writer task for a new session under `location`.
    pub fn start(location: Location) -> (Self, tokio::task::JoinHandle<()>) {
        Self::start_with(location, RetryPolicy::default())
    }

    /// [`start`](Self::start) with another retry policy (tests wait milliseconds, not minutes).
    pub fn start_with(
        location: Location,
        retry: RetryPolicy,
    ) -> (Self, tokio::task::JoinHandle<()>) {
        let (jobs, mut queue) = mpsc::unbounded_channel::<Arc<Dataset>>();
        let queued = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let writer_queued = queued.clone();
        let session = Session::new(session_id());
        tracing::info!(session = %session.id, root = %location.url_base, "session snapshots on");
        let handle = tokio::spawn(async move {
            let manifest = Manifest {
                layout: LAYOUT,
                loom_version: env!("CARGO_PKG_VERSION").into(),
                session: session.id.clone(),
                created_at: crate::common::text::now_rfc3339(),
                datasets: Vec::new(),
                complete: true,
                missing: Vec::new(),
            };
            let mut writer = Writer {
                location,
                session,
                manifest,
                pending: Vec::new(),
                logged: Default::default(),
                retry,
                queued: writer_queued,
            };
            loop {
                tokio::select! {
                    job = queue.recv() => match job {
                        Some(dataset) => {
                            writer.queued.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                            writer.attempt(dataset, 0).await
                        }
                        None => break,
                    },
                    Some(due) = writer.next_due() => writer.attempt(due.dataset, due.attempts).await,
                }
            }
            // Shutting down: one last try for what waits (within the shutdown budget), the rest
            // is listed as missing.
            while let Some(due) = writer.pending.pop() {
                let last = writer.retry.attempts.saturating_sub(1);
                writer.attempt(due.dataset, last).await;
            }
        });
        (Self { jobs, queued }, handle)
    }

    /// Queue a new dataset for writing.
    pub fn dataset_created(&self, dataset: Arc<Dataset>) {
        self.queued
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.jobs.send(dataset).is_err() {
            self.queued
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Why a dataset was not written: its data cannot be Parquet (retrying changes nothing), or the
/// store failed (retried).
pub(super) enum WriteError {
    Encode(String),
    Store(String),
}

/// Writes the dataset's file, then both catalogs, then the manifest (so what the manifest lists is
/// complete). `others_waiting`: other datasets are not written yet (the manifest says it is
/// incomplete).
pub(super) async fn write_one(
    location: &Location,
    session: &Session,
    manifest: &mut Manifest,
    dataset: &Dataset,
    others_waiting: &(dyn Fn() -> bool + Sync),
) -> Result<(), WriteError> {
    let file = dataset_file(dataset);
    let schema = dataset.schema.clone();
    let batches = dataset.batches.clone();
    // A panic in the Parquet writer (it has had some for unusual types) is a failed write.
    let written = tokio::task::spawn_blocking(move || parquet_file(&schema, &batches))
        .await
        .map_err(|e| WriteError::Encode(format!("the Parquet writer failed: {e}")))?
        .map_err(WriteError::Encode)?;
    let store = &location.store;
    store
        .put(
            &file_path(location, session, &file),
            PutPayload::from(written.bytes),
        )
        .await
        .map_err(|e| WriteError::Store(e.to_string()))?;
    manifest
        .datasets
        .retain(|d| d.reference != dataset.reference);
    manifest.datasets.push(ManifestDataset {
        reference: dataset.reference.clone(),
        rows: dataset.rows,
        schema: ManifestColumn::all_of(&dataset.schema),
        provenance: ManifestProvenance::of(&dataset.provenance),
        created_at: dataset.provenance.created_at.clone(),
        pinned: dataset.pinned(),
        file,
        kind: dataset.content.kind().to_string(),
        table: table_for(dataset),
        spark_unreadable: written.spark_unreadable,
    });
    for (name, text) in [
        ("catalog.sql", catalog_sql(location, session, manifest)),
        (
            "catalog.spark.sql",
            catalog_spark_sql(location, session, manifest),
        ),
    ] {
        store
            .put(
                &child(&location.root, &[&session.folder, name]),
                PutPayload::from(text.into_bytes()),
            )
            .await
            .map_err(|e| WriteError::Store(e.to_string()))?;
    }
    // The manifest last: what it lists is complete.
    manifest
        .missing
        .retain(|m| m.reference != dataset.reference);
    manifest.complete = !others_waiting() && manifest.missing.is_empty();
    put_manifest(location, session, manifest)
        .await
        .map_err(WriteError::Store)
}

pub(super) async fn put_manifest(
    location: &Location,
    session: &Session,
    manifest: &Manifest,
) -> Result<(), String> {
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| e.to_string())?;
    location
        .store
        .put(
            &child(&location.root, &[&session.folder, "manifest.json"]),
            PutPayload::from(json),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A file named relative to its session folder (`a/b/c.parquet`).
pub(super) fn file_path(location: &Location, session: &Session, file: &str) -> StorePath {
    let mut path = child(&location.root, &[&session.folder]);
    for part in file.split('/') {
        path = path.join(part);
    }
    path
}
