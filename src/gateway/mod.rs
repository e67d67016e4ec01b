//! loom's upstream face: one MCP server over stdio that re-exposes every downstream server.
//!
//! [`Gateway`] owns the downstream servers and the exposed catalog; [`GatewayService`] is what
//! rmcp serves. Results that pass through (tool calls, resource reads, prompts, completions)
//! never go through rmcp's typed model: their bytes are carried from the downstream transport
//! to the upstream one (see [`crate::wire`]).

pub(crate) mod catalog;
pub(crate) mod direct;
pub(crate) mod discovery;
mod forward;
mod handler;
mod hub;
mod login;
pub(crate) mod naming;
mod observe;
mod outbox;
pub(crate) mod protocol;
mod subscriptions;
// Tool search keeps its path (`loom::gateway::search`), which tests and benches use.
pub use discovery::search;
pub use discovery::semantic;

// The protocol's rules by their short names, for this module and the ones beside it.
use protocol::{era, input, logging, task_extension, tasks};
pub use subscriptions::MAX_LISTENERS;
use subscriptions::Subscriptions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::ProgressToken;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use catalog::{ExposedCatalog, Route, ServerListing};
pub use handler::GatewayService;
pub use hub::Hub;

use crate::intercept::Origin;
use crate::result::{Decision, ResultPath};
use crate::store::{Store, StoreSettings};

use crate::config::Config;
use crate::downstream::{Downstream, DownstreamEvent, ServerState, UpstreamLink};
use crate::wire::RawResults;

/// A fingerprint of the connections a session reaches and how often each changed.
fn view_version(servers: &[Arc<Downstream>]) -> u64 {
    servers
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |acc: u64, server| {
            (acc ^ (server.key as u64))
                .wrapping_mul(0x0100_0000_01b3)
                .wrapping_add(server.changes())
                .wrapping_mul(0x0100_0000_01b3)
        })
}

/// Rebuilds of the catalog that arrive within this window become one `list_changed` upstream.
pub const LIST_CHANGED_COALESCE: Duration = Duration::from_millis(50);

/// How long shutdown waits for every child to be stopped before giving up on them (they are
/// killed by then; this only bounds waiting for the reaping).
pub const SHUTDOWN_BUDGET: Duration = Duration::from_millis(1800);

/// Why loom could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no servers to start: the configuration has no enabled server")]
    NoServers,
    #[error("the query engine failed its start-up check: {0}")]
    Engine(String),
    #[error("no server could start:\n{}", .0.iter().map(|(n, r)| format!("  - {n}: {r}")).collect::<Vec<_>>().join("\n"))]
    AllFailed(Vec<(String, String)>),
    #[error("{0}")]
    Cluster(String),
}

/// One client session of the gateway: the catalog it sees, its datasets and documents, its
/// report. The downstream servers are the [`Hub`]'s, shared by every session (one over stdio;
/// one per HTTP session).
pub struct Gateway {
    hub: Arc<Hub>,
    /// Whether ending this session ends the hub too (stdio: the session is the process).
    owns_hub: bool,
    exposed: RwLock<Arc<ExposedCatalog>>,
    upstream: UpstreamLink,
    /// Raw results waiting to be spliced into upstream responses, by upstream request id.
    splice: RawResults,
    /// Downstream progress token → the upstream client's token, per server.
    progress: forward::ProgressTable,
    /// This session's number among the hub's sessions (server requests find their session by
    /// it, §5.8).
    number: u64,
    /// Calls waiting for input, bridged tasks, task routes and log levels (the eras' part).
    protocol: protocol::ProtocolState,
    dirty: Notify,
    store: Arc<Store>,
    /// What becomes of each downstream tool result (SPEC §8, §19).
    result: ResultPath,
    /// The snapshot writer, drained at shutdown.
    snapshot_task: Mutex<Option<JoinHandle<()>>>,
    shutdown: CancellationToken,
    /// Cancelled when the client's side of the connection ends: what waits only for the client
    /// (a listen stream) stops at once instead of holding the shutdown.
    pub(crate) client_gone: CancellationToken,
    /// This session's own loops (the catalog rebuild).
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The tool search index, the tools searches joined and their nonce (SPEC §20).
    discovery: discovery::DiscoveryState,
    stats: Arc<crate::report::SessionStats>,
    /// Where this session's exports go and what they wrote so far (SPEC §15).
    exports: crate::tools::Exports,
    /// Log lines and progress waiting for the client, bounded (SPEC §5.9).
    outbox: outbox::Outbox,
    /// The resources this session subscribed to and its client's listen streams.
    subscriptions: Subscriptions,
    /// Whose session this is (over HTTP a digest of its token or OAuth subject), once known.
    credential: RwLock<Option<String>>,
    /// Per subscribed URI, the connections (keys) it was counted on (SPEC §22).
    subscribed_on: Mutex<HashMap<String, Vec<usize>>>,
    /// What the catalog was last built from: [`Self::view_version`] then.
    built_from: std::sync::atomic::AtomicU64,
    /// How the client reaches this session, for telemetry (unset: stdio).
    face: std::sync::OnceLock<(crate::telemetry::Transport, Option<String>)>,
    /// This session's part in the cluster (SPEC §25), once it joined its credential's scope.
    cluster: Arc<std::sync::OnceLock<Arc<crate::cluster::Membership>>>,
}

