//! The dataset store: one DataFusion `SessionContext` per loom process, each dataset a
//! `MemTable` named by its ref, a catalog of what is held, and the sealed query path.

pub(crate) mod bounded;
pub(crate) mod deadline;
pub mod document;
pub(crate) mod engine;
pub(crate) mod guard;
pub(crate) mod measure;
pub(crate) mod output;
pub(crate) mod profile;
mod share;
pub mod values;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::catalog::MemTable;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};

pub use guard::Refusal;
pub use profile::ColumnProfile;

use crate::ingest::ColumnInfo;

/// Where a dataset came from. Arguments are already redacted when they get here.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Provenance {
    pub server: String,
    pub tool: String,
    pub args: serde_json::Value,
    pub created_at: String,
    /// Which rung found the table (`structuredContent`, `json_text`, `query`, …).
    pub source: String,
}

/// One held dataset.
#[derive(Debug)]
pub struct Dataset {
    pub reference: String,
    pub rows: usize,
    pub bytes: usize,
    pub schema: SchemaRef,
    pub columns: Vec<ColumnInfo>,
    /// Column statistics (the envelope, describe, join hints): computed when the dataset is
    /// taken in, or — for one opened from a cluster's store — the first time one is asked for.
    profile: std::sync::OnceLock<Vec<ColumnProfile>>,
    pub provenance: Provenance,
    pub created: SystemTime,
    pub batches: Vec<RecordBatch>,
    /// Never evicted (materialized views; documents and blobs a client pinned with loom_read).
    pinned: std::sync::atomic::AtomicBool,
    /// A large `loom_query` result: evicted early.
    pub implicit: bool,
    /// The table of a result that passed through to the client whole (SPEC §8.4): evicted
    /// first (the client holds its bytes already).
    pub passed_through: bool,
    /// A table, or the original of a reduced result (a document or a blob) with its table.
    pub content: document::Content,
    last_access: Mutex<Instant>,
}

impl Dataset {
    /// Its columns' statistics (see the field).
    pub fn profile(&self) -> &[ColumnProfile] {
        self.profile
            .get_or_init(|| profile_of(&self.content, &self.schema, &self.batches))
    }

    pub fn pinned(&self) -> bool {
        self.pinned.load(std::sync::atomic::Ordering::Relaxed)
    }

    pub fn last_access(&self) -> Instant {
        *self
            .last_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        *self
            .last_access
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }
}

/// The statistics of a table, or the plain counts of a document's or blob's columns.
fn profile_of(
    content: &document::Content,
    schema: &SchemaRef,
    batches: &[RecordBatch],
) -> Vec<ColumnProfile> {
    match (content, batches.first()) {
        (document::Content::Table, _) | (_, None) => profile::profile(schema, batches),
        (_, Some(batch)) => document::plain_profile(schema, batch),
    }
}

/// What [`Store::add`] needs to hold a dataset.
pub struct NewDataset {
    pub server: String,
    pub tool: String,
    pub batches: Vec<RecordBatch>,
    pub schema: SchemaRef,
    pub columns: Vec<ColumnInfo>,
    pub provenance: Provenance,
    pub pinned: bool,
    pub implicit: bool,
    /// The table of a result that passed through whole (SPEC §8.4).
    pub passed_through: bool,
    /// A chosen ref (materialized views); `None` names it `ds_<server>_<tool>_<n>`.
    pub name: Option<String>,
}

/// Settings the store takes from the configuration.
#[derive(Debug, Clone)]
pub struct StoreSettings {
    pub memory_budget_bytes: u64,
    /// The engine's memory pool; `None`: [`engine::default_memory_limit`].
    pub engine_memory_limit_bytes: Option<u64>,
    pub query_timeout: Duration,
    /// A query result with more rows than this is not read further (SPEC §10.2).
    pub max_result_rows: usize,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            memory_budget_bytes: 256 * 1024 * 1024,
            engine_memory_limit_bytes: None,
            query_timeout: Duration::from_secs(30),
            max_result_rows: MAX_RESULT_ROWS,
        }
    }
}

/// Rows a query result may have (more: the query stops reading and fails).
pub const MAX_RESULT_ROWS: usize = 1_000_000;

/// Why a query produced no rows.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum QueryError {
    #[error("refused: {0}")]
    Refused(#[from] Refusal),
    #[error("{0}")]
    Sql(String),
    #[error("the query ran longer than {0} ms and was cancelled (queryTimeoutMs)")]
    Timeout(u128),
    #[error(
        "the result has more than {limit} {what}; loom stopped reading it (add a LIMIT, filter or \
         aggregate)"
    )]
    TooLarge { limit: u64, what: &'static str },
}

/// What a query returned.
#[derive(Debug, Clone)]
pub struct QueryOutput {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
    pub rows: usize,
}

