//! One configured server: its process, its MCP connection, what it lists, and the loop that keeps
//! it running (restart with backoff, give up after too many consecutive failures).

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, ListToolsRequest, PaginatedRequestParams,
    Prompt, ProtocolVersion, Resource, ResourceTemplate, ServerCapabilities,
};
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::handler::{DownstreamEvent, DownstreamHandler, UpstreamLink};
use super::http;
use super::oauth::ServerLogin;
use super::oauth::store::TokenStore;
use super::process::{self, ChildProcess};
use crate::config::{DownstreamProtocol, RestartPolicy, ServerConfig, Transport};
use crate::wire::direct::DirectCalls;
use crate::wire::{LineTransport, ProgressLedger, RawResults};

/// A server counts as recovered (its failure count starts again from zero) only after it stayed
/// connected this long; a server that handshakes and then crashes at once keeps counting.
pub const STABLE_AFTER: Duration = Duration::from_secs(10);

/// How often a server that needs a login looks for one (a login written by `loom auth login`).
pub(super) const LOGIN_POLL: Duration = Duration::from_secs(1);

/// How long a child may take from spawn to a complete `tools/list`. Generous because `npx -y`
/// may download its package on first start.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Where a server is in its life.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    Starting,
    Healthy,
    /// Waiting to start again after `failures` consecutive failures.
    Restarting {
        failures: u32,
        reason: String,
    },
    /// Gave up: delisted until loom restarts.
    Failed {
        reason: String,
    },
    /// A remote server that asks for an OAuth login nobody has made (or that was given up):
    /// delisted, not retried, until a login appears (SPEC §4.7).
    NeedsLogin {
        message: String,
    },
    Stopped,
}

impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Starting => f.write_str("starting"),
            Self::Healthy => f.write_str("healthy"),
            Self::Restarting { failures, reason } => {
                write!(
                    f,
                    "restarting after {failures} consecutive failure(s); last: {reason}"
                )
            }
            Self::Failed { reason } => write!(f, "failed and delisted; last: {reason}"),
            Self::NeedsLogin { message } => f.write_str(message),
            Self::Stopped => f.write_str("stopped"),
        }
    }
}

/// A tool definition exactly as the server listed it (every field, known to rmcp or not).
pub type ToolDef = Map<String, Value>;

/// What a server offers, as last listed.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub tools: Vec<ToolDef>,
    pub resources: Vec<Resource>,
    pub templates: Vec<ResourceTemplate>,
    pub prompts: Vec<Prompt>,
    pub capabilities: Option<ServerCapabilities>,
}

/// The live connection: how to send requests and where their raw results land.
#[derive(Clone)]
pub struct Live {
    pub peer: Peer<RoleClient>,
    pub raw: RawResults,
    pub progress: ProgressLedger,
    /// A remote server's failures, in loom's words (`None` for a child process).
    pub remote: Option<http::Outage>,
    /// Tool calls relayed without rmcp (a child process only; SPEC §5.1).
    pub direct: Option<Arc<DirectCalls>>,
    /// The connection speaks 2026-07-28 (opened with `server/discover`, SPEC §4.6): every
    /// request carries the envelope, answers may be `input_required`, list changes come on a
    /// listen stream.
    pub modern: bool,
}

impl Live {
    /// The protocol revision this connection speaks (what the server answered at `initialize`,
    /// or 2026-07-28 for a `server/discover` connection).
    pub fn protocol_version(&self) -> Option<String> {
        if self.modern {
            return Some(
                rmcp::model::ProtocolVersion::V_2026_07_28
                    .as_str()
                    .to_string(),
            );
        }
        self.peer
            .peer_info()
            .map(|info| info.protocol_version.as_str().to_string())
    }

    /// Why the last request to a remote server failed, if it did (taken).
    pub fn remote_failure(&self) -> Option<String> {
        self.remote.as_ref().and_then(http::Outage::take_failure)
    }
}

/// One configured server.
pub struct Downstream {
    pub index: usize,
    /// What the requests in flight on this connection are registered under (src/downstream/
    /// callers.rs): the index for the connection every session shares, a number of its own
    /// for a subject's connection (SPEC §4.7), so a server's question never reaches another
    /// subject's call.
    pub key: usize,
    pub config: ServerConfig,
    /// The OAuth login of a remote server that may ask for one (SPEC §4.7).
    pub login: Option<Arc<ServerLogin>>,
    state: RwLock<ServerState>,
    catalog: RwLock<Arc<Catalog>>,
    /// Counts changes of the state and the catalog (a session's catalog built from fewer is
    /// stale).
    changes: std::sync::atomic::AtomicU64,
    live: RwLock<Option<Live>>,
}

