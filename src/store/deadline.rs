//! A query's deadline, carried in its session config so that every step of the work can see it
//! — the step checks around every function call, the value-building functions and every
//! projection's output (SPEC §10.2).
//!
//! The timeout answers the client on time from another runtime and aborts the query's task, but
//! an abort only lands when the task yields, and a plan over in-memory data can run for seconds
//! without yielding once (a cross join feeding an aggregate one row at a time kept an engine
//! thread busy 4.6 s past a 3 s timeout). With the deadline in the config, the first check after
//! it fails the query from inside, within one batch.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use datafusion::common::config::{ConfigExtension, ConfigOptions};
use datafusion::common::{DataFusionError, Result};

datafusion::common::extensions_options! {
    /// When the running query must stop (milliseconds since the Unix epoch; 0: never).
    pub struct QueryDeadline {
        pub unix_ms: u64, default = 0
    }
}

impl ConfigExtension for QueryDeadline {
    const PREFIX: &'static str = "loom_deadline";
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl QueryDeadline {
    /// The deadline `timeout` from now.
    pub(crate) fn after(timeout: Duration) -> Self {
        Self {
            unix_ms: now_ms()
                .saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// The error text of work stopped by its deadline (the client was already told of the timeout).
pub(crate) const STOPPED: &str = "the query passed queryTimeoutMs and was stopped";

/// Fail once the deadline in `options` (if any) has passed.
pub(crate) fn check(options: &ConfigOptions) -> Result<()> {
    match options.extensions.get::<QueryDeadline>() {
        Some(deadline) if deadline.unix_ms != 0 && now_ms() > deadline.unix_ms => {
            Err(DataFusionError::ResourcesExhausted(STOPPED.into()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_passed_deadline_fails_and_none_never_does() {
        let mut options = ConfigOptions::new();
        assert!(check(&options).is_ok());
        options
            .extensions
            .insert(QueryDeadline::after(Duration::from_secs(60)));
        assert!(check(&options).is_ok());
        options.extensions.insert(QueryDeadline { unix_ms: 1 });
        let error = check(&options).expect_err("passed");
        assert!(error.to_string().contains(STOPPED), "{error}");
    }
}
