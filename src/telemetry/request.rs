//! One request as the operator sees it: its span, what it did, and the line and counts it leaves
//! when it ends (SPEC §24).
//!
//! The gateway opens an [`Observed`] when a request arrives and runs the handling [`within`] it;
//! whatever learns something on the way (which server, what became of the result) notes it on
//! the request being handled, found through a task-local, without being handed anything. With
//! telemetry off nothing is opened and every note is one failed task-local lookup.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::trace::SpanKind;

use super::trace::{self, TraceSpan};
use super::{audit, metrics};

tokio::task_local! {
    static CURRENT: Arc<Observed>;
}

/// How the client reached loom (the conventions' `network.transport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// stdio.
    Pipe,
    /// Streamable HTTP.
    Tcp,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Tcp => "tcp",
        }
    }
}

/// A request as it arrives.
pub struct Arrival<'a> {
    pub method: &'a str,
    /// The JSON-RPC id, as text.
    pub request_id: Option<String>,
    /// The protocol revision the request is served under.
    pub version: &'a str,
    pub transport: Transport,
    pub session_id: Option<&'a str>,
    /// The session's credential (a digest), `None` over stdio.
    pub credential: Option<&'a str>,
    /// The name the client asked for: a tool (`tools/call`) or a prompt (`prompts/get`).
    pub target: Option<&'a str>,
    /// The resource a `resources/*` request names.
    pub resource: Option<&'a str>,
    /// `_meta.traceparent` and `_meta.tracestate`, as the client sent them.
    pub traceparent: Option<&'a str>,
    pub tracestate: Option<&'a str>,
}

/// How a request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// A tool result with `isError: true`.
    ToolError,
    /// A JSON-RPC error, by code.
    Error(i32),
    /// No answer: the connection ended, the call was stopped (its `error.type`).
    Failed(&'static str),
}

impl Outcome {
    fn name(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Error(_) | Outcome::Failed(_) => "error",
        }
    }

    /// The conventions' `error.type`: `tool_error`, or the JSON-RPC code.
    fn error_type(&self) -> Option<String> {
        match self {
            Outcome::Ok => None,
            Outcome::ToolError => Some("tool_error".into()),
            Outcome::Error(code) => Some(code.to_string()),
            Outcome::Failed(why) => Some((*why).to_string()),
        }
    }
}

/// What was learnt while the request was handled.
#[derive(Default)]
struct Notes {
    server: Option<String>,
    tool: Option<String>,
    decision: Option<&'static str>,
    bytes_in: Option<u64>,
    bytes_out: Option<u64>,
    /// The answer, spliced in raw, is a tool result with `isError: true`.
    tool_error: bool,
    /// The revision the answer settled on (`initialize`: the one loom answered, not asked).
    version: Option<String>,
    chars_out: Option<u64>,
    tokens_saved: Option<i64>,
    rows: Option<u64>,
}

/// A request being handled.
pub struct Observed {
    started: Instant,
    time: String,
    method: String,
    target: Option<String>,
    version: String,
    transport: Transport,
    subject: String,
    span: TraceSpan,
    notes: Mutex<Notes>,
}

/// Open a request, if any telemetry is on.
pub fn begin(arrival: Arrival<'_>) -> Option<Arc<Observed>> {
    if !super::active() {
        return None;
    }
    let span = if trace::on() {
        server_span(&arrival)
    } else {
        TraceSpan::none()
    };
    Some(Arc::new(Observed {
        started: Instant::now(),
        // The audit line's alone: not made for nothing on every request.
        time: match audit::on() {
            true => crate::common::text::now_rfc3339(),
            false => String::new(),
        },
        method: capped(arrival.method),
        target: arrival.target.map(capped),
        version: capped(arrival.version),
        transport: arrival.transport,
        subject: match audit::on() {
            true => audit::subject_of(arrival.credential),
            false => String::new(),
        },
        span,
        notes: Mutex::new(Notes::default()),
    }))
}

/// The longest client-given name (a tool's, a method's) a span or an audit line carries.
const MAX_NAME_CHARS: usize = 256;