/// With a cluster, an export is also copied to the scope's `exports/` in the store (SPEC §25):
/// the answer names it under `stored`, or says under `storeError` why it is only local.
async fn store_export(
    member: &crate::cluster::Membership,
    mut result: rmcp::model::CallToolResult,
    overwrite: bool,
) -> rmcp::model::CallToolResult {
    let Some(serde_json::Value::Object(written)) = result.structured_content.as_mut() else {
        return result;
    };
    let Some(path) = written
        .get("path")
        .and_then(|p| p.as_str())
        .map(std::path::PathBuf::from)
    else {
        return result;
    };
    match member.store_export(&path, overwrite).await {
        Ok(url) => written.insert("stored".into(), url.into()),
        Err(error) => written.insert("storeError".into(), error.into()),
    };
    let text = serde_json::Value::Object(written.clone()).to_string();
    result.content = vec![rmcp::model::ContentBlock::text(text)];
    result
}

impl Gateway {
    /// Start the hub (every enabled server) and one session over it that owns it: loom over
    /// stdio. Fails only when no server could start at all, or the engine fails its check.
    pub async fn start(config: Config) -> Result<Arc<Self>, StartError> {
        let hub = Hub::start(config).await?;
        match Gateway::session(hub.clone(), true).await {
            Ok(gateway) => Ok(gateway),
            Err(error) => {
                hub.shutdown().await;
                Err(error)
            }
        }
    }

    /// A new client session over `hub`: its own store (checked sealed before use), catalog,
    /// joined tools and report.
    pub async fn session(hub: Arc<Hub>, owns_hub: bool) -> Result<Arc<Self>, StartError> {
        let config = hub.config.clone();
        let store = Arc::new(Store::on_shared(
            store_settings(&config),
            &hub.engine,
            owns_hub,
        ));
        // Sealed or nothing: if any forbidden statement runs, the session does not start.
        store.self_test().await.map_err(StartError::Engine)?;
        let mut snapshot_task = None;
        if let Some(snapshot) = &config.snapshot {
            // Never worse than no proxy: a snapshot root that cannot be opened is a warning.
            match crate::snapshot::open(&snapshot.url) {
                Ok(location) => {
                    let (writer, task) = crate::snapshot::SnapshotWriter::start(location);
                    store.listen(Box::new(move |d| writer.dataset_created(d)));
                    snapshot_task = Some(task);
                }
                Err(error) => tracing::warn!("session snapshots are off: {error}"),
            }
        }
        let stats = Arc::new(crate::report::SessionStats::new());
        let cluster = Arc::new(std::sync::OnceLock::new());
        let gateway = Arc::new(Self {
            upstream: UpstreamLink::mirrored(&hub.latest),
            hub: hub.clone(),
            owns_hub,
            exposed: RwLock::new(Arc::new(ExposedCatalog::default())),
            splice: RawResults::new(),
            progress: forward::ProgressTable::default(),
            number: hub.next_session_number(),
            protocol: protocol::ProtocolState::default(),
            dirty: Notify::new(),
            result: ResultPath::new(
                store.clone(),
                config.clone(),
                hub.summarizer.clone(),
                stats.clone(),
                cluster.clone(),
            ),
            store,
            snapshot_task: Mutex::new(snapshot_task),
            shutdown: CancellationToken::new(),
            client_gone: CancellationToken::new(),
            tasks: Mutex::new(Vec::new()),
            discovery: discovery::DiscoveryState::default(),
            stats,
            exports: crate::tools::Exports::new(&config.export_dir, owns_hub),
            outbox: outbox::Outbox::default(),
            subscriptions: Subscriptions::default(),
            credential: RwLock::new(None),
            subscribed_on: Mutex::default(),
            built_from: std::sync::atomic::AtomicU64::new(u64::MAX),
            face: std::sync::OnceLock::new(),
            cluster,
        });
        hub.register(&gateway);
        let source: std::sync::Arc<dyn crate::telemetry::metrics::Source> = gateway.clone();
        crate::telemetry::metrics::watch(std::sync::Arc::downgrade(&source));
        // Until the HTTP face says which credential opened it, a session is the local one
        // (stdio).
        hub.in_flight
            .session_opened(gateway.number, LOCAL_CREDENTIAL);
        let rebuild = tokio::spawn(gateway.clone().rebuild_loop());
        gateway.lock_tasks().push(rebuild);
        if let Some(writer) = outbox::Outbox::writer(&gateway) {
            let writer = tokio::spawn(writer);
            gateway.lock_tasks().push(writer);
        }
        // The first catalog is built here, not by the coalescing loop, so the first tools/list
        // answers at once.
        gateway.rebuild();
        // Over stdio the session is the machine's; an HTTP session joins once its credential is
        // known ([`Self::enter`]).
        if owns_hub {
            gateway.join_cluster().await;
        }
        Ok(gateway)
    }

