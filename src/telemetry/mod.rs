//! What loom tells operators (SPEC §24): traces over OTLP, metrics for Prometheus, an audit log.
//!
//! All three are process-wide and off by default; [`start`] turns on what the configuration,
//! the `OTEL_*` variables and `--metrics` ask for. The gateway opens one [`Observed`] per request
//! ([`begin`]) and finishes it with the outcome; the rest of loom notes what it learns on the
//! request being handled.

pub mod audit;
pub mod metrics;
mod request;
pub mod trace;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use request::{
    Arrival, Decided, Downstream, Observed, Outcome, Outgoing, Transport, begin, child, current,
    decided, downstream, note_answer, note_target, observing, queried, wants_sizes, within,
};
pub use trace::TraceSpan;

use crate::config::Config;

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Whether any of traces, metrics or the audit log is on.
pub fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// What was turned on, for the start-up log.
#[derive(Debug, Default)]
pub struct Started {
    pub traces: Option<String>,
    pub audit: bool,
    pub metrics: bool,
}

/// Turn on what `config`, the environment and `metrics` (a `--metrics` address was given) ask
/// for. Runs inside the tokio runtime. Fails with a message naming the setting at fault.
pub fn start(config: &Config, metrics: bool) -> Result<Started, String> {
    let mut started = Started::default();
    if let Some(audit) = &config.audit {
        audit::start(audit)?;
        started.audit = true;
    }
    if metrics {
        metrics::start();
        started.metrics = true;
    }
    let env_endpoint = trace::wanted(None);
    if let Some(endpoint) = trace::wanted(config.telemetry.otlp_endpoint.as_deref()) {
        trace::start(&endpoint, env_endpoint.is_none())?;
        started.traces = Some(endpoint);
    }
    ACTIVE.store(
        started.audit || started.metrics || started.traces.is_some(),
        Ordering::Relaxed,
    );
    Ok(started)
}

/// Write the audit lines and export the spans still queued, within `limit` in all; called once,
/// at exit.
pub fn shutdown(limit: Duration) {
    let started = std::time::Instant::now();
    audit::flush(limit / 2);
    trace::shutdown(limit.saturating_sub(started.elapsed()));
}