#[derive(Default)]
struct Catalog {
    datasets: Vec<Arc<Dataset>>,
    counters: HashMap<String, u32>,
    evicted: Vec<String>,
    /// The numbers this store's refs may take: all from 1 (`None`), or, in a cluster, the
    /// block its session claimed (SPEC §25).
    numbers: Option<Numbers>,
}

/// A block of ref numbers: `first + 1 ..= first + count`.
#[derive(Debug, Clone, Copy)]
struct Numbers {
    first: u32,
    count: u32,
}

impl Catalog {
    /// The next number of `base` (`ds_crm_rows`, `doc`, …) not taken by a held ref, within this
    /// store's block.
    fn next_reference(&mut self, base: &str) -> Result<String, String> {
        let numbers = self.numbers;
        let first = numbers.map_or(0, |b| b.first);
        loop {
            let counter = self.counters.entry(base.to_string()).or_insert(first);
            let last = numbers.map_or(u32::MAX, |b| b.first.saturating_add(b.count));
            // Checked before the count moves: a refused ref never moves it (nor wraps it).
            let Some(n) = counter.checked_add(1).filter(|n| *n <= last) else {
                return Err(match numbers {
                    Some(block) => format!(
                        "this session has numbered {} refs `{base}_…` already, all its cluster \
                         block holds (SPEC §25); start a new session for more",
                        block.count
                    ),
                    None => format!("every number of `{base}_…` is taken"),
                });
            };
            *counter = n;
            let candidate = format!("{base}_{n}");
            if !self.datasets.iter().any(|d| d.reference == candidate) {
                return Ok(candidate);
            }
        }
    }
}

/// Called with every dataset the store takes in (session snapshots and a cluster's store listen
/// here).
pub type Listener = Box<dyn Fn(Arc<Dataset>) + Send + Sync>;

/// Called with the ref of a dataset taken back before an answer named it (a cluster's store
/// deletes what it wrote of it).
pub type RemovalListener = Box<dyn Fn(&str) + Send + Sync>;

/// Opens into the store datasets held elsewhere that the new datasets (found in one result) may
/// join, before their join hints are chosen (a cluster's store, SPEC §25). Called from the
/// result path's blocking threads, never from async code; bounded in time by its maker.
pub type JoinSource = Box<dyn Fn(&Arc<Store>, &[&Dataset]) + Send + Sync>;

/// The store.
pub struct Store {
    ctx: SessionContext,
    /// Where planning, checking and running queries happen: never on the threads that carry
    /// passthrough traffic. Shared by every session of one loom ([`SharedEngine`]).
    engine: Arc<engine::Engine>,
    /// This session's share of the engine's threads: work beyond it waits (within its timeout)
    /// instead of taking the threads other sessions need.
    share: Arc<tokio::sync::Semaphore>,
    catalog: Mutex<Catalog>,
    listeners: Mutex<Vec<Listener>>,
    /// Told the ref of every dataset taken back before anyone was told of it ([`Self::remove`]).
    removal_listeners: Mutex<Vec<RemovalListener>>,
    /// Where datasets held elsewhere come from for join hints ([`JoinSource`]).
    join_source: Mutex<Option<Arc<JoinSource>>>,
    settings: StoreSettings,
    /// Private spill directory of a store with its own engine, removed when the store is
    /// dropped (a shared engine's is the [`SharedEngine`]'s).
    spill: Mutex<Option<tempfile::TempDir>>,
}

/// `ds_view_<name>`: a view's ref (`loom_materialize`), the name lowercased to `[a-z0-9_]`, at
/// most 48 characters.
pub fn view_ref(name: &str) -> Result<String, String> {
    match ref_part(name.trim(), 48) {
        Some(clean) => Ok(format!("ds_view_{clean}")),
        None => Err(format!(
            "name {name:?} has no letters or digits; use e.g. \"top_customers\""
        )),
    }
}

/// A part of a ref: lowercase `[a-z0-9_]` (anything else becomes `_`), cut to `max`
/// characters, without leading or trailing `_`; `None` when nothing is left.
pub fn ref_part(text: &str, max: usize) -> Option<String> {
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '_'
            }
        })
        .collect();
    out.truncate(max);
    let trimmed = out.trim_matches('_');
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// `ds_<server>_<tool>`, each part cut so refs stay short.
fn ref_base(server: &str, tool: &str) -> String {
    let part = |s: &str, max: usize| ref_part(s, max).unwrap_or_else(|| "x".to_string());
    format!("ds_{}_{}", part(server, 16), part(tool, 24))
}

/// The sealed path up to a checked plan: statement check, planning, plan walk. Returns the plan
/// and the datasets it reads.
async fn plan_checked_in(
    ctx: &SessionContext,
    sql: &str,
    datasets: &std::collections::HashSet<String>,
) -> Result<(datafusion::logical_expr::LogicalPlan, Vec<String>), QueryError> {
    guard::check_statement(sql)?;
    let plan = ctx
        .state()
        .create_logical_plan(sql)
        .await
        .map_err(|e| QueryError::Sql(guard::strip_prefix(&e.to_string()).to_string()))?;
    let scanned = guard::check(&plan, &|name| datasets.contains(name))?;
    Ok((plan, scanned))
}