/// `tools/list` followed to the last page, each tool kept as the server wrote it. rmcp's typed
/// `Tool` would drop fields it does not model (`execution`, new ones), so the pages are read raw.
async fn list_tools_raw(peer: &Peer<RoleClient>, raw: &RawResults) -> Result<Vec<ToolDef>, String> {
    #[derive(serde::Deserialize)]
    struct Page {
        #[serde(default)]
        tools: Vec<ToolDef>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let request = ClientRequest::ListToolsRequest(ListToolsRequest::with_param(params));
        let handle = peer
            .send_request_with_option(request, rmcp::service::PeerRequestOptions::no_options())
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let id = handle.id.clone();
        handle
            .await_response()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        let bytes = raw
            .take(&id)
            .ok_or_else(|| "tools/list failed: the answer went missing".to_string())?;
        let page: Page = serde_json::from_str(bytes.get())
            .map_err(|e| format!("tools/list answered something that is not a tool list: {e}"))?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    Err(format!("tools/list did not end after {MAX_PAGES} pages"))
}

/// A server that pages forever is broken, not large.
const MAX_PAGES: usize = 10_000;

/// How a tool takes part in MCP tasks (2025-11-25 `execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

/// A tool's `execution.taskSupport` (absent or unknown: forbidden, as the spec says).
pub fn task_support(tool: &ToolDef) -> TaskSupport {
    match tool
        .get("execution")
        .and_then(|e| e.get("taskSupport"))
        .and_then(Value::as_str)
    {
        Some("required") => TaskSupport::Required,
        Some("optional") => TaskSupport::Optional,
        _ => TaskSupport::Forbidden,
    }
}

/// Methods of MCP tasks whose answers loom passes on as sent (SPEC §5.10).
pub const TASK_METHODS: &[&str] = &[
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
];

/// Requests whose answers go back to loom's client untouched: keep their bytes.
pub(super) fn passes_through(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        JsonRpcMessage::Request(request) if matches!(
            request.request,
            ClientRequest::CallToolRequest(_)
                | ClientRequest::ReadResourceRequest(_)
                | ClientRequest::GetPromptRequest(_)
                | ClientRequest::CompleteRequest(_)
                | ClientRequest::ListToolsRequest(_)
        ) || matches!(
            &request.request,
            ClientRequest::CustomRequest(custom) if TASK_METHODS.contains(&custom.method.as_str())
        )
    )
}

impl Downstream {
    pub fn new(index: usize, config: ServerConfig) -> Self {
        Self::with_logins(index, config, None, false)
    }

    /// A server whose OAuth logins (if it is remote and may ask for one) are kept in `logins`:
    /// the machine's login, or none at all when `per_subject` (the HTTP face's subjects then
    /// log in each for themselves, on connections of their own: [`Self::for_subject`]).
    pub fn with_logins(
        index: usize,
        config: ServerConfig,
        logins: Option<&TokenStore>,
        per_subject: bool,
    ) -> Self {
        let login = match (config.remote_server(), logins) {
            (Some(remote), Some(store)) => remote.oauth.as_ref().map(|settings| {
                Arc::new(if per_subject {
                    ServerLogin::nobody(&config.name, &remote.url, settings.clone(), store.clone())
                } else {
                    ServerLogin::new(
                        &config.name,
                        &remote.url,
                        settings.clone(),
                        store.clone(),
                        None,
                    )
                })
            }),
            _ => None,
        };
        Self::with_login(index, index, config, login)
    }

    /// Server `index`'s connection for one subject of the HTTP face, with that subject's login
    /// (`subject` none: the machine's), its requests registered under `key`.
    pub fn for_subject(
        index: usize,
        key: usize,
        config: ServerConfig,
        store: &TokenStore,
        subject: Option<&str>,
    ) -> Self {
        let login = config.remote_server().and_then(|remote| {
            remote.oauth.as_ref().map(|settings| {
                Arc::new(ServerLogin::new(
                    &config.name,
                    &remote.url,
                    settings.clone(),
                    store.clone(),
                    subject.map(str::to_owned),
                ))
            })
        });
        Self::with_login(index, key, config, login)
    }