    /// The session now serves `credential`: set it, and join its scope of the cluster.
    pub async fn enter(&self, credential: &str) {
        self.set_credential(credential);
        self.join_cluster().await;
    }

    /// Join the cluster's scope of this session's credential (the machine's until one is set):
    /// a block of ref numbers claimed, every dataset written to the store as it is minted. A
    /// store that cannot be written leaves the session to itself (SPEC §25), never refuses it.
    async fn join_cluster(&self) {
        let Some(cluster) = self.hub.cluster.clone() else {
            return;
        };
        if self.cluster.get().is_some() {
            return;
        }
        let credential = self
            .credential()
            .unwrap_or_else(|| LOCAL_CREDENTIAL.to_string());
        let member = crate::cluster::Membership::join(cluster, &credential, &self.store).await;
        let listening = member.clone();
        self.store
            .listen(Box::new(move |d| listening.dataset_created(d)));
        let removing = member.clone();
        self.store
            .listen_for_removals(Box::new(move |r| removing.dataset_removed(r)));
        self.store.join_from(member.join_source());
        let _ = self.cluster.set(member);
    }

    /// The servers and what the sessions share.
    pub fn hub(&self) -> &Arc<Hub> {
        &self.hub
    }

    pub fn config(&self) -> &Config {
        &self.hub.config
    }

    /// The servers as this session reaches them: the connections every session shares, and
    /// a subject's own where it logs in for itself (SPEC §4.7).
    pub fn servers(&self) -> Vec<Arc<Downstream>> {
        let credential = self.credential();
        (0..self.hub.servers.len())
            .filter_map(|index| self.hub.server_for(index, credential.as_deref()))
            .collect()
    }

    /// Server `index` as this session reaches it.
    pub(crate) fn server(&self, index: usize) -> Option<Arc<Downstream>> {
        self.hub.server_for(index, self.credential().as_deref())
    }

    /// Whether a server this session reaches changed (or another connection took its place)
    /// since the catalog was built.
    pub(crate) fn catalog_is_stale(&self) -> bool {
        self.built_from.load(std::sync::atomic::Ordering::Acquire) != view_version(&self.servers())
    }

    /// What the eras and extensions keep for this session.
    pub(crate) fn protocol_state(&self) -> &protocol::ProtocolState {
        &self.protocol
    }

    /// This session's part in a cluster (SPEC §25), once it joined.
    pub(crate) fn cluster_member(&self) -> Option<&Arc<crate::cluster::Membership>> {
        self.cluster.get()
    }

    /// Whose session this is, once the face said.
    pub(crate) fn credential(&self) -> Option<String> {
        self.credential.read().ok().and_then(|c| c.clone())
    }

    pub fn exposed(&self) -> Arc<ExposedCatalog> {
        self.exposed.read().map(|c| c.clone()).unwrap_or_default()
    }