fn capped(text: &str) -> String {
    match text.char_indices().nth(MAX_NAME_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A method as a metric label: the protocol's own, else `other` (a client's made-up methods
/// must not grow a label set).
fn method_label(method: &str) -> &'static str {
    const METHODS: [&str; 22] = [
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "subscriptions/listen",
        "tasks/get",
        "tasks/list",
        "tasks/result",
        "tasks/cancel",
        "tasks/update",
        "elicitation/create",
        "sampling/createMessage",
    ];
    METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

/// A protocol revision as a metric label: one of the revisions loom knows, else `other`.
fn version_label(version: &str) -> &str {
    rmcp::model::ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .map(|known| known.as_str())
        .find(|known| *known == version)
        .unwrap_or("other")
}

/// An `error.type` as a metric label: `tool_error`, loom's own kinds, the JSON-RPC and MCP
/// codes (−32768 … −32000), else `other` (a server's own codes are any number).
fn error_label(error: &str) -> &str {
    match error {
        "tool_error" | "cancelled" | "timeout" | "connection_closed" | "malformed_error"
        | "malformed_answer" => error,
        code if code
            .parse::<i32>()
            .is_ok_and(|code| (-32768..=-32000).contains(&code)) =>
        {
            code
        }
        _ => "other",
    }
}

fn server_span(arrival: &Arrival<'_>) -> TraceSpan {
    let name = match arrival.target {
        Some(target) => format!("{} {}", capped(arrival.method), capped(target)),
        None => capped(arrival.method),
    };
    let mut attributes = vec![
        KeyValue::new("mcp.method.name", capped(arrival.method)),
        KeyValue::new("network.transport", arrival.transport.name()),
    ];
    if let Some(id) = &arrival.request_id {
        // A string id without its JSON quotes, as the conventions write it; cut like any name.
        let id = id
            .strip_prefix('"')
            .and_then(|id| id.strip_suffix('"'))
            .unwrap_or(id);
        attributes.push(KeyValue::new("jsonrpc.request.id", capped(id)));
    }
    if let Some(uri) = arrival.resource {
        attributes.push(KeyValue::new("mcp.resource.uri", capped(uri)));
    }
    if let Some(session) = arrival.session_id {
        attributes.push(KeyValue::new("mcp.session.id", session.to_string()));
    }
    name_attributes(&mut attributes, arrival.method, arrival.target);
    // A malformed traceparent gives an empty parent: loom's span starts a trace of its own.
    let parent = trace::parent_from(arrival.traceparent, arrival.tracestate);
    TraceSpan::start(name, SpanKind::Server, &parent, attributes)
}

/// The conventions' attributes of what a request names: a tool (`gen_ai.tool.name`,
/// `gen_ai.operation.name`) or a prompt (`gen_ai.prompt.name`).
fn name_attributes(attributes: &mut Vec<KeyValue>, method: &str, name: Option<&str>) {
    match (method, name) {
        ("tools/call", Some(tool)) => {
            attributes.push(KeyValue::new("gen_ai.tool.name", capped(tool)));
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
        }
        ("prompts/get", Some(prompt)) => {
            attributes.push(KeyValue::new("gen_ai.prompt.name", capped(prompt)));
        }
        _ => {}
    }
}

/// Run `future` as the handling of `observed` (as is, when telemetry is off).
pub async fn within<F: Future>(observed: Option<Arc<Observed>>, future: F) -> F::Output {
    match observed {
        None => future.await,
        Some(observed) => CURRENT.scope(observed, future).await,
    }
}

/// The request being handled, to carry its telemetry to work on another runtime ([`within`]).
pub fn current() -> Option<Arc<Observed>> {
    CURRENT.try_with(Arc::clone).ok()
}

fn with_current(f: impl FnOnce(&Observed)) {
    let _ = CURRENT.try_with(|observed| f(observed));
}

fn notes(observed: &Observed) -> std::sync::MutexGuard<'_, Notes> {
    observed
        .notes
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The request being handled goes to `server`'s tool `tool` (its own name), or loom's own.
pub fn note_target(server: &str, tool: &str) {
    with_current(|observed| observed.note_target(server, tool));
}

/// The answer of the request being handled, when it is a server's bytes spliced in: its size
/// and whether it is a tool result with `isError: true`.
pub fn note_answer(bytes: u64, tool_error: bool) {
    with_current(|observed| {
        let mut notes = notes(observed);
        notes.bytes_out = Some(bytes);
        notes.tool_error = tool_error;
    });
}

/// Whether anything wants to know of the answer of the request being handled.
pub fn observing() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}

/// Whether answers' sizes are wanted (by the audit log).
pub fn wants_sizes() -> bool {
    audit::on()
}

/// A span for part of loom's own work within the request being handled (none when tracing is
/// off or no request is).
pub fn child(name: &'static str) -> TraceSpan {
    if !trace::on() {
        return TraceSpan::none();
    }
    CURRENT
        .try_with(|observed| {
            observed
                .span
                .child(name.to_string(), SpanKind::Internal, Vec::new())
        })
        .unwrap_or_else(|_| TraceSpan::none())
}

/// A warning logged while a request is handled: an event of its SERVER span.
pub(super) fn event(message: String, attributes: Vec<KeyValue>) {
    with_current(|observed| observed.span.event(message, attributes));
}

/// What became of one server's tool result.
pub struct Decided<'a> {
    pub server: &'a str,
    pub tool: &'a str,
    /// `passthrough`, `envelope`, `reduced`, `summary` or `kept`.
    pub decision: &'static str,
    /// Bytes of the result JSON received.
    pub bytes_in: u64,
    pub chars_in: u64,
    /// Characters of the result JSON answered in its place.
    pub chars_out: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Rows of the datasets made of it.
    pub rows: Option<u64>,
}

