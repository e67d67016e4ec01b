//! Forwarding one request to a downstream server and carrying its raw answer back.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolResult, CancelledNotificationParam, ClientRequest, ContentBlock, ErrorCode,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleServer};

use std::sync::Arc;

use rmcp::model::ProgressToken;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use super::era::Era;
use crate::downstream::callers::{Answerer, Ask, CallerGuard};
use crate::downstream::{Live, ServerState};
use crate::wire::placeholder_result;

/// How long an answer waits for the progress notifications that preceded it to be passed on.
const PROGRESS_DRAIN: Duration = Duration::from_millis(500);

/// `_meta` keys of the MCP protocol envelope itself, which are per connection.
pub(super) const PROTOCOL_META_PREFIX: &str = "io.modelcontextprotocol/";

/// Why a forwarded request has no downstream answer.
#[derive(Debug)]
pub(super) enum ForwardError {
    /// The server is not connected right now.
    Down(ServerState),
    /// The server answered with a JSON-RPC error.
    Rpc(McpError),
    /// The connection closed before the answer.
    Closed(String),
    /// A remote server's request failed (an HTTP status, a broken stream), in loom's words.
    Failed(String),
    TimedOut(Duration),
    /// loom's client cancelled the request.
    Cancelled,
    /// loom cancelled it downstream (why, as the server was told).
    Stopped(&'static str),
}

/// How long a call made again after a login waits for the server's connection.
const CONNECT_AFTER_LOGIN: Duration = Duration::from_secs(15);

impl ForwardError {
    /// The text of an `isError` tool result (or of a JSON-RPC error), naming the server.
    pub(super) fn describe(&self, server: &str, what: &str) -> String {
        match self {
            Self::Down(state) => {
                format!("loom: server `{server}` is {state}; {what} cannot run now")
            }
            Self::Rpc(error) => format!(
                "loom: server `{server}` returned an error for {what}: {} (JSON-RPC error {})",
                error.message, error.code.0
            ),
            Self::Closed(detail) => format!(
                "loom: server `{server}` closed the connection before answering {what} ({detail}); \
                 loom restarts it"
            ),
            Self::Failed(detail) => {
                format!("loom: server `{server}` could not answer {what}: {detail}")
            }
            Self::TimedOut(after) => format!(
                "loom: server `{server}` did not answer {what} within {} ms; the request was \
                 cancelled (raise `callTimeoutMs` for this server if it needs longer)",
                after.as_millis()
            ),
            Self::Cancelled => format!("loom: {what} was cancelled by the client"),
            Self::Stopped(why) => format!("loom: {what} was cancelled ({why})"),
        }
    }

    /// As a `tools/call` answers it (SPEC §5.6): the server's own JSON-RPC error as the server
    /// sent it (clients act on its code, and connected directly they would get it so), anything
    /// loom says itself as an `isError` result.
    pub(super) fn into_call_answer(
        self,
        server: &str,
        what: &str,
    ) -> Result<ServerResult, McpError> {
        match self {
            Self::Rpc(error) => Err(error),
            other => Ok(other.into_tool_result(server, what)),
        }
    }

    /// As the `isError` result a tool call returns.
    pub(super) fn into_tool_result(self, server: &str, what: &str) -> ServerResult {
        ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(
            self.describe(server, what),
        )]))
    }

    /// As a JSON-RPC error (for methods that have no `isError` form). A downstream error is
    /// passed on with its own code and data.
    pub(super) fn into_rpc_error(self, server: &str, what: &str) -> McpError {
        match self {
            Self::Rpc(error) => error,
            other => McpError::new(
                ErrorCode::INTERNAL_ERROR,
                other.describe(server, what),
                None,
            ),
        }
    }
}

/// A downstream answer.
pub(super) enum Forwarded {
    /// The exact bytes of the `result`.
    Raw(Box<serde_json::value::RawValue>),
    /// A typed result (methods whose answers are not captured raw).
    Typed(Box<ServerResult>),
}

impl Gateway {
    /// Answer the upstream request `context.id` with `forwarded`: raw bytes go to the splice
    /// table and rmcp gets the placeholder. `cacheable` marks results that carry cache hints
    /// (`resources/read`).
    pub(super) fn pass_on(
        &self,
        forwarded: Forwarded,
        context: &RequestContext<RoleServer>,
        cacheable: bool,
    ) -> ServerResult {
        match forwarded {
            Forwarded::Raw(raw) => {
                let mut raw = Era::of_request(context).shape_raw(raw, cacheable);
                if Era::request_predates_resource_links(context) {
                    raw = super::era::raw_without_resource_links(raw);
                }
                if crate::telemetry::observing() {
                    crate::telemetry::note_answer(
                        raw.get().len() as u64,
                        super::observe::raw_is_error(raw.get()),
                    );
                }
                self.splice.put(context.id.clone(), raw);
                ServerResult::CustomResult(placeholder_result())
            }
            Forwarded::Typed(result) => *result,
        }
    }

