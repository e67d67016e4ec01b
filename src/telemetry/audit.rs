//! The audit log (SPEC §24.3): one JSON line per request handled, who asked what of which server
//! and how it ended — never arguments, results or tokens.
//!
//! Requests hand their line to a writer thread of the log's own through a bounded queue and never
//! wait: a file on a stalled disk, a network filesystem or a pipe nobody reads slows the log, not
//! a call. A line that finds the queue full is dropped and counted
//! (`loom_audit_lines_dropped_total`). The writer appends and flushes one line at a time (a line
//! written is in the file even if loom is killed next); past `maxBytes` the file becomes
//! `FILE.1` (one kept) and a new one begins. A failed write is logged once and never fails a
//! request.
//!
//! A request wakes the writer only when it sleeps; once awake, the writer writes what is queued,
//! waits [`LINGER`] for more and sleeps only when none came. Under load the writer so wakes on a
//! timer a few hundred times a second instead of once per request, and a request's part is a
//! lock and a push (a wake per line cost each call a thread switch on small machines).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::config::AuditConfig;

/// Lines waiting for the writer at most.
const QUEUE: usize = 4096;

/// How long the writer waits for more lines after writing before it sleeps: the longest a line
/// waits in the queue while lines keep coming.
const LINGER: Duration = Duration::from_millis(2);

/// The open log: its file and how large it is.
struct Open {
    file: File,
    size: u64,
}

/// The file end of the log, owned by the writer thread.
struct AuditFile {
    path: PathBuf,
    max_bytes: u64,
    open: Option<Open>,
    /// A failure was logged (the next ones are not, until a write succeeds again).
    failing: bool,
}

/// The requests' end of the log.
struct AuditLog {
    queue: Mutex<Queue>,
    /// The writer sleeps on it; a request that finds it asleep wakes it.
    wake: Condvar,
    /// Lines written (or failed) so far: what [`flush`] waits on.
    written: Condvar,
}

#[derive(Default)]
struct Queue {
    lines: Vec<String>,
    asleep: bool,
    /// Lines handed over, and lines the writer took and wrote.
    handed: u64,
    done: u64,
}

static LOG: OnceLock<AuditLog> = OnceLock::new();
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// OAuth subjects by the digest loom scopes their sessions with, so the log names the person.
static SUBJECTS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
/// Names remembered at most (a long-running loom forgets them all past this and starts over).
const MAX_SUBJECTS: usize = 10_000;

fn open_append(path: &Path) -> std::io::Result<Open> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let size = file.metadata()?.len();
    Ok(Open { file, size })
}

/// Open the log (created if missing) and start its writer. Fails when the file cannot be
/// created or opened.
pub fn start(config: &AuditConfig) -> Result<(), String> {
    let open = open_append(&config.path).map_err(|error| {
        format!(
            "cannot open the audit log {}: {error} (audit.path must name a file loom can create \
             and append to, in a directory that exists)",
            config.path.display()
        )
    })?;
    let file = AuditFile {
        path: config.path.clone(),
        max_bytes: config.max_bytes,
        open: Some(open),
        failing: false,
    };
    LOG.set(AuditLog {
        queue: Mutex::new(Queue::default()),
        wake: Condvar::new(),
        written: Condvar::new(),
    })
    .map_err(|_| "the audit log is already open".to_string())?;
    std::thread::Builder::new()
        .name("loom-audit".into())
        .spawn(move || file.run())
        .map_err(|error| format!("cannot start the audit log's writer: {error}"))?;
    Ok(())
}

impl AuditLog {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) fn on() -> bool {
    LOG.get().is_some()
}

