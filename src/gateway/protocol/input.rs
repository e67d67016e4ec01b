//! Calls that wait for their client's input (SPEC §5.11).
//!
//! A client on protocol 2026-07-28 cannot receive a server's requests: the revision answers a
//! `tools/call`, `prompts/get` or `resources/read` that needs input with a result of
//! `resultType: "input_required"` (its `inputRequests`, and a `requestState` to present again),
//! and the client calls again with `inputResponses`. Servers behind loom speak the `initialize`
//! era and ask with `elicitation/create`, `sampling/createMessage` or `roots/list` in the middle
//! of the call. loom keeps the server's call running, answers the client with `input_required`
//! naming the server's questions, and when the client calls again with the answers and loom's
//! `requestState`, hands the answers to the server's waiting requests and goes on waiting for
//! the call's answer (or its next question).
//!
//! A `requestState` is an unguessable handle, minted anew for every round and good for one
//! retry, within the session (over HTTP: the credential) that got it.

#![allow(deprecated)] // sampling and roots are deprecated by SEP-2577 but servers still ask for them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CreateMessageResult, CustomResult, ElicitResult, InputResponses, ListRootsResult, ServerResult,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Map, Value, json};

use crate::downstream::callers::{Ask, AskKind};
use crate::gateway::Gateway;
use crate::gateway::forward::{ForwardError, Forwarded, Running, Waited};

/// How long a call waits for its client to come back with the answers; then the server's
/// requests are answered with an error and the call is cancelled downstream.
pub(crate) const INPUT_WAIT: Duration = Duration::from_secs(600);

/// Calls of one session that may wait for input at once. A server asking beyond it gets an
/// error for its request (the call goes on).
pub(crate) const MAX_WAITING: usize = 256;

/// The request a call was made with: a retry must name the same.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::gateway) struct Call {
    pub method: &'static str,
    /// The exposed tool or prompt name, or the resource URI.
    pub target: String,
    pub arguments: Option<Value>,
    /// Where the exposed tool led when the call was made: a retry goes on with the call there
    /// even if the tool has left the catalog since (its server relisted its tools).
    pub route: Option<crate::gateway::catalog::Route>,
}

/// What a call waits with.
enum Pending {
    /// The server's call, still running: the answers go to its waiting requests.
    Running(Running),
    /// The server refused the call until its user finished URL flows (-32042, 2025-11-25's
    /// "URL elicitation required"): the call is made again when the client comes back.
    Again {
        index: usize,
        request: Box<rmcp::model::ClientRequest>,
        /// A login offered with it (SPEC §4.7): ended when the client declines or never comes.
        login: Option<tokio::task::AbortHandle>,
    },
    /// loom's own login tool (`S_login`, SPEC §4.7) asked the client to open a login page:
    /// its retry is answered once server `index` is connected with the login.
    Login {
        index: usize,
        server: String,
        login: tokio::task::AbortHandle,
    },
    /// A 2026-07-28 server answered with `input_required` itself: the client's answers go back
    /// to it with its own `requestState` on the call made again.
    Downstream {
        index: usize,
        request: Box<rmcp::model::ClientRequest>,
        state: Option<String>,
    },
}

impl Call {
    /// What a sealed `requestState` names the call by (src/cluster/handoff.rs).
    pub(in crate::gateway) fn digest(&self) -> String {
        crate::cluster::handoff::call_digest(self.method, &self.target, self.arguments.as_ref())
    }
}

impl Pending {
    fn cancel(&mut self, reason: &'static str) {
        match self {
            Pending::Running(running) => running.cancel(reason),
            // Nobody will come back for it: the login's wait for the browser ends too.
            Pending::Again {
                login: Some(login), ..
            }
            | Pending::Login { login, .. } => login.abort(),
            _ => {}
        }
    }
}

