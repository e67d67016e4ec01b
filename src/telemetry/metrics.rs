//! The metrics `/metrics` serves (SPEC §24.2), kept with the Prometheus project's own client.
//!
//! Counters and the duration histogram are updated as requests finish; what loom holds (the
//! datasets, the engine's memory, which servers are up) is read from the registered
//! [`Source`]s when a scrape comes, so nothing is counted twice and nothing goes stale.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, Weak};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;

/// The buckets the MCP semantic conventions advise for `mcp.server.operation.duration`.
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

/// Something whose state a scrape reads: a session's datasets, the hub's servers and engine.
pub trait Source: Send + Sync {
    fn sample(&self, into: &mut Sample);
}

/// What the sources say at one scrape.
#[derive(Debug, Default)]
pub struct Sample {
    pub datasets: u64,
    pub bytes_held: u64,
    pub engine_memory_bytes: u64,
    /// Each server: its name and whether it answers now.
    pub servers: Vec<(String, bool)>,
}

struct Metrics {
    registry: Registry,
    tool_calls: Family<Labels, Counter>,
    requests: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
    client_duration: Family<Labels, Histogram, fn() -> Histogram>,
    bytes_received: Family<Labels, Counter>,
    chars_answered: Family<Labels, Counter>,
    context_saved: Counter,
    datasets: Gauge,
    bytes_held: Gauge,
    engine_memory: Gauge,
    queries_refused: Family<Labels, Counter>,
    downstream_up: Family<Labels, Gauge>,
    restarts: Family<Labels, Counter>,
    spans_dropped: Counter,
    /// Spans dropped as last reported (the counter takes the difference).
    spans_dropped_seen: AtomicU64,
    audit_dropped: Counter,
    audit_dropped_seen: AtomicU64,
    sources: Mutex<Vec<Weak<dyn Source>>>,
}

static ON: AtomicBool = AtomicBool::new(false);
static METRICS: OnceLock<Metrics> = OnceLock::new();

/// Whether metrics are kept (a `--metrics` address was given).
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn metrics() -> Option<&'static Metrics> {
    if !on() {
        return None;
    }
    METRICS.get()
}

/// Start keeping metrics.
pub fn start() {
    METRICS.get_or_init(|| {
        let mut registry = Registry::default();
        let tool_calls = Family::<Labels, Counter>::default();
        registry.register(
            "loom_tool_calls",
            "Tool calls answered, by the exposed tool's server, the server's own tool name, outcome (ok, tool_error, error) and what loom did with the result (passthrough, envelope, reduced, summary, kept)",
            tool_calls.clone(),
        );
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "loom_requests",
            "JSON-RPC requests handled, by method and outcome",
            requests.clone(),
        );
        let duration =
            Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(duration_histogram);
        registry.register_with_unit(
            "mcp_server_operation_duration",
            "Duration of MCP requests as loom served them (the MCP semantic conventions' mcp.server.operation.duration)",
            Unit::Seconds,
            duration.clone(),
        );
        let client_duration =
            Family::<Labels, Histogram, fn() -> Histogram>::new_with_constructor(duration_histogram);
        registry.register_with_unit(
            "mcp_client_operation_duration",
            "Duration of the requests loom sent servers, to their answer (the MCP semantic conventions' mcp.client.operation.duration)",
            Unit::Seconds,
            client_duration.clone(),
        );
        let bytes_received = Family::<Labels, Counter>::default();
        registry.register(
            "loom_bytes_received",
            "Bytes of tool result JSON received from servers, by server and tool",
            bytes_received.clone(),
        );
        let chars_answered = Family::<Labels, Counter>::default();
        registry.register(
            "loom_chars_answered",
            "Characters of tool result JSON answered to clients, by server and tool",
            chars_answered.clone(),
        );
        let context_saved = Counter::default();
        registry.register(
            "loom_context_saved_chars",
            "Characters of tool results the client did not have to read (received minus answered)",
            context_saved.clone(),
        );
        let datasets = Gauge::default();
        registry.register("loom_datasets_held", "Datasets held by every session", datasets.clone());
        let bytes_held = Gauge::default();
        registry.register(
            "loom_bytes_held",
            "Bytes of the datasets held by every session",
            bytes_held.clone(),
        );
        let engine_memory = Gauge::default();
        registry.register(
            "loom_engine_memory_bytes",
            "Bytes the query engine holds reserved now",
            engine_memory.clone(),
        );
        let queries_refused = Family::<Labels, Counter>::default();
        registry.register(
            "loom_queries_refused",
            "Queries refused or stopped, by reason (refused: not a read-only query of held data; timeout; too_large; memory; sql: an error in the query)",
            queries_refused.clone(),
        );
        let downstream_up = Family::<Labels, Gauge>::default();
        registry.register(
            "loom_downstream_up",
            "1 while a server answers, 0 otherwise",
            downstream_up.clone(),
        );
        let restarts = Family::<Labels, Counter>::default();
        registry.register(
            "loom_downstream_restarts",
            "Times a server was started again after it failed",
            restarts.clone(),
        );
        let audit_dropped = Counter::default();
        registry.register(
            "loom_audit_lines_dropped",
            "Audit lines lost: the writer was behind by more than 4096 lines",
            audit_dropped.clone(),
        );
        let spans_dropped = Counter::default();
        registry.register(
            "loom_otlp_spans_dropped",
            "Spans lost: the export queue was full or the collector could not be reached",
            spans_dropped.clone(),
        );
        Metrics {
            registry,
            tool_calls,
            requests,
            duration,
            bytes_received,
            chars_answered,
            context_saved,
            datasets,
            bytes_held,
            engine_memory,
            queries_refused,
            downstream_up,
            restarts,
            spans_dropped,
            spans_dropped_seen: AtomicU64::new(0),
            audit_dropped,
            audit_dropped_seen: AtomicU64::new(0),
            client_duration,
            sources: Mutex::new(Vec::new()),
        }
    });
    ON.store(true, Ordering::Relaxed);
}