    pub fn upstream(&self) -> &UpstreamLink {
        &self.upstream
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// Who produced a call's result: the server, its own tool name and the arguments,
    /// redacted (or omitted for tools on the server's `provenanceDenylist`).
    pub(crate) fn origin_of(
        &self,
        route: &Route,
        arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Origin {
        let server = &self.hub.servers[route.server];
        let denied = server.config.provenance_denylist.contains(&route.name);
        Origin {
            server: server.name().to_string(),
            tool: route.name.clone(),
            args: if denied {
                serde_json::Value::String(crate::redact::OMITTED.into())
            } else {
                crate::redact::arguments(arguments)
            },
        }
    }

    /// Pass a raw tool result through, or replace it by an envelope (SPEC §8).
    pub(crate) async fn intercept(
        &self,
        raw: Box<serde_json::value::RawValue>,
        origin: Origin,
        context: &rmcp::service::RequestContext<rmcp::service::RoleServer>,
    ) -> rmcp::model::ServerResult {
        // Cancelled while the result is decided (a model summary can take seconds): the
        // decision is dropped, and with it the request to the model and what the reduction
        // held. rmcp drops the answer to a request its client cancelled; the token is also
        // cancelled when loom's service stops, and then this error may still go out.
        let decided = tokio::select! {
            decided = self.decide(raw, origin) => decided,
            () = context.ct.cancelled() => {
                return rmcp::model::ServerResult::CallToolResult(crate::tools::error_result(
                    "loom: the call was cancelled (by the client, or loom is stopping)",
                ));
            }
        };
        match decided {
            Decision::PassThrough(raw, _keep) => {
                self.pass_on(forward::Forwarded::Raw(raw), context, false)
            }
            Decision::Built(result) => *result,
        }
    }

    /// What answers a raw tool result ([`crate::result`] decides; the session tells it whether
    /// the tool has an MCP Apps view, which only its catalog knows).
    pub(crate) async fn decide(
        &self,
        raw: Box<serde_json::value::RawValue>,
        origin: Origin,
    ) -> Decision {
        let view = self
            .hub
            .servers
            .iter()
            .position(|s| s.name() == origin.server)
            .is_some_and(|index| self.exposed().has_view(index, &origin.tool));
        self.result.decide(raw, origin, view).await
    }

    /// One of loom's own tools answered: its answer counts against the session's saving.
    pub(crate) fn answered_own(
        &self,
        tool: &str,
        result: rmcp::model::CallToolResult,
    ) -> rmcp::model::ServerResult {
        let size = serde_json::to_string(&result)
            .map(|text| crate::report::Size::of(&text))
            .unwrap_or_default();
        self.stats.own_call(tool, size);
        rmcp::model::ServerResult::CallToolResult(result)
    }

    /// The session's figures as of now (SPEC §21).
    pub fn report(&self) -> crate::report::Report {
        let mut held = crate::report::Held::default();
        for dataset in self.store.list() {
            match dataset.content {
                crate::store::document::Content::Table => held.datasets += 1,
                crate::store::document::Content::Document(_) => held.documents += 1,
                crate::store::document::Content::Blob(_) => held.blobs += 1,
            }
            held.bytes += dataset.bytes as u64;
        }
        self.stats.report(held)
    }

    /// This session subscribes to `uri`; true when it was not subscribed before (the
    /// connections it goes to are then asked, each once for all sessions: SPEC §22).
    pub(crate) fn subscribe(&self, uri: &str) -> bool {
        self.subscriptions.subscribe(uri)
    }

    /// This session unsubscribes from `uri`; true when it was subscribed.
    pub(crate) fn unsubscribe(&self, uri: &str) -> bool {
        self.subscriptions.unsubscribe(uri)
    }

    /// This session's subscription to `uri` was counted on the connections `keys`.
    pub(crate) fn counted_subscription(&self, uri: &str, keys: Vec<usize>) {
        self.subscribed_on
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_owned(), keys);
    }

    /// The connections this session's subscription to `uri` was counted on (forgotten here).
    pub(crate) fn take_subscribed_connections(&self, uri: &str) -> Vec<Arc<Downstream>> {
        let keys = self
            .subscribed_on
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri)
            .unwrap_or_default();
        keys.into_iter()
            .filter_map(|key| self.hub.connection(key))
            .collect()
    }

