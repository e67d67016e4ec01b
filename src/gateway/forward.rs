//! Forwarding one request to a downstream server and carrying its raw answer back.

use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolResult, CancelledNotificationParam, ClientRequest, ContentBlock, ErrorCode,
    ServerResult,
};
use rmcp::service::{PeerRequestOptions, RequestContext, RoleServer};

use super::Gateway;
use super::era::Era;
use crate::downstream::ServerState;
use crate::wire::placeholder_result;

/// How long an answer waits for the progress notifications that preceded it to be passed on.
const PROGRESS_DRAIN: Duration = Duration::from_millis(500);

/// `_meta` keys of the MCP protocol envelope itself, which are per connection.
pub(super) const PROTOCOL_META_PREFIX: &str = "io.modelcontextprotocol/";

/// Why a forwarded request has no downstream answer.
#[derive(Debug)]
pub enum ForwardError {
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
}

impl ForwardError {
    /// The text of an `isError` tool result (or of a JSON-RPC error), naming the server.
    pub fn describe(&self, server: &str, what: &str) -> String {
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
        }
    }

    /// As the `isError` result a tool call returns.
    pub fn into_tool_result(self, server: &str, what: &str) -> ServerResult {
        ServerResult::CallToolResult(CallToolResult::error(vec![ContentBlock::text(
            self.describe(server, what),
        )]))
    }

    /// As a JSON-RPC error (for methods that have no `isError` form). A downstream error is
    /// passed on with its own code and data.
    pub fn into_rpc_error(self, server: &str, what: &str) -> McpError {
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
pub enum Forwarded {
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
                let raw = Era::of_request(context).shape_raw(raw, cacheable);
                self.splice.put(context.id.clone(), raw);
                ServerResult::CustomResult(placeholder_result())
            }
            Forwarded::Typed(result) => *result,
        }
    }

    /// Send `request` to server `index` and return its answer (raw bytes when the transport
    /// captured them). Cancels downstream when loom's client cancels or the server's
    /// `callTimeoutMs` passes.
    pub(super) async fn forward(
        &self,
        index: usize,
        request: ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Result<Forwarded, ForwardError> {
        let timeout = self
            .servers
            .get(index)
            .map(|server| Duration::from_millis(server.config.call_timeout_ms));
        self.forward_within(index, request, context, timeout).await
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
        self.hub.calling(index, &self.upstream);
        let Some(server) = self.servers.get(index) else {
            return Err(ForwardError::Down(ServerState::Stopped));
        };
        let live = server.live().map_err(ForwardError::Down)?;

        // rmcp puts its own progress token on every outgoing request, so the client's token is
        // mapped back when progress arrives; everything else in `_meta` travels as it came.
        let upstream_token = context.meta.get_progress_token();
        let mut meta = context.meta.clone();
        meta.0.remove("progressToken");
        // The 2026-07-28 per-request envelope (`io.modelcontextprotocol/protocolVersion`,
        // `…/clientInfo`, `…/clientCapabilities`) describes loom's client session, not the
        // downstream one, which loom opened with `initialize`: it stops at loom.
        meta.0
            .retain(|key, _| !key.starts_with(PROTOCOL_META_PREFIX));
        let mut options = PeerRequestOptions::no_options();
        if !meta.0.is_empty() {
            options = options.with_meta(meta);
        }
        let mut handle = live
            .peer
            .send_request_with_option(request, options)
            .await
            .map_err(|e| ForwardError::Closed(e.to_string()))?;
        let progress_key = (index, handle.progress_token.clone());
        if let Some(token) = upstream_token {
            self.lock_progress().insert(progress_key.clone(), token);
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
            after = expire(timeout) => Err(ForwardError::TimedOut(after)),
            _ = context.ct.cancelled() => Err(ForwardError::Cancelled),
        };
        // Progress that arrived before the answer goes out before it.
        live.progress
            .drained(&handle.progress_token, PROGRESS_DRAIN)
            .await;
        self.lock_progress().remove(&progress_key);

        match outcome {
            Ok(ServerResult::CustomResult(_)) => match live.raw.take(&handle.id) {
                Some(raw) => Ok(Forwarded::Raw(raw)),
                None => Err(ForwardError::Closed("the answer went missing".into())),
            },
            // Not captured raw (a method loom does not pass through): typed, as rmcp decoded it.
            Ok(other) => Ok(Forwarded::Typed(Box::new(other))),
            Err(error) => {
                live.raw.forget(&handle.id);
                if matches!(error, ForwardError::TimedOut(_) | ForwardError::Cancelled) {
                    let reason = match &error {
                        ForwardError::TimedOut(_) => "timed out in loom",
                        _ => "cancelled by loom's client",
                    };
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
