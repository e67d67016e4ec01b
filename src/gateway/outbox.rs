//! A session's outbox for the notifications a server can send without end: log lines and
//! progress. They used to be written to the client from the hub's one event loop, each write
//! awaited: a client that stopped reading held the loop (every session's notifications with it)
//! while the hub's queue grew without bound — a server's 8 M log lines to a client that was not
//! reading took loom to 2.27 GB. Now each session queues them, bounded in count and bytes, and
//! its own task writes them in order; what does not fit is dropped and counted (SPEC §5.9).
//! Results never come this way: they are answers, written on their request's path.
#![allow(deprecated)] // logging is SEP-2577-deprecated but clients still show it

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use rmcp::model::{LoggingMessageNotificationParam, ProgressNotificationParam};
use tokio::sync::mpsc;

use super::Gateway;

/// Notifications one client may have waiting.
pub(super) const OUTBOX_ENTRIES: usize = 4_096;
/// Bytes of notifications one client may have waiting (their JSON, estimated).
pub(super) const OUTBOX_BYTES: usize = 16 << 20;

/// One queued notification.
pub(super) enum Note {
    Log(LoggingMessageNotificationParam),
    Progress(ProgressNotificationParam),
}

impl Note {
    /// About the bytes the notification takes on the wire (its `data` and message dominate).
    fn bytes(&self) -> usize {
        const FRAME: usize = 96;
        match self {
            Note::Log(params) => {
                FRAME
                    + params.logger.as_ref().map_or(0, String::len)
                    + serde_json::to_string(&params.data).map_or(0, |s| s.len())
            }
            Note::Progress(params) => FRAME + params.message.as_ref().map_or(0, String::len),
        }
    }
}

pub(super) struct Outbox {
    queue: mpsc::Sender<(Note, usize)>,
    /// Taken by the writer task when it starts.
    waiting: std::sync::Mutex<Option<mpsc::Receiver<(Note, usize)>>>,
    bytes: Arc<AtomicUsize>,
    dropped: AtomicU64,
    /// Notes queued, and written (or let go), so far: a result waits for the notes queued before
    /// it ([`Outbox::drained`]), as a client drops the progress of a request already answered.
    queued: AtomicU64,
    written: Arc<AtomicU64>,
    wrote: Arc<tokio::sync::Notify>,
}

/// How long a result waits for the notifications queued before it: a client that reads gets
/// them in far less; one that does not read gets its result no later than this.
pub(super) const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Default for Outbox {
    fn default() -> Self {
        let (queue, waiting) = mpsc::channel(OUTBOX_ENTRIES);
        Outbox {
            queue,
            waiting: std::sync::Mutex::new(Some(waiting)),
            bytes: Arc::default(),
            dropped: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            written: Arc::default(),
            wrote: Arc::default(),
        }
    }
}

impl Outbox {
    /// Queue `note` for the client; `false` (and counted) when the client already has
    /// [`OUTBOX_ENTRIES`] or [`OUTBOX_BYTES`] waiting.
    pub(super) fn offer(&self, note: Note) -> bool {
        let size = note.bytes();
        let fits = self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held + size <= OUTBOX_BYTES).then_some(held + size)
            })
            .is_ok();
        if fits {
            // Counted before it can be written, so `written` never passes `queued`.
            self.queued.fetch_add(1, Ordering::AcqRel);
            match self.queue.try_send((note, size)) {
                Ok(()) => return true,
                Err(_) => {
                    self.bytes.fetch_sub(size, Ordering::AcqRel);
                    self.written.fetch_add(1, Ordering::AcqRel);
                }
            }
        }
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        // Once, then at every power of ten: a client that is not reading gets a flood.
        if dropped == 10u64.pow(dropped.ilog10()) {
            tracing::warn!(
                "the client is not reading: {dropped} log/progress notification(s) dropped so \
                 far (at most {OUTBOX_ENTRIES} or {} MiB wait for one client)",
                OUTBOX_BYTES >> 20
            );
        }
        false
    }

    /// Wait (at most [`DRAIN_WAIT`]) until every note queued so far has been written, so that a
    /// result sent next follows its call's progress and log lines, as directly.
    pub(super) async fn drained(&self) {
        let target = self.queued.load(Ordering::Acquire);
        let wait = async {
            loop {
                let notified = self.wrote.notified();
                if self.written.load(Ordering::Acquire) >= target {
                    return;
                }
                notified.await;
            }
        };
        let _ = tokio::time::timeout(DRAIN_WAIT, wait).await;
    }

    /// Notifications dropped so far.
    #[cfg(test)]
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// The task that writes the queue to `gateway`'s client, in order, one at a time.
    pub(super) fn writer(gateway: &Arc<Gateway>) -> Option<impl Future<Output = ()> + use<>> {
        let mut waiting = gateway
            .outbox
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()?;
        let bytes = gateway.outbox.bytes.clone();
        let written = gateway.outbox.written.clone();
        let wrote = gateway.outbox.wrote.clone();
        let gateway: Weak<Gateway> = Arc::downgrade(gateway);
        Some(async move {
            while let Some((note, size)) = waiting.recv().await {
                let peer = gateway.upgrade().and_then(|g| g.upstream.get());
                if let Some(peer) = peer {
                    let _ = match note {
                        Note::Log(params) => peer.notify_logging_message(params).await,
                        Note::Progress(params) => peer.notify_progress(params).await,
                    };
                }
                bytes.fetch_sub(size, Ordering::AcqRel);
                written.fetch_add(1, Ordering::AcqRel);
                wrote.notify_waiters();
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{LoggingLevel, ProgressToken};

    fn log(text: &str) -> Note {
        Note::Log(
            LoggingMessageNotificationParam::new(
                LoggingLevel::Info,
                serde_json::Value::String(text.into()),
            )
            .with_logger("s"),
        )
    }

    /// With nobody writing (a client that does not read), the outbox holds at most its entries
    /// and bytes; the rest is dropped and counted, never queued.
    #[test]
    fn a_client_that_does_not_read_holds_a_bounded_queue() {
        let outbox = Outbox::default();
        let kept = (0..10_000).filter(|_| outbox.offer(log("a line"))).count();
        assert_eq!(kept, OUTBOX_ENTRIES);
        assert_eq!(outbox.dropped(), 10_000 - OUTBOX_ENTRIES as u64);

        let outbox = Outbox::default();
        let big = "x".repeat(1 << 20);
        let kept = (0..100).filter(|_| outbox.offer(log(&big))).count();
        assert!(kept < 16, "{kept} one-MiB lines queued");
        assert!(outbox.bytes.load(Ordering::Acquire) <= OUTBOX_BYTES);
        let progress = Note::Progress(ProgressNotificationParam::new(
            ProgressToken(rmcp::model::NumberOrString::Number(1)),
            1.0,
        ));
        assert!(outbox.offer(progress), "a small notification still fits");
    }
}
