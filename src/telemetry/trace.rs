//! Traces over OTLP (SPEC §24.1), made with the OpenTelemetry SDK's own API.
//!
//! Request spans are the SDK's spans, held by the request they describe
//! ([`super::Observed`]) and ended when it ends: no `tracing` span, no registry and nothing
//! done at each poll of a request's future, so a traced hop costs the spans and no more. The one
//! bridge from `tracing` is [`layer`]: loom's warnings logged while a request is handled become
//! events of its SERVER span. Spans are only made while tracing is on ([`on`]), so with tracing
//! off a request costs one relaxed load.
//!
//! The exporter runs on the batch processor's own thread; the queue is bounded
//! ([`QUEUE`] spans between a span's end and its export), and whatever does not fit, or fails
//! to reach the collector, is counted ([`dropped`]) and never waits for.

use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, Span, SpanData,
    SpanExporter, SpanProcessor,
};

/// Spans between their end and their export; past it a span is dropped and counted.
pub const QUEUE: usize = 2048;

static ON: AtomicBool = AtomicBool::new(false);
static IN_QUEUE: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static TRACER: OnceLock<SdkTracer> = OnceLock::new();

/// Whether spans are being made and exported.
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Spans lost so far: the queue was full, or the collector refused or could not be reached.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

/// The `service.name` spans carry: `OTEL_SERVICE_NAME`, else `loom`.
fn service_name() -> String {
    std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "loom".to_string())
}

/// A span of loom's, held by what it describes and ended by [`TraceSpan::end`] or when dropped;
/// [`TraceSpan::none`] while tracing is off (every method then does nothing).
pub struct TraceSpan(Option<Context>);

impl TraceSpan {
    /// No span.
    pub fn none() -> Self {
        Self(None)
    }

    pub fn is_none(&self) -> bool {
        self.0.is_none()
    }

    /// Start a span `name` of `kind` under `parent` (a context without a span starts a trace)
    /// with `attributes`; none while tracing is off.
    pub(super) fn start(
        name: String,
        kind: SpanKind,
        parent: &Context,
        attributes: Vec<KeyValue>,
    ) -> Self {
        let Some(tracer) = TRACER.get().filter(|_| on()) else {
            return Self::none();
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, parent);
        Self(Some(parent.with_span(span)))
    }

    /// A span `name` of `kind` under this one (none when this is none).
    pub(super) fn child(
        &self,
        name: String,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> TraceSpan {
        match &self.0 {
            Some(parent) => Self::start(name, kind, parent, attributes),
            None => Self::none(),
        }
    }

    pub(super) fn set(&self, attribute: KeyValue) {
        if let Some(context) = &self.0 {
            context.span().set_attribute(attribute);
        }
    }

    /// The span failed with `error` (its `error.type` and status).
    pub(super) fn fail(&self, error: &str) {
        if let Some(context) = &self.0 {
            let span = context.span();
            span.set_attribute(KeyValue::new("error.type", error.to_string()));
            span.set_status(opentelemetry::trace::Status::error(error.to_string()));
        }
    }

    /// An event on the span (a warning logged while it was open).
    pub(super) fn event(&self, name: String, attributes: Vec<KeyValue>) {
        if let Some(context) = &self.0 {
            context.span().add_event(name, attributes);
        }
    }

    /// End the span now (later calls, and the drop, do nothing).
    pub(super) fn end(&self) {
        if let Some(context) = &self.0 {
            context.span().end();
        }
    }

    /// The `traceparent` and `tracestate` that make this span the parent of what a server
    /// does.
    pub(super) fn traceparent(&self) -> Option<(String, Option<String>)> {
        // The W3C form the SDK's propagator writes, without its map and lookups (every
        // request to a server carries one).
        let context = self.0.as_ref()?;
        let span = context.span();
        let span_context = span.span_context();
        if !span_context.is_valid() {
            return None;
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            span_context.trace_id(),
            span_context.span_id(),
            span_context.trace_flags().to_u8()
        );
        let tracestate = span_context.trace_state().header();
        Some((traceparent, (!tracestate.is_empty()).then_some(tracestate)))
    }

    /// The trace id, as hex, when the span has one.
    pub(super) fn trace_id(&self) -> Option<String> {
        let context = self.0.as_ref()?;
        let span_context = context.span().span_context().clone();
        span_context
            .is_valid()
            .then(|| span_context.trace_id().to_string())
    }
}

impl Drop for TraceSpan {
    fn drop(&mut self) {
        self.end();
    }
}

/// The layer that makes loom's warnings logged while a request is handled events of its
/// SERVER span (the only `tracing` loom's traces take).
pub fn layer<S>() -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    // Only warnings and errors: a layer that wanted every event would turn on every
    // `debug!` callsite of the process.
    WarningEvents.with_filter(tracing_subscriber::filter::LevelFilter::WARN)
}

struct WarningEvents;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for WarningEvents {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if !on() {
            return;
        }
        let mut fields = EventFields::default();
        event.record(&mut fields);
        let mut attributes = fields.attributes;
        attributes.push(KeyValue::new("level", event.metadata().level().as_str()));
        super::request::event(fields.message, attributes);
    }
}

/// An event's message and its other fields as attributes.
#[derive(Default)]
struct EventFields {
    message: String,
    attributes: Vec<KeyValue>,
}

