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

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::marker::PhantomData;
use std::sync::{Arc, Mutex as StdMutex, PoisonError};

use futures::StreamExt;
use rmcp::model::{
    CustomResult, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, JsonRpcResponse,
    JsonRpcVersion2_0, RequestId,
};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::Mutex;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};

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

    fn want(&self, id: RequestId) {
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
    lines: FramedRead<R, LinesCodec>,
    writer: Arc<Mutex<Option<BufWriter<W>>>>,
    raw: RawMode<Role>,
    peer: &'static str,
    _role: PhantomData<fn() -> Role>,
}

impl<Role: ServiceRole, R: AsyncRead + Unpin, W: AsyncWrite + Unpin> LineTransport<Role, R, W> {
    fn with_mode(read: R, write: W, raw: RawMode<Role>, peer: &'static str) -> Self {
        Self {
            lines: FramedRead::new(read, LinesCodec::new_with_max_length(MAX_MESSAGE_BYTES)),
            writer: Arc::new(Mutex::new(Some(BufWriter::new(write)))),
            raw,
            peer,
            _role: PhantomData,
        }
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
        let encoded: std::io::Result<Vec<Vec<u8>>> = match (&self.raw, &item) {
            (RawMode::Splice(results), JsonRpcMessage::Response(response)) => {
                match results.take(&response.id) {
                    Some(raw) => (|| {
                        let id = serde_json::to_string(&response.id).map_err(std::io::Error::other)?;
                        Ok(vec![
                            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":").into_bytes(),
                            raw.get().as_bytes().to_vec(),
                            b"}\n".to_vec(),
                        ])
                    })(),
                    None => encode_line(&item).map(|l| vec![l]),
                }
            }
            (RawMode::Capture(results, select), JsonRpcMessage::Request(request)) => {
                if select(&item) {
                    results.want(request.id.clone());
                }
                encode_line(&item).map(|l| vec![l])
            }
            _ => encode_line(&item).map(|l| vec![l]),
        };
        async move {
            let parts = encoded?;
            let mut guard = writer.lock().await;
            let Some(out) = guard.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "transport is closed",
                ));
            };
            for part in &parts {
                out.write_all(part).await?;
            }
            out.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            // FramedRead keeps partial lines in its buffer, so this is cancel-safe inside
            // rmcp's `select!` loop.
            let line = match self.lines.next().await? {
                Ok(line) => line,
                Err(LinesCodecError::MaxLineLengthExceeded) => {
                    tracing::error!(
                        peer = self.peer,
                        limit = MAX_MESSAGE_BYTES,
                        "message longer than the limit discarded"
                    );
                    continue;
                }
                Err(LinesCodecError::Io(error)) => {
                    tracing::warn!(peer = self.peer, %error, "read failed; closing");
                    return None;
                }
            };
            let line = line.trim_start_matches('\u{feff}').trim_end_matches('\r');
            if line.trim().is_empty() {
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
        let mut guard = self.writer.lock().await;
        if let Some(mut out) = guard.take() {
            out.flush().await?;
            out.shutdown().await?;
        }
        Ok(())
    }
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
                            ErrorCode::INVALID_PARAMS,
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