/// Read `source` at every scrape while it lives.
pub fn watch(source: Weak<dyn Source>) {
    if let Some(metrics) = metrics() {
        let mut sources = metrics
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sources.retain(|s| s.strong_count() > 0);
        sources.push(source);
    }
}

/// One finished request.
pub(super) fn request(method: &str, outcome: &str, duration_secs: f64, duration: Labels) {
    if let Some(metrics) = metrics() {
        metrics
            .requests
            .get_or_create(&vec![
                ("method", method.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
        metrics
            .duration
            .get_or_create(&duration)
            .observe(duration_secs);
    }
}

/// One request to a server answered (or not).
pub(super) fn downstream(duration_secs: f64, labels: Labels) {
    if let Some(metrics) = metrics() {
        metrics
            .client_duration
            .get_or_create(&labels)
            .observe(duration_secs);
    }
}

/// One finished tool call.
pub(super) fn tool_call(server: &str, tool: &str, outcome: &str, decision: &str) {
    if let Some(metrics) = metrics() {
        metrics
            .tool_calls
            .get_or_create(&vec![
                ("server", server.to_string()),
                ("tool", tool.to_string()),
                ("outcome", outcome.to_string()),
                ("decision", decision.to_string()),
            ])
            .inc();
    }
}

/// A server's tool result: its size received, the size answered in its place.
pub fn result_sizes(server: &str, tool: &str, bytes_in: u64, chars_in: u64, chars_out: u64) {
    if let Some(metrics) = metrics() {
        let labels = vec![("server", server.to_string()), ("tool", tool.to_string())];
        metrics
            .bytes_received
            .get_or_create(&labels)
            .inc_by(bytes_in);
        metrics
            .chars_answered
            .get_or_create(&labels)
            .inc_by(chars_out);
        metrics
            .context_saved
            .inc_by(chars_in.saturating_sub(chars_out));
    }
}

/// A query refused or stopped, and why.
pub fn query_refused(reason: &'static str) {
    if let Some(metrics) = metrics() {
        metrics
            .queries_refused
            .get_or_create(&vec![("reason", reason.to_string())])
            .inc();
    }
}

/// A server is being started again after a failure.
pub fn restarted(server: &str) {
    if let Some(metrics) = metrics() {
        metrics
            .restarts
            .get_or_create(&vec![("server", server.to_string())])
            .inc();
    }
}

/// Every metric in the Prometheus text format (version 0.0.4), read now.
pub fn scrape() -> Option<String> {
    let metrics = metrics()?;
    let mut sample = Sample::default();
    {
        let mut sources = metrics
            .sources
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        sources.retain(|s| s.strong_count() > 0);
        for source in sources.iter().filter_map(Weak::upgrade) {
            source.sample(&mut sample);
        }
    }
    let as_gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    metrics.datasets.set(as_gauge(sample.datasets));
    metrics.bytes_held.set(as_gauge(sample.bytes_held));
    metrics
        .engine_memory
        .set(as_gauge(sample.engine_memory_bytes));
    for (server, up) in &sample.servers {
        metrics
            .downstream_up
            .get_or_create(&vec![("server", server.clone())])
            .set(i64::from(*up));
    }
    let dropped = super::trace::dropped();
    let seen = metrics.spans_dropped_seen.swap(dropped, Ordering::Relaxed);
    metrics.spans_dropped.inc_by(dropped.saturating_sub(seen));
    let dropped = super::audit::dropped();
    let seen = metrics.audit_dropped_seen.swap(dropped, Ordering::Relaxed);
    metrics.audit_dropped.inc_by(dropped.saturating_sub(seen));
    let mut text = String::new();
    prometheus_client::encoding::prometheus_text::encode(&mut text, &metrics.registry).ok()?;
    Some(text)
}

/// The `Content-Type` of [`scrape`]'s text.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;
