//! Keeping memory bounded: a new key at a full shard drops the shard's
//! expired keys first, then the key nearest to expiry among a sample; and
//! sweeps, piggy-backed on the arrival of new keys, drop every key back to
//! fresh.

use std::sync::atomic::Ordering;

use super::{Entry, MemoryStore, ShardMap};
use crate::algorithm::State;
use crate::clock::Clock;
use crate::store::key::{KeyRef, StoredKey};

/// How many entries eviction looks at to pick a victim.
const EVICTION_SAMPLE: usize = 8;

impl<C: Clock> MemoryStore<C> {
    /// Drops every key whose state is back to fresh; returns how many.
    pub fn sweep(&self) -> usize {
        let now = self.inner.clock.now_micros();
        self.inner
            .shards
            .iter()
            .map(|shard| shard.0.lock().retain(|e| e.expires_at > now, self.rehash()))
            .sum()
    }

    /// Inserts or replaces an entry, keeping the shard within its cap.
    pub(super) fn store_entry(
        &self,
        map: &mut ShardMap,
        hash: u64,
        key: KeyRef<'_>,
        state: State,
        now: u64,
        reset: u64,
    ) {
        match map.find_mut(hash, |e| key.matches(&e.key)) {
            Some((i, _)) if reset == 0 => {
                map.remove(i, self.rehash());
            }
            Some((_, entry)) => {
                entry.state = state;
                entry.expires_at = now + reset;
            }
            None if reset == 0 => {}
            None => self.insert_new(map, hash, key, state, now, reset),
        }
    }

    /// Inserts a key that is not in `map`, keeping the shard within its cap:
    /// expired keys go first, then the one nearest to expiry among a sample.
    pub(super) fn insert_new(
        &self,
        map: &mut ShardMap,
        hash: u64,
        key: KeyRef<'_>,
        state: State,
        now: u64,
        reset: u64,
    ) {
        if map.len() >= self.inner.keys_per_shard {
            map.retain(|e| e.expires_at > now, self.rehash());
        }
        if map.len() >= self.inner.keys_per_shard {
            let victim = map
                .iter()
                .take(EVICTION_SAMPLE)
                .min_by_key(|(_, e)| e.expires_at)
                .map(|(i, _)| i);
            if let Some(i) = victim {
                map.remove(i, self.rehash());
            }
        }
        let entry = Entry {
            key: StoredKey::new(key),
            state,
            expires_at: now + reset,
        };
        map.insert_unique(hash, entry, self.rehash());
    }

