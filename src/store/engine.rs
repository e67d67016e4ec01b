//! The engine's own threads, its memory pool size, and reading a query's result without ever
//! holding more than the caps (SPEC §10.2).
//!
//! A query can be CPU-heavy for as long as `queryTimeoutMs` allows (planning included, which is
//! synchronous work no timeout interrupts while it runs): it must never run on the threads that
//! carry every other server's traffic. So planning, the plan check and execution run on a
//! runtime of their own, and the caller's timeout — on the gateway's runtime — answers on time
//! and aborts the query task.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use arrow::array::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use futures::StreamExt;
use tokio_util::task::AbortOnDropHandle;

use super::QueryError;

/// The stack of each engine thread. Planning and optimizing recurse once per level of a plan or
/// an expression; the statement check bounds those levels ([`super::guard::MAX_EXPRESSION_DEPTH`],
/// the CTE expansion), and this leaves a wide margin above them. Only touched pages cost memory.
pub(crate) const STACK_BYTES: usize = 64 * 1024 * 1024;

/// The engine's runtime. Dropped without blocking (a runtime dropped inside another one's task
/// would panic otherwise).
pub(crate) struct Engine {
    runtime: Option<tokio::runtime::Runtime>,
    threads: usize,
    /// Work whose caller gave up at its timeout and that has not stopped yet.
    overdue: Arc<AtomicUsize>,
}

/// Where one piece of work is: running, past its timeout, or done.
const RUNNING: u8 = 0;
const OVERDUE: u8 = 1;
const DONE: u8 = 2;

/// Marks its work done when the work's future is dropped (finished or aborted), taking it off
/// the overdue count if it was on it.
struct Finish {
    state: Arc<AtomicU8>,
    overdue: Arc<AtomicUsize>,
}

impl Drop for Finish {
    fn drop(&mut self) {
        if self.state.swap(DONE, Ordering::AcqRel) == OVERDUE {
            self.overdue.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Engine {
    /// One worker thread per core but one (a core stays free for the threads that carry
    /// passthrough traffic: with every core busy in queries, a call's p99 went from 0.4 to 4 ms),
    /// at least one; named so they show in a profile.
    pub(crate) fn start() -> Result<Self, String> {
        let threads = crate::parallel::cores().saturating_sub(1).max(1);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("loom-engine")
            .on_thread_start(lower_priority)
            .thread_stack_size(STACK_BYTES)
            .enable_time()
            .build()
            .map_err(|e| format!("cannot start the query engine's threads: {e}"))?;
        Ok(Self {
            runtime: Some(runtime),
            threads,
            overdue: Arc::default(),
        })
    }

    /// The engine's threads.
    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Spawn `work`, unless every engine thread may still be busy with work that passed its
    /// timeout: new work would then only queue behind it, unseen, so it is refused with a
    /// reason instead (SPEC §10.2).
    fn spawn<T: Send + 'static>(
        &self,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<(AbortOnDropHandle<T>, Arc<AtomicU8>), String> {
        let overdue = self.overdue.load(Ordering::Acquire);
        if overdue >= self.threads {
            return Err(format!(
                "the query engine is still busy: {overdue} earlier quer{} passed queryTimeoutMs \
                 and {} not stopped yet; try again in a few seconds",
                if overdue == 1 { "y" } else { "ies" },
                if overdue == 1 { "has" } else { "have" },
            ));
        }
        let state = Arc::new(AtomicU8::new(RUNNING));
        let finish = Finish {
            state: state.clone(),
            overdue: self.overdue.clone(),
        };
        let task = self.handle()?.spawn(async move {
            let _finish = finish;
            work.await
        });
        Ok((AbortOnDropHandle::new(task), state))
    }

    /// The caller gave up on the work of `state`: count it overdue until it stops.
    fn give_up(&self, state: &AtomicU8) {
        self.overdue.fetch_add(1, Ordering::AcqRel);
        if state
            .compare_exchange(RUNNING, OVERDUE, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // It finished meanwhile.
            self.overdue.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn handle(&self) -> Result<&tokio::runtime::Handle, String> {
        self.runtime
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
            .ok_or_else(|| "the query engine has stopped".to_string())
    }

    /// Run `work` on the engine and wait for it at most `timeout`, on the caller's runtime: when
    /// the engine's threads are all inside synchronous work (a long sort, an optimizer pass),
    /// a timer on the engine itself could not fire. Past the timeout the task is aborted and
    /// `None` is returned.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        timeout: Duration,
        work: impl Future<Output = T> + Send + 'static,
    ) -> Result<Option<T>, String> {
        // Aborted when dropped: a caller that gives up (its own timeout, a cancelled request)
        // stops the work instead of detaching it.
        let (mut task, state) = self.spawn(work)?;
        match tokio::time::timeout(timeout, &mut task).await {
            Ok(done) => done
                .map(Some)
                .map_err(|e| format!("the engine task failed: {e}")),
            Err(_) => {
                self.give_up(&state);
                Ok(None)
            }
        }
    }

    /// Run a query on the engine; after `timeout` the caller gets
    /// [`QueryError::Timeout`] at once and the task is aborted (it stops at its next await
    /// point; DataFusion's operators yield between batches).
    pub(crate) async fn run_within<T: Send + 'static>(
        &self,
        timeout: Duration,
        work: impl Future<Output = Result<T, QueryError>> + Send + 'static,
    ) -> Result<T, QueryError> {
        let (mut task, state) = self.spawn(work).map_err(QueryError::Sql)?;
        match tokio::time::timeout(timeout, &mut task).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(join)) => Err(QueryError::Sql(format!("the query failed: {join}"))),
            Err(_) => {
                self.give_up(&state);
                Err(QueryError::Timeout(timeout.as_millis()))
            }
        }
    }
}

/// Engine threads run at a lower priority (nice 10) than the threads that carry passthrough
/// traffic, so a core busy with a query yields to a tool call at once.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: setpriority takes plain integers and touches no memory of ours; on Linux
        // `who = 0` with PRIO_PROCESS names the calling thread. A failure only leaves the
        // thread at its normal priority.
        #[allow(unsafe_code)]
        let _ = unsafe { libc::setpriority(libc::PRIO_PROCESS as _, 0, 10) };
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Read `stream` to the end, failing as soon as the result has more than `max_rows` rows or
/// `max_bytes` bytes of Arrow arrays: a `SELECT *` over a cross join stops where it passes the
/// cap, never after a process-sized collect.
pub(crate) async fn collect_capped(
    mut stream: SendableRecordBatchStream,
    max_rows: usize,
    max_bytes: usize,
) -> Result<(Vec<RecordBatch>, usize), QueryError> {
    let (mut batches, mut rows, mut bytes) = (Vec::new(), 0usize, 0usize);
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(|e| QueryError::Sql(e.to_string()))?;
        rows = rows.saturating_add(batch.num_rows());
        bytes = bytes.saturating_add(batch.get_array_memory_size());
        if rows > max_rows {
            return Err(QueryError::TooLarge {
                limit: max_rows as u64,
                what: "rows",
            });
        }
        if bytes > max_bytes {
            return Err(QueryError::TooLarge {
                limit: max_bytes as u64,
                what: "bytes (memoryBudgetBytes)",
            });
        }
        batches.push(batch);
    }
    Ok((batches, rows))
}