/// Note `decided` on the request being handled, its span `span` (from [`child`]) and the
/// metrics.
pub fn decided(decided: &Decided<'_>, span: &TraceSpan) {
    metrics::result_sizes(
        decided.server,
        decided.tool,
        decided.bytes_in,
        decided.chars_in,
        decided.chars_out,
    );
    with_current(|observed| {
        let mut notes = notes(observed);
        notes.decision = Some(decided.decision);
        notes.bytes_in = Some(decided.bytes_in);
        notes.chars_out = Some(decided.chars_out);
        notes.tokens_saved = Some(signed(decided.tokens_in) - signed(decided.tokens_out));
        notes.rows = decided.rows;
    });
    if span.is_none() {
        return;
    }
    span.set(KeyValue::new("loom.server", decided.server.to_string()));
    result_attributes(
        span,
        decided.decision,
        decided.bytes_in,
        decided.chars_out,
        signed(decided.tokens_in) - signed(decided.tokens_out),
        decided.rows,
    );
}

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `loom.*` figures of a result, on `span`.
fn result_attributes(
    span: &TraceSpan,
    decision: &'static str,
    bytes_in: u64,
    chars_out: u64,
    tokens_saved: i64,
    rows: Option<u64>,
) {
    span.set(KeyValue::new("loom.decision", decision));
    span.set(KeyValue::new("loom.bytes_in", signed(bytes_in)));
    span.set(KeyValue::new("loom.chars_out", signed(chars_out)));
    span.set(KeyValue::new("loom.tokens_saved", tokens_saved));
    if let Some(rows) = rows {
        span.set(KeyValue::new("loom.rows", signed(rows)));
    }
}

/// A query loom's engine answered: rows and bytes answered (on the span from [`child`]).
pub fn queried(span: &TraceSpan, rows: u64, bytes: u64) {
    span.set(KeyValue::new("loom.rows", signed(rows)));
    span.set(KeyValue::new("loom.bytes_out", signed(bytes)));
}

/// The request loom sends a server for the request being handled.
pub struct Downstream {
    span: TraceSpan,
    started: Instant,
    method: &'static str,
    server: String,
    tool: Option<String>,
    transport: &'static str,
}

