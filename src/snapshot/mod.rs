//! Session snapshots: every dataset of a session written to Parquet as it is created, so the
//! analysis can be re-opened and re-queried after the conversation (`loom query`), by loom or by
//! any DataFusion-based engine.
//!
//! Layout under the snapshot root, one folder per session, Hive-style (`key=value` folders) so
//! engines that read partitioned Parquet see `session_id`, `server`, `tool` and `ref` as columns:
//! ```text
//! <root>/session_id=<id>/manifest.json      loom version, session id, created, datasets (written last)
//! <root>/session_id=<id>/catalog.sql        CREATE EXTERNAL TABLE … STORED AS PARQUET LOCATION …
//! <root>/session_id=<id>/catalog.spark.sql  CREATE TABLE … USING parquet LOCATION …
//! <root>/session_id=<id>/server=<s>/tool=<t>/ref=<ref>/<ref>.parquet   zstd, Arrow schema kept
//! ```
//! Sessions written before the Hive layout (`<root>/<id>/datasets/<ref>.parquet`, manifest
//! without `layout`) are still read: a manifest names each file relative to its session folder.
//! Writes happen on a background task (the envelope never waits for Parquet). Each object is
//! written whole (object_store's `put` is atomic: a temporary file renamed on local disks), and
//! the manifest is updated only after a dataset's file is in place, so a crash leaves a snapshot
//! that opens with everything it announces. A failure to write is a warning, never a failed call.

use std::sync::Arc;

use arrow::array::RecordBatch;
use bytes::Bytes;
use futures::StreamExt as _;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::store::{Dataset, Provenance};

pub mod catalog;
pub mod failure;
pub mod portable;

/// One dataset as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestDataset {
    #[serde(rename = "ref")]
    pub reference: String,
    pub rows: usize,
    /// The Arrow schema, as arrow's JSON-ish display (the Parquet file carries the real one).
    pub schema: Vec<ManifestColumn>,
    pub provenance: ManifestProvenance,
    pub created_at: String,
    pub pinned: bool,
    pub file: String,
    /// `dataset`, `document` (a reduced result's original, one row per line) or `blob`;
    /// manifests written before documents existed hold datasets only.
    #[serde(default = "dataset_kind")]
    pub kind: String,
    /// The ref without its sequence number (`ds_crm_rows` for `ds_crm_rows_2`): what the datasets
    /// of one tool share across sessions. Empty in manifests before layout 2.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub table: String,
    /// Why Spark cannot read some of its columns (`catalog.spark.sql` leaves such a table out).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub spark_unreadable: Vec<String>,
}

fn first_layout() -> u32 {
    1
}

/// The layout this version writes.
pub const LAYOUT: u32 = 2;

/// The folder of a session in the Hive-style layout is `session_id=<id>`.
pub const SESSION_FOLDER_PREFIX: &str = "session_id=";

fn dataset_kind() -> String {
    "dataset".to_string()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestColumn {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
}

/// Provenance as stored: arguments were redacted before they were ever held (SPEC §13).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestProvenance {
    pub server: String,
    pub tool: String,
    pub args: serde_json::Value,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// 2 for the Hive-style layout; absent (1) before it.
    #[serde(default = "first_layout")]
    pub layout: u32,
    pub loom_version: String,
    pub session: String,
    pub created_at: String,
    pub datasets: Vec<ManifestDataset>,
    /// False while some dataset of the session is not (yet) written; manifests before this field
    /// hold no such information and read as complete.
    #[serde(default = "complete_by_default")]
    pub complete: bool,
    /// Datasets the writer gave up on, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingDataset>,
}

fn complete_by_default() -> bool {
    true
}

/// A dataset of the session that is not in the snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissingDataset {
    #[serde(rename = "ref")]
    pub reference: String,
    pub error: String,
}