/// A call waiting for its client.
struct Waiting {
    call: Call,
    pending: Pending,
    /// The questions put to the client in this round, by the key it answers under.
    asked: Vec<(String, Ask)>,
    /// When the one expiry timer of this state fires ([`expire_later`]).
    expires_at: tokio::time::Instant,
}

/// Every call of a session that waits for input, by `requestState`.
#[derive(Default)]
pub(in crate::gateway) struct Suspended {
    table: Arc<Mutex<HashMap<String, Waiting>>>,
    keys: Arc<Keys>,
}

/// The keys a session's questions are asked under: never the same twice in a session.
#[derive(Default)]
pub(in crate::gateway) struct Keys(AtomicU64);

impl Keys {
    pub(crate) fn next(&self, kind: AskKind) -> String {
        let n = self.0.fetch_add(1, Ordering::Relaxed) + 1;
        let kind = match kind {
            AskKind::Elicitation => "elicitation",
            AskKind::Sampling => "sampling",
            AskKind::Roots => "roots",
        };
        format!("{kind}-{n}")
    }
}

impl Suspended {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn keys(&self) -> Arc<Keys> {
        self.keys.clone()
    }

    /// Whether a call waits under `state`.
    pub(crate) fn holds(&self, state: &str) -> bool {
        self.lock().contains_key(state)
    }

    /// Calls waiting now (for tests: nothing may leak).
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// The route of the tool call waiting under `state` for exposed tool `target`, if one does.
    pub(crate) fn route_of(
        &self,
        state: &str,
        target: &str,
    ) -> Option<crate::gateway::catalog::Route> {
        let table = self.lock();
        let waiting = table.get(state)?;
        (waiting.call.method == "tools/call" && waiting.call.target == target)
            .then(|| waiting.call.route.clone())
            .flatten()
    }

    /// The session ends: every waiting call is cancelled downstream.
    pub(crate) fn clear(&self) {
        let waiting: Vec<Waiting> = self.lock().drain().map(|(_, w)| w).collect();
        for mut waiting in waiting {
            waiting.pending.cancel("loom's client session ended");
        }
    }
}

/// What a call came to: the server's answer, or `input_required` for the client.
pub(in crate::gateway) enum Reply {
    Done(Forwarded),
    Input(Box<ServerResult>),
}

/// Rounds of a 2026-07-28 server's questions loom answers for a client of an older version in
/// one call (the SDKs stop at as many).
pub(crate) const MAX_ROUNDS: usize = 10;

/// The questions of a server's `input_required` result (key, kind, params), and its state.
fn questions_of(
    raw: &serde_json::value::RawValue,
) -> (Vec<(String, AskKind, Value)>, Option<String>) {
    // A question of a kind loom does not know is left out: the server gets no answer to it and
    // may ask again (a 2026-07-28 server must not ask what the client did not declare).
    let Ok(Value::Object(result)) = serde_json::from_str::<Value>(raw.get()) else {
        return (Vec::new(), None);
    };
    let state = result
        .get("requestState")
        .and_then(Value::as_str)
        .map(str::to_string);
    let mut asked = Vec::new();
    if let Some(Value::Object(requests)) = result.get("inputRequests") {
        for (key, entry) in requests {
            let kind = match entry.get("method").and_then(Value::as_str) {
                Some("elicitation/create") => AskKind::Elicitation,
                Some("sampling/createMessage") => AskKind::Sampling,
                Some("roots/list") => AskKind::Roots,
                _ => continue,
            };
            let params = entry.get("params").cloned().unwrap_or(Value::Null);
            asked.push((key.clone(), kind, params));
        }
    }
    (asked, state)
}

