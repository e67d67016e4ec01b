//! Direct calls: a plain `tools/call` relayed by loom without going through rmcp's service loops.
//!
//! rmcp decodes each request into its typed model, spawns a task with a cancellation token and a
//! span for it, sends it on through the client's own service loop and back; measured, that was
//! most of what loom added to a call (benches/README.md, "Hop and footprint"). A call that loom
//! only relays needs none of it: the line names a tool, goes to one child with a new id, and the
//! child's answer comes back by that id. This module holds the two ends of that path that live in
//! the transports:
//!
//! * upstream, a [`Bypass`] the transport offers every incoming line before decoding it; what the
//!   bypass takes it answers itself through a [`LineSink`] on the same writer rmcp uses;
//! * downstream, [`DirectCalls`]: ids of the form `"loom:N"` (rmcp numbers its own, so the two
//!   never meet), the answer and the progress of each routed to the call that waits for them, in
//!   the order they were read.
//!
//! What a direct call does between the two (routing, timeouts, cancellation, the size check that
//! decides pass-through, era shaping) is the gateway's: `src/gateway/direct.rs`.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex as StdMutex, OnceLock, PoisonError};

use serde::Deserialize;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{Mutex, mpsc};

/// A boxed future, for the object-safe traits below.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One side of a line transport that whole messages can be written to, shared with the
/// transport itself: each message is written under the transport's own lock, so lines from both
/// never interleave.
pub trait LineSink: Send + Sync {
    /// Write `parts` as one message (the last part ends with the newline) and flush.
    fn write_parts<'a>(&'a self, parts: &'a [&'a [u8]]) -> BoxFuture<'a, std::io::Result<()>>;
}

impl<W: AsyncWrite + Unpin + Send> LineSink for Mutex<Option<BufWriter<W>>> {
    fn write_parts<'a>(&'a self, parts: &'a [&'a [u8]]) -> BoxFuture<'a, std::io::Result<()>> {
        Box::pin(async move {
            let mut guard = self.lock().await;
            let Some(out) = guard.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "transport is closed",
                ));
            };
            for part in parts {
                out.write_all(part).await?;
            }
            out.flush().await
        })
    }
}

/// Upstream: takes incoming lines off rmcp's hands.
pub trait Bypass: Send + Sync {
    /// True when the bypass took `line` (and answers it, if it is a request, through `reply`);
    /// false when rmcp must decode it as usual. Called on the transport's read path: it must
    /// decide without waiting.
    fn offer(&self, line: &str, reply: &Arc<dyn LineSink>) -> bool;

    /// The connection is closing: let what the bypass took finish (bounded), then stop it.
    /// Called before the writer is closed.
    fn close(&self) -> BoxFuture<'_, ()>;

    /// The client's side of the connection ended (EOF): nothing more will come from it.
    fn input_ended(&self) {}
}

/// The prefix of direct call ids and progress tokens towards a child, as JSON text.
const ID_PREFIX: &str = "\"loom:";

/// What arrives for a direct call, in the order the child wrote it.
#[derive(Debug)]
pub enum Arrival {
    /// A `notifications/progress` line carrying the call's token.
    Progress(String),
    /// The response line (a result or an error); nothing follows it.
    Answer(String),
}

/// The direct calls open on one downstream connection.
#[derive(Default)]
pub struct DirectCalls {
    state: StdMutex<CallsState>,
    /// The child's stdin, set when the transport is built.
    sink: OnceLock<Arc<dyn LineSink>>,
}

#[derive(Default)]
struct CallsState {
    next: u64,
    open: HashMap<u64, mpsc::UnboundedSender<Arrival>>,
    /// The connection ended: no call opens any more, and the open ones were told (their
    /// receivers see the channel close).
    closed: bool,
}

/// One open direct call: its id towards the child and what arrives for it. Dropping it forgets
/// the call (a late answer is then dropped).
pub struct DirectCall {
    number: u64,
    /// `"loom:N"`, as JSON text: the request id and the progress token towards the child.
    pub id: String,
    pub arrivals: mpsc::UnboundedReceiver<Arrival>,
    calls: Arc<DirectCalls>,
}

impl Drop for DirectCall {
    fn drop(&mut self) {
        self.calls.with(|s| s.open.remove(&self.number));
    }
}

/// Just the token of a `notifications/progress`, as JSON text.
#[derive(Deserialize)]
struct ProgressPeek<'a> {
    #[serde(borrow)]
    params: ProgressParamsPeek<'a>,
}

#[derive(Deserialize)]
struct ProgressParamsPeek<'a> {
    #[serde(rename = "progressToken", borrow)]
    progress_token: &'a serde_json::value::RawValue,
}