/// Where snapshots go: an object store and a root prefix inside it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    pub root: StorePath,
    /// How `catalog.sql` names files: `file:///abs/dir`, `s3://bucket/prefix`, `memory:///`.
    pub url_base: String,
    /// An S3-compatible endpoint other than AWS, for messages.
    pub endpoint: Option<String>,
}

/// Only the root: the store's own Debug would show configuration (an access key id among it).
impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Location")
            .field("url_base", &self.url_base)
            .finish_non_exhaustive()
    }
}

/// Open a snapshot root: a directory path (created if missing), `file://`, `memory://` or
/// `s3://bucket/prefix` (credentials and region from the usual AWS environment variables only).
pub fn open(url: &str) -> Result<Location, String> {
    if let Some(rest) = url.strip_prefix("s3://") {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let (builder, endpoint) = s3_builder(bucket);
        let store = builder
            .build()
            .map_err(|e| format!("cannot open {url}: {}", scrub(&e.to_string())))?;
        return Ok(Location {
            store: Arc::new(store),
            root: StorePath::from(prefix),
            url_base: format!("s3://{bucket}/{prefix}")
                .trim_end_matches('/')
                .to_string(),
            endpoint,
        });
    }
    if url.starts_with("memory://") {
        return Ok(Location {
            store: Arc::new(object_store::memory::InMemory::new()),
            root: StorePath::from(""),
            url_base: "memory://".into(),
            endpoint: None,
        });
    }
    let dir = url.strip_prefix("file://").unwrap_or(url);
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create the snapshot directory {dir}: {e}"))?;
    let dir = std::fs::canonicalize(dir).map_err(|e| format!("cannot resolve {dir}: {e}"))?;
    let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
        .map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    Ok(Location {
        store: Arc::new(store),
        root: StorePath::from(""),
        url_base: format!("file://{}", dir.display()),
        endpoint: None,
    })
}

/// How long one S3 request may take, connection included, and how often a failed one is retried
/// (object_store's defaults, 10 retries over up to 3 minutes, would hold `loom query` that long
/// on an endpoint that is down).
const S3_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
const S3_REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
const S3_RETRIES: usize = 3;
const S3_RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// S3 from the usual AWS environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`, `AWS_ENDPOINT_URL`, …), path-style
/// requests unless `AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true`. An `http://` endpoint (an
/// S3-compatible server on a private network) is allowed without also setting `AWS_ALLOW_HTTP`.
/// Also returns the endpoint, when one is set (for messages).
fn s3_builder(bucket: &str) -> (object_store::aws::AmazonS3Builder, Option<String>) {
    use object_store::ClientConfigKey;
    use object_store::aws::AmazonS3ConfigKey;
    let mut builder = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket);
    let endpoint = [AmazonS3ConfigKey::S3Endpoint, AmazonS3ConfigKey::Endpoint]
        .iter()
        .find_map(|key| builder.get_config_value(key));
    let plain_http = endpoint
        .as_deref()
        .is_some_and(|e| e.to_ascii_lowercase().starts_with("http://"));
    if plain_http && std::env::var_os("AWS_ALLOW_HTTP").is_none() {
        builder = builder.with_allow_http(true);
    }
    // Client settings go in one by one: `with_client_options` would replace those the
    // environment gave (AWS_ALLOW_HTTP, a proxy, …).
    for (key, value) in [
        (ClientConfigKey::ConnectTimeout, S3_CONNECT_TIMEOUT),
        (ClientConfigKey::Timeout, S3_REQUEST_TIMEOUT),
    ] {
        let key = AmazonS3ConfigKey::Client(key);
        if builder.get_config_value(&key).is_none() {
            builder = builder.with_config(key, format!("{}s", value.as_secs()));
        }
    }
    let builder = builder.with_retry(object_store::RetryConfig {
        max_retries: S3_RETRIES,
        retry_timeout: S3_RETRY_TIMEOUT,
        ..Default::default()
    });
    (builder, endpoint)
}