/// `request` (a `tools/call`, `prompts/get` or `resources/read`) carrying `responses` and
/// `state`, as a 2026-07-28 retry does.
fn with_input(
    request: rmcp::model::ClientRequest,
    responses: Option<InputResponses>,
    state: Option<String>,
) -> rmcp::model::ClientRequest {
    use rmcp::model::ClientRequest;
    match request {
        ClientRequest::CallToolRequest(mut call) => {
            call.params.input_responses = responses;
            call.params.request_state = state;
            ClientRequest::CallToolRequest(call)
        }
        ClientRequest::GetPromptRequest(mut get) => {
            get.params.input_responses = responses;
            get.params.request_state = state;
            ClientRequest::GetPromptRequest(get)
        }
        ClientRequest::ReadResourceRequest(mut read) => {
            read.params.input_responses = responses;
            read.params.request_state = state;
            ClientRequest::ReadResourceRequest(read)
        }
        other => other,
    }
}

/// 2025-11-25's "URL elicitation required" error.
pub(in crate::gateway) const URL_ELICITATION_REQUIRED: rmcp::model::ErrorCode =
    rmcp::model::ErrorCode(-32042);

/// A `requestState` loom does not hold (any more).
fn unknown_state() -> McpError {
    McpError::invalid_params(
        "loom: the `requestState` is unknown or expired (each one answers one retry, within \
         600 s, in the session that got it — in a cluster, on any instance, for the same \
         credential); call again without `requestState` and `inputResponses` to start over",
        None,
    )
}

impl Gateway {
    /// Run `request` until its answer — or, for a 2026-07-28 client, until the server asks
    /// its client something: then the call waits and the client gets `input_required`.
    pub(in crate::gateway) async fn call(
        &self,
        index: usize,
        request: rmcp::model::ClientRequest,
        context: &RequestContext<RoleServer>,
        call: Call,
    ) -> Result<Reply, ForwardError> {
        // A subject's own connection may still be starting (its first request started it):
        // the call waits for it as for a login's connection, not fails.
        if self.server(index).is_some_and(|server| {
            matches!(server.state(), crate::downstream::ServerState::Starting)
        }) {
            self.wait_until_live(index).await;
        }
        // Kept to be made again should the server want a URL flow finished first, or answer
        // with `input_required` itself (a 2026-07-28 server).
        let modern_server = self
            .server(index)
            .and_then(|server| server.live().ok())
            .is_some_and(|live| live.modern);
        let era = super::era::Era::of_request(context);
        let again = (era == super::era::Era::Discover || modern_server).then(|| request.clone());
        let running = self.start_call(
            index,
            request,
            context,
            self.call_timeout(index),
            true,
            None,
        )?;
        match self
            .follow(running, Vec::new(), call.clone(), &context.ct)
            .await
        {
            Ok(Reply::Done(Forwarded::Raw(raw))) if super::era::is_input_required(&raw) => {
                match again {
                    Some(request) => self.server_asks(index, request, raw, call, context).await,
                    None => Ok(Reply::Done(Forwarded::Raw(raw))),
                }
            }
            Err(ForwardError::Rpc(error)) if error.code == URL_ELICITATION_REQUIRED => {
                let capabilities = context.client_capabilities().unwrap_or_default();
                match again {
                    Some(request) => self.url_first(index, request, error, call, &capabilities),
                    None => Err(ForwardError::Rpc(error)),
                }
            }
            other => other,
        }
    }

