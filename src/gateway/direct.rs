//! Direct calls, the gateway's half (SPEC §5.1): a plain `tools/call` for a child's tool, taken
//! off the upstream transport before rmcp decodes it, relayed to the child under an id of loom's
//! own, and answered with the child's bytes — with what rmcp's path gives kept: the size check
//! that decides pass-through, `callTimeoutMs` and the client's cancellation (both cancel the
//! call downstream), progress passed on before the answer, an `isError` result when the child
//! goes away, era shaping and the session's report.
//!
//! Anything else goes to rmcp as before: other methods, loom's own tools, task-augmented calls,
//! a tool no server lists, a server that is down or remote, a request that does not decode
//! cleanly (rmcp words the error), and everything before the client's handshake.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex as StdMutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use rmcp::ErrorData as McpError;
use rmcp::model::{RequestId, ServerResult};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::era::Era;
use super::forward::{ForwardError, PROTOCOL_META_PREFIX, expire};
use super::{Gateway, discovery};
use crate::downstream::callers::{Answerer, Ask};
use crate::result::Decision;
use crate::tools;
use crate::wire::direct::{Arrival, BoxFuture, Bypass, DirectCall, DirectCalls, LineSink};
use crate::wire::one_line;

/// The upstream calls in flight on the direct path, by the client's request id: which call
/// (a number, so a finished call never removes a later one that reused its id) and what
/// cancels it.
type InFlight = Arc<StdMutex<HashMap<RequestId, (u64, CancellationToken)>>>;

/// How long a closing connection waits for direct calls still running to be answered (rmcp
/// waits as long for its own handlers when the client closes its end).
const DRAIN: Duration = Duration::from_secs(5);

/// The [`Bypass`] of one client session.
pub(crate) struct DirectLane {
    gateway: Arc<Gateway>,
    in_flight: InFlight,
    started: AtomicU64,
    running: TaskTracker,
    /// Cancelled when the connection closes: every call still running is cancelled with it.
    closing: CancellationToken,
}

impl DirectLane {
    pub(crate) fn new(gateway: Arc<Gateway>) -> Arc<Self> {
        Arc::new(Self {
            gateway,
            in_flight: InFlight::default(),
            started: AtomicU64::new(0),
            running: TaskTracker::new(),
            closing: CancellationToken::new(),
        })
    }
}

/// The top of an incoming message, its params left as text.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<BTreeMap<Cow<'a, str>, &'a RawValue>>,
    #[serde(default)]
    task: Option<IgnoredAny>,
    #[serde(rename = "requestState", default)]
    request_state: Option<IgnoredAny>,
    #[serde(rename = "inputResponses", default)]
    input_responses: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct CancelParams {
    #[serde(rename = "requestId")]
    request_id: RequestId,
}

/// The members of a child's response line.
#[derive(Deserialize)]
struct Answer<'a> {
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

/// A child's progress line, its params member by member.
#[derive(Deserialize)]
struct ProgressLine<'a> {
    #[serde(borrow)]
    params: BTreeMap<Cow<'a, str>, &'a RawValue>,
}

/// What a 2026-07-28 request says of its client.
struct Modern {
    capabilities: rmcp::model::ClientCapabilities,
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still ask for it
    log_level: Option<rmcp::model::LoggingLevel>,
}

/// One call taken off rmcp's hands, ready to go to its child.
struct Relay {
    /// The client's id, as it wrote it (answers carry it back unchanged).
    id_text: String,
    id: RequestId,
    server: usize,
    /// What the call is registered under among the calls in flight ([`Downstream::key`]).
    key: usize,
    server_name: String,
    tool: String,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
    /// The client's progress token, as JSON text.
    progress_token: Option<String>,
    /// The name the client called (the exposed one).
    exposed: String,
    era: Era,
    /// The client predates `resource_link` blocks: they reach it as text (SPEC §5.7).
    links_as_text: bool,
    /// The client: where the server's own requests during the call go (SPEC §5.8).
    peer: rmcp::Peer<rmcp::RoleServer>,
    /// A 2026-07-28 request: what it declared its client can answer, and the log level it asked
    /// for (its questions become `input_required`, §5.11).
    modern: Option<Modern>,
    timeout: Duration,
    /// The request line for the child.
    line: Vec<u8>,
    calls: Arc<DirectCalls>,
    call: DirectCall,
    /// The request's telemetry (SPEC §24), when any is on.
    observed: Option<Arc<crate::telemetry::Observed>>,
    /// The CLIENT span of the request to the child; ends with its answer.
    traced: Option<crate::telemetry::Downstream>,
}

/// The server's answer shaped for the client's era (SPEC §5.7); `links_as_text` is
/// [`Relay::links_as_text`].
fn shape_raw(era: Era, links_as_text: bool, raw: Box<RawValue>) -> Box<RawValue> {
    let raw = era.shape_raw(raw, false);
    match links_as_text {
        true => super::era::raw_without_resource_links(raw),
        false => raw,
    }
}