/// A request to a server, as its CLIENT span describes it.
pub struct Outgoing<'a> {
    pub server: &'a str,
    pub method: &'a str,
    /// The server's own tool (`tools/call`) or prompt (`prompts/get`) name.
    pub name: Option<&'a str>,
    /// A remote server's host and port.
    pub address: Option<(&'a str, u16)>,
    /// The revision the connection to the server speaks.
    pub version: Option<&'a str>,
    /// loom's id of the request to the server, as JSON text, when loom writes it itself.
    pub request_id: Option<&'a str>,
}

/// Open the record of a request to a server (when tracing or metrics are on and a request is
/// handled): its CLIENT span and its duration.
pub fn downstream(outgoing: &Outgoing<'_>) -> Option<Downstream> {
    CURRENT
        .try_with(|observed| observed.downstream(outgoing))
        .ok()
        .flatten()
}

impl Observed {
    /// [`downstream`] for this request.
    pub fn downstream(&self, outgoing: &Outgoing<'_>) -> Option<Downstream> {
        if !trace::on() && !metrics::on() {
            return None;
        }
        let Outgoing {
            server,
            method,
            name,
            address,
            version,
            request_id,
        } = *outgoing;
        let transport = if address.is_some() { "tcp" } else { "pipe" };
        let span = if self.span.is_none() {
            TraceSpan::none()
        } else {
            let span_name = match name {
                Some(name) => format!("{method} {}", capped(name)),
                None => capped(method),
            };
            let mut attributes = vec![
                KeyValue::new("mcp.method.name", capped(method)),
                KeyValue::new("loom.server", server.to_string()),
            ];
            name_attributes(&mut attributes, method, name);
            if let Some((host, port)) = address {
                attributes.push(KeyValue::new("server.address", host.to_string()));
                attributes.push(KeyValue::new("server.port", i64::from(port)));
            }
            attributes.push(KeyValue::new("network.transport", transport));
            if let Some(version) = version {
                attributes.push(KeyValue::new("mcp.protocol.version", capped(version)));
            }
            if let Some(id) = request_id {
                let id = id
                    .strip_prefix('"')
                    .and_then(|id| id.strip_suffix('"'))
                    .unwrap_or(id);
                attributes.push(KeyValue::new("jsonrpc.request.id", capped(id)));
            }
            self.span.child(span_name, SpanKind::Client, attributes)
        };
        Some(Downstream {
            span,
            started: Instant::now(),
            method: method_label(method),
            server: server.to_string(),
            tool: (method == "tools/call").then(|| name.map(capped)).flatten(),
            transport,
        })
    }
}

impl Downstream {
    /// `traceparent` (and `tracestate`) naming this span as the parent of the server's work
    /// (none while tracing is off).
    pub fn traceparent(&self) -> Option<(String, Option<String>)> {
        self.span.traceparent()
    }

    /// The server answered (or did not): the span ends, the duration is counted.
    pub fn answered(self, outcome: &Outcome) {
        let error = outcome.error_type();
        if let Some(error) = &error {
            self.span.fail(error);
        }
        self.span.end();
        let mut labels = vec![
            ("mcp_method_name", self.method.to_string()),
            ("network_transport", self.transport.to_string()),
            ("loom_server", self.server),
        ];
        if let Some(tool) = self.tool {
            labels.push(("gen_ai_tool_name", tool));
        }
        if let Some(error) = &error {
            labels.push(("error_type", error_label(error).to_string()));
        }
        metrics::downstream(self.started.elapsed().as_secs_f64(), labels);
    }
}

impl Observed {
    /// The revision loom answered with (an `initialize` asks for one and may get another).
    pub fn note_version(&self, version: &str) {
        notes(self).version = Some(capped(version));
    }

    /// The request goes to `server`'s tool `tool` (its own name), or to loom's own tool.
    pub fn note_target(&self, server: &str, tool: &str) {
        let mut notes = notes(self);
        notes.server = Some(server.to_string());
        notes.tool = Some(tool.to_string());
    }