    /// Follow a direct-path call whose server has asked `asks` (the direct path waits inline
    /// until then, src/gateway/direct.rs) to its answer or to `input_required`.
    pub(in crate::gateway) async fn follow_asked(
        &self,
        running: Running,
        asks: Vec<Ask>,
        call: Call,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<Reply, ForwardError> {
        let asked = asks
            .into_iter()
            .map(|ask| (self.protocol.suspended.keys.next(ask.kind), ask))
            .collect();
        self.follow(running, asked, call, cancelled).await
    }

    /// The server answered -32042 (URL elicitation required, 2025-11-25): a 2026-07-28 client
    /// that takes URL-mode elicitation gets the URLs as `input_required`, and its retry makes
    /// the call again; any other client gets the server's error.
    pub(in crate::gateway) fn url_first(
        &self,
        index: usize,
        request: rmcp::model::ClientRequest,
        error: McpError,
        call: Call,
        capabilities: &rmcp::model::ClientCapabilities,
    ) -> Result<Reply, ForwardError> {
        let elicitations: Vec<Value> = error
            .data
            .as_ref()
            .and_then(|data| data.get("elicitations"))
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let takes_urls = elicitations
            .iter()
            .all(|e| crate::downstream::callers::declares(capabilities, AskKind::Elicitation, e));
        if elicitations.is_empty() || !takes_urls {
            return Err(ForwardError::Rpc(error));
        }
        let asked = elicitations
            .into_iter()
            .map(|params| {
                // Nobody waits for these answers: the call is simply made again.
                let (reply, _) = tokio::sync::oneshot::channel();
                let ask = Ask {
                    kind: AskKind::Elicitation,
                    params,
                    reply,
                };
                (self.protocol.suspended.keys.next(AskKind::Elicitation), ask)
            })
            .collect();
        let again = |(index, request)| Pending::Again {
            index,
            request: Box::new(request),
            login: None,
        };
        match self.suspend((index, request), again, asked, &call) {
            Ok(result) => Ok(Reply::Input(Box::new(result))),
            Err(_) => Err(ForwardError::Rpc(error)),
        }
    }

    /// A login page for a 2026-07-28 client (SPEC §4.7): `input_required` with the URL
    /// elicitation `elicitation`; the retry makes `again` on server `index` (a call of one of
    /// its tools), or — without one, loom's `S_login` — says whether the login took.
    pub(in crate::gateway) fn login_first(
        &self,
        index: usize,
        server: &str,
        elicitation: Value,
        call: Call,
        again: Option<rmcp::model::ClientRequest>,
        login: tokio::task::AbortHandle,
    ) -> Option<ServerResult> {
        let (reply, _) = tokio::sync::oneshot::channel();
        let asked = vec![(
            self.protocol.suspended.keys.next(AskKind::Elicitation),
            Ask {
                kind: AskKind::Elicitation,
                params: elicitation,
                reply,
            },
        )];
        let server = server.to_owned();
        let into = move |index| match again {
            Some(request) => Pending::Again {
                index,
                request: Box::new(request),
                login: Some(login),
            },
            None => Pending::Login {
                index,
                server,
                login,
            },
        };
        self.suspend(index, into, asked, &call).ok()
    }

    /// [`Gateway::call`] of a request that waits for MCP task `task` (`tasks/result`): the
    /// server's questions tied to the task are for it.
    pub(in crate::gateway) async fn call_for_task(
        &self,
        index: usize,
        request: rmcp::model::ClientRequest,
        context: &RequestContext<RoleServer>,
        call: Call,
        task: String,
    ) -> Result<Reply, ForwardError> {
        let timeout = self.call_timeout(index);
        let mut running =
            self.start_call(index, request, context, timeout, true, Some(task.clone()))?;
        // Given up on, the task is cancelled on its server too (every way a call is abandoned,
        // the first request's or a retry's).
        if let Some(Ok(live)) = self.server(index).map(|s| s.live()) {
            let peer = live.peer.clone();
            running.on_abandon(move || {
                let request = rmcp::model::ClientRequest::CustomRequest(
                    rmcp::model::CustomRequest::new("tasks/cancel", Some(json!({"taskId": task}))),
                );
                tokio::spawn(async move {
                    let _ = peer.send_request(request).await;
                });
            });
        }
        self.follow(running, Vec::new(), call, &context.ct).await
    }

    /// The client came back with `inputResponses` and the `requestState` loom gave it: the
    /// answers go to the server's waiting requests and the call goes on. A state loom does
    /// not hold, a retry that names another call, an answer to a question that was not asked
    /// or that is not a result of its kind: -32602, and nothing is delivered.
    pub(in crate::gateway) async fn resume(
        &self,
        state: &str,
        responses: Option<&InputResponses>,
        call: Call,
        context: &RequestContext<RoleServer>,
    ) -> Result<Result<Reply, ForwardError>, McpError> {
        let Some(waiting) = self.protocol.suspended.lock().remove(state) else {
            return Err(unknown_state());
        };
        if let Err(error) = check_retry(&waiting, responses, &call) {
            // Not this call's retry: the call keeps waiting for the one that is, under the
            // timer it already has. Nothing more is kept for a refusal (a new timer per refused
            // retry held memory for 600 s each). Past its time the timer may have fired while
            // the state was out of the table: it is given up here instead.
            let mut waiting = waiting;
            if tokio::time::Instant::now() >= waiting.expires_at {
                waiting.pending.cancel(EXPIRED);
            } else {
                self.protocol
                    .suspended
                    .lock()
                    .insert(state.to_string(), waiting);
            }
            return Err(error);
        }
        // A sealed state answers one retry in the whole cluster: taken up here, it is claimed in
        // the store first (another instance may have retried it from the start when this one
        // did not answer). A store that fails does not hold the call up: this instance's table
        // already gave it out once.
        if let Some(member) = self.cluster.get()
            && let Some(sealed) = member.cluster().open_state(state)
        {
            match member.claim_state(&sealed).await {
                Ok(true) => {}
                Ok(false) => {
                    let mut waiting = waiting;
                    waiting
                        .pending
                        .cancel("its requestState was taken up on another instance");
                    return Err(unknown_state());
                }
                Err(error) => {
                    tracing::warn!("a requestState is taken up without its claim: {error}");
                }
            }
        }
        let Waiting { pending, asked, .. } = waiting;
        let accepted = responses.is_some_and(|answers| {
            !answers.is_empty()
                && answers
                    .values()
                    .all(|answer| answer.get("action").and_then(Value::as_str) == Some("accept"))
        });
        let running = match pending {
            Pending::Running(running) => running,
            Pending::Login {
                index,
                server,
                login,
            } => {
                if accepted {
                    self.wait_until_live(index).await;
                } else {
                    // Declined: the login no longer waits for a browser (nor holds the claim).
                    login.abort();
                }
                let logged_in = self.server(index).is_some_and(|s| s.live().is_ok());
                let result = if logged_in {
                    crate::tools::text_result(format!(
                        "loom: logged in to `{server}`; its tools are listed again"
                    ))
                } else {
                    crate::tools::error_result(format!(
                        "loom: not logged in to `{server}` (the login was declined, or did not \
                         finish); call `{server}_login` again to retry"
                    ))
                };
                return Ok(Ok(Reply::Done(Forwarded::Typed(Box::new(
                    ServerResult::CallToolResult(result),
                )))));
            }
            // The URL flows are done (or declined): the call is made again.
            Pending::Again {
                index,
                request,
                login,
            } => {
                // A login the person accepted to make: its connection may still be on its way
                // up (SPEC §4.7); declined, it no longer waits for a browser.
                if accepted {
                    self.wait_until_live(index).await;
                } else if let Some(login) = login {
                    login.abort();
                }
                return Ok(Box::pin(self.call(index, *request, context, call)).await);
            }
            // The server's own question: its answers and state go back to it with the call.
            Pending::Downstream {
                index,
                request,
                state,
            } => {
                let request = with_input(*request, responses.cloned(), state);
                return Ok(Box::pin(self.call(index, request, context, call)).await);
            }
        };
        let mut unanswered = Vec::new();
        for (key, ask) in asked {
            match responses.and_then(|r| r.get(&key)) {
                Some(answer) => {
                    let _ = ask.reply.send(Ok(answer.clone()));
                }
                None => unanswered.push((key, ask)),
            }
        }
        let mut running = running;
        self.bind_progress(&running, context.meta.get_progress_token());
        if super::era::Era::of_request(context) == super::era::Era::Discover
            && let Some(level) = context.meta.log_level()
        {
            running.set_log(Some(self.protocol.want_logs(running.index(), &level)));
        }
        Ok(self.follow(running, unanswered, call, &context.ct).await)
    }

    /// Wait for `running`; questions (those `asked` already and any the server puts) suspend it.
    async fn follow(
        &self,
        mut running: Running,
        mut asked: Vec<(String, Ask)>,
        call: Call,
        cancelled: &tokio_util::sync::CancellationToken,
    ) -> Result<Reply, ForwardError> {
        loop {
            if !asked.is_empty() {
                // While it waits, its progress and log lines go nowhere: the request that
                // started it is answered (a retry binds its own).
                self.bind_progress(&running, None);
                running.park();
                match self.suspend(running, Pending::Running, std::mem::take(&mut asked), &call) {
                    Ok(result) => return Ok(Reply::Input(Box::new(result))),
                    Err(back) => running = back,
                }
            }
            match running.wait(cancelled).await {
                Waited::Done(outcome) => {
                    self.unbind_progress(&running);
                    return outcome.map(Reply::Done);
                }
                Waited::Asked(asks) => {
                    asked = asks
                        .into_iter()
                        .map(|ask| (self.protocol.suspended.keys.next(ask.kind), ask))
                        .collect();
                }
            }
        }
    }

    /// A 2026-07-28 server answered `input_required` (SPEC §4.6): a 2026-07-28 client gets its
    /// questions (under loom's `requestState`, which carries the server's), a client of an older
    /// version gets them as requests, loom answers the server with the client's answers and
    /// makes the call again — up to [`MAX_ROUNDS`] rounds.
    async fn server_asks(
        &self,
        index: usize,
        request: rmcp::model::ClientRequest,
        raw: Box<serde_json::value::RawValue>,
        call: Call,
        context: &RequestContext<RoleServer>,
    ) -> Result<Reply, ForwardError> {
        let mut request = request;
        let mut raw = raw;
        for _ in 0..MAX_ROUNDS {
            let (asked, state) = questions_of(&raw);
            if super::era::Era::of_request(context) == super::era::Era::Discover {
                let asked = asked
                    .into_iter()
                    .map(|(key, kind, params)| {
                        let (reply, _) = tokio::sync::oneshot::channel();
                        (
                            key,
                            Ask {
                                kind,
                                params,
                                reply,
                            },
                        )
                    })
                    .collect();
                let pending = |(index, request, state)| Pending::Downstream {
                    index,
                    request: Box::new(request),
                    state,
                };
                return match self.suspend((index, request, state), pending, asked, &call) {
                    Ok(result) => Ok(Reply::Input(Box::new(result))),
                    Err(_) => Err(ForwardError::Failed(
                        "the server's questions cannot be kept for the client".into(),
                    )),
                };
            }
            // A client of the `initialize` era: the questions become requests to it, if it
            // declared what they need (§5.8), each within the call's own cancellation.
            let capabilities = context
                .peer
                .peer_info()
                .map(|info| info.capabilities.clone())
                .unwrap_or_default();
            let mut answers = InputResponses::new();
            for (key, kind, params) in asked {
                if !crate::downstream::callers::declares(&capabilities, kind, &params) {
                    return Err(ForwardError::Rpc(crate::downstream::callers::not_declared(
                        kind, &params,
                    )));
                }
                let asked =
                    rmcp::model::ServerRequest::CustomRequest(rmcp::model::CustomRequest::new(
                        kind.method(),
                        Some(params).filter(|p| !p.is_null()),
                    ));
                let sent = tokio::select! {
                    sent = context.peer.send_request(asked) => sent,
                    () = context.ct.cancelled() => return Err(ForwardError::Cancelled),
                };
                let answer = sent.map_err(|error| match error {
                    rmcp::ServiceError::McpError(error) => ForwardError::Rpc(error),
                    other => ForwardError::Failed(format!(
                        "the client did not answer the server's {}: {other}",
                        kind.method()
                    )),
                })?;
                let answer = serde_json::to_value(answer).map_err(|error| {
                    ForwardError::Failed(format!("the client's answer: {error}"))
                })?;
                answers.insert(key, answer);
            }
            request = with_input(request, Some(answers), state);
            let running = self.start_call(
                index,
                request.clone(),
                context,
                self.call_timeout(index),
                false,
                None,
            )?;
            match self
                .follow(running, Vec::new(), call.clone(), &context.ct)
                .await?
            {
                Reply::Done(Forwarded::Raw(next)) if super::era::is_input_required(&next) => {
                    raw = next;
                }
                other => return Ok(other),
            }
        }
        Err(ForwardError::Failed(format!(
            "it asked for input more than {MAX_ROUNDS} times in a row"
        )))
    }

    /// Park the call under a new `requestState` and build the `input_required` answer. With
    /// too many calls waiting, or no randomness for a handle, the server's questions get an
    /// error instead and the call is handed back to go on.
    fn suspend<P>(
        &self,
        pending: P,
        into: impl FnOnce(P) -> Pending,
        asked: Vec<(String, Ask)>,
        call: &Call,
    ) -> Result<ServerResult, P> {
        let refuse = |asked: Vec<(String, Ask)>, why: String| {
            for (_, ask) in asked {
                let _ = ask
                    .reply
                    .send(Err(McpError::internal_error(why.clone(), None)));
            }
        };
        // In a cluster the state is sealed: any instance can tell where the call waits (§25).
        let state = match self.cluster.get() {
            Some(member) => member.seal_state(&call.digest(), INPUT_WAIT),
            None => crate::token::random_hex(),
        };
        let Some(state) = state else {
            refuse(
                asked,
                "loom: no randomness for a requestState; the question cannot reach the client"
                    .into(),
            );
            return Err(pending);
        };
        let mut requests = Map::new();
        for (key, ask) in &asked {
            requests.insert(key.clone(), input_request(ask));
        }
        let mut result = json!({
            "resultType": "input_required",
            "requestState": state,
        });
        if !requests.is_empty() {
            result["inputRequests"] = Value::Object(requests);
        }
        {
            let mut table = self.protocol.suspended.lock();
            if table.len() >= MAX_WAITING {
                drop(table);
                refuse(
                    asked,
                    format!(
                        "loom: {MAX_WAITING} calls of this client already wait for its input; \
                         the question cannot reach it"
                    ),
                );
                return Err(pending);
            }
            table.insert(
                state.clone(),
                Waiting {
                    call: call.clone(),
                    pending: into(pending),
                    asked,
                    expires_at: tokio::time::Instant::now() + INPUT_WAIT,
                },
            );
        }
        expire_later(Arc::downgrade(&self.protocol.suspended.table), state);
        Ok(ServerResult::CustomResult(CustomResult(result)))
    }
}

/// After [`INPUT_WAIT`], a call still waiting under `state` is given up: the server's requests
/// get an error (their answer channels close) and the call is cancelled downstream.
const EXPIRED: &str = "loom's client did not answer the server's request within 600 s";

fn expire_later(table: Weak<Mutex<HashMap<String, Waiting>>>, state: String) {
    tokio::spawn(async move {
        tokio::time::sleep(INPUT_WAIT).await;
        let Some(table) = table.upgrade() else { return };
        let waiting = table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&state);
        if let Some(mut waiting) = waiting {
            waiting.pending.cancel(EXPIRED);
        }
    });
}

