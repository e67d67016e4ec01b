//! One HTTP session: a [`Gateway`] session served by rmcp over loom's line transport through an
//! in-memory pipe, and the routing of what loom writes back to the HTTP requests waiting for it.
//!
//! Every line loom writes is one JSON-RPC message. A response goes to the POST of its request
//! (and ends it); a progress notification to the POST whose request carried its token; anything
//! else loom sends on its own (log messages, list changes, a server's sampling or elicitation
//! request) to the standing GET stream when one is open, else to the most recent POST still
//! waiting (as SSE), else into a bounded backlog the next GET stream starts with.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::stateless::Rewrite;
use super::{Body, full, plain};
use crate::gateway::{Gateway, GatewayService, Hub, StartError};
use crate::wire::{LineTransport, MAX_MESSAGE_BYTES};

/// Size of the in-memory pipe between the HTTP side and the session's transport, each way.
const PIPE_BYTES: usize = 256 * 1024;
/// Messages kept for a GET stream that is not open yet; the oldest go first beyond it.
const BACKLOG: usize = 256;

/// What the HTTP side needs to know of one JSON-RPC message.
pub(crate) struct Message {
    /// The id as written (`1`, `"a"`), when there is one.
    pub id: Option<String>,
    pub method: Option<String>,
    /// `params._meta.progressToken` as written.
    pub progress_token: Option<String>,
    /// `params.requestId` of a `notifications/cancelled`, as written.
    pub cancels: Option<String>,
}

#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(borrow, default)]
    params: Option<PeekParams<'a>>,
}

#[derive(Deserialize)]
struct PeekParams<'a> {
    #[serde(borrow, rename = "_meta", default)]
    meta: Option<PeekMeta<'a>>,
    #[serde(borrow, rename = "progressToken", default)]
    progress_token: Option<&'a RawValue>,
    #[serde(borrow, rename = "requestId", default)]
    request_id: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct PeekMeta<'a> {
    #[serde(borrow, rename = "progressToken", default)]
    progress_token: Option<&'a RawValue>,
}

impl Message {
    /// Reads one JSON-RPC message object (a batch array is refused: removed in 2025-06-18).
    pub(crate) fn read(body: &[u8]) -> Result<Message, String> {
        let text = std::str::from_utf8(body).map_err(|_| "the body is not UTF-8".to_string())?;
        if text.trim_start().starts_with('[') {
            return Err("JSON-RPC batches are not supported; send one message per request".into());
        }
        let peek: Peek<'_> = serde_json::from_str(text)
            .map_err(|e| format!("the body is not a JSON-RPC message: {e}"))?;
        // A request's token is in `_meta`; a progress notification's in `params`.
        let progress_token = peek.params.as_ref().and_then(|p| {
            p.meta
                .as_ref()
                .and_then(|m| m.progress_token)
                .or(p.progress_token)
                .and_then(canonical::<rmcp::model::ProgressToken>)
        });
        let cancels = match peek.method.as_deref() {
            Some("notifications/cancelled") => peek
                .params
                .as_ref()
                .and_then(|p| p.request_id)
                .and_then(canonical::<rmcp::model::RequestId>),
            _ => None,
        };
        // Keys are ids as rmcp reads and writes them (`"\u0061"` is `"a"`); an id rmcp cannot
        // read would never be answered, so it is refused here.
        let id = match peek.id {
            None => None,
            Some(raw) => Some(canonical::<rmcp::model::RequestId>(raw).ok_or_else(|| {
                format!(
                    "the id {} is not a JSON-RPC id loom can answer (a string or an integer)",
                    raw.get()
                )
            })?),
        };
        Ok(Message {
            id,
            method: peek.method,
            progress_token,
            cancels,
        })
    }

    fn is_request(&self) -> bool {
        self.id.is_some() && self.method.is_some()
    }
}

/// `raw` as the type reads it, written back: the same id or token always gives the same key.
fn canonical<T: serde::de::DeserializeOwned + serde::Serialize>(raw: &RawValue) -> Option<String> {
    let value: T = serde_json::from_str(raw.get()).ok()?;
    serde_json::to_string(&value).ok()
}

/// One message for a waiting POST; `last` ends it. An empty `line` that is `last` ends it
/// without an answer: the client cancelled the request (no answer is sent to a cancelled one).
struct Out {
    line: Bytes,
    last: bool,
}

/// A POST waiting for what loom sends for its request.
struct Waiting {
    to: mpsc::UnboundedSender<Out>,
    /// Whether the client takes SSE (only then can it carry messages other than its answer).
    sse: bool,
    /// A stateless request's own id and token, given back on what loom sends for it.
    rewrite: Option<Rewrite>,
    /// A `subscriptions/listen` stream: it carries its subscription's notifications only.
    listen: bool,
}