    /// The request ended: its span ends, its metrics count, its audit line is written.
    /// `bytes_out`: the answer's size when the caller knows it (else what was noted).
    pub fn finish(self: Arc<Self>, outcome: Outcome, bytes_out: Option<u64>) {
        let elapsed = self.started.elapsed();
        let notes = std::mem::take(&mut *notes(&self));
        let outcome = match outcome {
            Outcome::Ok if notes.tool_error => Outcome::ToolError,
            other => other,
        };
        let error_type = outcome.error_type();
        let version = notes
            .version
            .clone()
            .unwrap_or_else(|| self.version.clone());
        if !self.span.is_none() {
            self.span
                .set(KeyValue::new("mcp.protocol.version", version.clone()));
            if let Some(error) = &error_type {
                self.span.fail(error);
            }
            if let (Some(decision), Some(bytes_in), Some(chars_out), Some(saved)) = (
                notes.decision,
                notes.bytes_in,
                notes.chars_out,
                notes.tokens_saved,
            ) {
                result_attributes(&self.span, decision, bytes_in, chars_out, saved, notes.rows);
            }
            if let Some(server) = &notes.server {
                self.span.set(KeyValue::new("loom.server", server.clone()));
            }
            self.span.end();
        }
        if metrics::on() {
            // Labels only of what loom knows (a listed tool, a protocol method, a revision loom
            // serves), so that no client can grow the label sets.
            let method = method_label(&self.method);
            let version = version_label(&version);
            let mut labels = vec![
                ("mcp_method_name", method.to_string()),
                ("network_transport", self.transport.name().to_string()),
                ("mcp_protocol_version", version.to_string()),
            ];
            if self.method == "tools/call"
                && notes.server.is_some()
                && let Some(tool) = &self.target
            {
                labels.push(("gen_ai_tool_name", tool.clone()));
            }
            if let Some(error) = &error_type {
                labels.push(("error_type", error_label(error).to_string()));
            }
            metrics::request(method, outcome.name(), elapsed.as_secs_f64(), labels);
            if self.method == "tools/call" {
                metrics::tool_call(
                    notes.server.as_deref().unwrap_or("unknown"),
                    notes.tool.as_deref().unwrap_or("unknown"),
                    outcome.name(),
                    notes.decision.unwrap_or("none"),
                );
            }
        }
        if audit::on() {
            // The tool of a `tools/call` (the server's own name when a server answers it).
            let tool = match self.method.as_str() {
                "tools/call" => notes.tool.as_deref().or(self.target.as_deref()),
                _ => None,
            };
            audit::write(&audit::Line {
                time: &self.time,
                subject: &self.subject,
                era: &version,
                method: &self.method,
                server: notes.server.as_deref(),
                tool,
                decision: notes.decision,
                bytes_in: notes.bytes_in,
                bytes_out: bytes_out.or(notes.bytes_out),
                duration_ms: (elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
                outcome: outcome.name(),
                trace_id: self.span.trace_id(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_protocol_s_methods_become_labels() {
        for method in [
            "initialize",
            "ping",
            "tools/call",
            "tasks/result",
            "server/discover",
        ] {
            assert_eq!(method_label(method), method);
        }
        for method in ["x/y", "tools/call\n", "tools/", "tools/aa", "ToolsCall"] {
            assert_eq!(method_label(method), "other", "{method:?}");
        }
    }

    #[test]
    fn only_known_revisions_and_codes_become_labels() {
        assert_eq!(version_label("2025-11-25"), "2025-11-25");
        assert_eq!(version_label("2026-07-28"), "2026-07-28");
        assert_eq!(version_label("2031-01-01"), "other");
        assert_eq!(error_label("-32602"), "-32602");
        assert_eq!(error_label("tool_error"), "tool_error");
        assert_eq!(error_label("-1"), "other");
        assert_eq!(error_label("12345"), "other");
    }

    #[test]
    fn long_names_are_cut() {
        let long = "é".repeat(1000);
        let cut = capped(&long);
        assert_eq!(cut.chars().count(), MAX_NAME_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(capped("short"), "short");
    }
}
