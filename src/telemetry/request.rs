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

use opentelemetry::trace::Status;
use tracing::Instrument as _;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use super::trace::{self, TARGET};
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
    span: tracing::Span,
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
        tracing::Span::none()
    };
    Some(Arc::new(Observed {
        started: Instant::now(),
        time: crate::common::text::now_rfc3339(),
        method: capped(arrival.method),
        target: arrival.target.map(capped),
        version: capped(arrival.version),
        transport: arrival.transport,
        subject: audit::subject_of(arrival.credential),
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
fn method_label(method: &str) -> &str {
    const PREFIXES: [&str; 10] = [
        "server/",
        "tools/",
        "resources/",
        "prompts/",
        "completion/",
        "logging/",
        "tasks/",
        "subscriptions/",
        "roots/",
        "notifications/",
    ];
    let known = matches!(method, "initialize" | "ping")
        || (method.len() <= 40
            && PREFIXES
                .iter()
                .any(|p| method.len() > p.len() && method.starts_with(p))
            && method
                .bytes()
                .all(|b| b.is_ascii_alphabetic() || b == b'/' || b == b'_'));
    if known { method } else { "other" }
}

fn server_span(arrival: &Arrival<'_>) -> tracing::Span {
    let name = match arrival.target {
        Some(target) => format!("{} {}", capped(arrival.method), capped(target)),
        None => capped(arrival.method),
    };
    let span =
        tracing::info_span!(target: TARGET, "request", otel.name = %name, otel.kind = "server");
    // A malformed traceparent gives an empty parent: loom's span starts a trace of its own.
    let _ = span.set_parent(trace::parent_from(arrival.traceparent, arrival.tracestate));
    span.set_attribute("mcp.method.name", capped(arrival.method));
    span.set_attribute("mcp.protocol.version", capped(arrival.version));
    span.set_attribute("network.transport", arrival.transport.name());
    if let Some(id) = &arrival.request_id {
        span.set_attribute("jsonrpc.request.id", id.clone());
    }
    if let Some(session) = arrival.session_id {
        span.set_attribute("mcp.session.id", session.to_string());
    }
    match (arrival.method, arrival.target) {
        ("tools/call", Some(tool)) => {
            span.set_attribute("gen_ai.tool.name", capped(tool));
            span.set_attribute("gen_ai.operation.name", "execute_tool");
        }
        ("prompts/get", Some(prompt)) => {
            span.set_attribute("gen_ai.prompt.name", capped(prompt));
        }
        _ => {}
    }
    span
}

/// Run `future` as the handling of `observed` (as is, when telemetry is off).
pub async fn within<F: Future>(observed: Option<Arc<Observed>>, future: F) -> F::Output {
    match observed {
        None => future.await,
        Some(observed) => {
            let span = observed.span.clone();
            CURRENT.scope(observed, future.instrument(span)).await
        }
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
pub fn child(name: &'static str) -> tracing::Span {
    if !trace::on() {
        return tracing::Span::none();
    }
    CURRENT
        .try_with(|observed| {
            tracing::info_span!(target: TARGET, parent: &observed.span, "work", otel.name = name, otel.kind = "internal")
        })
        .unwrap_or_else(|_| tracing::Span::none())
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
pub fn decided(decided: &Decided<'_>, span: &tracing::Span) {
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
    });
    if span.is_none() {
        return;
    }
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    span.set_attribute("loom.server", decided.server.to_string());
    span.set_attribute("loom.decision", decided.decision);
    span.set_attribute("loom.bytes_in", as_i64(decided.bytes_in));
    span.set_attribute("loom.chars_out", as_i64(decided.chars_out));
    span.set_attribute(
        "loom.tokens_saved",
        as_i64(decided.tokens_in) - as_i64(decided.tokens_out),
    );
    if let Some(rows) = decided.rows {
        span.set_attribute("loom.rows", as_i64(rows));
    }
}

/// A query loom's engine answered: rows and bytes answered (on the span from [`child`]).
pub fn queried(span: &tracing::Span, rows: u64, bytes: u64) {
    if span.is_none() {
        return;
    }
    let as_i64 = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    span.set_attribute("loom.rows", as_i64(rows));
    span.set_attribute("loom.bytes_out", as_i64(bytes));
}

/// The request loom sends a server for the request being handled.
pub struct Downstream {
    span: tracing::Span,
}

/// Open the CLIENT span of a request to `server` (when tracing is on and a request is being
/// handled). `tool` is the server's own tool name; `address` a remote server's host and port.
pub fn downstream(
    server: &str,
    method: &str,
    tool: Option<&str>,
    address: Option<(&str, u16)>,
) -> Option<Downstream> {
    if !trace::on() {
        return None;
    }
    CURRENT
        .try_with(|observed| observed.downstream(server, method, tool, address))
        .ok()
        .flatten()
}

impl Observed {
    /// [`downstream`] for this request.
    pub fn downstream(
        &self,
        server: &str,
        method: &str,
        tool: Option<&str>,
        address: Option<(&str, u16)>,
    ) -> Option<Downstream> {
        if !trace::on() || self.span.is_none() {
            return None;
        }
        {
            let name = match tool {
                Some(tool) => format!("{method} {tool}"),
                None => method.to_string(),
            };
            let span = tracing::info_span!(target: TARGET, parent: &self.span, "downstream", otel.name = %name, otel.kind = "client");
            span.set_attribute("mcp.method.name", method.to_string());
            span.set_attribute("loom.server", server.to_string());
            if let Some(tool) = tool {
                span.set_attribute("gen_ai.tool.name", tool.to_string());
                span.set_attribute("gen_ai.operation.name", "execute_tool");
            }
            match address {
                Some((host, port)) => {
                    span.set_attribute("server.address", host.to_string());
                    span.set_attribute("server.port", i64::from(port));
                    span.set_attribute("network.transport", "tcp");
                }
                None => span.set_attribute("network.transport", "pipe"),
            }
            Some(Downstream { span })
        }
    }
}

impl Downstream {
    /// `traceparent` (and `tracestate`) naming this span as the parent of the server's work.
    pub fn traceparent(&self) -> Option<(String, Option<String>)> {
        trace::context_of(&self.span)
    }

    /// The server answered (or did not): the span ends.
    pub fn answered(self, outcome: &Outcome) {
        if let Some(error) = outcome.error_type() {
            self.span.set_attribute("error.type", error.clone());
            self.span.set_status(Status::error(error));
        }
    }
}

impl Observed {
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
        if !self.span.is_none() {
            if let Some(error) = &error_type {
                self.span.set_attribute("error.type", error.clone());
                self.span.set_status(Status::error(error.clone()));
            }
            if let Some(decision) = notes.decision {
                self.span.set_attribute("loom.decision", decision);
            }
            if let Some(server) = &notes.server {
                self.span.set_attribute("loom.server", server.clone());
            }
        }
        if metrics::on() {
            // Labels only of what loom knows (a listed tool, a protocol method, a revision loom
            // serves), so that no client can grow the label sets.
            let method = method_label(&self.method);
            let version = match self.version.as_str() {
                v if v.len() == 10 && v.bytes().all(|b| b.is_ascii_digit() || b == b'-') => v,
                _ => "other",
            };
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
                labels.push(("error_type", error.clone()));
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
            let mut line = serde_json::Map::new();
            line.insert("time".into(), self.time.clone().into());
            line.insert("subject".into(), self.subject.clone().into());
            line.insert("era".into(), self.version.clone().into());
            line.insert("method".into(), self.method.clone().into());
            let tool = notes.tool.clone().or_else(|| self.target.clone());
            line.insert("server".into(), notes.server.clone().into());
            line.insert("tool".into(), tool.into());
            line.insert("decision".into(), notes.decision.into());
            line.insert("bytesIn".into(), notes.bytes_in.into());
            line.insert("bytesOut".into(), bytes_out.or(notes.bytes_out).into());
            line.insert(
                "durationMs".into(),
                serde_json::json!((elapsed.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0),
            );
            line.insert("outcome".into(), outcome.name().into());
            if let Some(trace_id) = trace::trace_id_of(&self.span) {
                line.insert("traceId".into(), trace_id.into());
            }
            audit::write(&serde_json::Value::Object(line));
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
        let long = "tools/a".repeat(20);
        for method in ["x/y", "tools/call\n", "tools/", "ToolsCall", long.as_str()] {
            assert_eq!(method_label(method), "other", "{method:?}");
        }
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