impl tracing::field::Visit for EventFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_string(),
            name => self.attributes.push(KeyValue::new(name, value.to_string())),
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            "message" => self.message = format!("{value:?}"),
            name => self
                .attributes
                .push(KeyValue::new(name, format!("{value:?}"))),
        }
    }
}

/// Where traces go, from the environment first, then `telemetry.otlpEndpoint`; `None` when
/// tracing is off (no endpoint, or `OTEL_SDK_DISABLED=true`, or `OTEL_TRACES_EXPORTER=none`).
pub fn wanted(config_endpoint: Option<&str>) -> Option<String> {
    let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
        || set("OTEL_TRACES_EXPORTER").is_some_and(|v| v.trim().eq_ignore_ascii_case("none"))
    {
        return None;
    }
    set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .or_else(|| config_endpoint.map(str::to_string))
}

/// Start exporting to `endpoint` (what [`wanted`] gave). Must run inside the tokio runtime:
/// the gRPC exporter's channel lives on it.
pub fn start(endpoint: &str, from_config: bool) -> Result<(), String> {
    use opentelemetry_otlp::{Protocol, WithExportConfig};
    if PROVIDER.get().is_some() {
        return Err("traces are already exported".into());
    }
    // The exporter's HTTP client is reqwest's (rustls, without a provider of its own).
    crate::common::tls::install_crypto_provider();
    let (variable, protocol) = [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ]
    .into_iter()
    .find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (name, v))
    })
    .unwrap_or(("", String::new()));
    let grpc = match protocol.trim() {
        "" | "http/protobuf" => false,
        "grpc" => true,
        other => {
            return Err(format!(
                "{variable} is {other:?}; loom speaks \"http/protobuf\" (the default) and \
                 \"grpc\""
            ));
        }
    };
    // The exporter reads its endpoint, headers and timeout from the OTEL_* variables itself;
    // the configuration's endpoint is given to it only when no variable names one. Over
    // http/protobuf a base endpoint gets `/v1/traces` (the exporter adds it to the variable
    // OTEL_EXPORTER_OTLP_ENDPOINT, not to an endpoint given in code).
    let exporter = if grpc {
        let builder = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_protocol(Protocol::Grpc);
        match from_config {
            true => builder.with_endpoint(endpoint).build(),
            false => builder.build(),
        }
    } else {
        let builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        match from_config {
            true => builder
                .with_endpoint(format!("{}/v1/traces", endpoint.trim_end_matches('/')))
                .build(),
            false => builder.build(),
        }
    }
    .map_err(|error| format!("cannot export traces to {endpoint}: {error}"))?;
    let config = BatchConfigBuilder::default()
        .with_max_queue_size(QUEUE)
        .with_scheduled_delay(Duration::from_millis(500))
        .build();
    // The sampler comes from OTEL_TRACES_SAMPLER / _ARG (the SDK reads them); the default is
    // parent-based always-on, so a client's unsampled trace stays unsampled through loom.
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Bounded(BatchSpanProcessor::new(Counted(exporter), config)))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name())
                .build(),
        )
        .build();
    let tracer = provider.tracer("loom");
    PROVIDER
        .set(provider)
        .map_err(|_| "traces are already exported".to_string())?;
    let _ = TRACER.set(tracer);
    ON.store(true, Ordering::Relaxed);
    Ok(())
}

/// Export what is queued and stop, waiting at most `limit` (a collector that does not answer
/// must not hold loom's exit).
pub fn shutdown(limit: Duration) {
    if !on() {
        return;
    }
    ON.store(false, Ordering::Relaxed);
    let Some(provider) = PROVIDER.get().cloned() else {
        return;
    };
    let (done, finished) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("loom-otlp-flush".into())
        .spawn(move || {
            let _ = provider.shutdown_with_timeout(limit);
            let _ = done.send(());
        });
    if spawned.is_ok() {
        let _ = finished.recv_timeout(limit);
    }
}

/// The parent a request names in its `_meta` (`traceparent`, `tracestate`); an absent or
/// malformed `traceparent` gives an empty context (loom's span starts a trace).
pub fn parent_from(traceparent: Option<&str>, tracestate: Option<&str>) -> Context {
    if traceparent.is_none() {
        return Context::new();
    }
    let mut carrier = HashMap::new();
    if let Some(value) = traceparent {
        carrier.insert("traceparent".to_string(), value.to_string());
    }
    if let Some(value) = tracestate {
        carrier.insert("tracestate".to_string(), value.to_string());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The batch processor, bounded: a span that finds [`QUEUE`] spans waiting is dropped and
/// counted.
#[derive(Debug)]
struct Bounded(BatchSpanProcessor);

impl SpanProcessor for Bounded {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        self.0.on_start(span, cx);
    }

    fn on_end(&self, span: SpanData) {
        if IN_QUEUE.fetch_add(1, Ordering::Relaxed) >= QUEUE {
            IN_QUEUE.fetch_sub(1, Ordering::Relaxed);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        self.0.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}

/// The exporter, counting what leaves the queue and what never reached the collector.
#[derive(Debug)]
struct Counted<E>(E);

impl<E: SpanExporter> SpanExporter for Counted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let spans = batch.len();
        let result = self.0.export(batch).await;
        IN_QUEUE.fetch_sub(
            spans.min(IN_QUEUE.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        if result.is_err() {
            DROPPED.fetch_add(spans as u64, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.0.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.0.set_resource(resource);
    }
}