/// The engine's memory pool when `engineMemoryLimit` is not set: a quarter of the machine's
/// memory, at least 256 MiB and at most 8 GiB (2 GiB when the machine's memory is unknown).
pub(crate) fn default_memory_limit() -> u64 {
    const MIB: u64 = 1024 * 1024;
    match total_memory() {
        Some(total) => (total / 4).clamp(256 * MIB, 8 * 1024 * MIB),
        None => 2 * 1024 * MIB,
    }
}

/// Physical memory, from `/proc/meminfo` (Linux); `None` elsewhere.
fn total_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_pool_is_a_quarter_of_memory_within_bounds() {
        let limit = default_memory_limit();
        assert!((256 << 20..=8 << 30).contains(&limit), "{limit}");
        if let Some(total) = total_memory() {
            assert!(
                limit <= total / 4 || limit == 256 << 20,
                "{limit} of {total}"
            );
        }
    }

    /// Work that cannot be interrupted keeps its thread past the timeout: while every engine
    /// thread is held so, new work is refused with a reason instead of queueing unseen.
    #[tokio::test]
    async fn an_engine_busy_past_its_timeouts_refuses_new_work_until_it_is_free() {
        let engine = Engine::start().expect("engine");
        for _ in 0..engine.threads() {
            let outcome = engine
                .run_within(Duration::from_millis(50), async {
                    std::thread::sleep(Duration::from_millis(700));
                    Ok::<(), QueryError>(())
                })
                .await;
            assert!(
                matches!(outcome, Err(QueryError::Timeout(50))),
                "{outcome:?}"
            );
        }
        let refused = engine
            .run_within(Duration::from_secs(5), async { Ok::<u8, QueryError>(1) })
            .await;
        match refused {
            Err(QueryError::Sql(message)) => assert!(message.contains("still busy"), "{message}"),
            other => panic!("not refused: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let later = engine
            .run_within(Duration::from_secs(5), async { Ok::<u8, QueryError>(1) })
            .await;
        assert!(matches!(later, Ok(1)), "{later:?}");
    }

    #[tokio::test]
    async fn a_query_past_its_time_is_answered_on_time_and_stopped() {
        let engine = Engine::start().expect("engine");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let outcome = engine
            .run_within(Duration::from_millis(50), async move {
                // Holds `tx` until aborted: dropping it is how the test sees the abort.
                let _tx = tx;
                std::future::pending::<Result<(), QueryError>>().await
            })
            .await;
        assert_eq!(outcome, Err(QueryError::Timeout(50)));
        assert!(rx.await.is_err(), "the task was not stopped");
    }
}
