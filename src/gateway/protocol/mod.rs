//! The protocol's eras and extensions, one job of the gateway: what a client's version decides
//! of every result and request (`era`: the `initialize` handshake against 2026-07-28's
//! per-request envelope), a 2026-07-28 call that needs its client's input (`input`:
//! `input_required` and `requestState`), MCP tasks in both shapes (`tasks`: 2025-11-25's;
//! `task_extension`: 2026-07-28's extension) and per-request log levels (`logging`). The
//! session's routing and catalog stay in gateway/; these are the rules it applies.

pub(crate) mod era;
pub(super) mod input;
pub(super) mod logging;
pub(crate) mod task_extension;
pub(crate) mod tasks;

use std::sync::{Arc, Mutex, PoisonError};

use crate::gateway::catalog::Route;

/// What one session keeps for the eras and extensions; the rest of the gateway reaches it
/// through the methods below.
#[derive(Default)]
pub(crate) struct ProtocolState {
    /// Calls waiting for their client's input (2026-07-28 `input_required`), by `requestState`.
    suspended: input::Suspended,
    /// Tasks created for 2026-07-28 clients (the tasks extension), by id.
    bridged: task_extension::BridgedTasks,
    /// MCP task id → the server that runs it.
    task_routes: Arc<tasks::TaskRoutes>,
    /// The log levels 2026-07-28 requests in flight asked for, per server.
    log_interest: Arc<logging::LogInterest>,
    /// The level a client of the `initialize` era set with `logging/setLevel` (none: every
    /// level), told to 2026-07-28 servers with each of its requests.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    legacy_log_level: Mutex<Option<rmcp::model::LoggingLevel>>,
}

impl ProtocolState {
    /// Calls waiting for this client's input (SPEC §5.11).
    pub(crate) fn calls_waiting_for_input(&self) -> usize {
        self.suspended.len()
    }

    /// Whether a call waits here under `state` (a cluster's HTTP face asks before it forwards
    /// a retry to the instance the state names, SPEC §25).
    pub(crate) fn holds_request_state(&self, state: &str) -> bool {
        self.suspended.holds(state)
    }

    /// Whether a task of the tasks extension has id `task` here (SPEC §25).
    pub(crate) fn holds_task(&self, task: &str) -> bool {
        self.bridged.get(task).is_some()
    }

    /// The route of `target` in the call suspended under `state`, if one is.
    pub(crate) fn waiting_route(&self, state: &str, target: &str) -> Option<Route> {
        self.suspended.route_of(state, target)
    }

    /// A 2026-07-28 request to server `server` asked for log lines at `level` or above, for as
    /// long as the guard lives.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    pub(crate) fn want_logs(
        &self,
        server: usize,
        level: &rmcp::model::LoggingLevel,
    ) -> logging::LogInterestGuard {
        self.log_interest.register(server, level)
    }

    /// Whether a log line of `server` at `level` reaches this session's client: a 2026-07-28
    /// client only for requests that asked for it (`io.modelcontextprotocol/logLevel`), at that
    /// level or above; a handshake client nothing below the level it set, whatever another
    /// session asked the shared server for.
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    pub(crate) fn passes_log(
        &self,
        client_is_2026: bool,
        server: usize,
        level: &rmcp::model::LoggingLevel,
        read_at: std::time::Instant,
    ) -> bool {
        if client_is_2026 {
            return self.log_interest.wants(server, level, read_at);
        }
        match *self.lock_legacy_level() {
            Some(set) => logging::log_rank(level) >= logging::log_rank(&set),
            None => true,
        }
    }

    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    pub(crate) fn set_legacy_log_level(&self, level: rmcp::model::LoggingLevel) {
        *self.lock_legacy_level() = Some(level);
    }

    /// The log level a request of a client of the `initialize` era carries to a 2026-07-28
    /// server: the one it set, else every level (as such a server logs before being told).
    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    pub(crate) fn legacy_log_level(&self) -> rmcp::model::LoggingLevel {
        self.lock_legacy_level()
            .unwrap_or(rmcp::model::LoggingLevel::Debug)
    }

    #[allow(deprecated)] // logging is SEP-2577-deprecated; clients still set it
    fn lock_legacy_level(&self) -> std::sync::MutexGuard<'_, Option<rmcp::model::LoggingLevel>> {
        self.legacy_log_level
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The session ended: suspended calls and bridged tasks go.
    pub(crate) fn end(&self) {
        self.suspended.clear();
        self.bridged.clear();
    }
}
