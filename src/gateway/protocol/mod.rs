//! The protocol's eras and extensions, one job of the gateway: what a client's version decides
//! of every result and request (`era`: the `initialize` handshake against 2026-07-28's
//! per-request envelope), a 2026-07-28 call that needs its client's input (`input`:
//! `input_required` and `requestState`), MCP tasks in both shapes (`tasks`: 2025-11-25's;
//! `task_extension`: 2026-07-28's extension) and per-request log levels (`logging`). The
//! session's routing and catalog stay in gateway/; these are the rules it applies.

pub mod era;
pub(super) mod input;
pub(super) mod logging;
pub mod task_extension;
pub mod tasks;
