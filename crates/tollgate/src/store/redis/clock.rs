//! Whose clock a decision reads, and our estimate of the server's: the
//! offset between our clock and the server's, measured with `TIME` at
//! connect and every 30 s, from which the deadlines a call carries and
//! the server-clock fixed window's reset are reckoned.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::RedisStore;
use super::error::store_error;
use super::keys;
use crate::algorithm::MAX_EXACT;
use crate::{Clock, Error, Result};

/// Where the scripts read the time.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum TimeSource {
    /// The server's clock (`TIME` in the script; for a fixed window of
    /// whole ms, and for a token bucket, GCRA or leaky bucket whose
    /// interval is whole ms, the expiry of its key, see [`keys`](super::keys)):
    /// application servers with skewed clocks still agree. The default.
    #[default]
    Server,
    /// The caller's clock, passed as an argument: for Redis-compatible
    /// services that refuse `TIME` in scripts, and for the simulator. The
    /// stored time never moves backwards, so a late request cannot refill
    /// a bucket.
    Client(Arc<dyn Clock>),
}

/// How often the offset between our clock and the server's is measured
/// again (clocks drift apart by some parts per million).
const OFFSET_REFRESH_MICROS: u64 = 30_000_000;

impl RedisStore {
    /// Measures the server's clock against ours with `TIME`, taking the
    /// middle of the round trip as the moment the server read it.
    pub(super) async fn measure_offset(&self) -> Result<()> {
        let before = self.inner.clock.now_micros();
        let time: (u64, u64) = redis::from_redis_value(
            self.inner
                .conn
                .query(&redis::cmd("TIME"))
                .await
                .map_err(|e| store_error(&e))?,
        )
        .map_err(|e| store_error(&redis::RedisError::from(e)))?;
        let after = self.inner.clock.now_micros();
        let server = time.0 * 1_000_000 + time.1;
        let local = before + (after - before) / 2;
        self.inner
            .offset
            .store(server as i64 - local as i64, Ordering::Relaxed);
        self.inner
            .offset_error
            .store((after - before).div_ceil(2), Ordering::Relaxed);
        self.inner.offset_at.store(after, Ordering::Relaxed);
        Ok(())
    }

    /// The deadline argument: 0 (none), or when, on the server's clock, a
    /// call made now must have run.
    pub(super) fn server_deadline(&self) -> u64 {
        match self.inner.deadline {
            Some(deadline) => self.server_now() + deadline,
            None => 0,
        }
    }

    /// The clock key a lone server-clock window check with `deadline`
    /// (server µs) names (see `lua/fixed_window_server_deadline.lua`), which
    /// then stands for its deadline: one that exists until a ms X with
    /// (X + 1) ms at or before the deadline, X on a grid of a sixteenth of
    /// the store's deadline, so that the checks sent within that much of
    /// each other share it and one in so many reads the clock, and a check
    /// is refused at most that and a ms before its own deadline. `None` on
    /// a cluster (a script's keys share one slot, and a slot's clock key
    /// would seldom be there), and for deadlines under 16 ms (whose checks
    /// read `TIME` against their deadline exactly).
    pub(super) fn deadline_clock_key(&self, deadline: u64) -> Option<Vec<u8>> {
        let grid = self.inner.deadline? / 16_000;
        if grid == 0 || self.inner.conn.is_cluster() {
            return None;
        }
        let x = (deadline / 1000 / grid * grid).checked_sub(1)?;
        Some(keys::clock_key(&self.inner.prefix, x))
    }

    /// Our estimate of the server's clock now, in µs (within the offset's
    /// error), measuring the offset again when it is older than 30 s, or
    /// when the store moved to a new master (Sentinel), whose clock is
    /// another.
    pub(super) fn server_now(&self) -> u64 {
        let now = self.inner.clock.now_micros();
        let at = self.inner.offset_at.load(Ordering::Relaxed);
        let switches = self.master_switches();
        let measured_on = self.inner.offset_master.load(Ordering::Relaxed);
        // One caller wins each compare-exchange, so one measurement runs.
        let stale = (now.saturating_sub(at) > OFFSET_REFRESH_MICROS
            && self
                .inner
                .offset_at
                .compare_exchange(at, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok())
            || (switches != measured_on
                && self
                    .inner
                    .offset_master
                    .compare_exchange(measured_on, switches, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok());
        if stale && let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let store = self.clone();
            // A failed measurement keeps the last offset; the next call
            // after the refresh interval tries again.
            runtime.spawn(async move { store.measure_offset().await });
        }
        let offset = self.inner.offset.load(Ordering::Relaxed);
        (now as i64 + offset) as u64
    }

    /// The first two numbers of every call: the time source (-1 = the
    /// server's clock, else the client's now) and the deadline.
    pub(super) fn time_args(&self) -> Result<[f64; 2]> {
        match &self.inner.time {
            TimeSource::Server => Ok([-1.0, self.server_deadline() as f64]),
            TimeSource::Client(clock) => {
                let now = clock.now_micros();
                if now >= MAX_EXACT {
                    return Err(Error::argument(
                        "now",
                        format!("the client clock reads {now}µs, beyond 2^53"),
                    ));
                }
                Ok([now as f64, 0.0])
            }
        }
    }

    /// The time a calendar window's bounds are computed around, from the
    /// time argument of a call (-1 for the server's clock): the client's
    /// now as it is, or our estimate of the server's a second early, so
    /// that the script's own now falls in that window or the next, of
    /// which it is also told (see `lua/fixed_window.lua`).
    pub(super) fn calendar_time(&self, time: f64) -> u64 {
        if time < 0.0 {
            self.server_now().saturating_sub(1_000_000)
        } else {
            time as u64
        }
    }
}
