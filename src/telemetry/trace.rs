//! Spans over OTLP (SPEC §24.1): configured the OpenTelemetry way, off unless an endpoint is set.
//!
//! loom's spans are `tracing` spans of the target [`TARGET`]; tracing-opentelemetry turns them
//! into OpenTelemetry spans, and loom's own warnings logged inside one become its events. The
//! layer is installed with the log subscriber at start-up, before the configuration is read, on
//! a tracer provider whose processor is [`Deferred`]: it drops everything until [`start`] gives
//! it the exporter the environment and the configuration ask for. Spans are only made while
//! tracing is on ([`on`]), so with tracing off a request costs one relaxed load.
//!
//! The exporter runs on the batch processor's own thread; the queue is bounded
//! ([`QUEUE`] spans between a span's end and its export), and whatever does not fit, or fails
//! to reach the collector, is counted ([`dropped`]) and never waits for.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider, Span, SpanData, SpanExporter,
    SpanProcessor,
};
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The `tracing` target of loom's request spans (the only spans the OpenTelemetry layer takes).
pub const TARGET: &str = "loom_otel";

/// Spans between their end and their export; past it a span is dropped and counted.
pub const QUEUE: usize = 2048;

static ON: AtomicBool = AtomicBool::new(false);
static IN_QUEUE: AtomicUsize = AtomicUsize::new(0);
static DROPPED: AtomicU64 = AtomicU64::new(0);
static SHARED: OnceLock<Arc<Shared>> = OnceLock::new();
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

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

/// The OpenTelemetry layer for the log subscriber (made once; later calls get `None`).
pub fn layer<S>() -> Option<impl tracing_subscriber::Layer<S>>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use tracing_subscriber::Layer as _;
    let shared = Arc::new(Shared::default());
    SHARED.set(shared.clone()).ok()?;
    // The sampler comes from OTEL_TRACES_SAMPLER / _ARG (the SDK reads them); the default is
    // parent-based always-on, so a client's unsampled trace stays unsampled through loom.
    let provider = SdkTracerProvider::builder()
        .with_span_processor(Deferred(shared))
        .with_resource(
            Resource::builder()
                .with_service_name(service_name())
                .build(),
        )
        .build();
    let tracer = provider.tracer("loom");
    PROVIDER.set(provider).ok()?;
    let filter = tracing_subscriber::filter::Targets::new()
        .with_target(TARGET, tracing::Level::INFO)
        .with_default(tracing::Level::WARN);
    Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_level(false)
            .with_tracked_inactivity(false)
            // loom hands contexts on explicitly (parents, traceparent); attaching one to the
            // thread at every poll of a request would cost each hop for nothing.
            .with_context_activation(false)
            .with_filter(filter),
    )
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
    let Some(shared) = SHARED.get() else {
        return Err("the trace layer was not installed".into());
    };
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
    let mut processor = BatchSpanProcessor::new(Counted(exporter), config);
    if let Some(resource) = shared.lock_resource().as_ref() {
        processor.set_resource(resource);
    }
    shared
        .processor
        .set(processor)
        .map_err(|_| "traces are already exported".to_string())?;
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
    let mut carrier = HashMap::new();
    if let Some(value) = traceparent {
        carrier.insert("traceparent".to_string(), value.to_string());
    }
    if let Some(value) = tracestate {
        carrier.insert("tracestate".to_string(), value.to_string());
    }
    TraceContextPropagator::new().extract(&carrier)
}

/// The `traceparent` and `tracestate` that make `span` the parent of what a server does.
pub fn context_of(span: &tracing::Span) -> Option<(String, Option<String>)> {
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    let traceparent = carrier.remove("traceparent")?;
    Some((traceparent, carrier.remove("tracestate")))
}

/// The trace id of `span`, as hex, when it has one.
pub fn trace_id_of(span: &tracing::Span) -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    let context = span.context();
    let span_context = context.span().span_context().clone();
    span_context
        .is_valid()
        .then(|| span_context.trace_id().to_string())
}

#[derive(Debug, Default)]
struct Shared {
    processor: OnceLock<BatchSpanProcessor>,
    resource: Mutex<Option<Resource>>,
}

impl Shared {
    fn lock_resource(&self) -> std::sync::MutexGuard<'_, Option<Resource>> {
        self.resource.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The provider's processor: nothing until [`start`], then the bounded batch processor.
#[derive(Debug)]
struct Deferred(Arc<Shared>);

impl SpanProcessor for Deferred {
    fn on_start(&self, span: &mut Span, cx: &Context) {
        if let Some(processor) = self.0.processor.get() {
            processor.on_start(span, cx);
        }
    }

    fn on_end(&self, span: SpanData) {
        let Some(processor) = self.0.processor.get() else {
            return;
        };
        if IN_QUEUE.fetch_add(1, Ordering::Relaxed) >= QUEUE {
            IN_QUEUE.fetch_sub(1, Ordering::Relaxed);
            DROPPED.fetch_add(1, Ordering::Relaxed);
            return;
        }
        processor.on_end(span);
    }

    fn force_flush(&self) -> OTelSdkResult {
        match self.0.processor.get() {
            Some(processor) => processor.force_flush(),
            None => Ok(()),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        match self.0.processor.get() {
            Some(processor) => processor.shutdown_with_timeout(timeout),
            None => Ok(()),
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        *self.0.lock_resource() = Some(resource.clone());
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