/// Lines dropped because the writer was behind.
pub fn dropped() -> u64 {
    DROPPED.load(Ordering::Relaxed)
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

/// One request's line (SPEC §24.3): written as it is declared, absent values as `null`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Line<'a> {
    pub time: &'a str,
    pub subject: &'a str,
    pub era: &'a str,
    pub method: &'a str,
    pub server: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub decision: Option<&'a str>,
    pub bytes_in: Option<u64>,
    pub bytes_out: Option<u64>,
    pub duration_ms: f64,
    pub outcome: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

/// Hand one line to the writer (never waits).
pub(super) fn write(line: &Line<'_>) {
    let Some(log) = LOG.get() else {
        return;
    };
    let Ok(mut text) = serde_json::to_string(line) else {
        return;
    };
    text.push('\n');
    let mut queue = log.lock();
    if queue.lines.len() >= QUEUE {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    queue.lines.push(text);
    queue.handed += 1;
    if queue.asleep {
        queue.asleep = false;
        log.wake.notify_one();
    }
}

/// Wait (at most `limit`) until the lines handed over so far are written: at exit.
pub fn flush(limit: Duration) {
    let Some(log) = LOG.get() else {
        return;
    };
    let deadline = Instant::now() + limit;
    let mut queue = log.lock();
    let target = queue.handed;
    if queue.asleep && queue.done < target {
        queue.asleep = false;
        log.wake.notify_one();
    }
    while queue.done < target {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        queue = match log.written.wait_timeout(queue, left) {
            Ok((queue, _)) => queue,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

impl AuditFile {
    fn run(mut self) {
        let Some(log) = LOG.get() else {
            return;
        };
        loop {
            let lines = {
                let mut queue = log.lock();
                while queue.lines.is_empty() {
                    queue.asleep = true;
                    queue = match log.wake.wait(queue) {
                        Ok(queue) => queue,
                        Err(poisoned) => poisoned.into_inner(),
                    };
                }
                std::mem::take(&mut queue.lines)
            };
            let count = lines.len() as u64;
            for line in lines {
                self.write(line.as_bytes());
            }
            log.lock().done += count;
            log.written.notify_all();
            // More lines are likely while requests keep coming: take them on a timer rather
            // than being woken for each.
            std::thread::sleep(LINGER);
        }
    }

    fn write(&mut self, line: &[u8]) {
        match self.append(line) {
            Ok(()) if self.failing => {
                self.failing = false;
                tracing::warn!("the audit log {} is written again", self.path.display());
            }
            Ok(()) => {}
            Err(error) if !self.failing => {
                self.failing = true;
                tracing::warn!(
                    "cannot write the audit log {}: {error}; requests go on unlogged until it \
                     can be written",
                    self.path.display()
                );
            }
            Err(_) => {}
        }
    }

    fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        let len = line.len() as u64;
        if self
            .open
            .as_ref()
            .is_some_and(|o| o.size > 0 && o.size + len > self.max_bytes)
        {
            // The full file is kept as FILE.1; should renaming fail (a directory loom may no
            // longer write), the line goes to the file as it is rather than nowhere.
            match std::fs::rename(&self.path, rotated_path(&self.path)) {
                Ok(()) => self.open = None,
                Err(error) => {
                    if !self.failing {
                        tracing::warn!(
                            "cannot rotate the audit log {}: {error}; it grows past audit.maxBytes",
                            self.path.display()
                        );
                    }
                }
            }
        }
        if self.open.is_none() {
            self.open = Some(open_append(&self.path)?);
        }
        let Some(current) = self.open.as_mut() else {
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
                self.open = None;
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
        let mut log = AuditFile {
            path: path.clone(),
            max_bytes: 100,
            open: None,
            failing: false,
        };
        for n in 0..10 {
            let line = format!("{{\"n\":{n},\"pad\":\"{}\"}}\n", "x".repeat(20));
            log.append(line.as_bytes()).expect("append");
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
        let mut log = AuditFile {
            path: path.clone(),
            max_bytes: 1 << 20,
            open: None,
            failing: false,
        };
        log.append(b"{\"a\":1}\n").expect("first");
        std::fs::remove_file(&path).expect("remove");
        // The open handle still writes to the removed file; a rotation or failure reopens.
        log.append(b"{\"a\":2}\n").expect("second");
        log.open = None;
        log.append(b"{\"a\":3}\n").expect("third");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "{\"a\":3}\n");
    }

    #[test]
    fn a_rotation_that_cannot_rename_keeps_writing_the_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.jsonl");
        let mut log = AuditFile {
            path: path.clone(),
            max_bytes: 10,
            open: None,
            failing: false,
        };
        log.append(b"{\"a\":1}\n").expect("first");
        // FILE.1 is a directory that is not empty: renaming onto it fails.
        std::fs::create_dir_all(rotated_path(&path).join("x")).expect("blocker");
        for n in 2..6 {
            log.append(format!("{{\"a\":{n}}}\n").as_bytes())
                .expect("kept writing");
        }
        assert_eq!(
            std::fs::read_to_string(&path)
                .expect("read")
                .lines()
                .count(),
            5
        );
    }
}