/// One question as a 2026-07-28 `inputRequests` entry: the server's method and params, without
/// what that revision does not have in them (`_meta`, `task`, the URL elicitation's
/// `elicitationId` — the server gets the answer to its own request either way — and members of
/// `requestedSchema` other than `$schema`, `type`, `properties` and `required`).
pub(in crate::gateway) fn input_request(ask: &Ask) -> Value {
    let mut entry = Map::new();
    entry.insert("method".into(), Value::String(ask.kind.method().into()));
    if let Value::Object(params) = &ask.params {
        let mut params = params.clone();
        params.remove("_meta");
        params.remove("task");
        if ask.kind == AskKind::Elicitation {
            params.remove("elicitationId");
            // 2026-07-28's requestedSchema has these members only (a server of that revision
            // sends no others, e.g. no `title`).
            if let Some(Value::Object(schema)) = params.get_mut("requestedSchema") {
                schema.retain(|key, _| {
                    matches!(key.as_str(), "$schema" | "type" | "properties" | "required")
                });
            }
        }
        entry.insert("params".into(), Value::Object(params));
    }
    Value::Object(entry)
}

/// Whether a retry may resume `waiting`: the same call, and answers only to questions asked,
/// each a result of its kind.
fn check_retry(
    waiting: &Waiting,
    responses: Option<&InputResponses>,
    call: &Call,
) -> Result<(), McpError> {
    if waiting.call.method != call.method || waiting.call.target != call.target {
        return Err(McpError::invalid_params(
            format!(
                "loom: this `requestState` belongs to `{}` of `{}`, not to `{}` of `{}`",
                waiting.call.method, waiting.call.target, call.method, call.target
            ),
            None,
        ));
    }
    if waiting.call.arguments != call.arguments {
        return Err(McpError::invalid_params(
            format!(
                "loom: a retry with `requestState` must repeat the arguments of the call it \
                 continues (`{}` was called with other arguments)",
                call.target
            ),
            None,
        ));
    }
    let Some(responses) = responses else {
        return Ok(());
    };
    let asked: Vec<&str> = waiting.asked.iter().map(|(key, _)| key.as_str()).collect();
    let unasked: Vec<&str> = responses
        .keys()
        .map(String::as_str)
        .filter(|key| !asked.contains(key))
        .collect();
    if !unasked.is_empty() {
        return Err(McpError::invalid_params(
            format!(
                "loom: `inputResponses` answers {} that loom did not ask in this round (it asked {})",
                names(&unasked),
                names(&asked)
            ),
            None,
        ));
    }
    for (key, ask) in &waiting.asked {
        if let Some(answer) = responses.get(key) {
            check_answer(key, ask, answer)?;
        }
    }
    Ok(())
}

