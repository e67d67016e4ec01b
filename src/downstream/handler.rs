//! loom's client face towards one downstream server: what it does with the requests and
//! notifications a server sends to its client.
//!
//! Server→client requests (sampling, roots, elicitation) are forwarded to loom's own client when
//! that client declared the capability; notifications become [`DownstreamEvent`]s for the gateway.

#![allow(deprecated)] // roots, sampling and logging are deprecated by SEP-2577 but clients use them.

use std::sync::{Arc, RwLock};

use rmcp::ErrorData as McpError;
use rmcp::model::{
    ClientCapabilities, ClientConfig, CreateMessageRequestParams, CreateMessageResult,
    CustomNotification, ElicitRequestParams, ElicitResult, ErrorCode, Implementation,
    ListRootsResult, LoggingMessageNotificationParam, ProgressNotificationParam, ProtocolVersion,
    RequestParamsMeta, ResourceUpdatedNotificationParam,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleClient, RoleServer};
use rmcp::{ClientHandler, ServiceError};
use tokio::sync::{mpsc, oneshot};

use super::callers::{Answerer, Ask, AskKind, Callers, Picked, declares, not_declared};

/// What happened on a downstream connection that the gateway must act on.
#[derive(Debug)]
pub enum DownstreamEvent {
    /// The server's tools, resources or prompts (or its state) changed: rebuild the catalog.
    CatalogChanged { server: usize },
    /// The server sent a list_changed notification: re-list it, then rebuild.
    ListChanged { server: usize },
    Progress {
        server: usize,
        params: ProgressNotificationParam,
    },
    Logging {
        server: usize,
        params: LoggingMessageNotificationParam,
        /// The sessions that may hear it, decided as it arrived (SPEC §5.4): a server's log
        /// line names no request, so it goes only where no other credential's call could have
        /// caused it.
        audience: Vec<u64>,
        /// When it was read from the server: a 2026-07-28 client hears it if a request of its
        /// that asked for it was in flight then (SPEC §5.4).
        read_at: std::time::Instant,
    },
    ResourceUpdated {
        server: usize,
        params: ResourceUpdatedNotificationParam,
    },
    /// `notifications/tasks/status`: forwarded as it came, and its task id routed to `server`.
    TaskStatus {
        server: usize,
        notification: CustomNotification,
    },
}

/// The `_meta` key that ties a message to its MCP task (2025-11-25).
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The 2025-11-25 task status notification.
pub(super) const TASK_STATUS: &str = "notifications/tasks/status";

/// The upstream client, once it has connected. Shared by every downstream handler.
#[derive(Clone, Default)]
pub struct UpstreamLink {
    peer: Slot,
    /// Set too whenever this link is (a session's link keeps the hub's "latest session" current).
    mirror: Option<Slot>,
    /// Asked when this link holds no peer.
    fallback: Option<Slot>,
}

type Slot = Arc<RwLock<Option<Peer<RoleServer>>>>;

impl UpstreamLink {
    /// A link that also sets `mirror` whenever it is set.
    pub fn mirrored(mirror: &UpstreamLink) -> Self {
        UpstreamLink {
            mirror: Some(mirror.peer.clone()),
            ..UpstreamLink::default()
        }
    }

    /// A link that answers with `fallback`'s peer while it holds none itself.
    pub fn with_fallback(fallback: &UpstreamLink) -> Self {
        UpstreamLink {
            fallback: Some(fallback.peer.clone()),
            ..UpstreamLink::default()
        }
    }

    pub fn set(&self, peer: Peer<RoleServer>) {
        if let Some(mirror) = &self.mirror
            && let Ok(mut slot) = mirror.write()
        {
            *slot = Some(peer.clone());
        }
        if let Ok(mut slot) = self.peer.write() {
            *slot = Some(peer);
        }
    }

    /// The peer, if it is still connected; else the fallback's (a session that called a
    /// server last may have ended since).
    pub fn get(&self) -> Option<Peer<RoleServer>> {
        let open = |slot: &Slot| {
            slot.read()
                .ok()
                .and_then(|slot| slot.clone())
                .filter(|peer| !peer.is_transport_closed())
        };
        open(&self.peer).or_else(|| self.fallback.as_ref().and_then(open))
    }
}

/// The `_meta` a server put on its request, to travel on with it (e.g. 2025-11-25's
/// `io.modelcontextprotocol/related-task`, which ties an elicitation to its task); the progress
/// token is the downstream connection's own and is left behind.
fn carried_meta<P: RequestParamsMeta>(params: &mut P, context: &RequestContext<RoleClient>) {
    let mut meta = context.meta.clone();
    meta.0.0.remove("progressToken");
    if !meta.0.0.is_empty() {
        *params.meta_mut() = Some(meta);
    }
}

fn upstream_error(what: &str, error: ServiceError) -> McpError {
    match error {
        ServiceError::McpError(error) => error,
        other => {
            McpError::internal_error(format!("{what} via loom's client failed: {other}"), None)
        }
    }
}

