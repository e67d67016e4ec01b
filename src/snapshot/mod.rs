//! Session snapshots: every dataset of a session written to Parquet as it is created, so the
//! analysis can be re-opened and re-queried after the conversation (`loom query`), by loom or by
//! any DataFusion-based engine.
//!
//! Layout under the snapshot root, one folder per session, Hive-style (`key=value` folders) so
//! engines that read partitioned Parquet see `session_id`, `server`, `tool` and `ref` as columns:
//! ```text
//! <root>/session_id=<id>/manifest.json      loom version, session id, created, datasets (written last)
//! <root>/session_id=<id>/catalog.sql        CREATE EXTERNAL TABLE … STORED AS PARQUET LOCATION …
//! <root>/session_id=<id>/catalog.spark.sql  CREATE TABLE … USING parquet LOCATION …
//! <root>/session_id=<id>/server=<s>/tool=<t>/ref=<ref>/<ref>.parquet   zstd, Arrow schema kept
//! ```
//! Sessions written before the Hive layout (`<root>/<id>/datasets/<ref>.parquet`, manifest
//! without `layout`) are still read: a manifest names each file relative to its session folder.
//! Writes happen on a background task (the envelope never waits for Parquet). Each object is
//! written whole (object_store's `put` is atomic: a temporary file renamed on local disks), and
//! the manifest is updated only after a dataset's file is in place, so a crash leaves a snapshot
//! that opens with everything it announces. A failure to write is a warning, never a failed call.

use futures::StreamExt as _;

pub(crate) mod catalog;
pub(crate) mod failure;
pub(crate) mod portable;

mod encode;
mod location;
mod manifest;
mod naming;
mod scripts;
mod sessions;
mod writer;

pub use encode::*;
pub use location::*;
pub use manifest::*;
pub use naming::*;
use scripts::*;
pub use sessions::*;
pub use writer::*;

#[cfg(test)]
mod tests;