    fn with_login(
        index: usize,
        key: usize,
        config: ServerConfig,
        login: Option<Arc<ServerLogin>>,
    ) -> Self {
        Self {
            index,
            key,
            login,
            config,
            state: RwLock::new(ServerState::Starting),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            changes: std::sync::atomic::AtomicU64::new(0),
            live: RwLock::new(None),
        }
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Returns once the login this server waits for may be there (its file changed).
    async fn wait_for_login(&self) {
        let Some(login) = &self.login else {
            return std::future::pending().await;
        };
        let before = login.stored_version();
        let mut polls = 0u64;
        loop {
            tokio::select! {
                () = tokio::time::sleep(LOGIN_POLL) => {}
                () = login.kept() => return,
            }
            if login.stored_version() != before {
                return;
            }
            // A subject's login may come from another instance of a cluster (SPEC §25): its
            // store is asked every other poll.
            polls += 1;
            if polls.is_multiple_of(2) && login.pull_shared().await {
                return;
            }
        }
    }

    pub fn state(&self) -> ServerState {
        self.state
            .read()
            .map(|s| s.clone())
            .unwrap_or(ServerState::Stopped)
    }

    /// How many times its state or catalog changed.
    pub fn changes(&self) -> u64 {
        self.changes.load(std::sync::atomic::Ordering::Acquire)
    }

    fn set_state(&self, state: ServerState) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        tracing::info!(server = %self.config.name, %state, "server state");
        if let Ok(mut slot) = self.state.write() {
            *slot = state;
        }
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.read().map(|c| c.clone()).unwrap_or_default()
    }

    fn set_catalog(&self, catalog: Catalog) {
        self.changes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if let Ok(mut slot) = self.catalog.write() {
            *slot = Arc::new(catalog);
        }
    }

    /// The live connection, or why there is none (for the `isError` text of a call).
    pub fn live(&self) -> Result<Live, ServerState> {
        match self.live.read().ok().and_then(|l| l.clone()) {
            Some(live) => Ok(live),
            None => Err(self.state()),
        }
    }

    fn set_live(&self, live: Option<Live>) {
        if let Ok(mut slot) = self.live.write() {
            *slot = live;
        }
    }

    /// List everything the server declares, following every cursor to the end.
    async fn list_catalog(
        &self,
        peer: &Peer<RoleClient>,
        raw: &RawResults,
    ) -> Result<Catalog, String> {
        let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
        let declared = capabilities.clone().unwrap_or_default();
        let mut catalog = Catalog {
            capabilities,
            ..Catalog::default()
        };
        if declared.tools.is_some() {
            catalog.tools = list_tools_raw(peer, raw)
                .await?
                .into_iter()
                .filter(|tool| {
                    tool.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(|name| self.config.tool_allowed(name))
                })
                .collect();
        }
        if declared.resources.is_some() {
            catalog.resources = peer
                .list_all_resources()
                .await
                .map_err(|e| format!("resources/list failed: {e}"))?;
            // Templates are optional even for servers with resources; a server that does not
            // implement the method must not be marked unhealthy for it.
            catalog.templates = peer.list_all_resource_templates().await.unwrap_or_default();
        }
        if declared.prompts.is_some() {
            catalog.prompts = peer
                .list_all_prompts()
                .await
                .map_err(|e| format!("prompts/list failed: {e}"))?;
        }
        Ok(catalog)
    }

    /// Re-list after a `list_changed` notification.
    pub async fn relist(&self) -> Result<(), String> {
        let live = self.live().map_err(|state| state.to_string())?;
        let catalog = self.list_catalog(&live.peer, &live.raw).await?;
        self.set_catalog(catalog);
        Ok(())
    }