/// A result loom built for a call, shaped for the client's era.
fn shape_built(era: Era, links_as_text: bool, result: ServerResult) -> ServerResult {
    let result = era.shape_built(result);
    match links_as_text {
        true => super::era::built_without_resource_links(result),
        false => result,
    }
}

impl Bypass for DirectLane {
    fn offer(&self, line: &str, reply: &Arc<dyn LineSink>) -> bool {
        // A JSON-RPC message is an object; serde would also read an array into the structs.
        if !line.trim_start().starts_with('{') {
            return false;
        }
        let finder = memchr::memmem::find;
        let bytes = line.as_bytes();
        let cancels =
            !self.lock().is_empty() && finder(bytes, b"notifications/cancelled").is_some();
        if !cancels && finder(bytes, b"tools/call").is_none() {
            return false;
        }
        let Ok(incoming) = serde_json::from_str::<Incoming<'_>>(line) else {
            return false;
        };
        if incoming.jsonrpc.as_deref() != Some("2.0") {
            return false;
        }
        match (incoming.method.as_deref(), incoming.id) {
            (Some("tools/call"), Some(id)) => match self.relay(id, incoming.params) {
                Some(relay) => {
                    self.start(relay, reply.clone());
                    true
                }
                None => false,
            },
            (Some("notifications/cancelled"), None) => self.cancel(incoming.params),
            _ => false,
        }
    }

    fn input_ended(&self) {
        self.gateway.client_gone.cancel();
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.running.close();
            if tokio::time::timeout(DRAIN, self.running.wait())
                .await
                .is_err()
            {
                tracing::warn!(
                    "direct calls still running {} s after the client closed: cancelled",
                    DRAIN.as_secs()
                );
            }
            self.closing.cancel();
        })
    }
}