/// The handler loom runs as the client of downstream server number `server`.
#[derive(Clone)]
pub struct DownstreamHandler {
    pub server: usize,
    /// What this connection's requests in flight are registered under in `callers`
    /// ([`super::Downstream::key`]).
    pub callers_key: usize,
    /// The client of the session that called this server last: where a request that comes
    /// while no call is in flight goes.
    pub upstream: UpstreamLink,
    /// Every request in flight on every server: a request that comes during one goes to that
    /// call's client.
    pub callers: Arc<Callers>,
    /// The params of this server's sampling and elicitation requests as it wrote them (the
    /// transport keeps them; rmcp's typed params would change values on the way).
    pub params: crate::wire::RawParams,
    pub events: mpsc::UnboundedSender<DownstreamEvent>,
}

/// Where one server request goes.
enum Relay {
    /// To this client, as a server→client request.
    Peer(Peer<RoleServer>),
    /// Answered by a 2026-07-28 client through `input_required`: the answer, once it comes.
    Input(oneshot::Receiver<Result<serde_json::Value, McpError>>),
}

impl DownstreamHandler {
    /// A log line of this server as its transport read it (`notifications/message`): who may
    /// hear it is decided now, before any answer read after it ends its call.
    pub fn log_line(&self, line: &str) {
        #[derive(serde::Deserialize)]
        struct Notification {
            params: LoggingMessageNotificationParam,
        }
        match serde_json::from_str::<Notification>(line) {
            Ok(notification) => self.emit(DownstreamEvent::Logging {
                server: self.server,
                params: notification.params,
                audience: self.callers.log_audience(self.callers_key),
                read_at: std::time::Instant::now(),
            }),
            Err(error) => {
                tracing::warn!(server = self.server, %error, "ignoring a malformed log line")
            }
        }
    }

    fn emit(&self, event: DownstreamEvent) {
        // The receiver only goes away at shutdown, when events no longer matter.
        let _ = self.events.send(event);
    }

    /// Where a request of `kind` from this server goes (SPEC §5.8): to the client of the call in
    /// flight on this server, as a request for a client of the `initialize` era or as an
    /// `input_required` question for a 2026-07-28 one; with no call in flight, to the client
    /// that called this server last.
    /// The params of request `context.id` as the server wrote them, without the downstream
    /// connection's progress token; `typed` (rmcp's decoding) when they were not kept.
    fn params_of(
        &self,
        context: &RequestContext<RoleClient>,
        typed: &impl serde::Serialize,
    ) -> serde_json::Value {
        let kept = self
            .params
            .take(&context.id)
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok());
        let mut params = kept.unwrap_or_else(|| as_value(typed));
        if let Some(meta) = params
            .get_mut("_meta")
            .and_then(serde_json::Value::as_object_mut)
        {
            meta.remove("progressToken");
            if meta.is_empty()
                && let Some(params) = params.as_object_mut()
            {
                params.remove("_meta");
            }
        }
        params
    }

    fn relay(&self, kind: AskKind, params: serde_json::Value) -> Result<Relay, McpError> {
        let related_task = params
            .get("_meta")
            .and_then(|meta| meta.get(RELATED_TASK))
            .and_then(|task| task.get("taskId"))
            .and_then(serde_json::Value::as_str);
        let peer = match self.callers.pick(self.callers_key, related_task) {
            Picked::Answerer(Answerer::Peer(peer)) => peer,
            Picked::Answerer(Answerer::Input { capabilities, asks }) => {
                if !declares(&capabilities, kind, &params) {
                    return Err(not_declared(kind, &params));
                }
                let (reply, answer) = oneshot::channel();
                asks.send(Ask {
                    kind,
                    params,
                    reply,
                })
                .map_err(|_| {
                    McpError::internal_error(
                        format!("loom: the call this {} belongs to has ended", kind.method()),
                        None,
                    )
                })?;
                return Ok(Relay::Input(answer));
            }
            Picked::Answerer(Answerer::Refuse { method }) => {
                return Err(McpError::new(
                    ErrorCode::METHOD_NOT_FOUND,
                    format!(
                        "loom's client speaks protocol 2026-07-28, where a server's {} can only \
                         be answered during tools/call, prompts/get or resources/read (it came \
                         during `{method}`)",
                        kind.method()
                    ),
                    None,
                ));
            }
            Picked::NoneForTask => {
                return Err(McpError::internal_error(
                    format!(
                        "loom: no request of loom's waits for the task this {} belongs to (a \
                         client hears a task's questions while it waits for tasks/result)",
                        kind.method()
                    ),
                    None,
                ));
            }
            Picked::Ambiguous { sessions } => {
                return Err(McpError::internal_error(
                    format!(
                        "loom: calls of {sessions} clients are in flight on this server, and \
                         loom cannot tell which of them this {} is for",
                        kind.method()
                    ),
                    None,
                ));
            }
            Picked::Unclaimed { credentials } => {
                return Err(McpError::internal_error(
                    format!(
                        "loom: no call of loom's is in flight on this server and clients of \
                         {credentials} credentials are connected, so loom cannot tell whose this \
                         {} is (a server's request goes to the client whose call caused it, \
                         never to another credential's)",
                        kind.method()
                    ),
                    None,
                ));
            }
            Picked::Nobody => self
                .upstream
                .get()
                .ok_or_else(|| not_connected(kind.capability()))?,
        };
        let declared = peer
            .peer_info()
            .is_some_and(|info| declares(&info.capabilities, kind, &params));
        if declared {
            Ok(Relay::Peer(peer))
        } else {
            Err(not_declared(kind, &params))
        }
    }
}