/// Whether `answer` is a result of the kind `ask` asked for.
pub(in crate::gateway) fn check_answer(
    key: &str,
    ask: &Ask,
    answer: &Value,
) -> Result<(), McpError> {
    let fits = match ask.kind {
        AskKind::Elicitation => serde_json::from_value::<ElicitResult>(answer.clone()).is_ok(),
        AskKind::Sampling => serde_json::from_value::<CreateMessageResult>(answer.clone()).is_ok(),
        AskKind::Roots => serde_json::from_value::<ListRootsResult>(answer.clone()).is_ok(),
    };
    if fits {
        Ok(())
    } else {
        Err(McpError::invalid_params(
            format!(
                "loom: `inputResponses.{key}` is not a result of `{}`",
                ask.kind.method()
            ),
            None,
        ))
    }
}

fn names(keys: &[&str]) -> String {
    if keys.is_empty() {
        return "nothing".into();
    }
    keys.iter()
        .map(|key| format!("`{key}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(kind: AskKind, params: Value) -> Ask {
        let (reply, _) = tokio::sync::oneshot::channel();
        Ask {
            kind,
            params,
            reply,
        }
    }

    #[test]
    fn questions_lose_what_2026_does_not_have() {
        let url = ask(
            AskKind::Elicitation,
            json!({"mode": "url", "url": "https://x", "message": "m", "elicitationId": "e1",
                   "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}),
        );
        assert_eq!(
            input_request(&url),
            json!({"method": "elicitation/create",
                   "params": {"mode": "url", "url": "https://x", "message": "m"}})
        );
        let roots = ask(AskKind::Roots, Value::Null);
        assert_eq!(input_request(&roots), json!({"method": "roots/list"}));
    }
}