    /// Send `request` to server `index` and return its answer (raw bytes when the transport
    /// captured them). Cancels downstream when loom's client cancels or the server's
    /// `callTimeoutMs` passes. For requests whose answer cannot be `input_required`: a server
    /// request that comes meanwhile goes to a client of the `initialize` era and is refused for
    /// a 2026-07-28 one.
    pub(super) async fn forward(
        &self,
        index: usize,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<Forwarded, ForwardError> {
        let timeout = self.call_timeout(index);
        self.forward_within(index, request, context, timeout).await
    }

    /// Waits (up to [`CONNECT_AFTER_LOGIN`]) while server `index` is on its way up after a
    /// login: its connection starting, or a login kept that it has not connected with yet.
    pub(super) async fn wait_until_live(&self, index: usize) {
        let deadline = tokio::time::Instant::now() + CONNECT_AFTER_LOGIN;
        while tokio::time::Instant::now() < deadline {
            let Some(server) = self.server(index) else {
                return;
            };
            let coming = match server.state() {
                ServerState::Starting | ServerState::Restarting { .. } => true,
                // Kept, or still being exchanged for tokens.
                ServerState::NeedsLogin { .. } => server.login.as_ref().is_some_and(|login| {
                    login.stored_version().is_some() || login.offer_under_way()
                }),
                _ => false,
            };
            if server.live().is_ok() || !coming {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits (up to [`CONNECT_AFTER_LOGIN`]) while the server `tool` is named after (`S_…`) is
    /// starting: a subject's own connection starts with the subject's first request, which may
    /// already call one of its tools.
    pub(super) async fn wait_while_starting(&self, tool: &str) {
        let deadline = tokio::time::Instant::now() + CONNECT_AFTER_LOGIN;
        while tokio::time::Instant::now() < deadline {
            let starting = self
                .server_named_in(tool)
                .is_some_and(|server| matches!(server.state(), ServerState::Starting));
            if !starting {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (up to [`CONNECT_AFTER_LOGIN`]) while a connection of this session's is starting
    /// — a subject's own, started by its first request — and lists its servers as they are now
    /// when the catalog was built from an older state: the subject's first `tools/list` shows
    /// its servers as they came up (or their `S_login`), not as they were a moment before.
    pub(super) async fn settle(&self) {
        let starting = || {
            self.servers()
                .iter()
                .any(|server| matches!(server.state(), ServerState::Starting))
        };
        let deadline = tokio::time::Instant::now() + CONNECT_AFTER_LOGIN;
        while starting() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        if self.catalog_is_stale() {
            // The rebuild loop follows with the same catalog and so notifies nobody.
            self.rebuild();
        }
    }

    /// The server's `callTimeoutMs`.
    pub(super) fn call_timeout(&self, index: usize) -> Option<Duration> {
        self.hub
            .servers
            .get(index)
            .map(|server| Duration::from_millis(server.config.call_timeout_ms))
    }

    /// [`Gateway::forward`] with a limit of its own (`None`: until the server answers, the
    /// client cancels or the connection ends — for `tasks/result`, which waits for the task).
    pub(super) async fn forward_within(
        &self,
        index: usize,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        timeout: Option<Duration>,
    ) -> Result<Forwarded, ForwardError> {
        self.forward_for(index, request, context, timeout, None)
            .await
    }

    /// [`Gateway::forward_within`] of a request that waits for MCP task `task`
    /// (`tasks/result`): the server's questions tied to the task are for it.
    pub(super) async fn forward_for(
        &self,
        index: usize,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        timeout: Option<Duration>,
        task: Option<String>,
    ) -> Result<Forwarded, ForwardError> {
        let mut running = self.start_call(index, request, context, timeout, false, task)?;
        match running.wait(&context.ct).await {
            Waited::Done(outcome) => {
                self.unbind_progress(&running);
                outcome
            }
            // Not asked for: the call's answerer refuses server requests.
            Waited::Asked(_) => Err(ForwardError::Closed("unexpected input request".into())),
        }
    }

    /// Start `request` on server `index`: sent now, answered into the returned [`Running`],
    /// which may outlive the client request that started it (a 2026-07-28 call that waits for
    /// its client's input). `asks` says whether the server's own requests during it become
    /// `input_required` questions for a 2026-07-28 client (tools/call, prompts/get,
    /// resources/read); other 2026-07-28 requests refuse them.
    pub(super) fn start_call(
        &self,
        index: usize,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
        timeout: Option<Duration>,
        asks: bool,
        task: Option<String>,
    ) -> Result<Running, ForwardError> {
        let method = request.method().to_string();
        // Who the server's own requests during this call are for (SPEC §5.8).
        let (answerer, asks_rx) = match Era::of_request(context) {
            Era::Initialize => (Answerer::Peer(context.peer.clone()), None),
            Era::Discover if asks => {
                let (answerer, asks) = input_answerer(context);
                (answerer, Some(asks))
            }
            Era::Discover => (Answerer::Refuse { method }, None),
        };
        // rmcp puts its own progress token on every outgoing request, so the client's token is
        // mapped back when progress arrives; everything else in `_meta` travels as it came.
        let upstream_token = context.meta.get_progress_token();
        let mut meta = context.meta.clone();
        meta.0.remove("progressToken");
        // The 2026-07-28 per-request envelope (`io.modelcontextprotocol/protocolVersion`,
        // `…/clientInfo`, `…/clientCapabilities`, `…/logLevel`) describes loom's client, not the
        // downstream connection, which loom opened with `initialize`: it stops at loom.
        meta.0
            .retain(|key, _| !key.starts_with(PROTOCOL_META_PREFIX));
        // What a 2026-07-28 server is told of the client, per request: what this client can
        // answer (not all loom could relay), and the log level it asked for.
        let client = match Era::of_request(context) {
            Era::Discover => context.client_capabilities(),
            Era::Initialize => context
                .peer
                .peer_info()
                .map(|info| info.capabilities.clone()),
        };
        let launch = Launch {
            meta,
            answerer,
            asks: asks_rx,
            task,
            timeout,
            client,
            log_level: match Era::of_request(context) {
                Era::Discover => context.meta.log_level(),
                Era::Initialize => Some(self.protocol.legacy_log_level()),
            },
        };
        let mut running = self.launch(index, request, launch)?;
        self.bind_progress(&running, upstream_token);
        if Era::of_request(context) == Era::Discover
            && let Some(level) = context.meta.log_level()
        {
            running._log = Some(self.protocol.want_logs(index, &level));
            if let Some(server) = self.server(index) {
                self.hub.wants_log_level(&server, &level);
            }
        }
        Ok(running)
    }

    /// Send `request` to server `index` as `launch` says; answered into the returned
    /// [`Running`].
    pub(super) fn launch(
        &self,
        index: usize,
        request: ClientRequest,
        launch: Launch,
    ) -> Result<Running, ForwardError> {
        let Some(server) = self.server(index) else {
            return Err(ForwardError::Down(ServerState::Stopped));
        };
        self.hub.calling(index, server.key, &self.upstream);
        let live = server.live().map_err(ForwardError::Down)?;
        let caller =
            self.hub
                .in_flight
                .register(server.key, self.number, launch.task, launch.answerer);
        let mut meta = launch.meta;
        if live.modern {
            // rmcp stamps the rest of the envelope (version, loom's client info).
            if let Some(client) = &launch.client {
                meta.set_client_capabilities(client.clone());
            }
            if let Some(level) = launch.log_level {
                meta.set_log_level(level);
            }
        }
        // The request's CLIENT span, and loom's trace context in place of the client's (SPEC
        // §24.1); with tracing off the client's `traceparent` travels as it came.
        let traced = downstream_span(&server, &request);
        if let Some((traceparent, tracestate)) = traced.as_ref().and_then(|t| t.traceparent()) {
            meta.0.insert("traceparent".into(), traceparent.into());
            match tracestate {
                Some(state) => meta.0.insert("tracestate".into(), state.into()),
                None => meta.0.remove("tracestate"),
            };
        }
        let mut options = PeerRequestOptions::no_options();
        if !meta.0.is_empty() {
            options = options.with_meta(meta);
        }
        let (stop, stopped) = oneshot::channel();
        let (answer, outcome) = oneshot::channel();
        let progress = Arc::new(std::sync::Mutex::new(None));
        let token_slot = progress.clone();
        tokio::spawn(async move {
            let outcome = drive(live, request, options, stopped, token_slot).await;
            if let Some(traced) = traced {
                traced.answered(&telemetry_outcome(&outcome));
            }
            let _ = answer.send(outcome);
        });
        Ok(Running {
            index,
            outcome,
            asks: launch.asks,
            stop: Some(stop),
            limit: launch.timeout,
            spent: Duration::ZERO,
            progress,
            progress_table: Some(self.progress_table()),
            _caller: caller,
            _log: None,
            on_abandon: None,
        })
    }

    /// Progress the server sends for `running` goes to the client's `token` (or nowhere). A
    /// call that waits for input is resumed by a new request with a token of its own.
    pub(super) fn bind_progress(&self, running: &Running, token: Option<ProgressToken>) {
        // The downstream token is known once the request is on its way; until then progress
        // cannot arrive either, and `drive` binds it when it is.
        let mut slot = running
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &mut *slot {
            Some(ProgressBinding::Direct(current)) => {
                *current
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    token.and_then(|t| serde_json::to_string(&t).ok());
            }
            Some(ProgressBinding::Sent(downstream)) => {
                let key = (running.index, downstream.clone());
                match token {
                    Some(token) => {
                        self.lock_progress().insert(key, token);
                    }
                    None => {
                        self.lock_progress().remove(&key);
                    }
                }
            }
            other => {
                *other = Some(ProgressBinding::Wanted {
                    progress: self.progress_table(),
                    index: running.index,
                    token,
                })
            }
        }
    }

    /// The call is over: its progress no longer goes anywhere.
    pub(super) fn unbind_progress(&self, running: &Running) {
        let slot = running
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ProgressBinding::Sent(downstream)) = &*slot {
            self.lock_progress()
                .remove(&(running.index, downstream.clone()));
        }
    }
}

/// How a request is sent: its `_meta`, who answers the server's own requests during it, and
/// its limit.
pub(super) struct Launch {
    pub meta: rmcp::model::RequestMetaObject,
    pub answerer: Answerer,
    pub asks: Option<tokio::sync::mpsc::UnboundedReceiver<Ask>>,
    /// The MCP task the request waits for (`tasks/result`).
    pub task: Option<String>,
    pub timeout: Option<Duration>,
    /// The client's capabilities, told to a 2026-07-28 server (SPEC §4.6).
    pub client: Option<rmcp::model::ClientCapabilities>,
    /// The log level a 2026-07-28 client asked for with this request.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still ask for it
    pub log_level: Option<rmcp::model::LoggingLevel>,
}

/// An answerer that turns the server's requests into questions for a 2026-07-28 client, with
/// what this request says its client can answer; and where the questions arrive.
pub(super) fn input_answerer(
    context: &RequestContext<RoleServer>,
) -> (Answerer, tokio::sync::mpsc::UnboundedReceiver<Ask>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let capabilities = context.client_capabilities().unwrap_or_default();
    (
        Answerer::Input {
            capabilities: Box::new(capabilities),
            asks: tx,
        },
        rx,
    )
}

/// Where a running call's progress goes: the client's token wanted before the request was
/// sent, or the downstream token once it was (the table then holds the mapping).
pub(super) enum ProgressBinding {
    Wanted {
        progress: ProgressTable,
        index: usize,
        token: Option<ProgressToken>,
    },
    Sent(ProgressToken),
    /// A call of the direct path: the client's token (as JSON text) its progress goes to.
    Direct(Arc<std::sync::Mutex<Option<String>>>),
}

/// Downstream progress token → the upstream client's token, per server.
pub(super) type ProgressTable =
    Arc<std::sync::Mutex<std::collections::HashMap<(usize, ProgressToken), ProgressToken>>>;

/// A request in flight on a server, answered by a task of its own.
pub(super) struct Running {
    index: usize,
    outcome: oneshot::Receiver<Result<Forwarded, ForwardError>>,
    /// The server's own requests for a 2026-07-28 client, when the call can carry them.
    asks: Option<tokio::sync::mpsc::UnboundedReceiver<Ask>>,
    /// Dropping it (or sending a reason) cancels the request downstream.
    stop: Option<oneshot::Sender<&'static str>>,
    /// `callTimeoutMs`, counted only while loom waits for the server (not for the client).
    limit: Option<Duration>,
    spent: Duration,
    progress: Arc<std::sync::Mutex<Option<ProgressBinding>>>,
    /// Where the progress mapping of an rmcp-path call lives (removed when the call goes).
    progress_table: Option<ProgressTable>,
    _caller: CallerGuard,
    /// The log level this 2026-07-28 request asked for, registered while it runs.
    _log: Option<super::logging::LogInterestGuard>,
    /// What else must stop when the call is abandoned (a task run by loom is cancelled on its
    /// server, §5.10).
    on_abandon: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let slot = self
            .progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let (Some(ProgressBinding::Sent(downstream)), Some(table)) =
            (&*slot, &self.progress_table)
        {
            table
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&(self.index, downstream.clone()));
        }
    }
}

/// What waiting for a running call gave.
pub(super) enum Waited {
    Done(Result<Forwarded, ForwardError>),
    /// The server asked the client for input (every request that had come).
    Asked(Vec<Ask>),
}

impl Running {
    /// A call of the direct path, answered by its own exchange task (src/gateway/direct.rs).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn direct(
        index: usize,
        outcome: oneshot::Receiver<Result<Forwarded, ForwardError>>,
        asks: tokio::sync::mpsc::UnboundedReceiver<Ask>,
        stop: oneshot::Sender<&'static str>,
        limit: Duration,
        progress: Arc<std::sync::Mutex<Option<String>>>,
        caller: CallerGuard,
        log: Option<super::logging::LogInterestGuard>,
    ) -> Running {
        Running {
            index,
            outcome,
            asks: Some(asks),
            stop: Some(stop),
            limit: Some(limit),
            spent: Duration::ZERO,
            progress: Arc::new(std::sync::Mutex::new(Some(ProgressBinding::Direct(
                progress,
            )))),
            progress_table: None,
            _caller: caller,
            _log: log,
            on_abandon: None,
        }
    }

    /// Wait for the answer, the server's questions, the limit or the client's cancellation.
    pub(super) async fn wait(&mut self, cancelled: &CancellationToken) -> Waited {
        // Followed again: the server's next question may be this call's.
        self._caller.set_parked(false);
        let began = tokio::time::Instant::now();
        let left = self.limit.map(|limit| limit.saturating_sub(self.spent));
        let asks = async {
            match self.asks.as_mut() {
                Some(asks) => asks.recv().await,
                None => std::future::pending().await,
            }
        };
        let waited = tokio::select! {
            biased;
            outcome = &mut self.outcome => Waited::Done(outcome.unwrap_or_else(|_| {
                Err(ForwardError::Closed("the answer went missing".into()))
            })),
            Some(ask) = asks => {
                let mut asked = vec![ask];
                if let Some(asks) = self.asks.as_mut() {
                    while let Ok(more) = asks.try_recv() {
                        asked.push(more);
                    }
                }
                Waited::Asked(asked)
            }
            _ = expire(left) => {
                self.cancel("timed out in loom");
                Waited::Done(Err(ForwardError::TimedOut(self.limit.unwrap_or_default())))
            }
            _ = cancelled.cancelled() => {
                self.cancel("cancelled by loom's client");
                Waited::Done(Err(ForwardError::Cancelled))
            }
        };
        self.spent += began.elapsed();
        waited
    }

    /// The server the call runs on.
    pub(super) fn index(&self) -> usize {
        self.index
    }

    /// The call waits for its client (§5.11): the log level its finished request asked for
    /// lapses with it (a retry brings its own).
    pub(super) fn park(&mut self) {
        self._log = None;
        // Its server is blocked on the question the client has not answered: a new question
        // of that server comes from another call in flight, if there is one (SPEC §5.8).
        self._caller.set_parked(true);
    }

    /// The log level of the request that resumed the call.
    pub(super) fn set_log(&mut self, log: Option<super::logging::LogInterestGuard>) {
        self._log = log;
    }

    /// Cancel the request downstream, saying why.
    pub(super) fn cancel(&mut self, reason: &'static str) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(reason);
        }
        if let Some(abandon) = self.on_abandon.take() {
            abandon();
        }
    }

    /// `then` runs when the call is abandoned (timed out, cancelled, given up waiting for its
    /// client, its session ended), not when it is answered.
    pub(super) fn on_abandon(&mut self, then: impl FnOnce() + Send + Sync + 'static) {
        self.on_abandon = Some(Box::new(then));
    }
}

/// Send one request and wait for its answer or for `stopped`; the server is told when the
/// request is cancelled. Runs in a task of its own, so a call can outlive the client request
/// that started it.
async fn drive(
    live: Live,
    request: ClientRequest,
    options: PeerRequestOptions,
    stopped: oneshot::Receiver<&'static str>,
    progress: Arc<std::sync::Mutex<Option<ProgressBinding>>>,
) -> Result<Forwarded, ForwardError> {
    let mut handle = live
        .peer
        .send_request_with_option(request, options)
        .await
        .map_err(|e| ForwardError::Closed(e.to_string()))?;
    {
        let mut slot = progress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(ProgressBinding::Wanted {
            progress: table,
            index,
            token: Some(token),
        }) = slot.take()
        {
            table
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert((index, handle.progress_token.clone()), token);
        }
        *slot = Some(ProgressBinding::Sent(handle.progress_token.clone()));
    }
    let outcome = tokio::select! {
        answer = &mut handle.rx => match answer {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => Err(ForwardError::Rpc(error)),
            Ok(Err(other)) => Err(match live.remote_failure() {
                Some(failure) => ForwardError::Failed(failure),
                None => ForwardError::Closed(other.to_string()),
            }),
            Err(_) => Err(match live.remote_failure() {
                Some(failure) => ForwardError::Failed(failure),
                None => ForwardError::Closed("the connection ended".into()),
            }),
        },
        reason = stopped => Err(ForwardError::Stopped(reason.unwrap_or("loom stopped waiting for it"))),
    };
    // Progress that arrived before the answer goes out before it.
    live.progress
        .drained(&handle.progress_token, PROGRESS_DRAIN)
        .await;

    match outcome {
        Ok(ServerResult::CustomResult(_)) => match live.raw.take(&handle.id) {
            Some(raw) => Ok(Forwarded::Raw(raw)),
            None => Err(ForwardError::Closed("the answer went missing".into())),
        },
        // Not captured raw (a method loom does not pass through): typed, as rmcp decoded it.
        Ok(other) => Ok(Forwarded::Typed(Box::new(other))),
        Err(error) => {
            live.raw.forget(&handle.id);
            if let ForwardError::Stopped(reason) = &error {
                let _ = live
                    .peer
                    .notify_cancelled(CancelledNotificationParam::new(
                        Some(handle.id.clone()),
                        Some(reason.to_string()),
                    ))
                    .await;
            }
            Err(error)
        }
    }
}

/// The CLIENT span of `request` to `server` (when tracing is on and a request is handled).
fn downstream_span(
    server: &crate::downstream::Downstream,
    request: &ClientRequest,
) -> Option<crate::telemetry::Downstream> {
    if !crate::telemetry::active() {
        return None;
    }
    let tool = match request {
        ClientRequest::CallToolRequest(call) => Some(call.params.name.as_ref()),
        ClientRequest::GetPromptRequest(get) => Some(get.params.name.as_str()),
        _ => None,
    };
    let url = match &server.config.transport {
        crate::config::Transport::Http(remote) => reqwest::Url::parse(&remote.url).ok(),
        crate::config::Transport::Stdio => None,
    };
    let address = url
        .as_ref()
        .and_then(|url| Some((url.host_str()?, url.port_or_known_default()?)));
    let version = server.live().ok().and_then(|live| live.protocol_version());
    crate::telemetry::downstream(&crate::telemetry::Outgoing {
        server: server.name(),
        method: request.method(),
        name: tool,
        address,
        version: version.as_deref(),
        // rmcp numbers the request as it sends it.
        request_id: None,
    })
}

/// How a forwarded request ended, for its span.
pub(super) fn telemetry_outcome(
    outcome: &Result<Forwarded, ForwardError>,
) -> crate::telemetry::Outcome {
    use crate::telemetry::Outcome;
    match outcome {
        Ok(Forwarded::Raw(raw)) if super::observe::raw_is_error(raw.get()) => Outcome::ToolError,
        Ok(Forwarded::Typed(result)) if matches!(result.as_ref(), ServerResult::CallToolResult(r) if r.is_error == Some(true)) => {
            Outcome::ToolError
        }
        Ok(_) => Outcome::Ok,
        Err(ForwardError::Rpc(error)) => Outcome::Error(error.code.0),
        Err(ForwardError::Stopped(reason)) if reason.contains("timed out") => {
            Outcome::Failed("timeout")
        }
        Err(ForwardError::Stopped(_)) => Outcome::Failed("cancelled"),
        Err(_) => Outcome::Failed("connection_closed"),
    }
}

/// Resolves when `timeout` has passed, never without one.
pub(super) async fn expire(timeout: Option<Duration>) -> Duration {
    match timeout {
        Some(after) => {
            tokio::time::sleep(after).await;
            after
        }
        None => std::future::pending().await,
    }
}