/// Remove the spill directory held in `slot` now, if it is still there.
fn close_spill(slot: &Mutex<Option<tempfile::TempDir>>) {
    let spill = slot.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let Some(dir) = spill
        && let Err(error) = dir.close()
    {
        tracing::warn!("cannot remove the spill directory: {error}");
    }
}

/// Spill directories are `<temp dir>/loom-spill-<pid>-<random>`.
const SPILL_PREFIX: &str = "loom-spill-";

/// What the engine may spill to disk: this many times its memory pool.
pub const SPILL_PER_POOL: u64 = 4;

/// Remove the spill directories of loom processes that are gone (a crash or a kill leaves
/// them behind); a directory of a live process, or of another user, is left alone. Returns how
/// many were removed.
pub fn remove_stale_spills(temp: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(SPILL_PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        if !alive && entry.file_type().is_ok_and(|t| t.is_dir()) {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => removed += 1,
                Err(error) => tracing::debug!(
                    "cannot remove the stale spill directory {}: {error}",
                    entry.path().display()
                ),
            }
        }
    }
    if removed > 0 {
        tracing::info!(
            "removed {removed} spill director(ies) left by loom processes that are gone"
        );
    }
    removed
}

/// The query engine's threads, memory pool and spill directory, shared by every store (every
/// client session) of one loom process: however many sessions are open, queries run on one set
/// of engine threads and within one memory pool (SPEC §10.2, §22).
pub struct SharedEngine {
    engine: Arc<engine::Engine>,
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
    /// Removed by [`SharedEngine::remove_spill`] at shutdown, or when dropped.
    spill: Mutex<Option<tempfile::TempDir>>,
}

impl SharedEngine {
    /// Bytes the engine's memory pool has reserved now (queries running, spills pending).
    pub fn reserved_bytes(&self) -> usize {
        self.runtime.memory_pool.reserved()
    }

    pub fn start(settings: &StoreSettings) -> Result<Self, String> {
        remove_stale_spills(&std::env::temp_dir());
        let spill = tempfile::Builder::new()
            .prefix(&format!("{SPILL_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| format!("cannot create the spill directory: {e}"))?;
        let limit = settings
            .engine_memory_limit_bytes
            .unwrap_or_else(engine::default_memory_limit);
        let mut runtime = RuntimeEnvBuilder::new().with_disk_manager_builder(
            DiskManagerBuilder::default()
                .with_mode(DiskManagerMode::Directories(vec![
                    spill.path().to_path_buf(),
                ]))
                .with_max_temp_directory_size(limit.saturating_mul(SPILL_PER_POOL)),
        );
        // Always a pool: joins, sorts and aggregations spill or fail cleanly instead of
        // growing without bound.
        runtime = runtime.with_memory_limit(usize::try_from(limit).unwrap_or(usize::MAX), 1.0);
        let runtime = runtime
            .build_arc()
            .map_err(|e| format!("cannot start the query engine: {e}"))?;
        Ok(SharedEngine {
            engine: Arc::new(engine::Engine::start()?),
            runtime,
            spill: Mutex::new(Some(spill)),
        })
    }

    /// Remove the spill directory now (at shutdown).
    pub fn remove_spill(&self) {
        close_spill(&self.spill);
    }
}

impl Store {
    /// A store with an engine of its own (one session: `loom query`, tests).
    pub fn new(settings: StoreSettings) -> Result<Self, String> {
        let shared = SharedEngine::start(&settings)?;
        let spill = shared
            .spill
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let mut store = Store::on_shared(settings, &shared, true);
        store.spill = Mutex::new(spill);
        Ok(store)
    }

    /// A store on `shared`'s engine. The only session of its process (`sole`) may use all of
    /// it; one of several gets a share — at most half the engine's threads (at least one) and
    /// half its memory pool — so that no session can take the engine from the others
    /// (SPEC §10.2).
    pub fn on_shared(settings: StoreSettings, shared: &SharedEngine, sole: bool) -> Self {
        let config = SessionConfig::new()
            .with_information_schema(false)
            .with_target_partitions(2);
        let threads = shared.engine.threads();
        let (runtime, permits) = if sole {
            (shared.runtime.clone(), threads)
        } else {
            let pool = &shared.runtime.memory_pool;
            let limit = match pool.memory_limit() {
                datafusion::execution::memory_pool::MemoryLimit::Finite(limit) => limit / 2,
                _ => usize::MAX,
            };
            let runtime = datafusion::execution::runtime_env::RuntimeEnv {
                memory_pool: Arc::new(share::SessionShare::new(pool.clone(), limit)),
                disk_manager: shared.runtime.disk_manager.clone(),
                cache_manager: shared.runtime.cache_manager.clone(),
                object_store_registry: shared.runtime.object_store_registry.clone(),
            };
            (Arc::new(runtime), (threads / 2).max(1))
        };
        let ctx = SessionContext::new_with_config_rt(config, runtime);
        bounded::install(&ctx);
        output::install(&ctx);
        Self {
            ctx,
            engine: shared.engine.clone(),
            share: Arc::new(tokio::sync::Semaphore::new(permits)),
            catalog: Mutex::new(Catalog::default()),
            listeners: Mutex::new(Vec::new()),
            removal_listeners: Mutex::new(Vec::new()),
            join_source: Mutex::new(None),
            settings,
            spill: Mutex::new(None),
        }
    }

    /// Tell `listener` about every dataset from now on, after those listening already.
    pub fn listen(&self, listener: Listener) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(listener);
    }

    /// Tell `listener` the ref of every dataset [`Self::remove`] takes back from now on.
    pub fn listen_for_removals(&self, listener: RemovalListener) {
        self.removal_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(listener);
    }

    /// Where datasets held elsewhere come from for join hints, from now on.
    pub fn join_from(&self, source: JoinSource) {
        *self
            .join_source
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::new(source));
    }

