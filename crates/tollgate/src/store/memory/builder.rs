//! Configuring a [`MemoryStore`]: its clock, its key cap and its sweep
//! interval.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::{Inner, MemoryStore, SHARDS, Shard};
use crate::clock::{Clock, MonotonicClock};

/// The default cap on keys.
pub const DEFAULT_MAX_KEYS: usize = 1 << 20;

/// The default interval between sweeps of keys back to their fresh state.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(10);

/// Builds a [`MemoryStore`] with a clock, a key cap and a sweep interval.
#[derive(Debug)]
pub struct MemoryStoreBuilder<C> {
    clock: C,
    max_keys: usize,
    sweep_interval: Duration,
}

impl MemoryStoreBuilder<MonotonicClock> {
    pub(super) fn new() -> Self {
        MemoryStoreBuilder {
            clock: MonotonicClock::new(),
            max_keys: DEFAULT_MAX_KEYS,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
        }
    }
}

impl<C: Clock> MemoryStoreBuilder<C> {
    /// Reads time from `clock`.
    pub fn clock<D: Clock>(self, clock: D) -> MemoryStoreBuilder<D> {
        MemoryStoreBuilder {
            clock,
            max_keys: self.max_keys,
            sweep_interval: self.sweep_interval,
        }
    }

    /// Holds at most this many keys (rounded up to a multiple of 64; at
    /// least 64). Default: 2^20.
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// Drops expired keys at most this often (piggy-backed on the arrival of
    /// new keys, so an idle store costs nothing). Default: 10 s.
    pub fn sweep_interval(mut self, interval: Duration) -> Self {
        self.sweep_interval = interval;
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore<C> {
        let now = self.clock.now_micros();
        let interval = self.sweep_interval.as_micros() as u64;
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS).map(|_| Shard::default()).collect(),
                hasher: foldhash::fast::RandomState::default(),
                clock: self.clock,
                keys_per_shard: self.max_keys.div_ceil(SHARDS).max(1),
                sweep_interval: interval,
                next_sweep: AtomicU64::new(now.saturating_add(interval)),
            }),
        }
    }
}

impl MemoryStore<MonotonicClock> {
    /// A store on a [`MonotonicClock`] with the default cap and sweep
    /// interval.
    pub fn new() -> Self {
        MemoryStoreBuilder::new().build()
    }

    /// A builder, to set the clock, the key cap or the sweep interval.
    pub fn builder() -> MemoryStoreBuilder<MonotonicClock> {
        MemoryStoreBuilder::new()
    }
}

impl Default for MemoryStore<MonotonicClock> {
    fn default() -> Self {
        MemoryStore::new()
    }
}