    /// Sweeps every shard when the interval has passed; only one caller wins.
    pub(super) fn maybe_sweep(&self, now: u64) {
        let next = self.inner.next_sweep.load(Ordering::Relaxed);
        if now >= next
            && self
                .inner
                .next_sweep
                .compare_exchange(
                    next,
                    now + self.inner.sweep_interval,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            self.sweep();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{ManualClock, Policy};

    use super::super::test_store as store;

    #[test]
    fn the_key_cap_holds_and_evicts_the_key_nearest_to_fresh() {
        let clock = ManualClock::new(1_000_000_000);
        let store = store(&clock, 500);
        assert_eq!(store.max_keys(), 512, "rounded up to 8 per shard");
        let short = Policy::fixed_window("short", 1, Duration::from_millis(10)).unwrap();
        let long = Policy::fixed_window("long", 1, Duration::from_secs(3600)).unwrap();
        // One long-lived key per shard is not enough to fill it; flood with
        // short-lived keys too.
        assert!(store.check_sync(&long, b"victim?", 1).unwrap().allowed);
        for i in 0..10_000u32 {
            store.check_sync(&short, &i.to_be_bytes(), 1).unwrap();
            assert!(store.len() <= store.max_keys(), "cap exceeded at {i}");
        }
        // The long-lived key expires last, so eviction by nearest expiry
        // keeps it: its limit still holds.
        assert!(!store.check_sync(&long, b"victim?", 1).unwrap().allowed);
    }

    #[test]
    fn at_the_cap_expired_keys_are_dropped_before_any_eviction() {
        let clock = ManualClock::new(1_000_000_000);
        // 16 keys per shard; 200 keys spread over 64 shards stay far below
        // that in every shard (a random hasher seed, but P(> 16) < 1e-8).
        let store = store(&clock, 1024);
        let p = Policy::fixed_window("p", 1, Duration::from_millis(10)).unwrap();
        for i in 0..5_000u32 {
            store.check_sync(&p, &i.to_be_bytes(), 1).unwrap();
        }
        assert!(store.len() <= 1024);
        clock.advance(Duration::from_millis(10));
        let long = Policy::fixed_window("long", 1, Duration::from_secs(60)).unwrap();
        for i in 0..200u32 {
            store.check_sync(&long, &i.to_be_bytes(), 1).unwrap();
        }
        for i in 0..200u32 {
            assert!(
                !store
                    .check_sync(&long, &i.to_be_bytes(), 1)
                    .unwrap()
                    .allowed,
                "key {i} kept its state"
            );
        }
    }

    /// Removing keys moves their neighbours in a shard's table (each
    /// removal shifts the entries after it back): every key left keeps its
    /// own state, and every key removed starts fresh.
    #[test]
    fn removing_keys_leaves_every_other_key_its_state() {
        let clock = ManualClock::new(1_000_000_000);
        let store = store(&clock, 1 << 16);
        let p = Policy::fixed_window("p", 1, Duration::from_secs(3600)).unwrap();
        let keys: Vec<[u8; 4]> = (0..3_000u32).map(u32::to_be_bytes).collect();
        for key in &keys {
            assert!(store.check_sync(&p, key, 1).unwrap().allowed);
        }
        for key in keys.iter().step_by(3) {
            store.reset_sync(&p, key).unwrap();
        }
        assert_eq!(store.len(), 2_000);
        for (i, key) in keys.iter().enumerate() {
            let allowed = store.check_sync(&p, key, 1).unwrap().allowed;
            assert_eq!(allowed, i % 3 == 0, "key {i}");
        }
    }

    #[test]
    fn sweeping_drops_exactly_the_keys_back_to_fresh() {
        let clock = ManualClock::new(5_000_000);
        let store = store(&clock, 1 << 16);
        let tb = Policy::token_bucket("tb", 10, Duration::from_secs(1), 10).unwrap();
        let log = Policy::sliding_log("log", 5, Duration::from_secs(2)).unwrap();
        store.check_sync(&tb, b"a", 5).unwrap(); // full again after 500 ms
        store.check_sync(&log, b"a", 1).unwrap(); // empty again after 2 s
        store.check_sync(&tb, b"peek", 0).unwrap(); // a peek stores nothing
        assert_eq!(store.len(), 2);
        clock.advance(Duration::from_millis(499));
        assert_eq!(store.sweep(), 0);
        clock.advance(Duration::from_millis(1));
        assert_eq!(store.sweep(), 1);
        assert_eq!(store.check_sync(&tb, b"a", 0).unwrap().remaining, 10);
        clock.advance(Duration::from_millis(1_500));
        assert_eq!(store.sweep(), 1);
        assert!(store.is_empty());
    }

    #[test]
    fn sweeps_run_by_themselves_as_new_keys_arrive() {
        let clock = ManualClock::new(0);
        let store = MemoryStore::builder()
            .clock(clock.clone())
            .sweep_interval(Duration::from_secs(1))
            .build();
        let p = Policy::fixed_window("p", 1, Duration::from_millis(100)).unwrap();
        for i in 0..100u32 {
            store.check_sync(&p, &i.to_be_bytes(), 1).unwrap();
        }
        clock.advance(Duration::from_secs(2));
        store.check_sync(&p, b"new", 1).unwrap();
        assert_eq!(store.len(), 1);
    }
}