    /// Connect (spawn the child, or open the HTTP session), handshake, list. On failure a child
    /// is stopped before returning.
    async fn connect(
        &self,
        handler: DownstreamHandler,
    ) -> Result<
        (
            RunningService<RoleClient, DownstreamHandler>,
            Link,
            Live,
            Catalog,
        ),
        String,
    > {
        let raw = RawResults::new();
        let progress = ProgressLedger::default();
        // Request ids start over with the connection.
        handler.params.clear();
        let live = |service: &RunningService<RoleClient, DownstreamHandler>,
                    remote: Option<http::Outage>,
                    direct: Option<Arc<DirectCalls>>| {
            let modern = service.peer().peer_info().is_some_and(|info| {
                info.protocol_version.as_str() >= ProtocolVersion::V_2026_07_28.as_str()
            });
            Live {
                peer: service.peer().clone(),
                raw: raw.clone(),
                progress: progress.clone(),
                remote,
                // The direct path writes handshake-era requests; a 2026-07-28 connection wants
                // the envelope on each, which rmcp's path stamps.
                direct: direct.filter(|_| !modern),
                modern,
            }
        };
        match &self.config.transport {
            Transport::Stdio => {
                let spawned = process::spawn(&self.config)
                    .map_err(|e| format!("cannot start `{}`: {e}", self.config.command))?;
                let mut child = spawned.child;
                let direct = DirectCalls::new();
                let transport = LineTransport::capturing(
                    spawned.stdout,
                    spawned.stdin,
                    raw.clone(),
                    passes_through,
                    "downstream",
                )
                .with_progress_ledger(progress.clone())
                .with_raw_params(handler.params.clone())
                .with_direct_calls(direct.clone())
                .with_log_tap({
                    let handler = handler.clone();
                    Arc::new(move |line: &str| handler.log_line(line))
                });
                match self.handshake(handler, transport, &raw).await {
                    Ok((service, catalog)) => {
                        let live = live(&service, None, Some(direct));
                        Ok((service, Link::Child(Box::new(child)), live, catalog))
                    }
                    Err(reason) => Err(with_exit(reason, &mut child).await),
                }
            }
            Transport::Http(remote) => {
                let (transport, outage) = http::transport(
                    remote,
                    raw.clone(),
                    progress.clone(),
                    handler.params.clone(),
                    self.login.clone(),
                )?;
                let (service, catalog) = self.handshake(handler, transport, &raw).await.map_err(
                    |reason| match outage.last_failure() {
                        // rmcp's wording around it names its own types; loom's says it all.
                        Some(failure) if reason.starts_with("MCP handshake failed") => {
                            format!("MCP handshake failed: {failure}")
                        }
                        _ => reason,
                    },
                )?;
                let live = live(&service, Some(outage.clone()), None);
                Ok((service, Link::Remote(outage), live, catalog))
            }
        }
    }

    /// `initialize` and the first listing over `transport`, within [`STARTUP_TIMEOUT`].
    async fn handshake<T, E, A>(
        &self,
        handler: DownstreamHandler,
        transport: T,
        raw: &RawResults,
    ) -> Result<(RunningService<RoleClient, DownstreamHandler>, Catalog), String>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let lifecycle = match self.config.protocol {
            DownstreamProtocol::Handshake => rmcp::service::ClientLifecycleMode::Initialize,
            DownstreamProtocol::Modern => rmcp::service::ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            DownstreamProtocol::Auto => rmcp::service::ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
            },
        };
        let handshake = async {
            let service = rmcp::serve_client_with_lifecycle(handler, transport, lifecycle)
                .await
                .map_err(|e| {
                    format!(
                        "MCP handshake failed: {}",
                        crate::common::text::error_chain(&e)
                    )
                })?;
            let peer = service.peer().clone();
            // Every request of loom's must reach the server (a cached list would hide a
            // change; results loom passes on are never typed, so never cached anyway).
            peer.set_response_cache_config(rmcp::ClientCacheConfig::disabled())
                .await;
            let catalog = self.list_catalog(&peer, raw).await?;
            Ok::<_, String>((service, catalog))
        };
        match tokio::time::timeout(STARTUP_TIMEOUT, handshake).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!(
                "no complete handshake within {} s",
                STARTUP_TIMEOUT.as_secs()
            )),
        }
    }

    /// Keep the server running until `shutdown`. `first` learns how the first start went.
    pub async fn supervise(
        self: Arc<Self>,
        policy: RestartPolicy,
        upstream: UpstreamLink,
        callers: Arc<super::callers::Callers>,
        events: mpsc::UnboundedSender<DownstreamEvent>,
        shutdown: CancellationToken,
        first: oneshot::Sender<Result<(), String>>,
    ) {
        let mut first = Some(first);
        let mut report_first = |outcome: Result<(), String>| {
            if let Some(first) = first.take() {
                let _ = first.send(outcome);
            }
        };
        let handler = DownstreamHandler {
            server: self.index,
            callers_key: self.key,
            upstream,
            callers,
            params: crate::wire::RawParams::default(),
            events: events.clone(),
        };
        let mut failures: u32 = 0;
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            let connected = tokio::select! {
                _ = shutdown.cancelled() => break,
                connected = self.connect(handler.clone()) => connected,
            };
            let reason = match connected {
                Ok((service, mut link, live, catalog)) => {
                    if live.modern {
                        // 2026-07-28 servers announce list changes on a listen stream only.
                        tokio::spawn(listen_for_changes(
                            live.peer.clone(),
                            self.index,
                            events.clone(),
                        ));
                    }
                    self.set_catalog(catalog);
                    self.set_live(Some(live));
                    self.set_state(ServerState::Healthy);
                    let _ = events.send(DownstreamEvent::CatalogChanged { server: self.index });
                    report_first(Ok(()));
                    let since = Instant::now();
                    let service_ct = service.cancellation_token();
                    let waiting = service.waiting();
                    tokio::pin!(waiting);
                    tokio::select! {
                        _ = shutdown.cancelled() => {
                            self.set_live(None);
                            // Closing the transport closes the child's stdin (the polite stop)
                            // or ends the HTTP session with a DELETE.
                            service_ct.cancel();
                            let _ = waiting.await;
                            let how = link.stop().await;
                            tracing::info!(server = %self.config.name, "stopped: {how}");
                            break;
                        }
                        _ = &mut waiting => {}
                        _ = link.broken() => {
                            service_ct.cancel();
                            let _ = waiting.await;
                        }
                    }
                    self.set_live(None);
                    if since.elapsed() >= STABLE_AFTER {
                        failures = 0;
                    }
                    link.ended().await
                }
                Err(reason) if self.login.as_ref().is_some_and(|l| l.login_needed()) => reason,
                Err(reason) => {
                    report_first(Err(reason.clone()));
                    reason
                }
            };
            // Not a failure, whether at the start or in the middle of a session (a refused
            // refresh, a logout, a step-up): the server is fine, a person has to log in. Others
            // go on serving; this one is listed again once a login appears.
            if let Some(login) = self.login.as_ref().filter(|l| l.login_needed()) {
                let message = login.needs_login_message();
                tracing::warn!(server = %self.config.name, "{message} (last: {reason})");
                self.set_state(ServerState::NeedsLogin { message });
                self.set_catalog(Catalog::default());
                let _ = events.send(DownstreamEvent::CatalogChanged { server: self.index });
                report_first(Ok(()));
                failures = 0;
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    () = self.wait_for_login() => {}
                }
                // This attempt decides afresh whether a login is needed (a transient failure
                // after the login is then reported as what it is).
                login.reset_needed();
                continue;
            }
            failures = failures.saturating_add(1);
            tracing::warn!(server = %self.config.name, failures, "{reason}");
            if failures >= policy.max_attempts.max(1) {
                self.set_state(ServerState::Failed { reason });
                self.set_catalog(Catalog::default());
                let _ = events.send(DownstreamEvent::CatalogChanged { server: self.index });
                return;
            }
            self.set_state(ServerState::Restarting { failures, reason });
            crate::telemetry::metrics::restarted(&self.config.name);
            let delay = policy.delay_for_attempt(failures);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        self.set_live(None);
        self.set_state(ServerState::Stopped);
    }
}

