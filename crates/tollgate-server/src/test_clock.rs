//! The clock the service decides by, and the one way tests pin it.
//!
//! For tests only: `TOLLGATE_TEST_CLOCK_MS` (or the hidden `serve` flag
//! `--test-clock-ms`) stands the clock of every decision still at that
//! Unix time in milliseconds: the memory store's and ERL mode's. A test
//! that runs the binary can then count a per-minute window without the
//! minute turning under it. Redis on the server's clock (the default)
//! keeps the server's. Not a setting: it is missing from the docs on
//! purpose, and a service run with it never sees time pass.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use tollgate::{Clock, MonotonicClock};

static PINNED: OnceLock<Option<u64>> = OnceLock::new();

/// Pins the clock at `ms` (when given), once, before anything decides.
pub(crate) fn pin(ms: Option<u64>) {
    let _ = PINNED.set(ms);
}

fn pinned_micros() -> Option<u64> {
    PINNED
        .get()
        .copied()
        .flatten()
        .map(|ms| ms.saturating_mul(1_000))
}

/// Unix seconds now (ERL mode's windows).
pub(crate) fn unix_secs() -> u64 {
    match pinned_micros() {
        Some(micros) => micros / 1_000_000,
        None => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    }
}

/// The memory store's clock: the monotonic one, unless pinned.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ServiceClock {
    Running(MonotonicClock),
    Pinned(u64),
}

impl ServiceClock {
    pub(crate) fn new() -> ServiceClock {
        match pinned_micros() {
            Some(micros) => ServiceClock::Pinned(micros),
            None => ServiceClock::Running(MonotonicClock::new()),
        }
    }
}

impl Clock for ServiceClock {
    fn now_micros(&self) -> u64 {
        match self {
            ServiceClock::Running(clock) => clock.now_micros(),
            ServiceClock::Pinned(micros) => *micros,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pinned_clock_stands_still() {
        let clock = ServiceClock::Pinned(1_800_000_000_000_000);
        assert_eq!(clock.now_micros(), 1_800_000_000_000_000);
        assert_eq!(clock.now_micros(), 1_800_000_000_000_000);
        let running = ServiceClock::Running(MonotonicClock::new());
        assert!(running.now_micros() > 1_700_000_000_000_000);
    }
}