/// `text` with the values of the AWS secrets of this process's environment replaced: an error
/// from the store never shows them, whatever it quotes.
pub fn scrub(text: &str) -> String {
    let mut out = text.to_string();
    for key in [
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_ACCESS_KEY_ID",
    ] {
        if let Ok(value) = std::env::var(key)
            && value.len() >= 4
        {
            out = out.replace(&value, "***");
        }
    }
    out
}

/// Open a snapshot root that must already exist (for reading).
pub fn open_existing(url: &str) -> Result<Location, String> {
    if !url.contains("://") && !std::path::Path::new(url).is_dir() {
        return Err(format!("no snapshot at {url}: not a directory"));
    }
    if let Some(dir) = url.strip_prefix("file://")
        && !std::path::Path::new(dir).is_dir()
    {
        return Err(format!("no snapshot at {url}: not a directory"));
    }
    open(url)
}

fn child(root: &StorePath, parts: &[&str]) -> StorePath {
    let mut path = root.clone();
    for part in parts {
        path = path.join(*part);
    }
    path
}

/// A dataset as Parquet.
pub struct ParquetFile {
    pub bytes: Vec<u8>,
    /// Why Spark cannot read some columns (empty when it reads them all).
    pub spark_unreadable: Vec<String>,
}

/// Parquet of a dataset: zstd, in portable types ([`portable`]), the Arrow schema embedded so
/// [`read_parquet`] gives back exactly the types it had.
pub fn parquet_file(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<ParquetFile, String> {
    let (schema, batches) = portable::to_portable(schema, batches)?;
    let properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .build();
    let mut buffer = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buffer, schema.clone(), Some(properties))
        .map_err(|e| e.to_string())?;
    for batch in &batches {
        writer.write(batch).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(ParquetFile {
        bytes: buffer,
        spark_unreadable: portable::spark_unreadable(&schema),
    })
}

/// Parquet bytes of a dataset (see [`parquet_file`]).
pub fn parquet_bytes(
    schema: &arrow::datatypes::SchemaRef,
    batches: &[RecordBatch],
) -> Result<Vec<u8>, String> {
    parquet_file(schema, batches).map(|file| file.bytes)
}

/// Record batches back from Parquet bytes, in the types they had before they were written.
pub fn read_parquet(
    bytes: Bytes,
) -> Result<(arrow::datatypes::SchemaRef, Vec<RecordBatch>), String> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).map_err(|e| e.to_string())?;
    let schema = builder.schema().clone();
    let reader = builder.build().map_err(|e| e.to_string())?;
    let batches = reader
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    portable::from_portable(&schema, batches)
}

