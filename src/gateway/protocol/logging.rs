//! Log messages for clients on protocol 2026-07-28, which ask for them per request
//! (`io.modelcontextprotocol/logLevel` in `_meta`): a server's `notifications/message` reaches
//! such a client only while a request of it to that server that asked for the message's level
//! (or a more verbose one) is in flight (SPEC §5.4).

#![allow(deprecated)] // logging is SEP-2577-deprecated but clients and servers still use it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

/// Requests in flight that asked for log messages of a server at a level (2026-07-28).
#[derive(Default)]
pub(crate) struct LogInterest {
    next: std::sync::atomic::AtomicU64,
    wanted: Mutex<Vec<(u64, usize, u8)>>,
}

/// Keeps one request's interest registered.
pub(crate) struct LogInterestGuard {
    interest: Arc<LogInterest>,
    number: u64,
}

impl Drop for LogInterestGuard {
    fn drop(&mut self) {
        self.interest
            .wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(n, _, _)| *n != self.number);
    }
}

/// A log level's rank: debug (0) is the most verbose.
pub(crate) fn log_rank(level: &rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel::*;
    match level {
        Debug => 0,
        Info => 1,
        Notice => 2,
        Warning => 3,
        Error => 4,
        Critical => 5,
        Alert => 6,
        Emergency => 7,
    }
}

impl LogInterest {
    pub(crate) fn register(
        self: &Arc<Self>,
        server: usize,
        level: &rmcp::model::LoggingLevel,
    ) -> LogInterestGuard {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        self.wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((number, server, log_rank(level)));
        LogInterestGuard {
            interest: self.clone(),
            number,
        }
    }

    pub(in crate::gateway) fn wants(
        &self,
        server: usize,
        level: &rmcp::model::LoggingLevel,
    ) -> bool {
        let rank = log_rank(level);
        self.wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(_, s, wanted)| *s == server && *wanted <= rank)
    }
}
