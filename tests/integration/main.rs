//! Every integration test but three in one test binary (issue 37), as ripgrep and DataFusion keep
//! theirs: one link of loom's library instead of twenty, and one place that lists them.
//! Each module is one file's tests as it was; `cargo test --test integration MODULE::` runs one.
//!
//! Apart, each its own binary: tests/interop.rs (one test that runs the whole Python interop
//! suite for minutes and wants the machine to itself), tests/resource_bombs.rs (it measures
//! loom processes' peak memory and CPU and kills by pid, so tests running beside it in one
//! process would blur what it measures) and tests/footprint.rs (an idle loom hands pages back
//! only when no other loom process maps the same executable).

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/s3.rs"]
mod s3;

mod apps;
mod dataplane;
mod demo;
mod firewall;
mod firewall_corpus;
mod http_serve;
mod json_summary;
mod layers;
mod lifecycle;
mod passthrough;
mod protocol_2026;
mod proxy;
mod remote;
mod snapshot;
mod sql;
mod summary;
mod text_corpus;
mod text_e2e;
mod tool_disclosure;
mod tool_search;
