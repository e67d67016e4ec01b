//! What a session tells [`crate::telemetry`]: each request it handles (both paths: rmcp's and
//! the direct lane), and what it holds when metrics are scraped (SPEC §24).

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequest, ClientRequest, GetPromptRequest, ServerResult};
use rmcp::service::{RequestContext, RoleServer};

use super::era::Era;
use super::{Gateway, Hub};
use crate::telemetry::{self, Arrival, Observed, Outcome};

/// The revision a 2026-07-28 request is served under.
pub(super) const MODERN_VERSION: &str = "2026-07-28";

impl Gateway {
    /// Whether the client reached this session over HTTP, and its session id (2025 sessions).
    pub(crate) fn set_http_face(&self, session_id: Option<&str>) {
        let _ = self
            .face
            .set((telemetry::Transport::Tcp, session_id.map(str::to_string)));
    }

    fn face(&self) -> (telemetry::Transport, Option<&str>) {
        match self.face.get() {
            Some((transport, session)) => (*transport, session.as_deref()),
            None => (telemetry::Transport::Pipe, None),
        }
    }

    /// Open the telemetry of a request arriving on rmcp's path (`None` when it is all off).
    pub(super) fn observe(
        &self,
        request: &ClientRequest,
        context: &RequestContext<RoleServer>,
    ) -> Option<Arc<Observed>> {
        if !telemetry::active() {
            return None;
        }
        let version = match request {
            ClientRequest::InitializeRequest(initialize) => {
                initialize.params.protocol_version.as_str().to_string()
            }
            _ => match Era::of_request(context) {
                Era::Discover => MODERN_VERSION.to_string(),
                Era::Initialize => context
                    .peer
                    .peer_info()
                    .map(|info| info.protocol_version.as_str().to_string())
                    .unwrap_or_default(),
            },
        };
        let target = match request {
            ClientRequest::CallToolRequest(CallToolRequest { params, .. }) => {
                Some(params.name.as_ref())
            }
            ClientRequest::GetPromptRequest(GetPromptRequest { params, .. }) => {
                Some(params.name.as_str())
            }
            _ => None,
        };
        let resource = match request {
            ClientRequest::ReadResourceRequest(read) => Some(read.params.uri.as_str()),
            ClientRequest::SubscribeRequest(subscribe) => Some(subscribe.params.uri.as_str()),
            ClientRequest::UnsubscribeRequest(unsubscribe) => Some(unsubscribe.params.uri.as_str()),
            _ => None,
        };
        let text = |key: &str| context.meta.0.get(key).and_then(serde_json::Value::as_str);
        let credential = self.credential();
        let (transport, session_id) = self.face();
        let observed = telemetry::begin(Arrival {
            method: request.method(),
            request_id: serde_json::to_string(&context.id).ok(),
            version: &version,
            transport,
            session_id,
            credential: credential
                .as_deref()
                .filter(|c| *c != super::LOCAL_CREDENTIAL),
            target,
            resource,
            traceparent: text("traceparent"),
            tracestate: text("tracestate"),
        });
        if let (Some(observed), Some(tool)) = (&observed, target)
            && matches!(request, ClientRequest::CallToolRequest(_))
        {
            self.note_tool_target(observed, tool);
        }
        observed
    }

    /// Open the telemetry of a plain call taken by the direct lane: `id` and `tool` as the
    /// client wrote them, `target` the server's name and its own tool name.
    pub(super) fn observe_direct(
        &self,
        id: &str,
        tool: &str,
        version: &str,
        meta: &std::collections::BTreeMap<std::borrow::Cow<'_, str>, &serde_json::value::RawValue>,
        target: (&str, &str),
    ) -> Option<Arc<Observed>> {
        if !telemetry::active() {
            return None;
        }
        let text = |key: &str| {
            meta.get(key)
                .and_then(|raw| serde_json::from_str::<String>(raw.get()).ok())
        };
        let (traceparent, tracestate) = (text("traceparent"), text("tracestate"));
        let credential = self.credential();
        let (transport, session_id) = self.face();
        let observed = telemetry::begin(Arrival {
            method: "tools/call",
            request_id: Some(id.to_string()),
            version,
            transport,
            session_id,
            credential: credential
                .as_deref()
                .filter(|c| *c != super::LOCAL_CREDENTIAL),
            target: Some(tool),
            resource: None,
            traceparent: traceparent.as_deref(),
            tracestate: tracestate.as_deref(),
        })?;
        observed.note_target(target.0, target.1);
        Some(observed)
    }

    /// Note which server's tool (its own name) the exposed `tool` is, or loom's own.
    pub(super) fn note_tool_target(&self, observed: &Arc<Observed>, tool: &str) {
        let exposed = self.exposed();
        let target = match exposed.tool_route(tool) {
            Some(route) => self
                .server(route.server)
                .map(|server| (server.name().to_string(), route.name.clone())),
            // loom's own tools; a name nothing answers to is not noted (metrics say `unknown`:
            // a client's made-up names must not grow a label set).
            None if crate::tools::NAMES.contains(&tool)
                || super::discovery::DISCOVERY_NAMES.contains(&tool)
                || tool == super::discovery::STATS =>
            {
                Some(("loom".to_string(), tool.to_string()))
            }
            None => None,
        };
        if let Some((server, own)) = target {
            observed.note_target(&server, &own);
        }
    }
}

/// How an answer of rmcp's path ended, and its size when metrics or the audit log want it.
pub(super) fn ending(answer: &Result<ServerResult, McpError>) -> (Outcome, Option<u64>) {
    match answer {
        Err(error) => (Outcome::Error(error.code.0), None),
        Ok(result) => {
            let tool_error =
                matches!(result, ServerResult::CallToolResult(r) if r.is_error == Some(true));
            // A raw answer is a placeholder here: its size and `isError` were noted when it was
            // put in the splice table.
            if matches!(result, ServerResult::CustomResult(_)) {
                return (Outcome::Ok, None);
            }
            let bytes = telemetry::wants_sizes()
                .then(|| serde_json::to_vec(result).map(|b| b.len() as u64).ok())
                .flatten();
            match tool_error {
                true => (Outcome::ToolError, bytes),
                false => (Outcome::Ok, bytes),
            }
        }
    }
}

/// Whether raw tool result bytes say `isError: true` (read only as far as needed).
pub(crate) fn raw_is_error(raw: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    // Built once: `memmem::find` builds its searcher at every call.
    static IS_ERROR: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"isError\""));
    IS_ERROR.find(raw.as_bytes()).is_some()
        && serde_json::from_str::<Flag>(raw).is_ok_and(|flag| flag.is_error == Some(true))
}

impl telemetry::metrics::Source for Gateway {
    fn sample(&self, into: &mut telemetry::metrics::Sample) {
        for dataset in self.store.list() {
            into.datasets += 1;
            into.bytes_held += dataset.bytes as u64;
        }
    }
}

impl telemetry::metrics::Source for Hub {
    fn sample(&self, into: &mut telemetry::metrics::Sample) {
        into.engine_memory_bytes = into
            .engine_memory_bytes
            .max(self.engine.reserved_bytes() as u64);
        for server in &self.servers {
            let up = matches!(server.state(), crate::downstream::ServerState::Healthy);
            into.servers.push((server.name().to_string(), up));
        }
    }
}