fn sql_string(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A Spark SQL string literal: Spark escapes with backslashes (and reads `'a''b'` as two
/// literals run together, `ab`).
fn spark_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn catalog_sql(location: &Location, session: &Session, manifest: &Manifest) -> String {
    let mut sql = format!(
        "-- loom session {}: open with datafusion-cli or any DataFusion-based engine.\n",
        session.id
    );
    for d in &manifest.datasets {
        let url = format!("{}/{}/{}", location.url_base, session.folder, d.file);
        sql.push_str(&format!(
            "CREATE EXTERNAL TABLE {} STORED AS PARQUET LOCATION {};\n",
            crate::envelope::sql::quote_ident(&d.reference),
            sql_string(&url)
        ));
    }
    sql
}

/// Spark SQL for the same tables: `CREATE OR REPLACE TEMPORARY VIEW … USING parquet OPTIONS
/// (path '<ref folder>')`.
/// Spark resolves column names case-insensitively unless told otherwise (a view may have `X`
/// beside `x`) and shows instants in its session time zone (loom shows UTC); the file sets both.
/// A table with a column Spark cannot read is left out, with the reason.
fn catalog_spark_sql(location: &Location, session: &Session, manifest: &Manifest) -> String {
    // Spark's S3 connector is `s3a://`.
    let base = match location.url_base.strip_prefix("s3://") {
        Some(rest) => format!("s3a://{rest}"),
        None => location.url_base.clone(),
    };
    let mut sql = format!(
        "-- loom session {}: run with `spark-sql -f`, or statement by statement with spark.sql().\n\
         SET spark.sql.caseSensitive=true;\n\
         SET spark.sql.session.timeZone=UTC;\n",
        session.id
    );
    for d in &manifest.datasets {
        let file = format!("{}/{}/{}", base, session.folder, d.file);
        let folder = file.rsplit_once('/').map_or(file.as_str(), |(dir, _)| dir);
        let name = format!("`{}`", d.reference.replace('`', "``"));
        if d.spark_unreadable.is_empty() {
            // A temporary view, replaced if it exists: every session has a `ds_crm_rows_1`, and
            // a table kept from another session's catalog would answer with that one's data.
            sql.push_str(&format!(
                "CREATE OR REPLACE TEMPORARY VIEW {name} USING parquet OPTIONS (path {});\n",
                spark_string(folder)
            ));
        } else {
            sql.push_str(&format!(
                "-- {name} left out: {}\n",
                d.spark_unreadable.join("; ")
            ));
        }
    }
    sql.push_str(&format!(
        "-- Every session's datasets of one tool at once (session_id, server, tool and ref become columns):\n\
         --   spark.read.option(\"basePath\", \"{base}\").parquet(\"{base}/session_id=*/server=<server>/tool=<tool>\")\n"
    ));
    sql
}

/// The session id: the UTC start time (so names sort by age) and the process id, and for the
/// second and later sessions of one process (`loom serve --http` opens one per client) a
/// sequence number — two sessions opened in the same millisecond must not share a folder.
pub fn session_id() -> String {
    static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sequence = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let start = chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ");
    let pid = std::process::id();
    match sequence {
        1 => format!("{start}-{pid}"),
        n => format!("{start}-{pid}-{n}"),
    }
}

/// Whether a folder under the root is named like a session ([`session_id`]):
/// `YYYYMMDDTHHMMSSmmmZ-PID` or `…-PID-N`. Anything else there (a user's own folder) is not
/// one, and is never taken for the latest session.
pub fn is_session_name(name: &str) -> bool {
    let Some((start, rest)) = name.split_once("Z-") else {
        return false;
    };
    let start = start.as_bytes();
    let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    let start_ok =
        start.len() == 18 && digits(&start[..8]) && start[8] == b'T' && digits(&start[9..]);
    let mut numbers = rest.split('-');
    let pid_ok = numbers.next().is_some_and(|n| digits(n.as_bytes()));
    let sequence_ok = numbers.next().is_none_or(|n| digits(n.as_bytes()));
    start_ok && pid_ok && sequence_ok && numbers.next().is_none()
}

/// A session under a root: its id and the folder that holds it (`session_id=<id>`, or `<id>` for
/// sessions written before the Hive layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub folder: String,
}

impl Session {
    fn new(id: String) -> Self {
        Self {
            folder: format!("{SESSION_FOLDER_PREFIX}{id}"),
            id,
        }
    }

    /// The session a folder under the root holds, if it is one.
    pub fn from_folder(folder: &str) -> Option<Self> {
        let id = folder.strip_prefix(SESSION_FOLDER_PREFIX).unwrap_or(folder);
        is_session_name(id).then(|| Self {
            id: id.to_string(),
            folder: folder.to_string(),
        })
    }
}

/// A Hive partition value for a server or tool name: letters, digits, `_`, `-` and `.` kept,
/// anything else (a `/`, `=`, space, non-ASCII) as `_`, at most 64 characters. Exact names are in
/// the manifest; the folder only has to be safe on every store and readable by every engine.
pub fn partition_value(name: &str) -> String {
    let value: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if value.is_empty() || value.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        value
    }
}

/// Where a dataset's file goes, relative to its session folder.
fn dataset_file(dataset: &Dataset) -> String {
    format!(
        "server={}/tool={}/ref={}/{}.parquet",
        partition_value(&dataset.provenance.server),
        partition_value(&dataset.provenance.tool),
        dataset.reference,
        dataset.reference
    )
}