impl DirectLane {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, (u64, CancellationToken)>> {
        self.in_flight
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A cancellation of a direct call: taken (the call cancels itself downstream and sends no
    /// answer, as for any cancelled request). Anyone else's goes to rmcp.
    fn cancel(&self, params: Option<&RawValue>) -> bool {
        let Some(params) = params.and_then(|p| serde_json::from_str::<CancelParams>(p.get()).ok())
        else {
            return false;
        };
        match self.lock().remove(&params.request_id) {
            Some((_, token)) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// The call, if it is one the direct path takes.
    fn relay(&self, id_raw: &RawValue, params: Option<&RawValue>) -> Option<Relay> {
        let gateway = &self.gateway;
        let id = serde_json::from_str::<RequestId>(id_raw.get()).ok()?;
        let params = params.filter(|p| p.get().starts_with('{'))?;
        let params = serde_json::from_str::<CallParams<'_>>(params.get()).ok()?;
        if params.task.is_some()
            || params.request_state.is_some()
            || params.input_responses.is_some()
            || tools::NAMES.contains(&params.name.as_ref())
            || discovery::DISCOVERY_NAMES.contains(&params.name.as_ref())
            || params.name == discovery::STATS
        {
            return None;
        }
        // Arguments are an object or absent; anything else is rmcp's to refuse in its words.
        let arguments = match params.arguments {
            None => None,
            Some(raw) if raw.get() == "null" => None,
            Some(raw) => Some(serde_json::from_str::<serde_json::Map<_, _>>(raw.get()).ok()?),
        };
        let meta = params.meta.unwrap_or_default();
        // rmcp's session must be under way (its first request chose the lifecycle).
        let peer = gateway.upstream.get()?;
        let mut links_as_text = false;
        let served_version;
        let (era, modern) = if meta.keys().any(|key| key.starts_with(PROTOCOL_META_PREFIX)) {
            // A 2026-07-28 request whose envelope is in order (anything else is rmcp's path,
            // which words the error).
            served_version = super::observe::MODERN_VERSION.to_string();
            (Era::Discover, Some(modern_envelope(&meta)?))
        } else {
            let version = &peer.peer_info()?.protocol_version;
            links_as_text = super::era::predates_resource_links(Some(version.as_str()));
            served_version = version.as_str().to_string();
            (Era::of(Some(version)), None)
        };
        let exposed = gateway.exposed();
        let route = exposed.tool_route(&params.name)?;
        if exposed.runs_only_as_task(&params.name) {
            // Run as a task by loom for clients without tasks (SPEC §5.10), or refused by the
            // server when called plainly: either way not a plain relay.
            return None;
        }
        let server = gateway.server(route.server)?;
        let live = server.live().ok()?;
        let calls = live.direct.clone()?;
        if self.lock().contains_key(&id) {
            // The client reused an id still in flight: rmcp's path decides what that means.
            return None;
        }
        let call = calls.open()?;
        // A token that is not one (`null`, an object) asks for no progress, as on rmcp's path.
        let progress_token = meta
            .get("progressToken")
            .filter(|t| serde_json::from_str::<rmcp::model::ProgressToken>(t.get()).is_ok())
            .map(|t| t.get().to_string());
        let observed = gateway.observe_direct(
            id_raw.get(),
            &params.name,
            &served_version,
            &meta,
            (server.name(), &route.name),
        );
        let traced = observed.as_ref().and_then(|o| {
            o.downstream(&crate::telemetry::Outgoing {
                server: server.name(),
                method: "tools/call",
                name: Some(&route.name),
                address: None,
                version: live.protocol_version().as_deref(),
                request_id: Some(&call.id),
            })
        });
        let trace_context = traced.as_ref().and_then(|t| t.traceparent());
        let line = request_line(
            &call.id,
            &route.name,
            params.arguments,
            &meta,
            progress_token.is_some(),
            trace_context.as_ref(),
        )
        .ok()?;
        Some(Relay {
            id_text: id_raw.get().to_string(),
            id,
            server: route.server,
            key: server.key,
            server_name: server.name().to_string(),
            tool: route.name.clone(),
            arguments,
            progress_token,
            exposed: params.name.to_string(),
            era,
            links_as_text,
            peer,
            modern,
            timeout: Duration::from_millis(server.config.call_timeout_ms),
            line,
            calls,
            call,
            observed,
            traced,
        })
    }

    fn start(&self, mut relay: Relay, reply: Arc<dyn LineSink>) {
        // With telemetry on, the answer is seen on its way out (its size and outcome).
        let (reply, watched) = match relay.observed.take() {
            Some(observed) => {
                let watched = Arc::new(Watched::new(reply));
                let sink: Arc<dyn LineSink> = watched.clone();
                (sink, Some((observed, watched)))
            }
            None => (reply, None),
        };
        let cancelled = self.closing.child_token();
        let number = self.started.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .insert(relay.id.clone(), (number, cancelled.clone()));
        self.gateway
            .hub
            .calling(relay.server, relay.key, &self.gateway.upstream);
        let gateway = self.gateway.clone();
        let in_flight = self.in_flight.clone();
        if relay.modern.is_some() {
            self.running.spawn(async move {
                let id = relay.id.clone();
                observed_run(watched, run_modern(&gateway, relay, reply, cancelled)).await;
                let mut in_flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
                if in_flight.get(&id).is_some_and(|(n, _)| *n == number) {
                    in_flight.remove(&id);
                }
            });
            return;
        }
        let caller = gateway.hub.in_flight.register(
            relay.key,
            gateway.number,
            None,
            Answerer::Peer(relay.peer.clone()),
        );
        self.running.spawn(async move {
            let id = relay.id.clone();
            observed_run(watched, run(&gateway, relay, reply, cancelled)).await;
            drop(caller);
            let mut in_flight = in_flight.lock().unwrap_or_else(PoisonError::into_inner);
            if in_flight.get(&id).is_some_and(|(n, _)| *n == number) {
                in_flight.remove(&id);
            }
        });
    }
}

/// The request line for the child: the server's own tool name, the client's arguments as it
/// wrote them, its `_meta` without what describes loom's client session (the 2026-07-28
/// envelope) and with loom's progress token in place of the client's.
fn request_line(
    id: &str,
    tool: &str,
    arguments: Option<&RawValue>,
    meta: &BTreeMap<Cow<'_, str>, &RawValue>,
    wants_progress: bool,
    trace_context: Option<&(String, Option<String>)>,
) -> serde_json::Result<Vec<u8>> {
    let mut line = Vec::with_capacity(128 + arguments.map_or(0, |a| a.get().len()));
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    line.extend_from_slice(id.as_bytes());
    line.extend_from_slice(br#","method":"tools/call","params":{"name":"#);
    serde_json::to_writer(&mut line, tool)?;
    if let Some(arguments) = arguments.filter(|a| a.get() != "null") {
        line.extend_from_slice(br#","arguments":"#);
        line.extend_from_slice(arguments.get().as_bytes());
    }
    // With tracing on, loom's span is the parent the child sees (SPEC §24.1).
    let kept = meta.iter().filter(|(key, _)| {
        *key != "progressToken"
            && !key.starts_with(PROTOCOL_META_PREFIX)
            && !(trace_context.is_some() && (*key == "traceparent" || *key == "tracestate"))
    });
    let mut first = true;
    let mut open_meta = |line: &mut Vec<u8>| {
        line.extend_from_slice(if first { br#","_meta":{"# } else { b"," });
        first = false;
    };
    for (key, value) in kept {
        open_meta(&mut line);
        serde_json::to_writer(&mut line, key)?;
        line.push(b':');
        line.extend_from_slice(value.get().as_bytes());
    }
    if wants_progress {
        open_meta(&mut line);
        line.extend_from_slice(br#""progressToken":"#);
        line.extend_from_slice(id.as_bytes());
    }
    if let Some((traceparent, tracestate)) = trace_context {
        open_meta(&mut line);
        line.extend_from_slice(br#""traceparent":"#);
        serde_json::to_writer(&mut line, traceparent)?;
        if let Some(tracestate) = tracestate {
            line.extend_from_slice(br#","tracestate":"#);
            serde_json::to_writer(&mut line, tracestate)?;
        }
    }
    if !first {
        line.push(b'}');
    }
    line.extend_from_slice(b"}}");
    // A line ends only where the message does: `\r` is whitespace in JSON but a line break to
    // some readers (universal newlines), so none reaches the child inside a message.
    let mut line = one_line(&line).into_owned();
    line.push(b'\n');
    Ok(line)
}

/// The client side of a 2026-07-28 request's envelope, when it is in order: a version loom knows
/// of that revision or later, and `clientCapabilities` (and a `logLevel`, when there is one)
/// that decode.
fn modern_envelope(meta: &BTreeMap<Cow<'_, str>, &RawValue>) -> Option<Modern> {
    let version = meta.get("io.modelcontextprotocol/protocolVersion")?;
    let version: rmcp::model::ProtocolVersion = serde_json::from_str(version.get()).ok()?;
    if !rmcp::model::ProtocolVersion::KNOWN_VERSIONS.contains(&version)
        || Era::of(Some(&version)) != Era::Discover
    {
        return None;
    }
    let capabilities = meta.get("io.modelcontextprotocol/clientCapabilities")?;
    let capabilities = serde_json::from_str(capabilities.get()).ok()?;
    let log_level = match meta.get("io.modelcontextprotocol/logLevel") {
        None => None,
        Some(level) => Some(serde_json::from_str(level.get()).ok()?),
    };
    Some(Modern {
        capabilities,
        log_level,
    })
}

/// A 2026-07-28 call on the direct path: relayed as any other, but the child's questions in
/// the middle of it (SPEC §5.11) make it wait for its client, which gets `input_required`; the
/// client's retry resumes it on rmcp's path, where every retry goes. Until the child asks, the
/// call is waited for here, as a handshake client's is; only a call that asks moves to a task
/// of its own (it outlives this request).
async fn run_modern(
    gateway: &Arc<Gateway>,
    mut relay: Relay,
    reply: Arc<dyn LineSink>,
    cancelled: CancellationToken,
) {
    let Some(modern) = relay.modern.take() else {
        return;
    };
    let head = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, relay.id_text);
    let (asks_tx, mut asks) = tokio::sync::mpsc::unbounded_channel();
    let caller = gateway.hub.in_flight.register(
        relay.key,
        gateway.number,
        None,
        Answerer::Input {
            capabilities: Box::new(modern.capabilities.clone()),
            asks: asks_tx,
        },
    );
    let log = modern.log_level.map(|level| {
        if let Some(server) = gateway.server(relay.server) {
            gateway.hub.wants_log_level(&server, &level);
        }
        gateway.protocol.want_logs(relay.server, &level)
    });
    let began = tokio::time::Instant::now();
    let call = super::input::Call {
        method: "tools/call",
        target: relay.exposed.clone(),
        arguments: relay.arguments.clone().map(serde_json::Value::Object),
        route: Some(super::catalog::Route {
            server: relay.server,
            name: relay.tool.clone(),
        }),
    };
    let followed = match exchange(&mut relay, &reply, &cancelled, Some(&mut asks)).await {
        Ok(Exchanged::Answer(line)) => answer_of(&line).map(super::input::Reply::Done),
        Ok(Exchanged::Asked(asked)) => {
            // The rest of the exchange goes on in a task of its own; progress goes to the
            // token in `progress` (the latest retry's).
            let progress = Arc::new(StdMutex::new(relay.progress_token.take()));
            let (stop, stopped) = tokio::sync::oneshot::channel();
            let (answer, outcome) = tokio::sync::oneshot::channel();
            let waiting = Waiting {
                calls: relay.calls.clone(),
                call: relay.call,
                reply: reply.clone(),
                progress: progress.clone(),
                traced: relay.traced.take(),
            };
            tokio::spawn(async move {
                let _ = answer.send(waiting.run(stopped).await);
            });
            let running = super::forward::Running::direct(
                relay.server,
                outcome,
                asks,
                stop,
                relay.timeout.saturating_sub(began.elapsed()),
                progress,
                caller,
                log,
            );
            gateway
                .follow_asked(running, asked, call.clone(), &cancelled)
                .await
        }
        Err(error) => Err(error),
    };
    let followed = match followed {
        Err(ForwardError::Rpc(error)) if error.code.0 == -32042 => {
            let mut params = rmcp::model::CallToolRequestParams::new(relay.tool.clone());
            params.arguments = relay.arguments.clone();
            let request = rmcp::model::ClientRequest::CallToolRequest(
                rmcp::model::CallToolRequest::new(params),
            );
            gateway.url_first(relay.server, request, error, call, &modern.capabilities)
        }
        other => other,
    };
    let result = match followed {
        Ok(super::input::Reply::Input(result)) => *result,
        Ok(super::input::Reply::Done(super::forward::Forwarded::Raw(raw))) => {
            let origin = gateway.origin_of(
                &super::catalog::Route {
                    server: relay.server,
                    name: relay.tool.clone(),
                },
                relay.arguments.as_ref(),
            );
            // Cancelled while the result is decided (a model summary can take seconds): no
            // answer, and what the decision held is let go with it.
            let decided = tokio::select! {
                decided = gateway.decide(raw, origin) => decided,
                _ = cancelled.cancelled() => return,
            };
            match decided {
                _ if cancelled.is_cancelled() => return,
                Decision::PassThrough(raw, keep) => {
                    let raw = shape_raw(relay.era, relay.links_as_text, raw);
                    gateway.notes_drained().await;
                    if let Err(error) = reply
                        .write_parts(&[head.as_bytes(), &one_line(raw.get().as_bytes()), b"}\n"])
                        .await
                    {
                        tracing::debug!(%error, "the client went away before the answer");
                    }
                    drop(keep);
                    return;
                }
                Decision::Built(result) => *result,
            }
        }
        Ok(super::input::Reply::Done(super::forward::Forwarded::Typed(result))) => *result,
        Err(ForwardError::Cancelled) => return,
        // The server's JSON-RPC error as it came (SPEC §5.6).
        Err(ForwardError::Rpc(error)) => {
            gateway.notes_drained().await;
            write_error(&relay.id_text, &error, &reply, &cancelled).await;
            return;
        }
        Err(error) => error.into_tool_result(&relay.server_name, &format!("tool `{}`", relay.tool)),
    };
    if cancelled.is_cancelled() {
        return;
    }
    let result = shape_built(relay.era, relay.links_as_text, result);
    gateway.notes_drained().await;
    match serde_json::to_vec(&result) {
        Ok(body) => {
            if let Err(error) = reply.write_parts(&[head.as_bytes(), &body, b"}\n"]).await {
                tracing::debug!(%error, "the client went away before the answer");
            }
        }
        Err(error) => tracing::error!(%error, "could not encode a tool result"),
    }
}

/// How a child's answer line ended, for its span.
fn answered_outcome(line: &str) -> crate::telemetry::Outcome {
    use crate::telemetry::Outcome;
    match serde_json::from_str::<Answer<'_>>(line) {
        Ok(Answer {
            result: Some(raw), ..
        }) if super::observe::raw_is_error(raw.get()) => Outcome::ToolError,
        Ok(Answer {
            result: Some(_), ..
        }) => Outcome::Ok,
        Ok(Answer {
            error: Some(error), ..
        }) => match serde_json::from_str::<McpError>(error.get()) {
            Ok(error) => Outcome::Error(error.code.0),
            Err(_) => Outcome::Failed("malformed_error"),
        },
        _ => Outcome::Failed("malformed_answer"),
    }
}

/// Run a direct call as the handling of its request, and finish the request's telemetry with
/// what its answer was.
async fn observed_run(
    watched: Option<(Arc<crate::telemetry::Observed>, Arc<Watched>)>,
    run: impl std::future::Future<Output = ()>,
) {
    let Some((observed, watched)) = watched else {
        return run.await;
    };
    crate::telemetry::within(Some(observed.clone()), run).await;
    let (outcome, bytes) = watched.ending();
    observed.finish(outcome, bytes);
}

/// The client's sink, seeing the answer go by: its size and how it ended.
struct Watched {
    inner: Arc<dyn LineSink>,
    seen: StdMutex<Option<(crate::telemetry::Outcome, Option<u64>)>>,
}

impl Watched {
    fn new(inner: Arc<dyn LineSink>) -> Self {
        Self {
            inner,
            seen: StdMutex::new(None),
        }
    }

    /// The answer written, or a cancelled request's (no answer).
    fn ending(&self) -> (crate::telemetry::Outcome, Option<u64>) {
        match self
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            Some((outcome, bytes)) => (outcome, bytes),
            None => (crate::telemetry::Outcome::Failed("cancelled"), None),
        }
    }
}

impl LineSink for Watched {
    fn write_parts<'a>(&'a self, parts: &'a [&'a [u8]]) -> BoxFuture<'a, std::io::Result<()>> {
        // The answer is the line that carries the request's id (progress and log lines carry a
        // method): its head is loom's, `{"jsonrpc":"2.0","id":…,"result":` then the result, or
        // the whole error line.
        if let Some(first) = parts.first()
            && first.starts_with(br#"{"jsonrpc":"2.0","id":"#)
        {
            let seen = if first.ends_with(br#""result":"#) {
                let result = parts.get(1).copied().unwrap_or_default();
                let tool_error =
                    std::str::from_utf8(result).is_ok_and(super::observe::raw_is_error);
                let outcome = match tool_error {
                    true => crate::telemetry::Outcome::ToolError,
                    false => crate::telemetry::Outcome::Ok,
                };
                (outcome, Some(result.len() as u64))
            } else {
                let code = std::str::from_utf8(first)
                    .ok()
                    .and_then(|line| serde_json::from_str::<Answer<'_>>(line.trim_end()).ok())
                    .and_then(|answer| answer.error)
                    .and_then(|error| serde_json::from_str::<McpError>(error.get()).ok())
                    .map_or(-32603, |error| error.code.0);
                // An error answers no result: no size (as on rmcp's path).
                (crate::telemetry::Outcome::Error(code), None)
            };
            *self.seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(seen);
        }
        self.inner.write_parts(parts)
    }
}

/// A JSON-RPC error answer with the client's id.
async fn write_error(
    id_text: &str,
    error: &McpError,
    reply: &Arc<dyn LineSink>,
    cancelled: &CancellationToken,
) {
    let Ok(error) = serde_json::to_string(error) else {
        return;
    };
    let line = format!(r#"{{"jsonrpc":"2.0","id":{id_text},"error":{error}}}"#);
    if !cancelled.is_cancelled()
        && let Err(error) = reply
            .write_parts(&[&one_line(line.as_bytes()), b"\n"])
            .await
    {
        tracing::debug!(%error, "the client went away before the answer");
    }
}

/// The rest of a direct call whose child asked its client something: waited for on a task of
/// its own (the request is already sent), progress passed on with the token of the moment
/// until the answer; `stopped` cancels it downstream.
struct Waiting {
    calls: Arc<DirectCalls>,
    call: DirectCall,
    reply: Arc<dyn LineSink>,
    progress: Arc<StdMutex<Option<String>>>,
    /// The CLIENT span of the request to the child, still open (SPEC §24.1).
    traced: Option<crate::telemetry::Downstream>,
}

impl Waiting {
    async fn run(
        mut self,
        stopped: tokio::sync::oneshot::Receiver<&'static str>,
    ) -> Result<super::forward::Forwarded, ForwardError> {
        tokio::pin!(stopped);
        let outcome = loop {
            tokio::select! {
                arrival = self.call.arrivals.recv() => match arrival {
                    Some(Arrival::Progress(line)) => {
                        let token = self.progress.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        pass_progress(&line, token.as_deref(), &self.reply).await;
                    }
                    Some(Arrival::Answer(line)) => break answer_of(&line),
                    None => break Err(ForwardError::Closed("the connection ended".into())),
                },
                reason = &mut stopped => break Err(ForwardError::Stopped(reason.unwrap_or("loom stopped waiting for it"))),
            }
        };
        if let Some(traced) = self.traced.take() {
            traced.answered(&super::forward::telemetry_outcome(&outcome));
        }
        if let Err(ForwardError::Stopped(reason)) = &outcome {
            let notice = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"{reason}"}}}}"#,
                self.call.id
            );
            let calls = self.calls.clone();
            tokio::spawn(async move {
                let _ = calls.send(&[notice.as_bytes(), b"\n"]).await;
            });
        }
        outcome
    }
}

/// A child's answer line as the outcome of its call.
fn answer_of(line: &str) -> Result<super::forward::Forwarded, ForwardError> {
    match serde_json::from_str::<Answer<'_>>(line) {
        Ok(Answer {
            result: Some(raw), ..
        }) => Ok(super::forward::Forwarded::Raw(raw.to_owned())),
        Ok(Answer {
            error: Some(error), ..
        }) => match serde_json::from_str::<McpError>(error.get()) {
            Ok(error) => Err(ForwardError::Rpc(error)),
            Err(_) => Err(ForwardError::Failed(
                "its error was not a JSON-RPC error".into(),
            )),
        },
        _ => Err(ForwardError::Failed(
            "its answer was not a JSON-RPC response".into(),
        )),
    }
}

/// Relay one call and answer it (unless the client cancelled it).
async fn run(
    gateway: &Gateway,
    mut relay: Relay,
    reply: Arc<dyn LineSink>,
    cancelled: CancellationToken,
) {
    let what = format!("tool `{}`", relay.tool);
    // The answer carries the client's id as the client wrote it.
    let head = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, relay.id_text);
    let outcome = exchange(&mut relay, &reply, &cancelled, None).await;
    let result = match outcome {
        Ok(Exchanged::Asked(_)) => return,
        Ok(Exchanged::Answer(line)) => match serde_json::from_str::<Answer<'_>>(&line) {
            Ok(Answer {
                result: Some(raw), ..
            }) => {
                let origin = gateway.origin_of(
                    &super::catalog::Route {
                        server: relay.server,
                        name: relay.tool.clone(),
                    },
                    relay.arguments.as_ref(),
                );
                // Cancelled while the result is decided (a model summary can take seconds):
                // no answer, and what the decision held is let go with it.
                let decided = tokio::select! {
                    decided = gateway.decide(raw.to_owned(), origin) => decided,
                    _ = cancelled.cancelled() => return,
                };
                match decided {
                    _ if cancelled.is_cancelled() => return,
                    Decision::PassThrough(raw, keep) => {
                        let raw = shape_raw(relay.era, relay.links_as_text, raw);
                        gateway.notes_drained().await;
                        if let Err(error) = reply
                            .write_parts(&[
                                head.as_bytes(),
                                &one_line(raw.get().as_bytes()),
                                b"}\n",
                            ])
                            .await
                        {
                            tracing::debug!(%error, "the client went away before the answer");
                        }
                        drop(keep);
                        return;
                    }
                    Decision::Built(result) => *result,
                }
            }
            Ok(Answer {
                error: Some(error), ..
            }) => match serde_json::from_str::<McpError>(error.get()) {
                // The server's JSON-RPC error, passed on as the server wrote it (SPEC §5.6).
                Ok(_) => {
                    gateway.notes_drained().await;
                    let line = format!(
                        r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
                        relay.id_text,
                        error.get()
                    );
                    if !cancelled.is_cancelled()
                        && let Err(error) = reply
                            .write_parts(&[&one_line(line.as_bytes()), b"\n"])
                            .await
                    {
                        tracing::debug!(%error, "the client went away before the answer");
                    }
                    return;
                }
                Err(_) => ForwardError::Failed("its error was not a JSON-RPC error".into())
                    .into_tool_result(&relay.server_name, &what),
            },
            _ => ForwardError::Failed("its answer was not a JSON-RPC response".into())
                .into_tool_result(&relay.server_name, &what),
        },
        Err(ForwardError::Cancelled) => return,
        Err(error) => error.into_tool_result(&relay.server_name, &what),
    };
    if cancelled.is_cancelled() {
        return;
    }
    let result = shape_built(relay.era, relay.links_as_text, result);
    let line = match serde_json::to_vec(&result) {
        Ok(body) => body,
        Err(error) => {
            tracing::error!(%error, "could not encode a tool result");
            return;
        }
    };
    // The call's log lines wait in the client's outbox; they go out before its answer, as
    // directly (SPEC §5.9). Progress is written on this path itself, in order.
    gateway.notes_drained().await;
    if let Err(error) = reply.write_parts(&[head.as_bytes(), &line, b"}\n"]).await {
        tracing::debug!(%error, "the client went away before the answer");
    }
}

