//! `loom_export`: a dataset written to a file of the session's export folder, within its quota.

use std::sync::Arc;

use rmcp::model::CallToolResult;
use serde_json::{Map, Value};

use super::*;
use crate::store::Store;

/// One session's export folder and what its exports wrote so far.
#[derive(Debug, Clone)]
pub(crate) struct Exports {
    dir: std::path::PathBuf,
    /// Bytes written against `exportMaxBytes`: the session's own until it is told its
    /// credential, then the counter every session of that credential shares ([`Self::share_quota`]).
    written: Arc<std::sync::RwLock<Arc<std::sync::atomic::AtomicU64>>>,
}

impl Exports {
    /// The stdio session (the only one of its process) writes in `exportDir` itself; every
    /// session of `loom serve --http` in a folder of its own below it, so one client can neither
    /// replace another's files nor learn their names from an "already exists".
    pub(crate) fn new(export_dir: &std::path::Path, sole_session: bool) -> Self {
        static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = if sole_session {
            export_dir.to_path_buf()
        } else {
            let number = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
            export_dir.join(format!(
                "session-{}-{}-{number}",
                chrono::Utc::now().format("%Y%m%dT%H%M%S"),
                std::process::id()
            ))
        };
        Self {
            dir,
            written: Arc::default(),
        }
    }

    /// Count this session's exports on `counter` from now on (with what it wrote so far): the
    /// quota is per credential, or opening sessions in turn would write without limit.
    pub(crate) fn share_quota(&self, counter: Arc<std::sync::atomic::AtomicU64>) {
        use std::sync::atomic::Ordering;
        let mut written = self
            .written
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !Arc::ptr_eq(&written, &counter) {
            counter.fetch_add(written.load(Ordering::Acquire), Ordering::AcqRel);
            *written = counter;
        }
    }

    fn counter(&self) -> Arc<std::sync::atomic::AtomicU64> {
        self.written
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

pub(crate) fn export(
    store: &Store,
    config: &crate::config::Config,
    exports: &Exports,
    arguments: &Option<Map<String, Value>>,
) -> CallToolResult {
    let usage = "pass {\"ref\": \"ds_…\", \"format\": \"csv\" | \"json\", \"filename\"?: \"name.csv\", \"overwrite\"?: false}";
    let (reference, format) = match (
        string_arg(arguments, "ref"),
        string_arg(arguments, "format"),
    ) {
        (Ok(r), Ok(f)) => (r, f),
        (Err(e), _) | (_, Err(e)) => return error_result(format!("loom_export: {e}; {usage}")),
    };
    let format = match crate::export::Format::parse(format) {
        Ok(f) => f,
        Err(e) => return error_result(format!("loom_export: {e}")),
    };
    let filename = match arguments.as_ref().and_then(|a| a.get("filename")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.as_str()),
        Some(other) => {
            return error_result(format!(
                "loom_export: `filename` must be a string, found {other}"
            ));
        }
    };
    let overwrite = match arguments.as_ref().and_then(|a| a.get("overwrite")) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return error_result(format!(
                "loom_export: `overwrite` must be true or false, found {other}"
            ));
        }
    };
    let Some(dataset) = store.get(reference) else {
        return error_result(format!(
            "loom_export: no dataset `{reference}`; {}",
            known_datasets(store)
        ));
    };
    let name = match crate::export::filename::resolve(filename, reference, format.extension()) {
        Ok(n) => n,
        Err(e) => return error_result(format!("loom_export: {e}")),
    };
    use std::sync::atomic::Ordering;
    let counter = exports.counter();
    let left = config
        .export_max_bytes
        .saturating_sub(counter.load(Ordering::Acquire));
    match crate::export::export_with(
        &dataset,
        format,
        &exports.dir,
        &name,
        overwrite,
        config.neutralize_csv_formulas,
        left,
    ) {
        Ok(written) => {
            counter.fetch_add(written.bytes, Ordering::AcqRel);
            json_result(serde_json::to_value(&written).unwrap_or(Value::Null))
        }
        Err(e) => error_result(format!("loom_export: {e}")),
    }
}
