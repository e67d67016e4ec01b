//! loom — a context gateway for the Model Context Protocol.
//!
//! A tool result travels from a server (`downstream`) to the `gateway`, which hands it to the
//! `result` path, where everything that becomes of it is decided in one direction: small results
//! pass through untouched; `intercept` sends tables `ingest → store → hints → envelope` and other
//! large results to the context firewall (`reduce`), their original kept in the `store`; what is
//! still over budget may go to the model (`llm`). Shared small items live in `common`, below everything. The binary in `main.rs`
//! only parses arguments and calls [`cli::run`]; README's Layout is the map.

// Unsafe code is refused everywhere but in the three reviewed places that allow it by name
// (footprint.rs: madvise; intercept/skim.rs: SSE2; store/engine.rs: setpriority).
#![deny(unsafe_code)]
// `pub` means used from outside the library (its binaries, tests and benches).
#![warn(unreachable_pub)]

pub mod cli;
pub mod cluster;
pub mod common;
pub mod config;
pub(crate) mod demo;
pub mod downstream;
pub mod envelope;
pub mod export;
pub mod footprint;
pub mod gateway;
pub mod hints;
pub(crate) mod http;
pub mod ingest;
pub mod intercept;
pub mod llm;
pub(crate) mod parallel;
pub(crate) mod redact;
pub mod reduce;
pub(crate) mod report;
pub(crate) mod result;
pub mod snapshot;
pub mod store;
pub mod telemetry;
pub(crate) mod token;
pub(crate) mod tools;
pub mod wire;
