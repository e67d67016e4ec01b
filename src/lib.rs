//! loom — a context gateway for the Model Context Protocol.
//!
//! A tool result travels `downstream → gateway` (and, later, through `intercept → ingest → store →
//! envelope`). The binary in `main.rs` only parses arguments and calls [`cli::run`].

// Unsafe code is refused everywhere but in the three reviewed places that allow it by name
// (footprint.rs: madvise; intercept/skim.rs: SSE2; store/engine.rs: setpriority).
#![deny(unsafe_code)]

pub mod cli;
pub mod config;
pub mod demo;
pub mod downstream;
pub mod envelope;
pub mod export;
pub mod footprint;
pub mod gateway;
pub mod hints;
pub mod http;
pub mod ingest;
pub mod intercept;
pub mod parallel;
pub mod redact;
pub mod reduce;
pub mod report;
pub mod snapshot;
pub mod store;
pub mod token;
pub mod wire;