    /// The connections a subscription to `uri` goes to: the server that lists it (or whose
    /// template matches it), else every server that declared `resources.subscribe` — as this
    /// session reaches them (a subject's own connections included).
    pub(crate) fn subscription_targets(&self, uri: &str) -> Vec<Arc<Downstream>> {
        let servers = self.servers();
        // A 2026-07-28 server takes no resources/subscribe (SPEC §4.6).
        let modern = |server: &Downstream| server.live().is_ok_and(|live| live.modern);
        match self.exposed().resource_owner(uri) {
            Some(owner) => servers
                .into_iter()
                .filter(|server| server.index == owner && !modern(server))
                .collect(),
            None => servers
                .into_iter()
                .filter(|server| {
                    server.catalog().capabilities.as_ref().is_some_and(|c| {
                        c.resources
                            .as_ref()
                            .is_some_and(|r| r.subscribe == Some(true))
                    })
                })
                .filter(|server| !modern(server))
                .collect(),
        }
    }

    /// Whether this session's client speaks 2026-07-28 (it opened the session without
    /// `initialize`): it gets no unsolicited notifications but what `subscriptions/listen`
    /// asks for.
    pub(crate) fn upstream_is_2026(&self) -> bool {
        self.upstream
            .get()
            .is_some_and(|peer| peer.peer_info().is_none())
    }

    /// When `tool` is named after a server that waits for an OAuth login (`SERVER_…`), what to
    /// tell the caller (SPEC §4.7): its tools are not listed, but a call to one says why.
    pub(crate) fn login_needed_for(&self, tool: &str) -> Option<String> {
        match self.server_named_in(tool)?.state() {
            ServerState::NeedsLogin { message } => Some(message),
            _ => None,
        }
    }

    /// The server `tool` is named after (`S_…`), as this session reaches it: the longest name
    /// that fits (server names may hold `_`: `gh` and `gh_ent`).
    pub(crate) fn server_named_in(&self, tool: &str) -> Option<Arc<Downstream>> {
        self.servers()
            .into_iter()
            .filter(|server| {
                tool.strip_prefix(server.name())
                    .is_some_and(|rest| rest.starts_with('_'))
            })
            .max_by_key(|server| server.name().len())
    }

    /// Calls waiting for this client's input (SPEC §5.11).
    pub fn calls_waiting_for_input(&self) -> usize {
        self.protocol.calls_waiting_for_input()
    }

    /// A listen stream opened; its number (`None` beyond [`MAX_LISTENERS`]).
    pub(crate) fn add_listener(&self, sink: rmcp::service::SubscriptionSink) -> Option<u64> {
        self.subscriptions.add_listener(sink)
    }

    pub(crate) fn remove_listener(&self, number: u64) {
        self.subscriptions.remove_listener(number);
    }

    /// One more listen stream of this session wants `uri`; true when the session did not
    /// want it before and no session did (the server is then asked).
    pub(crate) fn listen_to(&self, uri: &str) -> bool {
        self.subscriptions.listen_to(uri) && self.subscribe(uri)
    }

    /// One listen stream fewer wants `uri`; true when no session wants it any more.
    pub(crate) fn stop_listening_to(&self, uri: &str) -> bool {
        self.subscriptions.stop_listening_to(uri) && self.unsubscribe(uri)
    }

    /// The listen streams open now.
    fn sinks(&self) -> Vec<rmcp::service::SubscriptionSink> {
        self.subscriptions.sinks()
    }

    pub fn stats(&self) -> &crate::report::SessionStats {
        &self.stats
    }

    /// At the end of the session: the short report on stderr and, with `report.path`, the file
    /// (SPEC §21). Off with `report.enabled: false`.
    pub fn write_report(&self) {
        let settings = &self.hub.config.report;
        if !settings.enabled {
            return;
        }
        let report = self.report();
        eprintln!("{}", crate::report::stderr_summary(&report));
        if let Some(path) = &settings.path {
            match crate::report::write(&report, path) {
                Ok(()) => tracing::info!(path = %path.display(), "session report written"),
                Err(error) => {
                    tracing::warn!(path = %path.display(), "could not write the session report: {error}")
                }
            }
        }
    }

    /// Something the catalog shows changed: the coalescing loop rebuilds and tells the client.
    pub(crate) fn catalog_changed(&self) {
        self.dirty.notify_one();
    }