#[derive(Default)]
struct Routes {
    /// Request id → the POST waiting for its answer.
    pending: HashMap<String, Waiting>,
    /// Progress token (as written) → request id.
    progress: HashMap<String, String>,
    /// Most recent request first-come order, for messages that belong to no request.
    order: VecDeque<String>,
    standing: Option<mpsc::UnboundedSender<Out>>,
    backlog: VecDeque<Bytes>,
}

pub(crate) struct Session {
    id: String,
    /// The digest of the credential that opened it: no other may use it.
    credential: String,
    /// A scope of 2026-07-28 clients (no session id, no GET stream, answers given their
    /// client's ids back) rather than a session of the `initialize` era.
    stateless: bool,
    gateway: Arc<Gateway>,
    to_loom: tokio::sync::Mutex<WriteHalf<DuplexStream>>,
    routes: Mutex<Routes>,
    last_active: Mutex<Instant>,
    closed: CancellationToken,
}

impl Session {
    /// A new session over `hub` for the holder of `credential`, its transport running.
    pub(crate) async fn open(hub: Arc<Hub>, credential: &str) -> Result<Arc<Session>, StartError> {
        Self::open_as(hub, credential, false).await
    }

    /// The session of a scope of 2026-07-28 clients (src/http/stateless.rs).
    pub(crate) async fn open_scope(
        hub: Arc<Hub>,
        credential: &str,
    ) -> Result<Arc<Session>, StartError> {
        Self::open_as(hub, credential, true).await
    }

