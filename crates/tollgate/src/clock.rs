//! Where time comes from.
//!
//! Algorithms never read a clock: they are given `now` in integer
//! microseconds since the Unix epoch. Stores read it from a [`Clock`], so
//! tests and the simulator can drive time by hand with a [`ManualClock`].

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of wall-clock time in microseconds since the Unix epoch.
///
/// Wall-clock (not monotonic) time is what windows aligned to the epoch need;
/// the algorithms clamp time so that a clock stepping backwards never refills
/// a bucket.
pub trait Clock: Debug + Send + Sync + 'static {
    /// Microseconds since the Unix epoch.
    fn now_micros(&self) -> u64;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

/// Unix time kept by a fast monotonic counter: the system clock is read
/// once, when the clock is made, and then advanced by
/// [`quanta`](https://docs.rs/quanta) (the CPU's time-stamp counter where
/// it is reliable, the OS monotonic clock otherwise).
///
/// Reading it costs a few nanoseconds where [`SystemClock`] costs tens (a
/// `clock_gettime` call and a conversion), which matters to a store that
/// decides in about a hundred. It never steps backwards, and it does not
/// follow later corrections of the system clock (NTP steps and slews), so
/// after a long uptime it may differ from the system clock by the drift
/// NTP would have corrected. That is harmless within one process, which is
/// why [`MemoryStore`](crate::MemoryStore) uses it by default; clocks that
/// several machines must agree on (client time on Redis) should be
/// [`SystemClock`].
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    anchor_micros: u64,
    /// The counter's raw reading at the anchor.
    start: u64,
    counter: &'static quanta::Clock,
}

/// One calibrated counter for the process (calibrating takes milliseconds).
fn counter() -> &'static quanta::Clock {
    static COUNTER: OnceLock<quanta::Clock> = OnceLock::new();
    COUNTER.get_or_init(quanta::Clock::new)
}

impl MonotonicClock {
    /// A clock reading the system's Unix time now.
    pub fn new() -> MonotonicClock {
        let counter = counter();
        MonotonicClock {
            anchor_micros: SystemClock.now_micros(),
            start: counter.raw(),
            counter,
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now_micros(&self) -> u64 {
        // The raw counter scaled by its own calibration: no thread-local
        // lookup of a mocked clock, no 128-bit `Duration` conversion.
        let nanos = self.counter.delta_as_nanos(self.start, self.counter.raw());
        self.anchor_micros + nanos / 1_000
    }
}

/// A clock that only moves when told to; clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000_000);
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(clock.now_micros(), 1_250_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    micros: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `micros` microseconds since the epoch.
    pub fn new(micros: u64) -> ManualClock {
        ManualClock {
            micros: Arc::new(AtomicU64::new(micros)),
        }
    }

    /// Sets the time.
    pub fn set(&self, micros: u64) {
        self.micros.store(micros, Ordering::SeqCst);
    }

    /// Moves the time forward.
    pub fn advance(&self, by: Duration) {
        self.micros
            .fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.micros.load(Ordering::SeqCst)
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now_micros(&self) -> u64 {
        (**self).now_micros()
    }
}