/// What an exchange with the child ended with.
enum Exchanged {
    /// The child's answer line.
    Answer(String),
    /// The child asked the client something in the middle of the call (every question that
    /// had come); the call goes on.
    Asked(Vec<Ask>),
}

/// Send the call to the child and wait for its answer line (or, with `asks`, its first
/// questions), passing progress on; a timeout or the client's cancellation cancels it
/// downstream.
async fn exchange(
    relay: &mut Relay,
    reply: &Arc<dyn LineSink>,
    cancelled: &CancellationToken,
    mut asks: Option<&mut tokio::sync::mpsc::UnboundedReceiver<Ask>>,
) -> Result<Exchanged, ForwardError> {
    // The limit and the client's cancellation count from the start (on rmcp's path the
    // request is only queued before they start): a child that stops reading cannot hold a call
    // past them.
    let expired = expire(Some(relay.timeout));
    tokio::pin!(expired);
    if cancelled.is_cancelled() {
        return Err(ForwardError::Cancelled);
    }
    // A write is never abandoned half-way (the rest of the line would be lost and the next
    // message read as its tail): one that cannot finish at once goes on in a task of its own.
    let calls = relay.calls.clone();
    let line = std::mem::take(&mut relay.line);
    let mut send = Box::pin(async move { calls.send(&[&line]).await });
    let sent = match (&mut send).now_or_never() {
        Some(sent) => sent.map_err(|e| ForwardError::Closed(e.to_string())),
        None => {
            let mut sending = tokio::spawn(send);
            tokio::select! {
                sent = &mut sending => match sent {
                    Ok(sent) => sent.map_err(|e| ForwardError::Closed(e.to_string())),
                    Err(e) => Err(ForwardError::Closed(e.to_string())),
                },
                after = &mut expired => Err(ForwardError::TimedOut(after)),
                _ = cancelled.cancelled() => Err(ForwardError::Cancelled),
            }
        }
    };
    let outcome = match sent {
        Err(error) => Err(error),
        Ok(()) => loop {
            tokio::select! {
                arrival = relay.call.arrivals.recv() => match arrival {
                    Some(Arrival::Progress(line)) => pass_progress(&line, relay.progress_token.as_deref(), reply).await,
                    Some(Arrival::Answer(line)) => break Ok(Exchanged::Answer(line)),
                    None => break Err(ForwardError::Closed("the connection ended".into())),
                },
                Some(ask) = next_ask(&mut asks) => {
                    let mut asked = vec![ask];
                    if let Some(asks) = asks.as_mut() {
                        while let Ok(more) = asks.try_recv() {
                            asked.push(more);
                        }
                    }
                    break Ok(Exchanged::Asked(asked));
                }
                after = &mut expired => break Err(ForwardError::TimedOut(after)),
                _ = cancelled.cancelled() => break Err(ForwardError::Cancelled),
            }
        },
    };
    if let Some(traced) = relay.traced.take() {
        match &outcome {
            Ok(Exchanged::Answer(line)) => traced.answered(&answered_outcome(line)),
            // The child asked something: its request is still open (the span ends with it).
            Ok(Exchanged::Asked(_)) => relay.traced = Some(traced),
            Err(ForwardError::Cancelled) => {
                traced.answered(&crate::telemetry::Outcome::Failed("cancelled"))
            }
            Err(ForwardError::TimedOut(_)) => {
                traced.answered(&crate::telemetry::Outcome::Failed("timeout"))
            }
            Err(_) => traced.answered(&crate::telemetry::Outcome::Failed("connection_closed")),
        }
    }
    let reason = match &outcome {
        Err(ForwardError::TimedOut(_)) => "timed out in loom",
        Err(ForwardError::Cancelled) => "cancelled by loom's client",
        _ => return outcome,
    };
    let notice = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"{reason}"}}}}"#,
        relay.call.id
    );
    // Sent on its own: a child that stopped reading must not hold the answer to the client
    // (the request's own write, if still going on, keeps its place in the writer's queue).
    let calls = relay.calls.clone();
    tokio::spawn(async move {
        let _ = calls.send(&[notice.as_bytes(), b"\n"]).await;
    });
    outcome
}