/// What a live connection holds besides rmcp's service.
enum Link {
    /// The child process of a stdio server.
    Child(Box<ChildProcess>),
    /// The signal that a remote server went away.
    Remote(http::Outage),
}

impl Link {
    /// Resolves when the connection is known to be broken while rmcp's service still runs
    /// (a remote server that stopped answering); never for a child, whose end closes the pipe.
    async fn broken(&self) {
        match self {
            Link::Child(_) => std::future::pending().await,
            Link::Remote(outage) => outage.happened().await,
        }
    }

    /// Stop at shutdown; says how it ended.
    async fn stop(&mut self) -> String {
        match self {
            Link::Child(child) => child.terminate().await,
            Link::Remote(_) => "session closed".to_owned(),
        }
    }

    /// Why the connection ended, for the restart log and the server's state.
    async fn ended(&mut self) -> String {
        match self {
            Link::Child(child) => {
                format!(
                    "the connection ended; the process {}",
                    child.terminate().await
                )
            }
            Link::Remote(outage) => outage.reason(),
        }
    }
}

/// Add how the process ended to a failure reason: "handshake failed … (exited with code 3)"
/// tells the user far more than the handshake error alone. Its stdin is already closed (the
/// transport was dropped), so a live child gets the usual stop sequence.
async fn with_exit(reason: String, child: &mut ChildProcess) -> String {
    format!("{reason} ({})", child.terminate().await)
}

/// A 2026-07-28 server's list changes, heard on a `subscriptions/listen` stream of loom's for as
/// long as the connection lasts: each becomes the re-listing a handshake-era server's
/// `list_changed` notification starts.
async fn listen_for_changes(
    peer: Peer<RoleClient>,
    server: usize,
    events: mpsc::UnboundedSender<DownstreamEvent>,
) {
    let filter = rmcp::model::SubscriptionFilter::builder()
        .tools_list_changed()
        .prompts_list_changed()
        .resources_list_changed()
        .build();
    let mut subscription = match peer.listen(filter).await {
        Ok(subscription) => subscription,
        Err(error) => {
            tracing::warn!(
                server,
                "subscriptions/listen was refused, so list changes go unheard: {error}"
            );
            return;
        }
    };
    while let Ok(Some(_)) = subscription.next().await {
        if events
            .send(DownstreamEvent::ListChanged { server })
            .is_err()
        {
            return;
        }
    }
}
