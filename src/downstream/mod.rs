//! The servers loom starts: their environment, processes, connections and supervision.

pub(crate) mod callers;
pub(crate) mod env;
mod handler;
pub mod http;
pub(crate) mod oauth;
pub(crate) mod process;
mod supervisor;

pub use handler::{DownstreamEvent, DownstreamHandler, UpstreamLink};
pub use supervisor::{
    Catalog, Downstream, Live, STABLE_AFTER, STARTUP_TIMEOUT, ServerState, TASK_METHODS,
    TaskSupport, ToolDef, task_support,
};