/// The table a dataset belongs to across sessions: a view (`loom_materialize`) is its own (its
/// name was chosen, digits included: `top_10` is not `top`); others drop the sequence number.
fn table_for(dataset: &Dataset) -> String {
    if dataset.provenance.tool == "loom_materialize" {
        dataset.reference.clone()
    } else {
        table_of(&dataset.reference)
    }
}

/// `ds_crm_rows` for `ds_crm_rows_2`, `doc` for `doc_3`: the ref without its sequence number.
pub fn table_of(reference: &str) -> String {
    match reference.rsplit_once('_') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base.to_string()
        }
        _ => reference.to_string(),
    }
}

/// Writes one session's datasets in the background.
#[derive(Clone)]
pub struct SnapshotWriter {
    jobs: mpsc::UnboundedSender<Arc<Dataset>>,
    /// Datasets sent and not yet taken by the writer: while any is, the manifest is incomplete.
    queued: Arc<std::sync::atomic::AtomicUsize>,
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
const MAX_PENDING: usize = 32;

struct Pending {
    dataset: Arc<Dataset>,
    attempts: u32,
    next: tokio::time::Instant,
    error: String,
}

/// The writer's state: the manifest as written, what waits for a retry, which kinds of failure
/// have been logged (each kind is a warning once, then only a debug line).
struct Writer {
    location: Location,
    session: Session,
    manifest: Manifest,
    pending: Vec<Pending>,
    logged: std::collections::HashSet<failure::FailureKind>,
    retry: RetryPolicy,
    queued: Arc<std::sync::atomic::AtomicUsize>,
}

impl Writer {
    /// Whether anything of the session is not (yet) in the snapshot: a retry waiting, a dataset
    /// given up on, or one still queued behind the one being written.
    fn incomplete(&self) -> bool {
        !self.pending.is_empty()
            || !self.manifest.missing.is_empty()
            || self.queued.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    async fn attempt(&mut self, dataset: Arc<Dataset>, attempts: u32) {
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

    async fn give_up(&mut self, dataset: Arc<Dataset>, error: String) {
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
    async fn settle(&mut self) {
        self.manifest.complete = !self.incomplete();
        self.settle_as_is().await;
    }

    async fn settle_as_is(&mut self) {
        if let Err(error) = put_manifest(&self.location, &self.session, &self.manifest).await {
            let (_, message) = failure::explain(&self.location, "manifest not updated in", &error);
            tracing::debug!("{message}");
        }
    }

    /// The pending dataset due first, once its time has come.
    async fn next_due(&mut self) -> Option<Pending> {
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
enum WriteError {
    Encode(String),
    Store(String),
}

/// Writes the dataset's file, then both catalogs, then the manifest (so what the manifest lists is
/// complete). `others_waiting`: other datasets are not written yet (the manifest says it is
/// incomplete).
async fn write_one(
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
    let Provenance {
        server,
        tool,
        args,
        created_at,
        source,
    } = dataset.provenance.clone();
    manifest
        .datasets
        .retain(|d| d.reference != dataset.reference);
    manifest.datasets.push(ManifestDataset {
        reference: dataset.reference.clone(),
        rows: dataset.rows,
        schema: dataset
            .schema
            .fields()
            .iter()
            .map(|f| ManifestColumn {
                name: f.name().clone(),
                data_type: f.data_type().to_string(),
            })
            .collect(),
        provenance: ManifestProvenance {
            server,
            tool,
            args,
            source,
        },
        created_at,
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

async fn put_manifest(
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
fn file_path(location: &Location, session: &Session, file: &str) -> StorePath {
    let mut path = child(&location.root, &[&session.folder]);
    for part in file.split('/') {
        path = path.join(part);
    }
    path
}

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

#[cfg(test)]
mod tests;