    /// Every dataset held, after opening those held elsewhere that `new` may join (from a
    /// blocking thread only: see [`JoinSource`]).
    pub fn join_candidates(self: &Arc<Self>, new: &[&Dataset]) -> Vec<Arc<Dataset>> {
        let source = self
            .join_source
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(source) = source {
            source(self, new);
        }
        self.list()
    }

    /// Tell no one about datasets any more.
    pub fn stop_listening(&self) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.removal_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.join_source
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }

    /// Number refs within `first + 1 ..= first + count` from now on: a cluster's block, so that
    /// no other instance or session of the scope mints the same ref (SPEC §25).
    pub fn number_within(&self, first: u32, count: u32) {
        let mut catalog = self.lock();
        catalog.numbers = Some(Numbers { first, count });
        catalog.counters.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Catalog> {
        self.catalog.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Remove the private spill directory now (at shutdown): whatever still holds the store
    /// when the process exits — a blocking task the runtime stopped waiting for — must not keep
    /// it on disk.
    pub fn remove_spill(&self) {
        close_spill(&self.spill);
    }

    pub fn settings(&self) -> &StoreSettings {
        &self.settings
    }

    /// Hold a new dataset. Evicts older datasets if the memory budget is exceeded (never this
    /// one, never pinned ones).
    pub fn add(&self, new: NewDataset) -> Result<Arc<Dataset>, String> {
        self.add_content(new, document::Content::Table)
    }

    /// Hold the original of a reduced result as `doc_<n>`: whole, readable by character, line
    /// and pattern, and a table `(line_no, text)` for SQL.
    pub fn add_document(
        &self,
        kind: document::DocumentKind,
        text: String,
        provenance: Provenance,
    ) -> Result<Arc<Dataset>, String> {
        self.add_document_as(kind, text, provenance, None)
    }

    /// [`Self::add_document`] under a ref given (one another instance minted: SPEC §25), or the
    /// next `doc_<n>`.
    pub fn add_document_as(
        &self,
        kind: document::DocumentKind,
        text: String,
        provenance: Provenance,
        reference: Option<String>,
    ) -> Result<Arc<Dataset>, String> {
        let (schema, batch, body) = document::document(kind, text)?;
        let name = match reference {
            Some(reference) => reference,
            None => self.next_name("doc")?,
        };
        let new = NewDataset {
            server: provenance.server.clone(),
            tool: provenance.tool.clone(),
            batches: vec![batch],
            schema,
            columns: Vec::new(),
            provenance,
            pinned: false,
            implicit: false,
            passed_through: false,
            name: Some(name),
        };
        self.add_content(new, document::Content::Document(body))
    }

    /// Hold a binary lifted out of a result as `blob_<n>`.
    pub fn add_blob(
        &self,
        mime: &str,
        data: Vec<u8>,
        provenance: Provenance,
    ) -> Result<Arc<Dataset>, String> {
        self.add_blob_as(mime, data, provenance, None)
    }

    /// [`Self::add_blob`] under a ref given, or the next `blob_<n>`.
    pub fn add_blob_as(
        &self,
        mime: &str,
        data: Vec<u8>,
        provenance: Provenance,
        reference: Option<String>,
    ) -> Result<Arc<Dataset>, String> {
        let (schema, batch, body) = document::blob(mime, data)?;
        let name = match reference {
            Some(reference) => reference,
            None => self.next_name("blob")?,
        };
        let new = NewDataset {
            server: provenance.server.clone(),
            tool: provenance.tool.clone(),
            batches: vec![batch],
            schema,
            columns: Vec::new(),
            provenance,
            pinned: false,
            implicit: false,
            passed_through: false,
            name: Some(name),
        };
        self.add_content(new, document::Content::Blob(body))
    }

    /// `<prefix>_<n>`, the next number not taken.
    fn next_name(&self, prefix: &str) -> Result<String, String> {
        self.lock().next_reference(prefix)
    }

    /// [`Self::add`] with the statistics left until something asks for them: a dataset opened
    /// from a cluster's store (SPEC §25) is queried at once, and its first query should not wait
    /// for statistics the query does not use. Its join-hint hashes are counted at their most.
    pub fn add_unprofiled(&self, new: NewDataset) -> Result<Arc<Dataset>, String> {
        self.add_with(new, document::Content::Table, false)
    }

    fn add_content(
        &self,
        new: NewDataset,
        content: document::Content,
    ) -> Result<Arc<Dataset>, String> {
        self.add_with(new, content, true)
    }

    fn add_with(
        &self,
        new: NewDataset,
        content: document::Content,
        profiled: bool,
    ) -> Result<Arc<Dataset>, String> {
        let NewDataset {
            server,
            tool,
            batches,
            schema,
            columns,
            provenance,
            pinned,
            implicit,
            passed_through,
            name,
        } = new;
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let profile = std::sync::OnceLock::new();
        if profiled {
            let _ = profile.set(profile_of(&content, &schema, &batches));
        }
        let columns = if columns.is_empty() {
            ColumnInfo::of_schema(&schema, false)
        } else {
            columns
        };
        // What holding it costs: its Arrow arrays and the value hashes kept for join hints.
        let arrow_bytes: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
        let hash_bytes: usize = match profile.get() {
            Some(profile) => profile
                .iter()
                .map(|p| (p.distinct_hashes.capacity() + p.sketch.capacity()) * size_of::<u64>())
                .sum(),
            None => {
                schema.fields().len()
                    * (rows.min(profile::DISTINCT_CAP) + profile::SKETCH_SIZE)
                    * size_of::<u64>()
            }
        };
        let bytes = arrow_bytes.saturating_add(hash_bytes);
        let mut catalog = self.lock();
        // A dataset that cannot fit beside the pinned ones is refused, instead of evicting
        // everything else and still being over the budget.
        let budget = usize::try_from(self.settings.memory_budget_bytes).unwrap_or(usize::MAX);
        let held_pinned = pinned_bytes(&catalog);
        if pinned {
            pinned_room(
                &catalog,
                budget,
                bytes,
                name.as_deref().unwrap_or("the view"),
            )?;
        }
        // The table of a result the client holds whole is kept only in room it can take from
        // other such tables: it never evicts a dataset the client can reach only through loom.
        if passed_through {
            let others: usize = catalog
                .datasets
                .iter()
                .filter(|d| !d.passed_through)
                .map(|d| d.bytes)
                .sum();
            if others.saturating_add(bytes) > budget {
                return Err(format!(
                    "a passed-through table of {bytes} bytes would evict other datasets \
                     (memoryBudgetBytes is {budget}, {others} held by them); not kept"
                ));
            }
        }
        if bytes.saturating_add(held_pinned) > budget {
            return Err(format!(
                "it needs {bytes} bytes (Arrow arrays and join-hint hashes) and memoryBudgetBytes \
                 is {budget}{}",
                if held_pinned > 0 {
                    format!(", {held_pinned} of which pinned views hold")
                } else {
                    String::new()
                }
            ));
        }
        let reference = match name {
            Some(name) => {
                if catalog.datasets.iter().any(|d| d.reference == name) {
                    return Err(format!("a dataset named `{name}` already exists"));
                }
                name
            }
            // Skip numbers a chosen name (a view) already took: refs are unique.
            None => catalog.next_reference(&ref_base(&server, &tool))?,
        };
        let table = MemTable::try_new(schema.clone(), vec![batches.clone()])
            .map_err(|e| format!("cannot hold the table: {e}"))?;
        self.ctx
            .register_table(reference.as_str(), Arc::new(table))
            .map_err(|e| format!("cannot register the table: {e}"))?;
        let dataset = Arc::new(Dataset {
            reference,
            rows,
            bytes,
            schema,
            columns,
            profile,
            provenance,
            created: SystemTime::now(),
            batches,
            pinned: std::sync::atomic::AtomicBool::new(pinned),
            implicit,
            passed_through,
            content,
            last_access: Mutex::new(Instant::now()),
        });
        catalog.datasets.push(dataset.clone());
        self.evict(&mut catalog, &dataset.reference);
        drop(catalog);
        for listener in self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            listener(dataset.clone());
        }
        Ok(dataset)
    }

    /// Over budget: drop the tables of passed-through results first, then implicit results,
    /// then downstream datasets, least recently used first; never pinned ones, never `keep`.
    fn evict(&self, catalog: &mut Catalog, keep: &str) {
        let budget = usize::try_from(self.settings.memory_budget_bytes).unwrap_or(usize::MAX);
        loop {
            let total: usize = catalog.datasets.iter().map(|d| d.bytes).sum();
            if total <= budget {
                return;
            }
            let victim = catalog
                .datasets
                .iter()
                .enumerate()
                .filter(|(_, d)| !d.pinned() && d.reference != keep)
                .min_by_key(|(_, d)| (!d.passed_through, !d.implicit, d.last_access()))
                .map(|(i, _)| i);
            let Some(index) = victim else { return };
            let gone = catalog.datasets.remove(index);
            let _ = self.ctx.deregister_table(gone.reference.as_str());
            tracing::info!(dataset = %gone.reference, bytes = gone.bytes, "evicted (memoryBudgetBytes)");
            catalog.evicted.push(gone.reference.clone());
        }
    }

    /// Let `reference` go as if evicted (loom_describe then says so): a passed-through table
    /// past the keeper's count (SPEC §8.4). Pinned datasets stay.
    pub fn let_go(&self, reference: &str) {
        let mut catalog = self.lock();
        let Some(index) = catalog
            .datasets
            .iter()
            .position(|d| d.reference == reference && !d.pinned())
        else {
            return;
        };
        let gone = catalog.datasets.remove(index);
        let _ = self.ctx.deregister_table(gone.reference.as_str());
        catalog.evicted.push(gone.reference.clone());
    }

    /// Keep `reference` from eviction from now on, if it fits beside what is pinned already.
    pub fn pin(&self, reference: &str) -> Result<(), String> {
        let catalog = self.lock();
        let Some(dataset) = catalog.datasets.iter().find(|d| d.reference == reference) else {
            return Err(format!("no document, blob or dataset `{reference}`"));
        };
        if dataset.pinned() {
            return Ok(());
        }
        let budget = usize::try_from(self.settings.memory_budget_bytes).unwrap_or(usize::MAX);
        pinned_room(&catalog, budget, dataset.bytes, reference)?;
        dataset
            .pinned
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Drop a dataset (a half-built interception being undone).
    pub fn remove(&self, reference: &str) {
        let mut catalog = self.lock();
        catalog.datasets.retain(|d| d.reference != reference);
        let _ = self.ctx.deregister_table(reference);
        drop(catalog);
        for listener in self
            .removal_listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            listener(reference);
        }
    }

    pub fn get(&self, reference: &str) -> Option<Arc<Dataset>> {
        let found = self
            .lock()
            .datasets
            .iter()
            .find(|d| d.reference == reference)
            .cloned();
        if let Some(d) = &found {
            d.touch();
        }
        found
    }

    pub fn was_evicted(&self, reference: &str) -> bool {
        self.lock().evicted.iter().any(|r| r == reference)
    }

    pub fn list(&self) -> Vec<Arc<Dataset>> {
        self.lock().datasets.clone()
    }

    pub fn references(&self) -> Vec<String> {
        self.lock()
            .datasets
            .iter()
            .map(|d| d.reference.clone())
            .collect()
    }

    /// Check the statement, plan it and walk the plan (§10.3), without running anything (on the
    /// caller's thread: for benches and tests; queries plan on the engine).
    pub async fn plan_checked(
        &self,
        sql: &str,
    ) -> Result<datafusion::logical_expr::LogicalPlan, QueryError> {
        let datasets = self.references().into_iter().collect();
        plan_checked_in(&self.ctx, sql, &datasets)
            .await
            .map(|(plan, _)| plan)
    }

    /// Plan `sql`, check it with the guard, run it: all of it on the engine's threads and under
    /// `queryTimeoutMs`, the result read as a stream and capped (SPEC §10.2).
    pub async fn query(&self, sql: &str) -> Result<QueryOutput, QueryError> {
        let timeout = self.settings.query_timeout;
        // This query's own view of the session, carrying its deadline to every step of the
        // work (the catalog, functions and rules are shared).
        let mut state = self.ctx.state();
        state
            .config_mut()
            .options_mut()
            .extensions
            .insert(deadline::QueryDeadline::after(timeout));
        let ctx = SessionContext::new_with_state(state);
        let sql = sql.to_string();
        let datasets: std::collections::HashSet<String> = self.references().into_iter().collect();
        let max_rows = self.settings.max_result_rows;
        let max_bytes = usize::try_from(self.settings.memory_budget_bytes).unwrap_or(usize::MAX);
        let work = async move {
            let (plan, scanned) = plan_checked_in(&ctx, &sql, &datasets).await?;
            let frame = ctx
                .execute_logical_plan(plan)
                .await
                .map_err(|e| QueryError::Sql(e.to_string()))?;
            let schema: SchemaRef = Arc::new(frame.schema().as_arrow().clone());
            let task = frame.task_ctx();
            let physical = frame
                .create_physical_plan()
                .await
                .map_err(|e| QueryError::Sql(e.to_string()))?;
            guard::check_physical(&physical)?;
            let physical =
                output::bound_projections(physical).map_err(|e| QueryError::Sql(e.to_string()))?;
            let stream = datafusion::physical_plan::execute_stream(physical, Arc::new(task))
                .map_err(|e| QueryError::Sql(e.to_string()))?;
            let (batches, rows) = engine::collect_capped(stream, max_rows, max_bytes).await?;
            Ok::<_, QueryError>((
                QueryOutput {
                    schema,
                    batches,
                    rows,
                },
                scanned,
            ))
        };
        let (output, scanned) = match self.engine.run_within(timeout, work).await {
            // The deadline inside the work and the timeout around it are the same limit: the
            // client reads the same answer whichever fired first.
            Err(QueryError::Sql(message)) if message.contains(deadline::STOPPED) => {
                return Err(QueryError::Timeout(timeout.as_millis()));
            }
            other => other?,
        };
        for name in scanned {
            // `get` marks the dataset as used, which is what eviction orders by.
            let _ = self.get(&name);
        }
        Ok(output)
    }

    /// Run `work` on the engine's threads (loom's own tools: queries, profiling, envelopes,
    /// exports), off the threads that carry passthrough traffic, for at most `queryTimeoutMs`
    /// timed from the caller's runtime; `Ok(None)` when that passed (the work is aborted).
    pub async fn on_engine<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<Option<T>, String> {
        // Counted at both ends, so the idle period is timed from the end of long work.
        crate::footprint::heavy_work();
        // The session's turn is taken here, where loom's own tools enter the engine (a query
        // inside such work runs within the same turn).
        let share = self.share.clone();
        let work = async move {
            let _turn = share.acquire_owned().await;
            work.await
        };
        let outcome = self.engine.run(self.settings.query_timeout, work).await;
        crate::footprint::heavy_work();
        outcome
    }

    /// Statements that must never run, each with the words of the refusal that must stop it:
    /// the guard's (`refused: …`), the run-time bound of a value-building function, or — for
    /// quoted paths and URLs, which are no table at all — the planner's. loom refuses to start
    /// if any of them runs, or is stopped by anything else.
    pub const FORBIDDEN: &'static [(&'static str, &'static str)] = &[
        (
            "COPY (SELECT 1) TO '/tmp/loom-selftest.csv'",
            "refused: only read-only queries",
        ),
        (
            "CREATE EXTERNAL TABLE loom_selftest STORED AS CSV LOCATION '/etc/passwd'",
            "refused: only read-only queries",
        ),
        (
            "CREATE TABLE loom_selftest AS SELECT 1",
            "refused: only read-only queries",
        ),
        (
            "CREATE VIEW loom_selftest AS SELECT 1",
            "refused: only read-only queries",
        ),
        (
            "DROP TABLE loom_selftest",
            "refused: only read-only queries",
        ),
        (
            "INSERT INTO loom_selftest VALUES (1)",
            "refused: only read-only queries",
        ),
        (
            "SET datafusion.execution.batch_size = 1",
            "refused: only read-only queries",
        ),
        (
            "PREPARE loom_selftest AS SELECT 1",
            "refused: only read-only queries",
        ),
        ("SELECT * FROM '/etc/passwd'", "not found"),
        ("SELECT * FROM 'https://example.com/data.csv'", "not found"),
        ("SELECT * FROM range(10)", "refused: `range"),
        (
            "SELECT * FROM generate_series(1, 10)",
            "refused: `generate_series",
        ),
        ("SELECT 1; SELECT 2", "refused: exactly one statement"),
        (
            "SELECT repeat('a', 300000000)",
            "refused: `repeat` would build",
        ),
        ("SELECT lpad('a', 300000000)", "refused: `lpad` would build"),
        (
            "SELECT array_repeat(1, 300000000)",
            "refused: `array_repeat` would build",
        ),
        (
            "SELECT array_resize(make_array(1), 1000000000, 0)",
            "refused: `array_resize` would build",
        ),
        (
            "SELECT array_repeat(array_repeat(1, 100000), 100000)",
            "refused: at most one of",
        ),
        ("SELECT range(300000000)", "refused: `range` would build"),
        (
            "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT * FROM r",
            "refused: recursive CTEs",
        ),
        // A long literal times an allowed count: bounded by the bytes it would build.
        (
            "SELECT length(repeat('aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa', 100000))",
            "loom allows at most",
        ),
        (
            "SELECT length(replace(repeat('a', 100000), 'a', 'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb'))",
            "loom allows at most",
        ),
        // A chain of functions that each return more than they take, merged into one nested
        // expression and folded at planning: every step is checked (`loom_checked`).
        (
            "WITH a AS (SELECT repeat('x', 8000) AS s), b AS (SELECT CAST(string_to_array(s, NULL) AS VARCHAR) AS s FROM a), \
             c AS (SELECT CAST(string_to_array(s, NULL) AS VARCHAR) AS s FROM b) SELECT length(s) FROM c",
            "loom allows at most",
        ),
        (
            "WITH a AS (SELECT repeat('x', 8000) AS s) \
             SELECT length(array_to_string(string_to_array(s, NULL), s)) FROM a",
            "loom allows at most",
        ),
        // A 14-level CTE chain joining each level to itself: refused before planning.
        (
            "WITH a AS (SELECT 1 AS x), b AS (SELECT p.x FROM a p JOIN a q ON p.x = q.x), \
             c AS (SELECT p.x FROM b p JOIN b q ON p.x = q.x), d AS (SELECT p.x FROM c p JOIN c q ON p.x = q.x), \
             e AS (SELECT p.x FROM d p JOIN d q ON p.x = q.x), f AS (SELECT p.x FROM e p JOIN e q ON p.x = q.x), \
             g AS (SELECT p.x FROM f p JOIN f q ON p.x = q.x), h AS (SELECT p.x FROM g p JOIN g q ON p.x = q.x), \
             i AS (SELECT p.x FROM h p JOIN h q ON p.x = q.x), j AS (SELECT p.x FROM i p JOIN i q ON p.x = q.x), \
             k AS (SELECT p.x FROM j p JOIN j q ON p.x = q.x), l AS (SELECT p.x FROM k p JOIN k q ON p.x = q.x), \
             m AS (SELECT p.x FROM l p JOIN l q ON p.x = q.x), n AS (SELECT p.x FROM m p JOIN m q ON p.x = q.x), \
             o AS (SELECT p.x FROM n p JOIN n q ON p.x = q.x) SELECT count(*) FROM o",
            "refused: the query stands for",
        ),
    ];

    /// Run every [`Store::FORBIDDEN`] statement; an error if any of them ran, or was stopped by
    /// something other than what must stop it. SQL text over the size limit and expressions
    /// nested too deep are checked too.
    pub async fn self_test(&self) -> Result<(), String> {
        // Its code pages are handed back once loom is idle (a new HTTP session runs it too).
        crate::footprint::heavy_work();
        let oversized = format!("SELECT 1 AS x{}", " ".repeat(guard::MAX_SQL_BYTES));
        let deep = format!(
            "SELECT {}1 AS x",
            "1 + ".repeat(guard::MAX_EXPRESSION_DEPTH + 1)
        );
        let long = [
            (oversized.as_str(), "refused: the SQL is"),
            (deep.as_str(), "refused: expressions nest"),
        ];
        for (sql, must_say) in Self::FORBIDDEN.iter().chain(long.iter()) {
            let shown = crate::common::text::cut(sql, 80);
            match self.query(sql).await {
                Ok(output) => {
                    return Err(format!(
                        "the sealed engine ran `{shown}` ({} rows); refusing to start",
                        output.rows
                    ));
                }
                Err(error) if error.to_string().contains(must_say) => {}
                Err(error) => {
                    return Err(format!(
                        "`{shown}` was stopped by `{error}`, not by what must stop it \
                         (`{must_say}`); refusing to start"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What pinned datasets (materialized views, pinned documents and blobs) may hold together:
/// half of `memoryBudgetBytes`, so that the other half is always there for the results the
/// firewall intercepts — pinning can never switch it off.
pub const PINNED_SHARE_DIVISOR: usize = 2;

fn pinned_bytes(catalog: &Catalog) -> usize {
    catalog
        .datasets
        .iter()
        .filter(|d| d.pinned())
        .map(|d| d.bytes)
        .sum()
}

/// Whether `bytes` more may be pinned; the refusal names the share, what holds it and the ways
/// on.
fn pinned_room(catalog: &Catalog, budget: usize, bytes: usize, what: &str) -> Result<(), String> {
    let share = budget / PINNED_SHARE_DIVISOR;
    let held = pinned_bytes(catalog);
    if held.saturating_add(bytes) <= share {
        return Ok(());
    }
    let holders: Vec<String> = catalog
        .datasets
        .iter()
        .filter(|d| d.pinned())
        .take(10)
        .map(|d| format!("{} ({} bytes)", d.reference, d.bytes))
        .collect();
    Err(format!(
        "pinning `{what}` ({bytes} bytes) would pass the pinned share: pinned views and documents \
         may hold at most half of memoryBudgetBytes ({share} of {budget} bytes), and {held} bytes \
         are pinned already{}; query the data directly instead (loom_query keeps a large answer \
         as a dataset that can be evicted), or raise memoryBudgetBytes",
        if holders.is_empty() {
            String::new()
        } else {
            format!(" ({})", holders.join(", "))
        }
    ))
}

#[cfg(test)]
mod tests;