    async fn open_as(
        hub: Arc<Hub>,
        credential: &str,
        stateless: bool,
    ) -> Result<Arc<Session>, StartError> {
        let gateway = Gateway::session(hub, false).await?;
        gateway.enter(credential).await;
        let (loom_side, http_side) = tokio::io::duplex(PIPE_BYTES);
        let id = new_session_id();
        // A 2026-07-28 scope's id is loom's own, never the client's `Mcp-Session-Id`.
        gateway.set_http_face((!stateless).then_some(id.as_str()));
        let (loom_read, loom_write) = tokio::io::split(loom_side);
        let (http_read, http_write) = tokio::io::split(http_side);
        let session = Arc::new(Session {
            id,
            credential: credential.to_string(),
            stateless,
            gateway: gateway.clone(),
            to_loom: tokio::sync::Mutex::new(http_write),
            routes: Mutex::new(Routes::default()),
            last_active: Mutex::new(Instant::now()),
            closed: CancellationToken::new(),
        });
        let transport =
            LineTransport::splicing(loom_read, loom_write, gateway.splice_table(), "client")
                .with_initialize_patch(crate::gateway::tasks_capability_patch(&gateway))
                .with_bypass(crate::gateway::direct::DirectLane::new(gateway.clone()));
        let closed = session.closed.clone();
        let served = gateway.clone();
        tokio::spawn(async move {
            let service =
                match rmcp::serve_server(GatewayService::new(served.clone()), transport).await {
                    Ok(service) => service,
                    Err(error) => {
                        tracing::warn!("an HTTP session's handshake failed: {error}");
                        return;
                    }
                };
            served.upstream().set(service.peer().clone());
            let ct = service.cancellation_token();
            tokio::select! {
                _ = service.waiting() => {}
                _ = closed.cancelled() => ct.cancel(),
            }
        });
        tokio::spawn(session.clone().read_loom(http_read));
        Ok(session)
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn gateway(&self) -> &Arc<Gateway> {
        &self.gateway
    }

    pub(crate) fn credential(&self) -> &str {
        &self.credential
    }

    /// The `Mcp-Param-*` headers of a 2026-07-28 `tools/call` against the arguments, as the
    /// called tool's `x-mcp-header` annotations want them (src/http/stateless.rs).
    pub(crate) fn check_param_headers(
        &self,
        body: &str,
        headers: &http::HeaderMap,
    ) -> Result<(), String> {
        #[derive(Deserialize)]
        struct Call<'a> {
            #[serde(borrow)]
            params: Option<CallParams<'a>>,
        }
        #[derive(Deserialize)]
        struct CallParams<'a> {
            name: Option<String>,
            #[serde(borrow)]
            arguments: Option<&'a RawValue>,
        }
        let Ok(Call {
            params: Some(params),
        }) = serde_json::from_str::<Call<'_>>(body)
        else {
            return Ok(());
        };
        let given: Vec<(String, Option<String>)> = headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("mcp-param-"))
            .map(|(name, value)| {
                let visible = value
                    .to_str()
                    .ok()
                    .filter(|v| v.bytes().all(|b| (0x20..0x7f).contains(&b)));
                (name.as_str().to_string(), visible.map(str::to_string))
            })
            .collect();
        let catalog = self.gateway.exposed();
        let annotations = params
            .name
            .as_deref()
            .and_then(|name| catalog.input_schema(name))
            .map(super::stateless::param_headers)
            .unwrap_or_default();
        if annotations.is_empty() && given.is_empty() {
            // Nothing to compare: the arguments (up to the message limit) are not parsed.
            return Ok(());
        }
        let arguments = params.arguments.and_then(|raw| {
            serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(raw.get()).ok()
        });
        super::stateless::check_param_headers(&annotations, arguments.as_ref(), &given)
    }

    pub(crate) fn idle_for(&self) -> Duration {
        let busy = !self.lock_routes().pending.is_empty();
        if busy {
            return Duration::ZERO;
        }
        self.last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
    }

    fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
    }

    fn lock_routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// End the session: its streams end, its transport closes, its datasets are freed.
    pub(crate) async fn close(&self) {
        self.closed.cancel();
        {
            let mut routes = self.lock_routes();
            routes.pending.clear();
            routes.standing = None;
        }
        let _ = self.to_loom.lock().await.shutdown().await;
        self.gateway.shutdown().await;
        if self.gateway.config().report.enabled {
            eprintln!(
                "session {}: {}",
                self.id,
                crate::report::stderr_summary(&self.gateway.report())
            );
        }
    }

    async fn send_to_loom(&self, body: &[u8]) -> std::io::Result<()> {
        let mut pipe = self.to_loom.lock().await;
        pipe.write_all(&crate::wire::one_line(body)).await?;
        pipe.write_all(b"\n").await?;
        pipe.flush().await
    }

    /// A client's POST: a request waits for its answer; anything else is accepted at once. A
    /// stateless request comes with loom's id and token in `message` and `body` and the
    /// client's own in `rewrite`.
    pub(crate) async fn post(
        self: Arc<Self>,
        message: Message,
        body: Bytes,
        wants_json: bool,
        wants_sse: bool,
        rewrite: Option<Rewrite>,
    ) -> Response<Body> {
        self.touch();
        if !message.is_request() {
            if let Some(cancelled) = &message.cancels {
                self.end_without_answer(cancelled);
            }
            return match self.send_to_loom(&body).await {
                Ok(()) => plain(StatusCode::ACCEPTED, ""),
                Err(error) => plain(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the session is closing: {error}"),
                ),
            };
        }
        let Some(id) = message.id.clone() else {
            return plain(StatusCode::BAD_REQUEST, "a request needs an id");
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        {
            let mut routes = self.lock_routes();
            if routes.pending.contains_key(&id) {
                return super::rpc_error(
                    StatusCode::OK,
                    Some(&id),
                    -32600,
                    "a request with this id is still in progress in this session",
                );
            }
            routes.pending.insert(
                id.clone(),
                Waiting {
                    to: tx,
                    sse: wants_sse,
                    rewrite,
                    listen: message.method.as_deref() == Some("subscriptions/listen"),
                },
            );
            routes.order.push_back(id.clone());
            if let Some(token) = &message.progress_token {
                routes.progress.insert(token.clone(), id.clone());
            }
        }
        if let Err(error) = self.send_to_loom(&body).await {
            self.forget(&id);
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the session is closing: {error}"),
            );
        }
        // A stateless client cancels by going away (2026-07-28 has no notification for it
        // over HTTP): until the answer is handed over, dropping this cancels the request.
        let mut cancel = CancelOnDrop {
            session: self.stateless.then(|| self.clone()),
            id: id.clone(),
        };
        let first = tokio::select! {
            first = rx.recv() => first,
            _ = self.closed.cancelled() => None,
        };
        let Some(first) = first else {
            self.forget(&id);
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the session ended before answering",
            );
        };
        let session_header = match self.stateless {
            true => None,
            false => HeaderValue::from_str(&self.id).ok(),
        };
        if first.last && first.line.is_empty() {
            // Cancelled by the client: no answer.
            if !wants_sse {
                return plain(StatusCode::ACCEPTED, "cancelled by the client");
            }
            return sse_response(futures::stream::empty(), session_header);
        }
        // The answer alone, to a client that takes JSON: one plain body, no SSE event limit.
        if first.last && wants_json {
            cancel.disarm();
            self.touch();
            let status = match self.stateless {
                true => super::stateless::status_of(&first.line),
                false => StatusCode::OK,
            };
            let mut response = Response::new(full(first.line));
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            if let Some(value) = session_header {
                response.headers_mut().insert(super::SESSION_HEADER, value);
            }
            return response;
        }
        if !wants_sse {
            // Only JSON accepted, but messages came before the answer: they are dropped and the
            // answer awaited (the client could not read them anyway).
            let mut answer = first;
            while !answer.last {
                match rx.recv().await {
                    Some(next) => answer = next,
                    None => {
                        return plain(
                            StatusCode::SERVICE_UNAVAILABLE,
                            "the session ended before answering",
                        );
                    }
                }
            }
            cancel.disarm();
            if answer.line.is_empty() {
                return plain(StatusCode::ACCEPTED, "cancelled by the client");
            }
            let status = match self.stateless {
                true => super::stateless::status_of(&answer.line),
                false => StatusCode::OK,
            };
            let mut response = Response::new(full(answer.line));
            *response.status_mut() = status;
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            return response;
        }
        let session = self.clone();
        // The stream holds the cancellation: a client that closes it cancels the request.
        let stream = futures::stream::unfold(
            (Some(first), rx, false, cancel),
            move |(next, mut rx, done, mut cancel)| {
                let session = session.clone();
                async move {
                    if done {
                        return None;
                    }
                    let out = match next {
                        Some(out) => out,
                        None => rx.recv().await?,
                    };
                    if out.last {
                        cancel.disarm();
                    }
                    if out.last && out.line.is_empty() {
                        return None;
                    }
                    session.touch();
                    let last = out.last;
                    Some((sse_event(&out.line), (None, rx, last, cancel)))
                }
            },
        );
        sse_response(stream, session_header)
    }

    /// The GET stream: what loom sends on its own, from the backlog on.
    pub(crate) fn standing_stream(self: &Arc<Self>) -> Response<Body> {
        self.touch();
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut routes = self.lock_routes();
            if routes.standing.as_ref().is_some_and(|s| !s.is_closed()) {
                return plain(
                    StatusCode::CONFLICT,
                    "this session has a GET stream open already",
                );
            }
            for line in routes.backlog.drain(..) {
                let _ = tx.send(Out { line, last: false });
            }
            routes.standing = Some(tx);
        }
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            let out = rx.recv().await?;
            Some((sse_event(&out.line), rx))
        });
        sse_response(stream, HeaderValue::from_str(&self.id).ok())
    }

    /// The client cancelled request `id`: its POST ends now, without an answer.
    fn end_without_answer(&self, id: &str) {
        let waiting = {
            let mut routes = self.lock_routes();
            routes.order.retain(|o| o != id);
            routes.progress.retain(|_, owner| owner != id);
            routes.pending.remove(id)
        };
        if let Some(waiting) = waiting {
            let _ = waiting.to.send(Out {
                line: Bytes::new(),
                last: true,
            });
        }
    }

    fn forget(&self, id: &str) {
        let mut routes = self.lock_routes();
        routes.pending.remove(id);
        routes.order.retain(|o| o != id);
        routes.progress.retain(|_, owner| owner != id);
    }

    /// Route every line loom writes until the pipe closes.
    async fn read_loom(self: Arc<Self>, from_loom: tokio::io::ReadHalf<DuplexStream>) {
        let mut reader = BufReader::with_capacity(PIPE_BYTES, from_loom);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if line.len() > MAX_MESSAGE_BYTES {
                tracing::warn!(session = %self.id, "dropping a message over the size limit");
                continue;
            }
            while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                line.pop();
            }
            if line.is_empty() {
                continue;
            }
            let bytes = Bytes::copy_from_slice(&line);
            self.route(bytes);
        }
        // The transport ended: nothing will answer the POSTs still waiting.
        let mut routes = self.lock_routes();
        routes.pending.clear();
        routes.standing = None;
    }

    fn route(&self, line: Bytes) {
        let Ok(message) = Message::read(&line) else {
            return;
        };
        let mut routes = self.lock_routes();
        // A response (or error) to one of the client's requests ends that request's POST.
        if message.method.is_none()
            && let Some(id) = &message.id
        {
            if let Some(waiting) = routes.pending.remove(id) {
                routes.order.retain(|o| o != id);
                routes.progress.retain(|_, owner| owner != id);
                let mut line = line;
                if let Some(note) = waiting.rewrite.as_ref().and_then(|r| r.note.as_deref()) {
                    line = super::handoff::noted(line, note);
                }
                let line = given_back(
                    line,
                    waiting
                        .rewrite
                        .as_ref()
                        .map(|r| (&["id"][..], r.id.as_str())),
                );
                let _ = waiting.to.send(Out { line, last: true });
            }
            return;
        }
        if message.method.as_deref() == Some("notifications/progress") {
            let owner = message
                .progress_token
                .as_ref()
                .and_then(|token| routes.progress.get(token))
                .cloned();
            if let Some(waiting) = owner.and_then(|owner| routes.pending.get(&owner))
                && waiting.sse
            {
                let token = waiting.rewrite.as_ref().and_then(|r| r.token.as_deref());
                let line = given_back(
                    line.clone(),
                    token.map(|t| (&["params", "progressToken"][..], t)),
                );
                if offer(&waiting.to, &line) {
                    return;
                }
            }
            // A scope's progress for a request whose POST is gone (or takes JSON only) belongs
            // to nobody else: its token is loom's own.
            if self.stateless {
                return;
            }
        }
        // A listen stream's notification goes to the POST of its `subscriptions/listen`.
        if let Some(listen) = super::stateless::subscription_of(&line)
            && let Some(waiting) = routes.pending.get(&listen)
        {
            let id = waiting.rewrite.as_ref().map(|r| r.id.as_str());
            let line = given_back(
                line.clone(),
                id.map(|id| (&super::stateless::SUBSCRIPTION_PATH[..], id)),
            );
            offer(&waiting.to, &line);
            return;
        }
        if let Some(standing) = &routes.standing
            && offer(standing, &line)
        {
            return;
        }
        routes.standing = None;
        let newest = routes
            .order
            .iter()
            .rev()
            .find_map(|id| match routes.pending.get(id) {
                Some(waiting) if waiting.sse && !waiting.listen => Some(waiting.to.clone()),
                _ => None,
            });
        if let Some(waiting) = newest
            && offer(&waiting, &line)
        {
            return;
        }
        // A scope has no GET stream to hand a backlog to.
        if self.stateless {
            return;
        }
        if routes.backlog.len() >= BACKLOG {
            routes.backlog.pop_front();
        }
        routes.backlog.push_back(line);
    }
}