fn not_connected(what: &str) -> McpError {
    McpError::new(
        ErrorCode::METHOD_NOT_FOUND,
        format!("loom's client is not connected; {what} is unavailable"),
        None,
    )
}

/// The answer of a 2026-07-28 client, as the typed result rmcp sends on to the server.
async fn answered<T: serde::de::DeserializeOwned>(
    kind: AskKind,
    answer: oneshot::Receiver<Result<serde_json::Value, McpError>>,
) -> Result<T, McpError> {
    let value = answer.await.unwrap_or_else(|_| {
        Err(McpError::internal_error(
            format!(
                "loom's client did not answer the {} (its call ended or loom stopped waiting)",
                kind.method()
            ),
            None,
        ))
    })?;
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(
            format!(
                "loom's client answered the {} with a malformed result: {error}",
                kind.method()
            ),
            None,
        )
    })
}

/// A server's request sent on to a client of the `initialize` era with its params as the server
/// wrote them; the client's answer in the typed shape rmcp hands back to the server.
async fn send_raw<T: serde::de::DeserializeOwned>(
    peer: &Peer<RoleServer>,
    kind: AskKind,
    params: serde_json::Value,
) -> Result<T, McpError> {
    let request = rmcp::model::ServerRequest::CustomRequest(rmcp::model::CustomRequest::new(
        kind.method(),
        Some(params),
    ));
    let answer = peer
        .send_request(request)
        .await
        .map_err(|e| upstream_error(kind.capability(), e))?;
    let value = serde_json::to_value(answer)
        .map_err(|error| McpError::internal_error(format!("{}: {error}", kind.method()), None))?;
    serde_json::from_value(value).map_err(|error| {
        McpError::internal_error(
            format!(
                "loom's client answered the {} with a malformed result: {error}",
                kind.method()
            ),
            None,
        )
    })
}

fn as_value(params: &impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(params).unwrap_or_default()
}

impl ClientHandler for DownstreamHandler {
    fn get_info(&self) -> ClientConfig {
        // Children start before loom's own client connects, so loom declares what it can relay
        // and answers "not supported" later if the client turns out not to have it. Elicitation
        // in both modes: servers offer URL-mode tools only to clients that declare it.
        let mut capabilities = ClientCapabilities::builder()
            .enable_roots()
            .enable_sampling()
            .enable_elicitation()
            .build();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::default())
                .with_url(rmcp::model::UrlElicitationCapability::default()),
        );
        // Children are spoken to with the `initialize` handshake, so the version offered must
        // be one that has it (rmcp's default, 2026-07-28, does not).
        ClientConfig::new(
            capabilities,
            Implementation::new("loom", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn create_message(
        &self,
        mut params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, McpError> {
        carried_meta(&mut params, &context);
        let raw = self.params_of(&context, &params);
        match self.relay(AskKind::Sampling, raw.clone())? {
            Relay::Peer(peer) => send_raw(&peer, AskKind::Sampling, raw).await,
            Relay::Input(answer) => answered(AskKind::Sampling, answer).await,
        }
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, McpError> {
        match self.relay(AskKind::Roots, serde_json::Value::Null)? {
            Relay::Peer(peer) => peer
                .list_roots()
                .await
                .map_err(|e| upstream_error("roots/list", e)),
            Relay::Input(answer) => answered(AskKind::Roots, answer).await,
        }
    }

    async fn create_elicitation(
        &self,
        mut params: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, McpError> {
        carried_meta(&mut params, &context);
        let raw = self.params_of(&context, &params);
        match self.relay(AskKind::Elicitation, raw.clone())? {
            Relay::Peer(peer) => send_raw(&peer, AskKind::Elicitation, raw).await,
            Relay::Input(answer) => answered(AskKind::Elicitation, answer).await,
        }
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.emit(DownstreamEvent::Progress {
            server: self.server,
            params,
        });
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.emit(DownstreamEvent::Logging {
            server: self.server,
            params,
            audience: self.callers.log_audience(self.callers_key),
            read_at: std::time::Instant::now(),
        });
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.emit(DownstreamEvent::ResourceUpdated {
            server: self.server,
            params,
        });
    }

    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == TASK_STATUS {
            self.emit(DownstreamEvent::TaskStatus {
                server: self.server,
                notification,
            });
        } else {
            tracing::debug!(method = %notification.method, "ignoring a notification loom does not know");
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(DownstreamEvent::ListChanged {
            server: self.server,
        });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(DownstreamEvent::ListChanged {
            server: self.server,
        });
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.emit(DownstreamEvent::ListChanged {
            server: self.server,
        });
    }
}