    /// One of loom's own tools. It runs on the engine's threads — queries, but also profiling
    /// a result, building its envelope and writing an export — never on the threads that carry
    /// passthrough traffic (SPEC §10.2).
    pub(crate) async fn call_own_tool(
        &self,
        name: &str,
        arguments: &Option<serde_json::Map<String, serde_json::Value>>,
    ) -> rmcp::model::CallToolResult {
        let store = self.store.clone();
        let config = self.hub.config.clone();
        let exports = self.exports.clone();
        let tool = name.to_string();
        let member = self.cluster.get().cloned();
        // What the call names and another instance (or an earlier session) minted is opened
        // first, from the cluster's store; the listing shows what the store holds too.
        let mut others = Ok(Vec::new());
        if let Some(member) = &member {
            match crate::cluster::prepare(member, &store, name, arguments).await {
                Ok(found) => others = found,
                Err(error) => return crate::tools::error_result(format!("{name}: {error}")),
            }
        }
        let overwrite = arguments
            .as_ref()
            .and_then(|a| a.get("overwrite"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        let arguments = arguments.clone();
        // What the call mints is in the store before its answer; a listing, which may name any
        // dataset held, waits for every write under way.
        let mark = match (&member, name) {
            (Some(member), n) if n != crate::tools::LIST => member.mark(),
            _ => 0,
        };
        // The request's telemetry goes with the work to the engine's runtime (SPEC §24.1).
        let observed = crate::telemetry::current();
        let work = crate::telemetry::within(observed, async move {
            match tool.as_str() {
                crate::tools::QUERY => {
                    crate::tools::query(&store, config.token_threshold, &arguments).await
                }
                crate::tools::LIST => crate::tools::list_with(&store, &others, &arguments),
                crate::tools::MATERIALIZE => crate::tools::materialize(&store, &arguments).await,
                crate::tools::EXPORT => crate::tools::export(&store, &config, &exports, &arguments),
                crate::tools::read::READ => crate::tools::read::read(&store, &arguments).await,
                _ => crate::tools::describe(&store, &arguments),
            }
        });
        let timeout = self.store.settings().query_timeout;
        let outcome = self.store.on_engine(work).await;
        if let Some(member) = &member {
            member.settled_since(mark).await;
        }
        match outcome {
            Ok(Some(result)) if name == crate::tools::EXPORT => match &member {
                Some(member) => store_export(member, result, overwrite).await,
                None => result,
            },
            Ok(Some(result)) => result,
            // Timed on this runtime: answered on time even when the engine's threads are busy
            // in work that cannot be interrupted at once.
            Ok(None) => crate::tools::error_result(format!(
                "{}: {}",
                name,
                crate::store::QueryError::Timeout(timeout.as_millis())
            )),
            Err(error) => crate::tools::error_result(format!("loom: {error}")),
        }
    }

    pub fn splice_table(&self) -> RawResults {
        self.splice.clone()
    }

    fn lock_tasks(&self) -> std::sync::MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.tasks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_progress(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(usize, ProgressToken), ProgressToken>> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn progress_table(&self) -> forward::ProgressTable {
        self.progress.clone()
    }

    /// The credential (a digest of its bearer token) this session was opened with over HTTP:
    /// a server's request that no call caused, and a server's log line, reach it only while
    /// no other credential could be the one concerned (SPEC §5.4, §5.8).
    /// Wait until the log and progress notifications queued so far are written (bounded).
    pub(super) async fn notes_drained(&self) {
        // The hub hands events over in order; let it take what was read before the answer.
        tokio::task::yield_now().await;
        self.outbox.drained().await;
    }

    pub fn set_credential(&self, credential: &str) {
        if let Ok(mut slot) = self.credential.write() {
            *slot = Some(credential.to_owned());
        }
        // A subject's own connections join its catalog.
        self.dirty.notify_one();
        self.hub.in_flight.session_opened(self.number, credential);
        self.exports.share_quota(self.hub.export_quota(credential));
    }

    /// End the session: its loops stop, queued snapshot writes finish, its spill directory
    /// goes. A session that owns the hub also stops every child (stdin closed, grace, SIGTERM,
    /// grace, SIGKILL) within the budget.
    pub async fn shutdown(&self) {
        self.hub.in_flight.session_closed(self.number);
        self.shutdown.cancel();
        self.protocol.end();
        for uri in self.subscriptions.drain() {
            for server in self.take_subscribed_connections(&uri) {
                self.hub.unsubscribed(server.key, &uri);
            }
        }
        // Dropping the listener closes the writer's queue; what is queued is still written.
        self.store.stop_listening();
        if let Some(member) = self.cluster.get()
            && tokio::time::timeout(SHUTDOWN_BUDGET / 4, member.settled())
                .await
                .is_err()
        {
            tracing::warn!(
                "shutdown budget ran out with datasets still being written to the cluster store"
            );
        }
        let writer = self
            .snapshot_task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let tasks: Vec<_> = std::mem::take(&mut *self.lock_tasks());
        for task in &tasks {
            task.abort();
        }
        let snapshots = async {
            if let Some(writer) = writer {
                let _ = writer.await;
            }
        };
        let hub = async {
            if self.owns_hub {
                self.hub.shutdown().await;
            }
        };
        if tokio::time::timeout(SHUTDOWN_BUDGET, futures::future::join(hub, snapshots))
            .await
            .is_err()
        {
            tracing::warn!(
                "shutdown budget ran out with servers still stopping or snapshots still being written"
            );
        }
        self.store.remove_spill();
    }

    /// Rebuild the exposed catalog now; returns which lists changed.
    fn rebuild(&self) -> ListsChanged {
        let servers = self.servers();
        self.built_from
            .store(view_version(&servers), std::sync::atomic::Ordering::Release);
        let listings: Vec<ServerListing<'_>> = servers
            .iter()
            .filter(|s| !matches!(s.state(), ServerState::Failed { .. }))
            .map(|s| ServerListing {
                index: s.index,
                name: s.name(),
                catalog: s.catalog(),
            })
            .collect();
        let reserved: Vec<&str> = crate::tools::NAMES
            .iter()
            .chain(discovery::DISCOVERY_NAMES)
            .copied()
            .chain([discovery::STATS])
            .collect();
        let mut next =
            ExposedCatalog::build(&listings, self.hub.config.max_tool_name_length, &reserved);
        let compression = &self.hub.config.compression;
        next.apply_output_schema_policy(|route| {
            self.hub
                .servers
                .get(route.server)
                .is_some_and(|s| compression.resolve(s.name(), &route.name).bypass)
        });
        let names: Vec<String> = self
            .hub
            .servers
            .iter()
            .map(|s| s.name().to_string())
            .collect();
        let found = discovery::Discovery::build(&next, &names, self.hub.tool_embedder.as_deref());
        if let Some(max) = self.hub.config.tools.max_description_chars {
            for tool in &mut next.tools {
                let cut = tool
                    .get("description")
                    .and_then(serde_json::Value::as_str)
                    .and_then(|d| discovery::cut_description(d, max));
                if let Some(cut) = cut {
                    tool.insert("description".into(), serde_json::Value::String(cut));
                }
            }
        }
        self.stats.exposed(found.direct_tools, found.direct);
        self.discovery.replace(found);
        // Listed whatever the tools mode: how a model asks for a server's login.
        next.tools.extend(self.login_tools(&servers));
        next.tools.extend(
            crate::tools::tools()
                .into_iter()
                .chain(std::iter::once(discovery::stats_tool()))
                .chain(discovery::tools())
                .filter_map(|t| serde_json::to_value(t).ok())
                .filter_map(|v| v.as_object().cloned()),
        );
        // loom's own view is listed after every server's resources; its URI is loom's.
        next.resources
            .retain(|r| r.uri != crate::tools::view::VIEW_URI);
        next.resources.push(crate::tools::view::resource());
        let next = Arc::new(next);
        let Ok(mut slot) = self.exposed.write() else {
            return ListsChanged::default();
        };
        let changed = ListsChanged {
            tools: slot.tools != next.tools,
            resources: slot.resources != next.resources || slot.templates != next.templates,
            prompts: slot.prompts != next.prompts,
        };
        *slot = next;
        changed
    }

    /// Coalesces catalog changes: many within [`LIST_CHANGED_COALESCE`] → one rebuild and at
    /// most one notification per list.
    async fn rebuild_loop(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.dirty.notified() => {}
            }
            tokio::time::sleep(LIST_CHANGED_COALESCE).await;
            let changed = self.rebuild();
            let joined = self.discovery.take_joined_changed();
            // 2026-07-28 clients hear of changes on their listen streams only; clients of the
            // `initialize` era get the notifications as before.
            for sink in self.sinks() {
                if changed.tools || joined {
                    let _ = sink.notify_tool_list_changed().await;
                }
                if changed.resources {
                    let _ = sink.notify_resource_list_changed().await;
                }
                if changed.prompts {
                    let _ = sink.notify_prompt_list_changed().await;
                }
            }
            let Some(peer) = self.upstream.get() else {
                continue;
            };
            if peer.peer_info().is_none() {
                continue;
            }
            if changed.tools || joined {
                let _ = peer.notify_tool_list_changed().await;
            }
            if changed.resources {
                let _ = peer.notify_resource_list_changed().await;
            }
            if changed.prompts {
                let _ = peer.notify_prompt_list_changed().await;
            }
        }
    }

    /// A downstream event, as far as it concerns this session (the hub hands each event to
    /// every session).
    async fn handle_event(&self, event: &DownstreamEvent) {
        match event {
            DownstreamEvent::CatalogChanged { .. } | DownstreamEvent::ListChanged { .. } => {
                self.dirty.notify_one()
            }
            DownstreamEvent::Progress { server, params } => {
                let upstream_token = self
                    .lock_progress()
                    .get(&(*server, params.progress_token.clone()))
                    .cloned();
                if let Some(token) = upstream_token {
                    let mut params = params.clone();
                    params.progress_token = token;
                    self.outbox.offer(outbox::Note::Progress(params));
                }
            }
            #[allow(deprecated)] // logging is SEP-2577-deprecated but clients still show it
            DownstreamEvent::Logging {
                server,
                params,
                audience,
                read_at,
            } => {
                // A line of a server shared by sessions of several credentials reaches only
                // the credential whose calls it can concern (decided as it arrived).
                if !audience.contains(&self.number) {
                    return;
                }
                if !self.protocol.passes_log(
                    self.upstream_is_2026(),
                    *server,
                    &params.level,
                    *read_at,
                ) {
                    return;
                }
                let name = self
                    .hub
                    .servers
                    .get(*server)
                    .map(|s| s.name())
                    .unwrap_or("?");
                let mut params = params.clone();
                params.logger = Some(match params.logger.take() {
                    Some(logger) => format!("{name}/{logger}"),
                    None => name.to_string(),
                });
                self.outbox.offer(outbox::Note::Log(params));
            }
            DownstreamEvent::TaskStatus {
                server,
                notification,
            } => self.task_status(*server, notification.clone()).await,
            DownstreamEvent::ResourceUpdated { params, .. } => {
                // Each listen stream's sink lets through the URIs it accepted.
                for sink in self.sinks() {
                    let _ = sink.notify_resource_updated(params.uri.clone()).await;
                }
                let subscribed = self.subscriptions.is_subscribed(&params.uri);
                let legacy = self
                    .upstream
                    .get()
                    .filter(|peer| peer.peer_info().is_some());
                if subscribed && let Some(peer) = legacy {
                    let _ = peer.notify_resource_updated(params.clone()).await;
                }
            }
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        self.hub.in_flight.session_closed(self.number);
        tracing::debug!("a gateway session was freed");
    }
}

/// The credential of the stdio session (HTTP credentials are hex digests, so never equal).
pub(crate) const LOCAL_CREDENTIAL: &str = "stdio";

/// What every session's store is built with.
fn store_settings(config: &Config) -> StoreSettings {
    StoreSettings {
        memory_budget_bytes: config.memory_budget_bytes,
        engine_memory_limit_bytes: config.engine_memory_limit_bytes,
        query_timeout: Duration::from_millis(config.query_timeout_ms),
        ..StoreSettings::default()
    }
}

/// The edit loom's `initialize` answer gets: rmcp's typed capabilities have no 2025-11-25
/// `tasks` member; loom declares it when a server behind it offers task-augmented tools
/// (SPEC §5.10).
pub fn tasks_capability_patch(
    gateway: &Arc<Gateway>,
) -> Arc<dyn Fn(&mut serde_json::Value) + Send + Sync> {
    // Weak: the transport may outlive the session for a moment at exit, and the gateway (its
    // store, its private spill directory) must be dropped when the session ends.
    let gateway = Arc::downgrade(gateway);
    Arc::new(move |result: &mut serde_json::Value| {
        let version = result
            .get("protocolVersion")
            .and_then(serde_json::Value::as_str);
        if era::Era::has_tasks(version)
            && gateway
                .upgrade()
                .is_some_and(|gateway| gateway.offers_tasks())
            && let Some(capabilities) = result
                .get_mut("capabilities")
                .and_then(serde_json::Value::as_object_mut)
        {
            capabilities.insert("tasks".into(), tasks::capability());
        }
    })
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ListsChanged {
    tools: bool,
    resources: bool,
    prompts: bool,
}