/// `line` with the member at the path given back the client's value (a stateless request's
/// id, token or listen id); as it is otherwise.
fn given_back(line: Bytes, member: Option<(&[&str], &str)>) -> Bytes {
    match member.and_then(|(path, value)| super::stateless::replace_member(&line, path, value)) {
        Some(rewritten) => Bytes::from(rewritten),
        None => line,
    }
}

/// Cancels a stateless request in loom when dropped before being disarmed: its client went
/// away before the answer.
struct CancelOnDrop {
    session: Option<Arc<Session>>,
    /// loom's id of the request, as JSON text.
    id: String,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.session = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        // An answer already routed to this request (queued, not yet read by the client that
        // left) ended it in loom: there is nothing left to cancel.
        if !session.lock_routes().pending.contains_key(&self.id) {
            return;
        }
        session.forget(&self.id);
        let notice = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{},"reason":"the HTTP client went away"}}}}"#,
            self.id
        );
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = session.send_to_loom(notice.as_bytes()).await;
            });
        }
    }
}

/// Hands a message that does not end anything to a stream; false when that stream is gone.
fn offer(to: &mpsc::UnboundedSender<Out>, line: &Bytes) -> bool {
    to.send(Out {
        line: line.clone(),
        last: false,
    })
    .is_ok()
}

