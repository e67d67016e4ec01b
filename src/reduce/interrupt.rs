//! When a reduction must stop (SPEC §19.3): a deadline and a cancel flag, which every stage checks
//! at bounded intervals.
//!
//! The reduction runs on the blocking pool, where nothing can abort it from outside: a client's
//! cancel dropped the answer but left the thread reducing a hostile page for 88 s (issue 35). Each
//! stage now asks [`Interrupt::check`] every few thousand steps of its own work; past the deadline
//! a stage hands over to its cheapest fallback (the page's text, no JSON summary, the rest of the
//! text unlifted), and on cancel the whole reduction stops and the original passes through.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long one result's reduction may take when its caller sets no deadline of its own. Every
/// stage is linear or bounded before it starts, and a 20 MiB page takes well under a second in a
/// release build; five seconds leaves room for a loaded machine while still stopping a page that
/// would otherwise keep a blocking thread busy for minutes.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(5);

/// Steps of work between two looks at the clock and the flag: a clock read costs tens of
/// nanoseconds, a step a few, so checking every step would double the cost of the cheap loops.
pub const STRIDE: u32 = 4096;

/// Why a stage stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The deadline passed: the stage falls back to its cheapest path.
    Deadline,
    /// The caller gave up on the result: nothing more is worth doing.
    Cancelled,
}

/// The error text of a reduction stopped by its caller's cancel.
pub const CANCELLED: &str = "the reduction was cancelled";

/// A deadline and a cancel flag; either may be absent. Cheap to clone (the flag is shared).
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    deadline: Option<Instant>,
    cancel: Option<Arc<AtomicBool>>,
}

impl Interrupt {
    /// Never fires.
    pub fn none() -> Self {
        Self::default()
    }

    /// Fires `limit` from now.
    pub fn after(limit: Duration) -> Self {
        Self {
            deadline: Instant::now().checked_add(limit),
            cancel: None,
        }
    }

    /// Fires at `deadline` (already passed: at the first check).
    pub fn at(deadline: Instant) -> Self {
        Self {
            deadline: Some(deadline),
            cancel: None,
        }
    }

    /// Also fires once `flag` is set (by whoever gave up on the result).
    pub fn with_cancel(mut self, flag: Arc<AtomicBool>) -> Self {
        self.cancel = Some(flag);
        self
    }

    /// The cancel flag alone: for a fallback that must finish once the deadline has passed.
    pub fn cancel_only(&self) -> Self {
        Self {
            deadline: None,
            cancel: self.cancel.clone(),
        }
    }

    /// Whether the caller gave up on the result.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    /// `Some` once the reduction must stop; a cancel wins over a passed deadline (it stops more).
    pub fn check(&self) -> Option<Stop> {
        if self.cancelled() {
            return Some(Stop::Cancelled);
        }
        match self.deadline {
            Some(deadline) if Instant::now() >= deadline => Some(Stop::Deadline),
            _ => None,
        }
    }

    /// A counter that checks this at the first step and every [`STRIDE`] steps after: a stage
    /// that starts past the deadline (or cancelled) stops at once, however little it has to do.
    pub fn pulse(&self) -> Pulse<'_> {
        Pulse {
            interrupt: self,
            left: 1,
            stopped: None,
        }
    }
}

/// Checks an [`Interrupt`] at the first call of [`Pulse::beat`] and every [`STRIDE`] calls
/// after, and remembers a stop.
#[derive(Debug)]
pub struct Pulse<'i> {
    interrupt: &'i Interrupt,
    left: u32,
    stopped: Option<Stop>,
}

impl Pulse<'_> {
    /// One step of work; `true` once the work must stop (and from then on).
    pub fn beat(&mut self) -> bool {
        if self.stopped.is_some() {
            return true;
        }
        self.left -= 1;
        if self.left == 0 {
            self.left = STRIDE;
            self.stopped = self.interrupt.check();
        }
        self.stopped.is_some()
    }

    /// `n` steps at once (a chunk of bytes scanned by a fast loop).
    pub fn beat_by(&mut self, n: usize) -> bool {
        if self.stopped.is_some() {
            return true;
        }
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        if n >= self.left {
            self.left = STRIDE;
            self.stopped = self.interrupt.check();
        } else {
            self.left -= n;
        }
        self.stopped.is_some()
    }

    /// Why the work stopped, if it did.
    pub fn stopped(&self) -> Option<Stop> {
        self.stopped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn none_never_fires_a_passed_deadline_does_and_cancel_wins() {
        assert_eq!(Interrupt::none().check(), None);
        assert_eq!(Interrupt::after(Duration::from_secs(3600)).check(), None);
        let passed = Interrupt::at(Instant::now());
        assert_eq!(passed.check(), Some(Stop::Deadline));
        let flag = Arc::new(AtomicBool::new(false));
        let both = passed.with_cancel(flag.clone());
        assert_eq!(both.check(), Some(Stop::Deadline));
        assert!(!both.cancelled());
        flag.store(true, Ordering::Relaxed);
        assert_eq!(both.check(), Some(Stop::Cancelled));
        assert!(both.cancelled());
    }

    #[test]
    fn a_pulse_looks_at_once_then_once_per_stride_and_stays_stopped() {
        let flag = Arc::new(AtomicBool::new(true));
        let interrupt = Interrupt::none().with_cancel(flag.clone());
        assert!(interrupt.pulse().beat(), "the first step looks");
        flag.store(false, Ordering::Relaxed);
        let mut pulse = interrupt.pulse();
        assert!(!pulse.beat());
        flag.store(true, Ordering::Relaxed);
        let beats = (1..=2 * STRIDE).take_while(|_| !pulse.beat()).count();
        // Set after the first look: read at the end of the stride that follows it.
        assert_eq!(beats, STRIDE as usize - 1);
        assert_eq!(pulse.stopped(), Some(Stop::Cancelled));
        flag.store(false, Ordering::Relaxed);
        assert!(pulse.beat(), "a stop is not taken back");
        let mut bulk = interrupt.pulse();
        assert!(!bulk.beat_by(10), "cleared flag");
        flag.store(true, Ordering::Relaxed);
        assert!(
            bulk.beat_by(STRIDE as usize),
            "a chunk of a stride or more looks at once"
        );
    }
}
