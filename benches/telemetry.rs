//! What one request's telemetry costs loom in itself (issue 39), without the processes of the
//! hop around it (`benches/passthrough.rs` times the hop): the SERVER span of a `tools/call`,
//! the CLIENT span of its request to a server with the `traceparent` handed on, and the end of
//! both, exported in batches to a collector that answers at once. `request` is what loom does;
//! `sdk_only` makes the same two spans with the OpenTelemetry SDK's own API (no `tracing`
//! registry in between), to tell how much of the cost is the bridge.
//!
//! `cargo bench --bench telemetry`

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::KeyValue;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _};
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing_subscriber::layer::SubscriberExt as _;

use loom::telemetry::{self, Arrival, Outcome, Transport};

#[path = "common/http_sink.rs"]
mod http_sink;

fn bench_request(c: &mut Criterion) {
    let sink = format!(
        "http://{}",
        http_sink::start("application/x-protobuf", String::new())
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _entered = runtime.enter();
    let subscriber = tracing_subscriber::registry().with(telemetry::trace::layer());
    tracing::subscriber::set_global_default(subscriber).expect("subscriber");
    let config = loom::config::parse_str(
        &serde_json::json!({"servers": [], "telemetry": {"otlpEndpoint": sink}}).to_string(),
        "bench",
        &|_| None,
    )
    .expect("config");
    telemetry::start(&config, false).expect("telemetry");

    let mut group = c.benchmark_group("telemetry");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("request", |b| {
        b.iter(|| {
            let observed = telemetry::begin(Arrival {
                method: "tools/call",
                request_id: Some("7".into()),
                version: "2025-11-25",
                transport: Transport::Pipe,
                session_id: None,
                credential: None,
                target: Some("fx_echo"),
                resource: None,
                traceparent: None,
                tracestate: None,
            });
            runtime.block_on(telemetry::within(observed.clone(), async {
                telemetry::note_target("fx", "echo");
                if let Some(downstream) = telemetry::downstream(&telemetry::Outgoing {
                    server: "fx",
                    method: "tools/call",
                    name: Some("echo"),
                    address: None,
                    version: Some("2025-11-25"),
                    request_id: Some("\"loom:7\""),
                }) {
                    std::hint::black_box(downstream.traceparent());
                    downstream.answered(&Outcome::Ok);
                }
            }));
            if let Some(observed) = observed {
                observed.finish(Outcome::Ok, Some(120));
            }
        })
    });

    // The same two spans straight through the SDK, exported the same way.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{sink}/v1/traces"))
        .build()
        .expect("exporter");
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let tracer = provider.tracer("bench");
    let propagator = TraceContextPropagator::new();
    group.bench_function("sdk_only", |b| {
        b.iter(|| {
            let server = tracer
                .span_builder("tools/call fx_echo")
                .with_kind(SpanKind::Server)
                .with_attributes([
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("mcp.protocol.version", "2025-11-25"),
                    KeyValue::new("network.transport", "pipe"),
                    KeyValue::new("jsonrpc.request.id", "7"),
                    KeyValue::new("gen_ai.tool.name", "fx_echo"),
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                ])
                .start_with_context(&tracer, &opentelemetry::Context::new());
            let server_cx = opentelemetry::Context::new().with_span(server);
            let client = tracer
                .span_builder("tools/call echo")
                .with_kind(SpanKind::Client)
                .with_attributes([
                    KeyValue::new("mcp.method.name", "tools/call"),
                    KeyValue::new("loom.server", "fx"),
                    KeyValue::new("gen_ai.tool.name", "echo"),
                    KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    KeyValue::new("network.transport", "pipe"),
                ])
                .start_with_context(&tracer, &server_cx);
            let client_cx = server_cx.with_span(client);
            let mut carrier = std::collections::HashMap::new();
            propagator.inject_context(&client_cx, &mut carrier);
            std::hint::black_box(&carrier);
            client_cx.span().end();
            let server_span = server_cx.span();
            server_span.set_attribute(KeyValue::new("loom.server", "fx"));
            server_span.end();
        })
    });
    group.finish();
    let _ = provider.shutdown();
}

criterion_group!(benches, bench_request);
criterion_main!(benches);
