//! The circuit breaker: after enough consecutive failures of the primary
//! store, stop calling it until a probe succeeds.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Whether decisions go to the primary store.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BreakerState {
    /// The primary store is used.
    Closed,
    /// The primary store failed; decisions come from the failure policy
    /// while a background probe waits for it to answer again.
    Open,
}

impl BreakerState {
    /// `closed` or `open`, for logs, metrics and health endpoints.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
        }
    }
}

#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    failures: AtomicU32,
    open: AtomicBool,
    /// When the breaker last opened, while it is open. Written only on the
    /// two transitions, read by status pages, never on the decision path.
    opened_at: Mutex<Option<Instant>>,
}

impl Breaker {
    pub(crate) fn new(threshold: u32) -> Breaker {
        Breaker {
            threshold,
            failures: AtomicU32::new(0),
            open: AtomicBool::new(false),
            opened_at: Mutex::new(None),
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        if self.open.load(Ordering::Acquire) {
            BreakerState::Open
        } else {
            BreakerState::Closed
        }
    }

    pub(crate) fn is_open(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    pub(crate) fn success(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a failure; one that waiting does not mend (not `transient`)
    /// opens the breaker at once. True for the one call that opened the
    /// breaker, so that the switch is logged and probed once.
    pub(crate) fn failure(&self, transient: bool) -> bool {
        let n = self.failures.fetch_add(1, Ordering::Relaxed) + 1;
        (n >= self.threshold || !transient) && self.open()
    }

    /// Opens the breaker whatever the count; true if it was closed.
    pub(crate) fn open(&self) -> bool {
        let mut opened_at = self.opened_at.lock();
        let opened = !self.open.swap(true, Ordering::AcqRel);
        if opened {
            *opened_at = Some(Instant::now());
        }
        opened
    }

    pub(crate) fn close(&self) {
        let mut opened_at = self.opened_at.lock();
        self.failures.store(0, Ordering::Relaxed);
        self.open.store(false, Ordering::Release);
        *opened_at = None;
    }

    /// How long the breaker has been open: `None` while it is closed.
    pub(crate) fn open_for(&self) -> Option<Duration> {
        self.opened_at.lock().map(|at| at.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_once_after_the_threshold_and_closes() {
        let b = Breaker::new(3);
        assert!(!b.failure(true));
        b.success();
        assert!(!b.failure(true) && !b.failure(true));
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.failure(true), "the third consecutive failure opens it");
        assert!(!b.failure(true), "only one caller sees the switch");
        assert_eq!(b.state(), BreakerState::Open);
        b.close();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(!b.failure(true));
    }

    #[test]
    fn a_failure_waiting_does_not_mend_opens_at_once() {
        let b = Breaker::new(3);
        assert!(b.failure(false), "a permission refused opens it");
        assert_eq!(b.state(), BreakerState::Open);
        assert!(!b.failure(false), "once");
    }

    #[test]
    fn it_tells_how_long_it_has_been_open() {
        let b = Breaker::new(1);
        assert_eq!(b.open_for(), None, "closed");
        assert!(b.failure(true));
        let first = b.open_for().expect("open since the failure");
        std::thread::sleep(Duration::from_millis(5));
        assert!(!b.open(), "already open: the moment it opened stays");
        assert!(b.open_for().expect("still open") >= first + Duration::from_millis(5));
        b.close();
        assert_eq!(b.open_for(), None, "closed again");
    }
}
