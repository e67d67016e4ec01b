//! The audit log (SPEC §24.3): one JSON line per request handled, who asked what of which server
//! and how it ended — never arguments, results or tokens.
//!
//! Lines are appended and flushed one at a time (a line loom wrote is on disk even if loom is
//! killed next); past `maxBytes` the file becomes `FILE.1` (one kept) and a new one begins. A
//! failed write is logged once and never fails the request it describes.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::config::AuditConfig;

/// The open log: its file and how large it is.
struct Open {
    file: File,
    size: u64,
}

pub(super) struct AuditLog {
    path: PathBuf,
    max_bytes: u64,
    open: Mutex<Option<Open>>,
    /// A failure was logged (the next ones are not, until a write succeeds again).
    failing: std::sync::atomic::AtomicBool,
}

static LOG: OnceLock<AuditLog> = OnceLock::new();

/// OAuth subjects by the digest loom scopes their sessions with, so the log names the person.
static SUBJECTS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
/// Names remembered at most (a long-running loom forgets them all past this and starts over).
const MAX_SUBJECTS: usize = 10_000;

fn open_append(path: &Path) -> std::io::Result<Open> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let size = file.metadata()?.len();
    Ok(Open { file, size })
}

/// Open the log (created if missing). Fails when the file cannot be created or opened.
pub fn start(config: &AuditConfig) -> Result<(), String> {
    let open = open_append(&config.path).map_err(|error| {
        format!(
            "cannot open the audit log {}: {error} (audit.path must name a file loom can create \
             and append to, in a directory that exists)",
            config.path.display()
        )
    })?;
    let log = AuditLog {
        path: config.path.clone(),
        max_bytes: config.max_bytes,
        open: Mutex::new(Some(open)),
        failing: std::sync::atomic::AtomicBool::new(false),
    };
    LOG.set(log)
        .map_err(|_| "the audit log is already open".to_string())
}

pub(super) fn on() -> bool {
    LOG.get().is_some()
}

/// The name of the OAuth subject whose sessions are scoped by `digest`.
pub fn name_subject(digest: &str, subject: &str) {
    if !on() {
        return;
    }
    let names = SUBJECTS.get_or_init(Default::default);
    let mut names = names.lock().unwrap_or_else(PoisonError::into_inner);
    if names.len() >= MAX_SUBJECTS && !names.contains_key(digest) {
        names.clear();
    }
    names.insert(digest.to_string(), subject.to_string());
}

/// Who a session's credential is, as the log names it.
pub(super) fn subject_of(credential: Option<&str>) -> String {
    match credential {
        None => "stdio".to_string(),
        Some(digest) => SUBJECTS
            .get()
            .and_then(|names| {
                names
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(digest)
                    .cloned()
            })
            .unwrap_or_else(|| digest.to_string()),
    }
}

/// Append one line.
pub(super) fn write(line: &serde_json::Value) {
    let Some(log) = LOG.get() else {
        return;
    };
    let mut text = line.to_string();
    text.push('\n');
    let mut open = log.open.lock().unwrap_or_else(PoisonError::into_inner);
    let result = log.append(&mut open, text.as_bytes());
    let failing = log.failing.load(std::sync::atomic::Ordering::Relaxed);
    match result {
        Ok(()) if failing => {
            log.failing
                .store(false, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!("the audit log {} is written again", log.path.display());
        }
        Ok(()) => {}
        Err(error) if !failing => {
            log.failing
                .store(true, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(
                "cannot write the audit log {}: {error}; requests go on unlogged until it can be \
                 written",
                log.path.display()
            );
        }
        Err(_) => {}
    }
}

impl AuditLog {
    fn append(&self, open: &mut Option<Open>, line: &[u8]) -> std::io::Result<()> {
        let len = line.len() as u64;
        if open
            .as_ref()
            .is_some_and(|o| o.size > 0 && o.size + len > self.max_bytes)
        {
            *open = None;
            let rotated = rotated_path(&self.path);
            std::fs::rename(&self.path, &rotated)?;
        }
        if open.is_none() {
            *open = Some(open_append(&self.path)?);
        }
        let Some(current) = open.as_mut() else {
            return Err(std::io::Error::other("the audit log is not open"));
        };
        let written = current
            .file
            .write_all(line)
            .and_then(|()| current.file.flush());
        match written {
            Ok(()) => {
                current.size += len;
                Ok(())
            }
            Err(error) => {
                // Opened afresh next time (the file may have been removed or its disk freed).
                *open = None;
                Err(error)
            }
        }
    }
}

/// `FILE.1`: where the full log goes when it rotates.
fn rotated_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".1");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_keeps_one_old_file_and_no_line_is_split() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog {
            path: path.clone(),
            max_bytes: 100,
            open: Mutex::new(None),
            failing: std::sync::atomic::AtomicBool::new(false),
        };
        let mut open = None;
        for n in 0..10 {
            let line = format!("{{\"n\":{n},\"pad\":\"{}\"}}\n", "x".repeat(20));
            log.append(&mut open, line.as_bytes()).expect("append");
        }
        let current = std::fs::read_to_string(&path).expect("current");
        let old = std::fs::read_to_string(rotated_path(&path)).expect("rotated");
        assert!(
            current.len() <= 100 && old.len() <= 100,
            "{current:?} {old:?}"
        );
        assert!(current.ends_with("\"n\":9,\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}\n"));
        for text in [&current, &old] {
            for line in text.lines() {
                serde_json::from_str::<serde_json::Value>(line).expect("whole line");
            }
        }
        assert!(!dir.path().join("audit.jsonl.2").exists());
    }

    #[test]
    fn a_removed_file_is_created_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog {
            path: path.clone(),
            max_bytes: 1 << 20,
            open: Mutex::new(None),
            failing: std::sync::atomic::AtomicBool::new(false),
        };
        let mut open = None;
        log.append(&mut open, b"{\"a\":1}\n").expect("first");
        std::fs::remove_file(&path).expect("remove");
        // The open handle still writes to the removed file; a rotation or failure reopens.
        log.append(&mut open, b"{\"a\":2}\n").expect("second");
        open = None;
        log.append(&mut open, b"{\"a\":3}\n").expect("third");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{\"a\":3}\n");
    }
}
