//! Session ids, folder names and the table name of each dataset.

use super::*;
use crate::store::Dataset;

/// The session id: the UTC start time (so names sort by age) and the process id, and for the
/// second and later sessions of one process (`loom serve --http` opens one per client) a
/// sequence number — two sessions opened in the same millisecond must not share a folder.
pub fn session_id() -> String {
    static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let sequence = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
    let start = chrono::Utc::now().format("%Y%m%dT%H%M%S%3fZ");
    let pid = std::process::id();
    match sequence {
        1 => format!("{start}-{pid}"),
        n => format!("{start}-{pid}-{n}"),
    }
}

/// Whether a folder under the root is named like a session ([`session_id`]):
/// `YYYYMMDDTHHMMSSmmmZ-PID` or `…-PID-N`. Anything else there (a user's own folder) is not
/// one, and is never taken for the latest session.
pub fn is_session_name(name: &str) -> bool {
    let Some((start, rest)) = name.split_once("Z-") else {
        return false;
    };
    let start = start.as_bytes();
    let digits = |part: &[u8]| !part.is_empty() && part.iter().all(u8::is_ascii_digit);
    let start_ok =
        start.len() == 18 && digits(&start[..8]) && start[8] == b'T' && digits(&start[9..]);
    let mut numbers = rest.split('-');
    let pid_ok = numbers.next().is_some_and(|n| digits(n.as_bytes()));
    let sequence_ok = numbers.next().is_none_or(|n| digits(n.as_bytes()));
    start_ok && pid_ok && sequence_ok && numbers.next().is_none()
}

/// A session under a root: its id and the folder that holds it (`session_id=<id>`, or `<id>` for
/// sessions written before the Hive layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub id: String,
    pub folder: String,
}

impl Session {
    pub(super) fn new(id: String) -> Self {
        Self {
            folder: format!("{SESSION_FOLDER_PREFIX}{id}"),
            id,
        }
    }

    /// The session a folder under the root holds, if it is one.
    pub fn from_folder(folder: &str) -> Option<Self> {
        let id = folder.strip_prefix(SESSION_FOLDER_PREFIX).unwrap_or(folder);
        is_session_name(id).then(|| Self {
            id: id.to_string(),
            folder: folder.to_string(),
        })
    }
}

/// A Hive partition value for a server or tool name: letters, digits, `_`, `-` and `.` kept,
/// anything else (a `/`, `=`, space, non-ASCII) as `_`, at most 64 characters. Exact names are in
/// the manifest; the folder only has to be safe on every store and readable by every engine.
pub fn partition_value(name: &str) -> String {
    let value: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if value.is_empty() || value.chars().all(|c| c == '.') {
        "_".to_string()
    } else {
        value
    }
}

/// Where a dataset's file goes, relative to its session folder.
pub(crate) fn dataset_file(dataset: &Dataset) -> String {
    format!(
        "server={}/tool={}/ref={}/{}.parquet",
        partition_value(&dataset.provenance.server),
        partition_value(&dataset.provenance.tool),
        dataset.reference,
        dataset.reference
    )
}

/// The table a dataset belongs to across sessions: a view (`loom_materialize`) is its own (its
/// name was chosen, digits included: `top_10` is not `top`); others drop the sequence number.
pub(super) fn table_for(dataset: &Dataset) -> String {
    if dataset.provenance.tool == "loom_materialize" {
        dataset.reference.clone()
    } else {
        table_of(&dataset.reference)
    }
}

/// `ds_crm_rows` for `ds_crm_rows_2`, `doc` for `doc_3`: the ref without its sequence number.
pub fn table_of(reference: &str) -> String {
    match reference.rsplit_once('_') {
        Some((base, n))
            if !base.is_empty() && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base.to_string()
        }
        _ => reference.to_string(),
    }
}