impl DirectCalls {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn with<T>(&self, f: impl FnOnce(&mut CallsState) -> T) -> T {
        // A poisoned lock only means another task panicked mid-update; the map is intact.
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut guard)
    }

    /// The transport's writer (once; later calls are ignored).
    pub(super) fn attach(&self, sink: Arc<dyn LineSink>) {
        let _ = self.sink.set(sink);
    }

    /// Open a call, or `None` when the connection has ended.
    pub fn open(self: &Arc<Self>) -> Option<DirectCall> {
        let (sender, arrivals) = mpsc::unbounded_channel();
        let number = self.with(|s| {
            if s.closed {
                return None;
            }
            s.next += 1;
            s.open.insert(s.next, sender);
            Some(s.next)
        })?;
        Some(DirectCall {
            number,
            id: format!("{ID_PREFIX}{number}\""),
            arrivals,
            calls: self.clone(),
        })
    }

    /// Write one message to the child.
    pub async fn send(&self, parts: &[&[u8]]) -> std::io::Result<()> {
        match self.sink.get() {
            Some(sink) => sink.write_parts(parts).await,
            None => Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the connection has no writer",
            )),
        }
    }

    /// Number of open calls (for tests: nothing may leak).
    pub fn open_calls(&self) -> usize {
        self.with(|s| s.open.len())
    }

    /// The connection ended: every open call sees its channel close, and none opens again.
    pub(super) fn close(&self) {
        self.with(|s| {
            s.closed = true;
            s.open.clear();
        });
    }

    /// Route an incoming line that belongs to a direct call: a response whose id, or a progress
    /// notification whose token, is a direct call's. True when the line was taken (also when its
    /// call has ended: a late answer or progress must not reach rmcp, which never sent it).
    pub(super) fn route(
        &self,
        id: Option<&serde_json::value::RawValue>,
        method: Option<&str>,
        line: &str,
    ) -> bool {
        let (number, arrival) = match (method, id) {
            (None, Some(id)) => match number_of(id.get()) {
                Some(number) => (number, Arrival::Answer(line.to_string())),
                None => return false,
            },
            (Some("notifications/progress"), _) => {
                let Ok(peek) = serde_json::from_str::<ProgressPeek<'_>>(line) else {
                    return false;
                };
                match number_of(peek.params.progress_token.get()) {
                    Some(number) => (number, Arrival::Progress(line.to_string())),
                    None => return false,
                }
            }
            _ => return false,
        };
        self.with(|s| {
            if let Some(sender) = s.open.get(&number) {
                let done = matches!(arrival, Arrival::Answer(_));
                let _ = sender.send(arrival);
                if done {
                    s.open.remove(&number);
                }
            }
        });
        true
    }
}

/// N of `"loom:N"`.
fn number_of(raw: &str) -> Option<u64> {
    raw.strip_prefix(ID_PREFIX)?.strip_suffix('"')?.parse().ok()
}

/// Closes a connection's direct calls when its transport goes away.
pub(super) struct CloseOnDrop(pub Arc<DirectCalls>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).expect("json")
    }

    #[test]
    fn answers_and_progress_reach_their_call_in_order() {
        let calls = DirectCalls::new();
        let mut call = calls.open().expect("open");
        assert_eq!(call.id, "\"loom:1\"");
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"loom:1","progress":1}}"#;
        assert!(calls.route(None, Some("notifications/progress"), progress));
        let answer = r#"{"jsonrpc":"2.0","id":"loom:1","result":{}}"#;
        assert!(calls.route(Some(&raw("\"loom:1\"")), None, answer));
        assert!(matches!(call.arrivals.try_recv(), Ok(Arrival::Progress(l)) if l == progress));
        assert!(matches!(call.arrivals.try_recv(), Ok(Arrival::Answer(l)) if l == answer));
        // The answer ends the call: a late line is taken and dropped.
        assert_eq!(calls.open_calls(), 0);
        assert!(calls.route(Some(&raw("\"loom:1\"")), None, answer));
        assert!(call.arrivals.try_recv().is_err());
    }

    #[test]
    fn rmcp_s_own_ids_and_tokens_are_left_alone() {
        let calls = DirectCalls::new();
        let _call = calls.open().expect("open");
        assert!(!calls.route(Some(&raw("1")), None, "{}"));
        assert!(!calls.route(Some(&raw("\"loom:x\"")), None, "{}"));
        assert!(!calls.route(Some(&raw("\"other:1\"")), None, "{}"));
        let progress = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#;
        assert!(!calls.route(None, Some("notifications/progress"), progress));
        // A request from the child with a direct-looking id is the child's own.
        assert!(!calls.route(Some(&raw("\"loom:1\"")), Some("ping"), "{}"));
    }

    #[test]
    fn a_closed_connection_ends_open_calls_and_opens_none() {
        let calls = DirectCalls::new();
        let mut call = calls.open().expect("open");
        let guard = CloseOnDrop(calls.clone());
        drop(guard);
        assert!(matches!(
            call.arrivals.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(calls.open().is_none());
    }

    #[test]
    fn a_dropped_call_is_forgotten() {
        let calls = DirectCalls::new();
        let call = calls.open().expect("open");
        assert_eq!(calls.open_calls(), 1);
        drop(call);
        assert_eq!(calls.open_calls(), 0);
    }
}
