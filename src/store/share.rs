//! One session's share of the engine's memory pool: the shared pool still bounds every session
//! together, and this bounds one session alone, so a session that sorts or joins as much as the
//! pool holds leaves room for the others (SPEC §10.2).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::common::{DataFusionError, Result};
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

#[derive(Debug)]
pub(super) struct SessionShare {
    inner: Arc<dyn MemoryPool>,
    limit: usize,
    used: AtomicUsize,
}

impl SessionShare {
    pub(super) fn new(inner: Arc<dyn MemoryPool>, limit: usize) -> Self {
        Self {
            inner,
            limit,
            used: AtomicUsize::new(0),
        }
    }
}

impl fmt::Display for SessionShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a session's share ({} bytes) of {}",
            self.limit, self.inner
        )
    }
}

impl MemoryPool for SessionShare {
    fn name(&self) -> &str {
        "loom-session-share"
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.used.fetch_add(additional, Ordering::AcqRel);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(shrink))
            });
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        let used = self.used.load(Ordering::Acquire);
        if used.saturating_add(additional) > self.limit {
            return Err(DataFusionError::ResourcesExhausted(format!(
                "this session's share of the engine's memory is used up ({used} of {} bytes, \
                 half of engineMemoryLimit, reserved; {additional} more asked for): other \
                 sessions keep the rest",
                self.limit
            )));
        }
        self.inner.try_grow(reservation, additional)?;
        self.used.fetch_add(additional, Ordering::AcqRel);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    use super::*;

    #[test]
    fn a_share_refuses_past_its_limit_and_the_pool_still_bounds_all() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1000));
        let a: Arc<dyn MemoryPool> = Arc::new(SessionShare::new(pool.clone(), 600));
        let b: Arc<dyn MemoryPool> = Arc::new(SessionShare::new(pool.clone(), 600));
        let ra = MemoryConsumer::new("a").register(&a);
        let rb = MemoryConsumer::new("b").register(&b);
        ra.try_grow(500).expect("within a's share");
        let error = ra.try_grow(200).expect_err("past a's share");
        assert!(error.to_string().contains("share"), "{error}");
        rb.try_grow(500).expect("b has its own share");
        assert!(rb.try_grow(50).is_err(), "the pool holds 1000 in all");
        ra.shrink(300);
        rb.try_grow(50).expect("room again");
        assert_eq!(pool.reserved(), 750);
    }
}
