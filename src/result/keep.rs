//! The tables of results that pass through whole, kept as datasets too (SPEC §8.4).
//!
//! A result under `tokenThreshold` reaches its client byte for byte; whether it holds a table is
//! only asked after the answer is on its way (a result that cannot hold one — no bracket, no
//! second line — is let go at once, see `intercept::may_hold_table`): the [`Keep`] a
//! passed-through result comes with is dropped once the answer is written (on rmcp's path, once
//! it is handed to rmcp to write), and dropping it hands
//! the result to the session's keeper, a task that finds and ingests tables one result at a
//! time (small ones on its own task, larger ones on the blocking pool). Nothing on the answer's
//! path waits for it, and a keeper that falls behind lets results go rather than queue them
//! without end.

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::intercept::Origin;
use crate::store::Store;

/// Passed-through tables a session keeps at most; past it the oldest are let go (as if
/// evicted, so `loom_describe` says what became of them).
pub(crate) const MAX_KEPT_TABLES: usize = 64;

/// Results waiting for the keeper at most; past it a result is not kept.
const QUEUE: usize = 32;

/// Results up to this size are read on the keeper's own task, larger ones on the blocking pool.
const INLINE_BYTES: usize = 16 * 1024;

/// A result for the keeper: its bytes and the call that made it.
type Job = (Box<RawValue>, Origin);

/// One passed-through result, handed to the keeper when dropped (after its answer was written).
pub(crate) struct Keep(Option<(Job, mpsc::Sender<Job>)>);

impl Keep {
    /// Nothing to keep.
    pub(crate) fn none() -> Self {
        Self(None)
    }
}

impl Drop for Keep {
    fn drop(&mut self) {
        if let Some((job, keeper)) = self.0.take()
            && keeper.try_send(job).is_err()
        {
            tracing::debug!("the keeper is busy; a passed-through result is not kept");
        }
    }
}

/// A session's keeper: where passed-through results go to have their tables kept.
pub(crate) struct Keeper {
    queue: mpsc::Sender<Job>,
}

impl Keeper {
    /// Start the keeper of the session whose datasets live in `store`. It ends when the session
    /// (and every [`Keep`] it gave out) is gone.
    pub(crate) fn start(store: Arc<Store>) -> Self {
        let (queue, mut results) = mpsc::channel::<Job>(QUEUE);
        tokio::spawn(async move {
            let mut kept = Kept::default();
            while let Some((raw, origin)) = results.recv().await {
                let fingerprint = fingerprint(&raw, &origin);
                // The same result of the same call again (an agent repeating a lookup): its
                // tables are held already, and are used now.
                if kept.holds(fingerprint, &store) {
                    continue;
                }
                // A small result is read here: handing it to the blocking pool would cost
                // another thread's wake-up for microseconds of work.
                if raw.get().len() <= INLINE_BYTES {
                    let refs = keep_tables(&raw, &origin, &store);
                    kept.record(fingerprint, refs, &store);
                    continue;
                }
                let store = store.clone();
                let worked = tokio::task::spawn_blocking(move || {
                    let refs = keep_tables(&raw, &origin, &store);
                    (refs, store)
                })
                .await;
                if let Ok((refs, store)) = worked {
                    kept.record(fingerprint, refs, &store);
                }
            }
        });
        Self { queue }
    }

    /// The keep that hands `raw` to this keeper once dropped: a copy of the bytes (the answer
    /// takes the original), made only for results that might be kept.
    pub(crate) fn keep(&self, raw: &RawValue, origin: Origin) -> Keep {
        Keep(Some(((raw.to_owned(), origin), self.queue.clone())))
    }
}

/// The result's tables as datasets (none when it holds no table).
fn keep_tables(raw: &RawValue, origin: &Origin, store: &Arc<Store>) -> Vec<String> {
    // A bug in the data path must not end the keeper (it would keep nothing more).
    let kept = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        crate::intercept::keep_passed_through(raw, origin, store)
    }));
    match kept {
        Ok(Ok(added)) => added.iter().map(|d| d.reference.clone()).collect(),
        Ok(Err(reason)) => {
            tracing::debug!(server = %origin.server, tool = %origin.tool, "a passed-through table was not kept: {reason}");
            Vec::new()
        }
        Err(_) => {
            tracing::error!(server = %origin.server, tool = %origin.tool, "keeping a passed-through table panicked");
            Vec::new()
        }
    }
}

/// Which server, tool, arguments and bytes a result was: the same again is not kept twice.
fn fingerprint(raw: &RawValue, origin: &Origin) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    origin.server.hash(&mut hasher);
    origin.tool.hash(&mut hasher);
    origin.args.to_string().hash(&mut hasher);
    raw.get().hash(&mut hasher);
    hasher.finish()
}

/// What the keeper holds: the refs it added, oldest first, and by which result.
#[derive(Default)]
struct Kept {
    order: VecDeque<String>,
    by_result: HashMap<u64, Vec<String>>,
}

impl Kept {
    /// Whether the tables of the result `fingerprint` are all still held (each is marked used).
    fn holds(&mut self, fingerprint: u64, store: &Store) -> bool {
        let Some(refs) = self.by_result.get(&fingerprint) else {
            return false;
        };
        if refs.iter().all(|r| store.get(r).is_some()) {
            return true;
        }
        self.by_result.remove(&fingerprint);
        false
    }

    fn record(&mut self, fingerprint: u64, refs: Vec<String>, store: &Store) {
        if refs.is_empty() {
            return;
        }
        self.order.extend(refs.iter().cloned());
        self.by_result.insert(fingerprint, refs);
        while self.order.len() > MAX_KEPT_TABLES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            store.let_go(&old);
            self.by_result.retain(|_, refs| !refs.contains(&old));
        }
    }
}
