//! Log messages for clients on protocol 2026-07-28, which ask for them per request
//! (`io.modelcontextprotocol/logLevel` in `_meta`): a server's `notifications/message` reaches
//! such a client only while a request of it to that server that asked for the message's level
//! (or a more verbose one) is in flight (SPEC §5.4).

#![allow(deprecated)] // logging is SEP-2577-deprecated but clients and servers still use it.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long an ended request's interest is kept to judge lines read while it was in flight but
/// handed to the session after it ended (the hub's event loop runs behind the answers).
const ENDED_KEPT: Duration = Duration::from_secs(30);

/// One request's interest: its server, the level it asked for, when it began and ended.
struct Wanted {
    number: u64,
    server: usize,
    rank: u8,
    began: Instant,
    ended: Option<Instant>,
}

/// Requests in flight that asked for log messages of a server at a level (2026-07-28).
#[derive(Default)]
pub(crate) struct LogInterest {
    next: std::sync::atomic::AtomicU64,
    wanted: Mutex<Vec<Wanted>>,
}

/// Keeps one request's interest registered.
pub(crate) struct LogInterestGuard {
    interest: Arc<LogInterest>,
    number: u64,
}

impl Drop for LogInterestGuard {
    fn drop(&mut self) {
        let now = Instant::now();
        let mut wanted = self
            .interest
            .wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for entry in wanted.iter_mut() {
            if entry.number == self.number {
                entry.ended = Some(now);
            }
        }
        wanted.retain(|w| {
            w.ended
                .is_none_or(|ended| now.duration_since(ended) < ENDED_KEPT)
        });
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
            .push(Wanted {
                number,
                server,
                rank: log_rank(level),
                began: Instant::now(),
                ended: None,
            });
        LogInterestGuard {
            interest: self.clone(),
            number,
        }
    }

    /// Whether a line of `server` at `level`, read from the server at `read_at`, was wanted by
    /// a request in flight at that moment (judged by when the line was read, not when the
    /// session gets to it: the answer may have been handed on, and the request ended, between
    /// the two).
    pub(in crate::gateway) fn wants(
        &self,
        server: usize,
        level: &rmcp::model::LoggingLevel,
        read_at: Instant,
    ) -> bool {
        let rank = log_rank(level);
        self.wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|w| {
                w.server == server
                    && w.rank <= rank
                    && w.began <= read_at
                    && w.ended.is_none_or(|ended| read_at <= ended)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::LoggingLevel;

    #[test]
    fn a_line_read_while_its_request_was_in_flight_is_wanted_after_the_request_ended() {
        let interest = Arc::new(LogInterest::default());
        let before = Instant::now();
        let guard = interest.register(3, &LoggingLevel::Info);
        let read_during = Instant::now();
        assert!(interest.wants(3, &LoggingLevel::Warning, read_during));
        assert!(!interest.wants(3, &LoggingLevel::Debug, read_during));
        assert!(!interest.wants(4, &LoggingLevel::Info, read_during));
        // Read before the request began: nobody asked for it.
        assert!(!interest.wants(3, &LoggingLevel::Info, before));
        drop(guard);
        // The session gets to the line only now: it was read while the request was in flight.
        assert!(interest.wants(3, &LoggingLevel::Info, read_during));
        // A line read after the request ended is nobody's.
        std::thread::sleep(Duration::from_millis(2));
        assert!(!interest.wants(3, &LoggingLevel::Info, Instant::now()));
    }
}
