//! The newline-delimited JSON-RPC transport both faces of loom use, with one addition rmcp's own
//! stdio transport cannot give: results that travel through loom untouched keep their exact bytes.
//!
//! rmcp decodes every response into typed structs (`CallToolResult`, …) and re-encodes them, which
//! reorders keys, rewrites numbers (`2.50` → `2.5`) and drops fields it does not model. A proxy
//! that promises byte-identical passthrough cannot allow that, so:
//!
//! * on the downstream (client) side the transport remembers the ids of requests whose answers
//!   are passed on (`tools/call`, `resources/read`, …), keeps the raw `result` bytes of their
//!   responses in a [`RawResults`] table and hands rmcp a placeholder instead of decoding them;
//! * on the upstream (server) side the gateway puts those bytes into another [`RawResults`] table
//!   under the upstream request id, answers rmcp with a placeholder, and the transport splices the
//!   bytes back in when it writes the response line.
//!
//! Everything else (handshake, lists, notifications) flows through rmcp's typed model as usual.

pub(crate) mod direct;
pub(crate) mod stdio;

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use futures::StreamExt;
use rmcp::model::{
    CustomResult, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcResponse,
    JsonRpcVersion2_0, ProgressToken, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::Mutex;
use tokio_util::bytes::BytesMut;
use tokio_util::codec::{Decoder, FramedRead, LinesCodec, LinesCodecError};

use direct::{Bypass, CloseOnDrop, DirectCalls, LineSink};

/// The largest JSON-RPC message (one line) loom reads from either side. Both SDK peers the
/// product was conceived against break near 10 MiB; 256 MiB of tabular JSON is what a large
/// database dump through an MCP server looks like.
pub const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// The value rmcp sees in place of a result whose bytes are kept aside.
pub fn placeholder_result() -> CustomResult {
    CustomResult(serde_json::Value::Null)
}

/// Raw `result` bytes by request id, shared between a transport and the code that answers (or
/// awaits) that request.
#[derive(Clone, Default, Debug)]
pub struct RawResults {
    inner: Arc<StdMutex<RawState>>,
}

#[derive(Default, Debug)]
struct RawState {
    /// Ids whose responses must be captured raw (client side only).
    wanted: HashSet<RequestId>,
    results: HashMap<RequestId, Box<RawValue>>,
}

impl RawResults {
    pub fn new() -> Self {
        Self::default()
    }

    fn with<T>(&self, f: impl FnOnce(&mut RawState) -> T) -> T {
        // A poisoned lock only means another task panicked mid-insert; the map itself is intact.
        let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// Store the bytes that must answer request `id`.
    pub fn put(&self, id: RequestId, raw: Box<RawValue>) {
        self.with(|s| s.results.insert(id, raw));
    }

    /// Take the bytes stored for `id`, if any.
    pub fn take(&self, id: &RequestId) -> Option<Box<RawValue>> {
        self.with(|s| s.results.remove(id))
    }

    /// Forget `id` entirely (a request that was cancelled or timed out).
    pub fn forget(&self, id: &RequestId) {
        self.with(|s| {
            s.wanted.remove(id);
            s.results.remove(id);
        });
    }

    /// Capture the raw result of the response to `id` when it arrives.
    pub fn want(&self, id: RequestId) {
        self.with(|s| s.wanted.insert(id));
    }

    fn capture_if_wanted(&self, id: &RequestId, raw: &RawValue) -> bool {
        self.with(|s| {
            if s.wanted.remove(id) {
                s.results.insert(id.clone(), raw.to_owned());
                true
            } else {
                false
            }
        })
    }

    /// Number of entries held (for tests: nothing may leak).
    pub fn len(&self) -> usize {
        self.with(|s| s.results.len() + s.wanted.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The params of the requests a server sends loom (sampling, elicitation) as the server wrote
/// them, by request id: rmcp decodes them into typed structs that change values (a sampling
/// `temperature` of 0.7 is an `f32` there, 0.699999988 once written again), so the handler
/// relays these bytes instead (SPEC §5.8).
#[derive(Clone, Default, Debug)]
pub struct RawParams(Arc<StdMutex<KeptParams>>);

/// The kept params, and their ids oldest first (with the number each was kept under, so an
/// id reused after its params were taken is not evicted for its predecessor).
#[derive(Default, Debug)]
struct KeptParams {
    by_id: HashMap<RequestId, (u64, Box<RawValue>)>,
    order: std::collections::VecDeque<(u64, RequestId)>,
    next: u64,
}

/// The server requests whose params [`RawParams`] keeps.
const RAW_PARAM_METHODS: &[&str] = &["sampling/createMessage", "elicitation/create"];

/// Params kept at most: a request rmcp answers without handing it to loom's handler (params
/// it cannot decode, a session already gone) leaves its entry behind, and a server sending
/// such requests without end must not grow this without end. Past it the oldest go; a request
/// whose params went is relayed with rmcp's decoding instead.
const MAX_KEPT_PARAMS: usize = 256;

impl RawParams {
    fn with<T>(&self, f: impl FnOnce(&mut KeptParams) -> T) -> T {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// Keep the params of request `id` if it is one whose params are relayed.
    fn keep(&self, id: Option<&RawValue>, method: Option<&str>, params: Option<&RawValue>) {
        let (Some(id), Some(method), Some(params)) = (id, method, params) else {
            return;
        };
        if !RAW_PARAM_METHODS.contains(&method) {
            return;
        }
        let Ok(id) = serde_json::from_str::<RequestId>(id.get()) else {
            return;
        };
        self.with(|kept| {
            let number = kept.next;
            kept.next += 1;
            kept.by_id.insert(id.clone(), (number, params.to_owned()));
            kept.order.push_back((number, id));
            while kept.by_id.len() > MAX_KEPT_PARAMS || kept.order.len() > 4 * MAX_KEPT_PARAMS {
                let Some((number, id)) = kept.order.pop_front() else {
                    break;
                };
                if kept.by_id.get(&id).is_some_and(|(n, _)| *n == number) {
                    kept.by_id.remove(&id);
                }
            }
        });
    }

    /// The params of request `id` as the server wrote them.
    pub fn take(&self, id: &RequestId) -> Option<Box<RawValue>> {
        self.with(|kept| kept.by_id.remove(id).map(|(_, raw)| raw))
    }

    /// Params held now (for tests: nothing may pile up).
    pub fn len(&self) -> usize {
        self.with(|kept| kept.by_id.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A new connection: ids start over.
    pub fn clear(&self) {
        self.with(|kept| {
            kept.by_id.clear();
            kept.order.clear();
        });
    }
}

/// Where a downstream connection's log lines go, as read: rmcp hands notifications to its
/// handler in tasks of their own, after answers read later may have ended their calls; taken
/// on the read path, a line is placed while the call that caused it is still in flight
/// (SPEC §5.4).
pub type LogTap = Arc<dyn Fn(&str) + Send + Sync>;

/// One JSON-RPC message from a downstream server that arrived by a transport other than
/// [`LineTransport`] (Streamable HTTP): progress is counted, and when it is the response to a
/// wanted request its raw `result` is kept. Returns the id of a response so captured; the caller
/// hands rmcp the placeholder in its place.
pub fn capture_incoming(
    text: &str,
    results: &RawResults,
    progress: Option<&ProgressLedger>,
    params: Option<&RawParams>,
) -> Option<RequestId> {
    let peek: Peek<'_> = serde_json::from_str(text).ok()?;
    if let Some(params) = params {
        params.keep(peek.id, peek.method.as_deref(), peek.params);
    }
    if let (Some(ledger), Some("notifications/progress")) = (progress, peek.method.as_deref())
        && let Ok(progress) = serde_json::from_str::<ProgressPeek>(text)
    {
        ledger.seen(progress.params.progress_token);
    }
    if peek.method.is_some() {
        return None;
    }
    let id = serde_json::from_str::<RequestId>(peek.id?.get()).ok()?;
    if peek.error.is_some() {
        results.forget(&id);
        return None;
    }
    let result = peek.result?;
    results.capture_if_wanted(&id, result).then_some(id)
}

/// JSON text as one line: each `\n` and `\r` becomes a space. In valid JSON a line break can
/// only be whitespace between tokens (inside strings it is escaped), where a space means the
/// same; on a line-delimited transport one message must be one line. Borrowed when there is
/// nothing to change, which is the common case.
pub fn one_line(json: &[u8]) -> Cow<'_, [u8]> {
    if memchr::memchr2(b'\n', b'\r', json).is_none() {
        return Cow::Borrowed(json);
    }
    Cow::Owned(
        json.iter()
            .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b })
            .collect(),
    )
}

/// One framed line, or the reason one was skipped.
enum Line {
    Text(String),
    Skipped(&'static str),
}

/// `LinesCodec` with a limit, where an over-long or non-UTF-8 line is skipped instead of being
/// an error: `FramedRead` treats any decode error as the end of the stream and then stops
/// decoding what it has already buffered, which would stall the lines behind the bad one.
struct SkippingLines(LinesCodec);

impl SkippingLines {
    fn new(limit: usize) -> Self {
        Self(LinesCodec::new_with_max_length(limit))
    }

    fn map(
        decoded: Result<Option<String>, LinesCodecError>,
    ) -> Result<Option<Line>, std::io::Error> {
        match decoded {
            Ok(line) => Ok(line.map(Line::Text)),
            // The codec keeps discarding up to the next newline by itself.
            Err(LinesCodecError::MaxLineLengthExceeded) => Ok(Some(Line::Skipped(
                "longer than the message limit of loom's transport",
            ))),
            Err(LinesCodecError::Io(error)) if error.kind() == std::io::ErrorKind::InvalidData => {
                Ok(Some(Line::Skipped("not UTF-8")))
            }
            Err(LinesCodecError::Io(error)) => Err(error),
        }
    }
}

impl Decoder for SkippingLines {
    type Item = Line;
    type Error = std::io::Error;

    fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        Self::map(self.0.decode(buf))
    }

    fn decode_eof(&mut self, buf: &mut BytesMut) -> Result<Option<Line>, std::io::Error> {
        Self::map(self.0.decode_eof(buf))
    }
}

/// Progress notifications counted as they arrive on a downstream connection and as they are
/// passed on upstream. rmcp handles each notification in a task of its own, so the last
/// progress before a response could otherwise reach loom's client after the response (and be
/// dropped by it); a forwarded call waits until every progress the transport saw before the
/// response has been passed on.
#[derive(Clone, Default, Debug)]
pub struct ProgressLedger {
    inner: Arc<LedgerInner>,
}

#[derive(Default, Debug)]
struct LedgerInner {
    counts: StdMutex<HashMap<ProgressToken, (u64, u64)>>,
    changed: tokio::sync::Notify,
}

impl ProgressLedger {
    fn with<T>(&self, f: impl FnOnce(&mut HashMap<ProgressToken, (u64, u64)>) -> T) -> T {
        let mut guard = self
            .inner
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    fn seen(&self, token: ProgressToken) {
        self.with(|c| c.entry(token).or_default().0 += 1);
    }

    /// One progress notification for `token` was passed on (or deliberately dropped).
    pub fn done(&self, token: &ProgressToken) {
        self.with(|c| {
            if let Some(entry) = c.get_mut(token) {
                entry.1 += 1;
            }
        });
        self.inner.changed.notify_waiters();
    }

    /// Wait (at most `within`) until every progress seen for `token` was passed on, then forget
    /// the token.
    pub async fn drained(&self, token: &ProgressToken, within: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.inner.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let pending = self.with(|c| c.get(token).is_some_and(|(seen, done)| done < seen));
            if !pending || tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
        self.with(|c| c.remove(token));
    }
}

/// Just the token of a `notifications/progress`.
#[derive(Deserialize)]
struct ProgressPeek {
    params: ProgressParamsPeek,
}

#[derive(Deserialize)]
struct ProgressParamsPeek {
    #[serde(rename = "progressToken")]
    progress_token: ProgressToken,
}

/// The id of the client's `initialize` request and the edit its answer gets.
struct InitializePatch {
    request: Arc<StdMutex<Option<RequestId>>>,
    patch: Arc<dyn Fn(&mut serde_json::Value) + Send + Sync>,
}

impl InitializePatch {
    fn is_answer(&self, id: &RequestId) -> bool {
        let mut request = self.request.lock().unwrap_or_else(PoisonError::into_inner);
        if request.as_ref() == Some(id) {
            *request = None;
            true
        } else {
            false
        }
    }
}

/// Methods the upstream face hands to the gateway under [`TASK_METHOD_PREFIX`]: rmcp's typed
/// model speaks another revision of tasks than 2025-11-25 (it drops `params.task` from
/// `tools/call` and reads `tasks/get` and `tasks/cancel` in the extension's shape), so these
/// requests reach the gateway as custom requests with their params as sent.
const TASK_METHODS: &[&str] = &[
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
];

/// See [`TASK_METHODS`]; a task-augmented `tools/call` arrives as `loom/task:tools/call`.
pub const TASK_METHOD_PREFIX: &str = "loom/task:";

/// `line` with its method renamed under [`TASK_METHOD_PREFIX`] if it is a task request: one of
/// [`TASK_METHODS`], or a `tools/call` whose params carry a `task` object.
fn as_task_request(method: &str, line: &str) -> Option<String> {
    let is_task_method = TASK_METHODS.contains(&method);
    // A plain call is decided without parsing its (possibly large) arguments.
    let may_be_augmented_call = method == "tools/call" && line.contains("\"task\"");
    if !is_task_method && !may_be_augmented_call {
        return None;
    }
    // Only a JSON-RPC object is renamed; anything else (e.g. the array form serde would also
    // read into `Peek`) goes on to the ordinary decoding and its error.
    let mut message: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).ok()?;
    let augmented = message
        .get("params")
        .and_then(|p| p.get("task"))
        .is_some_and(serde_json::Value::is_object);
    if !is_task_method && !augmented {
        return None;
    }
    message.insert(
        "method".into(),
        serde_json::Value::String(format!("{TASK_METHOD_PREFIX}{method}")),
    );
    serde_json::to_string(&message).ok()
}

/// What the transport does with raw results.
enum RawMode<Role: ServiceRole> {
    /// Upstream face: outgoing responses whose id has stored bytes are written with those bytes.
    Splice(RawResults),
    /// Downstream face: responses to requests selected by the predicate are captured raw.
    Capture(RawResults, fn(&TxJsonRpcMessage<Role>) -> bool),
    /// Plain typed transport.
    None,
}

/// Newline-delimited JSON-RPC over any byte stream pair (stdio, a child's pipes, a duplex in
/// tests).
pub struct LineTransport<Role: ServiceRole, R, W> {
    lines: FramedRead<R, SkippingLines>,
    writer: Arc<Mutex<Option<BufWriter<W>>>>,
    raw: RawMode<Role>,
    peer: &'static str,
    progress: Option<ProgressLedger>,
    /// Upstream face: adds members to the `initialize` answer that rmcp's typed model cannot
    /// carry (the 2025-11-25 `tasks` capability).
    initialize_patch: Option<InitializePatch>,
    /// Upstream face: what may take a line before rmcp decodes it, and the writer it answers on.
    bypass: Option<(Arc<dyn Bypass>, Arc<dyn LineSink>)>,
    /// Downstream face: the direct calls open on this connection, closed with it.
    direct: Option<CloseOnDrop>,
    /// Downstream face: where the params of the server's own requests are kept as written.
    params: Option<RawParams>,
    /// Downstream face: where the server's log lines go instead of rmcp.
    log_tap: Option<LogTap>,
    _role: PhantomData<fn() -> Role>,
}

impl<Role: ServiceRole, R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<Role, R, W> {
    fn with_mode(read: R, write: W, raw: RawMode<Role>, peer: &'static str) -> Self {
        Self {
            lines: FramedRead::new(read, SkippingLines::new(MAX_MESSAGE_BYTES)),
            writer: Arc::new(Mutex::new(Some(BufWriter::new(write)))),
            raw,
            peer,
            progress: None,
            initialize_patch: None,
            bypass: None,
            direct: None,
            params: None,
            log_tap: None,
            _role: PhantomData,
        }
    }

    /// Lower the line limit (tests use this to exercise the limit without 256 MiB lines).
    pub fn with_max_message_bytes(mut self, limit: usize) -> Self {
        let read = self.lines.into_inner();
        self.lines = FramedRead::new(read, SkippingLines::new(limit));
        self
    }

    /// Let `patch` edit the answer to the client's `initialize` request before it is written.
    pub fn with_initialize_patch(
        mut self,
        patch: Arc<dyn Fn(&mut serde_json::Value) + Send + Sync>,
    ) -> Self {
        self.initialize_patch = Some(InitializePatch {
            request: Arc::new(StdMutex::new(None)),
            patch,
        });
        self
    }

    /// Count incoming progress notifications in `ledger`.
    pub fn with_progress_ledger(mut self, ledger: ProgressLedger) -> Self {
        self.progress = Some(ledger);
        self
    }

    /// Offer every incoming line to `bypass` before rmcp decodes it (upstream face).
    pub fn with_bypass(mut self, bypass: Arc<dyn Bypass>) -> Self
    where
        W: Send + 'static,
    {
        let sink: Arc<dyn LineSink> = self.writer.clone();
        self.bypass = Some((bypass, sink));
        self
    }

    /// Carry `calls` on this connection (downstream face): they write through this transport's
    /// writer, their answers and progress are routed to them, and they end with the connection.
    pub fn with_direct_calls(mut self, calls: Arc<DirectCalls>) -> Self
    where
        W: Send + 'static,
    {
        calls.attach(self.writer.clone());
        self.direct = Some(CloseOnDrop(calls));
        self
    }

    /// Keep the params of the server's sampling and elicitation requests as written
    /// (downstream face).
    pub fn with_raw_params(mut self, params: RawParams) -> Self {
        self.params = Some(params);
        self
    }

    /// Hand the server's log lines (`notifications/message`) to `tap` as they are read, in order
    /// with the answers, instead of to rmcp (downstream face).
    pub fn with_log_tap(mut self, tap: LogTap) -> Self {
        self.log_tap = Some(tap);
        self
    }

    /// A typed transport with no raw handling.
    pub fn plain(read: R, write: W, peer: &'static str) -> Self {
        Self::with_mode(read, write, RawMode::None, peer)
    }

    /// A transport that writes stored raw results in place of placeholders (server side).
    pub fn splicing(read: R, write: W, results: RawResults, peer: &'static str) -> Self {
        Self::with_mode(read, write, RawMode::Splice(results), peer)
    }

    /// A transport that captures the raw results of requests selected by `select` (client side).
    pub fn capturing(
        read: R,
        write: W,
        results: RawResults,
        select: fn(&TxJsonRpcMessage<Role>) -> bool,
        peer: &'static str,
    ) -> Self {
        Self::with_mode(read, write, RawMode::Capture(results, select), peer)
    }
}

/// Just enough of a message to route it without decoding its payload.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

fn encode_line(message: &impl serde::Serialize) -> std::io::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    Ok(line)
}

impl<Role, R, W> Transport<Role> for LineTransport<Role, R, W>
where
    Role: ServiceRole,
    Role::PeerResp: From<CustomResult>,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        // Decide and serialize before the future: `item` is typed and may hold non-Send-safe
        // borrows of nothing, but doing the work here keeps the returned future small.
        let encoded: std::io::Result<Outgoing> = match (&self.raw, &item) {
            (RawMode::Splice(_), JsonRpcMessage::Response(response))
                if self
                    .initialize_patch
                    .as_ref()
                    .is_some_and(|p| p.is_answer(&response.id)) =>
            {
                let patch = self.initialize_patch.as_ref().map(|p| p.patch.clone());
                serde_json::to_value(&item)
                    .map(|mut message| {
                        if let (Some(patch), Some(result)) = (patch, message.get_mut("result")) {
                            patch(result);
                        }
                        message
                    })
                    .map_err(std::io::Error::other)
                    .and_then(|message| encode_line(&message))
                    .map(Outgoing::Line)
            }
            (RawMode::Splice(results), JsonRpcMessage::Response(response)) => {
                match results.take(&response.id) {
                    Some(raw) => serde_json::to_string(&response.id)
                        .map_err(std::io::Error::other)
                        .map(|id| Outgoing::Spliced {
                            head: format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":"),
                            raw,
                        }),
                    None => encode_line(&item).map(Outgoing::Line),
                }
            }
            (RawMode::Capture(results, select), JsonRpcMessage::Request(request)) => {
                if select(&item) {
                    results.want(request.id.clone());
                }
                encode_line(&item).map(Outgoing::Line)
            }
            _ => encode_line(&item).map(Outgoing::Line),
        };
        async move {
            let outgoing = encoded?;
            let mut guard = writer.lock().await;
            let Some(out) = guard.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "transport is closed",
                ));
            };
            match outgoing {
                Outgoing::Line(line) => out.write_all(&line).await?,
                // Written from the captured buffer itself: a large result is never copied again.
                Outgoing::Spliced { head, raw } => {
                    out.write_all(head.as_bytes()).await?;
                    // A result from an HTTP server may be pretty-printed (SPEC §5.7).
                    out.write_all(&one_line(raw.get().as_bytes())).await?;
                    out.write_all(b"}\n").await?;
                }
            }
            out.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            // FramedRead keeps partial lines in its buffer, so this is cancel-safe inside
            // rmcp's `select!` loop.
            let Some(next) = self.lines.next().await else {
                self.end_direct_calls();
                if let Some((bypass, _)) = &self.bypass {
                    bypass.input_ended();
                }
                return None;
            };
            let line = match next {
                Ok(Line::Text(line)) => line,
                Ok(Line::Skipped(why)) => {
                    tracing::warn!(peer = self.peer, "ignoring a line: {why}");
                    continue;
                }
                Err(error) => {
                    tracing::warn!(peer = self.peer, %error, "read failed; closing");
                    self.end_direct_calls();
                    return None;
                }
            };
            let line = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
            if line.trim().is_empty() {
                continue;
            }
            if let Some((bypass, reply)) = &self.bypass
                && bypass.offer(line, reply)
            {
                continue;
            }
            match self.decode(line) {
                Decoded::Message(message) => return Some(message),
                Decoded::Skip => continue,
                Decoded::Reply(error) => {
                    let writer = self.writer.clone();
                    if let Ok(line) = encode_line(&error) {
                        let mut guard = writer.lock().await;
                        if let Some(out) = guard.as_mut() {
                            let _ = out.write_all(&line).await;
                            let _ = out.flush().await;
                        }
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Calls the bypass took are answered on this writer: they finish first, as rmcp lets
        // its own handlers finish.
        if let Some((bypass, _)) = &self.bypass {
            bypass.close().await;
        }
        let mut guard = self.writer.lock().await;
        if let Some(mut out) = guard.take() {
            out.flush().await?;
            out.shutdown().await?;
        }
        Ok(())
    }
}

/// A message ready to write.
enum Outgoing {
    Line(Vec<u8>),
    Spliced { head: String, raw: Box<RawValue> },
}

enum Decoded<Role: ServiceRole> {
    Message(RxJsonRpcMessage<Role>),
    Skip,
    Reply(JsonRpcError),
}

impl<Role: ServiceRole, R, W> LineTransport<Role, R, W>
where
    Role::PeerResp: From<CustomResult>,
{
    /// The connection ended: direct calls still open get no answer from it.
    fn end_direct_calls(&self) {
        if let Some(CloseOnDrop(calls)) = &self.direct {
            calls.close();
        }
    }

    fn decode(&self, line: &str) -> Decoded<Role> {
        let peek: Peek<'_> = match serde_json::from_str(line) {
            Ok(peek) => peek,
            Err(error) => {
                // Not JSON at all: there is no id to answer, and answering garbage can start an
                // echo storm with a confused peer. Same choice as the official SDKs.
                tracing::warn!(peer = self.peer, %error, "ignoring a line that is not JSON-RPC");
                return Decoded::Skip;
            }
        };
        if let Some(CloseOnDrop(calls)) = &self.direct
            && calls.route(peek.id, peek.method.as_deref(), line)
        {
            return Decoded::Skip;
        }
        if let (Some(tap), Some("notifications/message")) = (&self.log_tap, peek.method.as_deref())
        {
            tap(line);
            return Decoded::Skip;
        }
        if let (Some(ledger), Some("notifications/progress")) =
            (&self.progress, peek.method.as_deref())
            && let Ok(progress) = serde_json::from_str::<ProgressPeek>(line)
        {
            ledger.seen(progress.params.progress_token);
        }
        if let Some(params) = &self.params {
            params.keep(peek.id, peek.method.as_deref(), peek.params);
        }
        if let (RawMode::Capture(results, _), Some(id_raw), Some(_), None) =
            (&self.raw, peek.id, peek.error, &peek.method)
            && let Ok(id) = serde_json::from_str::<RequestId>(id_raw.get())
        {
            // An error answers a wanted request too: nothing will be captured for it.
            results.forget(&id);
        }
        if let (RawMode::Capture(results, _), Some(id_raw), Some(result), None) =
            (&self.raw, peek.id, peek.result, &peek.method)
            && let Ok(id) = serde_json::from_str::<RequestId>(id_raw.get())
            && results.capture_if_wanted(&id, result)
        {
            return Decoded::Message(JsonRpcMessage::Response(JsonRpcResponse {
                jsonrpc: JsonRpcVersion2_0,
                id,
                result: Role::PeerResp::from(placeholder_result()),
            }));
        }
        let renamed = match (&self.raw, peek.method.as_deref()) {
            (RawMode::Splice(_), Some(method)) => {
                if let (Some(patch), "initialize", Some(id_raw)) =
                    (&self.initialize_patch, method, peek.id)
                    && let Ok(id) = serde_json::from_str::<RequestId>(id_raw.get())
                {
                    *patch.request.lock().unwrap_or_else(PoisonError::into_inner) = Some(id);
                }
                as_task_request(method, line)
            }
            _ => None,
        };
        let line = renamed.as_deref().unwrap_or(line);
        match serde_json::from_str::<RxJsonRpcMessage<Role>>(line) {
            Ok(message) => Decoded::Message(message),
            Err(error) => {
                let id = peek
                    .id
                    .and_then(|raw| serde_json::from_str::<RequestId>(raw.get()).ok());
                tracing::warn!(peer = self.peer, %error, method = ?peek.method, "malformed message");
                // A request we cannot decode still deserves an answer, or its sender waits
                // forever. Responses and notifications are dropped.
                match (id, peek.method, peek.result) {
                    (Some(id), Some(method), None) => Decoded::Reply(JsonRpcError {
                        jsonrpc: JsonRpcVersion2_0,
                        id: Some(id),
                        error: ErrorData::new(
                            ErrorCode::INVALID_REQUEST,
                            format!("invalid `{method}` request: {error}"),
                            None,
                        ),
                    }),
                    _ => Decoded::Skip,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
    use rmcp::service::{RoleClient, RoleServer};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, duplex};

    fn ping(id: i64) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n")
    }

    #[test]
    fn params_never_taken_do_not_pile_up() {
        let params = RawParams::default();
        let raw = |text: &str| RawValue::from_string(text.to_string()).expect("raw");
        let body = raw(r#"{"messages":[],"maxTokens":5,"temperature":0.7}"#);
        for n in 0..5_000 {
            let id = raw(&n.to_string());
            params.keep(Some(&id), Some("sampling/createMessage"), Some(&body));
        }
        assert!(params.len() <= MAX_KEPT_PARAMS, "{} kept", params.len());
        let newest = params
            .take(&RequestId::Number(4_999))
            .expect("the newest is kept");
        assert!(newest.get().contains("0.7"));
        assert!(params.take(&RequestId::Number(0)).is_none());
        // Other methods are not kept at all.
        params.clear();
        params.keep(Some(&raw("1")), Some("roots/list"), Some(&body));
        assert!(params.is_empty());
    }

    #[test]
    fn task_requests_are_renamed_and_plain_calls_are_not() {
        let augmented = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","task":{"ttl":5}}}"#;
        let renamed: serde_json::Value =
            serde_json::from_str(&as_task_request("tools/call", augmented).expect("renamed"))
                .expect("json");
        assert_eq!(renamed["method"], "loom/task:tools/call");
        assert_eq!(renamed["params"]["task"]["ttl"], 5);
        let get = r#"{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"x"}}"#;
        assert!(
            as_task_request("tasks/get", get).is_some_and(|l| l.contains("loom/task:tasks/get"))
        );
        // `task` as an argument name is not task augmentation.
        let plain = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t","arguments":{"task":{}}}}"#;
        assert_eq!(as_task_request("tools/call", plain), None);
        assert_eq!(as_task_request("tools/list", get), None);
        // The array form of a message is not renamed (and does not panic).
        assert_eq!(
            as_task_request("tasks/get", r#"[1,null,"tasks/get",null]"#),
            None
        );
    }

    #[tokio::test]
    async fn bad_lines_are_skipped_and_the_connection_stays_up() {
        let (mut peer, ours) = duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let mut transport = LineTransport::<RoleServer, _, _>::plain(read, write, "test")
            .with_max_message_bytes(64);
        let writer = tokio::spawn(async move {
            let mut input = Vec::new();
            input.extend_from_slice(&[b'a'; 200]);
            input.push(b'\n');
            input.extend_from_slice(ping(1).as_bytes());
            input.extend_from_slice(b"\xff\xfe not utf-8\n");
            input.extend_from_slice(b"not json at all\n");
            input.extend_from_slice(ping(2).as_bytes());
            peer.write_all(&input).await.expect("write");
            peer
        });
        for expected in [1, 2] {
            let message = transport.receive().await.expect("a message");
            match message {
                JsonRpcMessage::Request(request) => {
                    assert_eq!(request.id, RequestId::Number(expected));
                    assert!(matches!(request.request, ClientRequest::PingRequest(_)));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        drop(writer.await);
    }

    #[tokio::test]
    async fn an_undecodable_request_is_answered_with_its_id() {
        let (mut peer, ours) = duplex(1 << 16);
        let (read, write) = tokio::io::split(ours);
        let mut transport = LineTransport::<RoleServer, _, _>::plain(read, write, "test");
        let (peer_read, mut peer_write) = tokio::io::split(&mut peer);
        peer_write
            .write_all(b"{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"tools/call\"}\n")
            .await
            .expect("write");
        peer_write
            .write_all(ping(8).as_bytes())
            .await
            .expect("write");
        let message = transport.receive().await.expect("the ping");
        assert!(matches!(message, JsonRpcMessage::Request(r) if r.id == RequestId::Number(8)));
        let mut answer = String::new();
        BufReader::new(peer_read)
            .read_line(&mut answer)
            .await
            .expect("read");
        let answer: serde_json::Value = serde_json::from_str(&answer).expect("json");
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -32600);
        assert!(
            answer["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("tools/call"))
        );
    }

    #[tokio::test]
    async fn captured_results_keep_their_bytes_and_splice_back() {
        // Client side: the request is sent, the raw answer is kept aside.
        let (mut server_end, client_end) = duplex(1 << 16);
        let (read, write) = tokio::io::split(client_end);
        let captured = RawResults::new();
        let mut client = LineTransport::<RoleClient, _, _>::capturing(
            read,
            write,
            captured.clone(),
            |m| matches!(m, JsonRpcMessage::Request(_)),
            "test",
        );
        let request: ClientJsonRpcMessage = serde_json::from_str(
            "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}",
        )
        .expect("request");
        client.send(request).await.expect("send");
        let raw = r#"{"content":[],"z":1,"a":2.50}"#;
        server_end
            .write_all(format!("{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{raw}}}\n").as_bytes())
            .await
            .expect("write");
        let received = client.receive().await.expect("response");
        assert!(matches!(received, JsonRpcMessage::Response(_)));
        let bytes = captured.take(&RequestId::Number(3)).expect("captured");
        assert_eq!(bytes.get(), raw);
        assert!(captured.is_empty());

        // Server side: the placeholder response goes out with the bytes in it.
        let (client_side, server_side) = duplex(1 << 16);
        let (read, write) = tokio::io::split(server_side);
        let splice = RawResults::new();
        let mut server =
            LineTransport::<RoleServer, _, _>::splicing(read, write, splice.clone(), "test");
        splice.put(RequestId::String("s-1".into()), bytes);
        let response: ServerJsonRpcMessage = JsonRpcMessage::Response(JsonRpcResponse {
            jsonrpc: JsonRpcVersion2_0,
            id: RequestId::String("s-1".into()),
            result: placeholder_result().into(),
        });
        server.send(response).await.expect("send");
        let mut line = String::new();
        BufReader::new(client_side)
            .read_line(&mut line)
            .await
            .expect("read");
        assert_eq!(
            line,
            format!("{{\"jsonrpc\":\"2.0\",\"id\":\"s-1\",\"result\":{raw}}}\n")
        );
        assert!(splice.is_empty());
    }
}