/// One SSE event carrying one message; a message with line breaks (none is written by loom's
/// transport, but the rule is SSE's) becomes several `data:` lines, which SSE joins back.
fn sse_event(line: &[u8]) -> Result<Frame<Bytes>, Infallible> {
    let mut event = Vec::with_capacity(line.len() + 24);
    event.extend_from_slice(b"event: message\n");
    for part in line.split(|b| *b == b'\n') {
        event.extend_from_slice(b"data: ");
        event.extend_from_slice(part);
        event.push(b'\n');
    }
    event.push(b'\n');
    Ok(Frame::data(Bytes::from(event)))
}

fn sse_response(
    stream: impl futures::Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static,
    session: Option<HeaderValue>,
) -> Response<Body> {
    let mut response = Response::new(StreamBody::new(stream.boxed()).boxed_unsync());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache"),
    );
    if let Some(value) = session {
        headers.insert(super::SESSION_HEADER, value);
    }
    response
}

/// 128 random bits as hex, from the standard library's per-process random keys (the same
/// source as the tool search nonce): unguessable enough to name a session, not a credential
/// (the bearer token is).
fn new_session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut id = String::with_capacity(32);
    for salt in 0..2u64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        id.push_str(&format!("{:016x}", hasher.finish()));
    }
    id
}