/// The next question of the child, if the call can carry them (never, otherwise).
async fn next_ask(
    asks: &mut Option<&mut tokio::sync::mpsc::UnboundedReceiver<Ask>>,
) -> Option<Ask> {
    match asks {
        Some(asks) => asks.recv().await,
        None => std::future::pending().await,
    }
}

/// A child's progress for a call, passed on with the client's token in place of loom's (and
/// dropped if the client asked for none).
async fn pass_progress(line: &str, token: Option<&str>, reply: &Arc<dyn LineSink>) {
    let Some(token) = token else { return };
    let Ok(progress) = serde_json::from_str::<ProgressLine<'_>>(line) else {
        return;
    };
    let mut out = Vec::with_capacity(line.len() + token.len());
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"#);
    for (n, (key, value)) in progress.params.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        if serde_json::to_writer(&mut out, key).is_err() {
            return;
        }
        out.push(b':');
        let value = match key.as_ref() {
            "progressToken" => token,
            _ => value.get(),
        };
        out.extend_from_slice(value.as_bytes());
    }
    out.extend_from_slice(b"}}");
    if let Err(error) = reply.write_parts(&[&one_line(&out), b"\n"]).await {
        tracing::debug!(%error, "progress not passed on");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.into()).expect("json")
    }

    #[test]
    fn the_child_gets_its_own_name_loom_s_id_and_token_and_the_client_s_arguments() {
        let arguments = raw(r#"{"b": 2.50, "a":[1]}"#);
        let token = raw("\"client-token\"");
        let trace = raw(r#"{"x":1}"#);
        let version = raw("\"2026-07-28\"");
        let meta: BTreeMap<Cow<'_, str>, &RawValue> = [
            (Cow::Borrowed("progressToken"), &*token),
            (Cow::Borrowed("trace"), &*trace),
            (
                Cow::Borrowed("io.modelcontextprotocol/protocolVersion"),
                &*version,
            ),
        ]
        .into_iter()
        .collect();
        let line = request_line(
            "\"loom:7\"",
            "echo \"x\"",
            Some(&arguments),
            &meta,
            true,
            None,
        )
        .expect("line");
        let line = String::from_utf8(line).expect("utf-8");
        assert_eq!(
            line,
            "{\"jsonrpc\":\"2.0\",\"id\":\"loom:7\",\"method\":\"tools/call\",\"params\":{\"name\":\
             \"echo \\\"x\\\"\",\"arguments\":{\"b\": 2.50, \"a\":[1]},\"_meta\":{\"trace\":{\"x\":1},\
             \"progressToken\":\"loom:7\"}}}\n"
        );
        serde_json::from_str::<serde_json::Value>(&line).expect("valid JSON");
        let bare =
            request_line("\"loom:8\"", "t", None, &BTreeMap::new(), false, None).expect("line");
        assert_eq!(
            String::from_utf8(bare).expect("utf-8"),
            "{\"jsonrpc\":\"2.0\",\"id\":\"loom:8\",\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}\n"
        );
    }

    #[test]
    fn with_tracing_on_the_child_gets_loom_s_trace_context_in_place_of_the_client_s() {
        let theirs = raw("\"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\"");
        let state = raw("\"vendor=client\"");
        let baggage = raw("\"k=v\"");
        let meta: BTreeMap<Cow<'_, str>, &RawValue> = [
            (Cow::Borrowed("traceparent"), &*theirs),
            (Cow::Borrowed("tracestate"), &*state),
            (Cow::Borrowed("baggage"), &*baggage),
        ]
        .into_iter()
        .collect();
        let ours = (
            "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01".to_string(),
            Some("vendor=client".to_string()),
        );
        let line = request_line("\"loom:9\"", "t", None, &meta, false, Some(&ours)).expect("line");
        let value: serde_json::Value = serde_json::from_slice(&line).expect("valid JSON");
        assert_eq!(
            value["params"]["_meta"],
            serde_json::json!({
                "baggage": "k=v",
                "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
                "tracestate": "vendor=client",
            })
        );
        // Off, the client's members travel as they came.
        let line = request_line("\"loom:9\"", "t", None, &meta, false, None).expect("line");
        let value: serde_json::Value = serde_json::from_slice(&line).expect("valid JSON");
        assert_eq!(
            value["params"]["_meta"]["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
    }
}
