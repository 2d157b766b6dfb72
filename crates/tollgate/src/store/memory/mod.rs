#![doc = include_str!("../../docs/memory.md")]

// The files here, one concept each: `builder.rs`, `decide.rs` (one key's
// state under its shard's lock, and the calls made of it), `batch.rs`
// (several requests, atomic ones under every shard lock they need),
// `held.rs` (a held take's stamp and its exact refund), `eviction.rs` (the
// key cap and sweeps), `store.rs` (the [`Store`](super::Store) impl, on
// valid input) and `table.rs` (a shard's table). The (policy, key) pair it
// keys its table by is every store's: `store/key.rs`.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use parking_lot::Mutex;

use self::table::Table;
use super::key::{KeyRef, StoredKey};
use crate::algorithm::State;
use crate::clock::{Clock, MonotonicClock};

mod batch;
mod builder;
mod decide;
mod eviction;
mod held;
mod store;
mod table;

pub use self::builder::{DEFAULT_MAX_KEYS, DEFAULT_SWEEP_INTERVAL, MemoryStoreBuilder};

/// Number of independently locked shards (a power of two).
const SHARDS: usize = 64;

/// A store that keeps every key's state in this process.
///
/// Keys live in 64 shards, each a hash table behind its own lock, holding
/// the algorithm's state and the time at which that state becomes
/// indistinguishable from a fresh one (its expiry, like a Redis TTL). An
/// expired entry counts as fresh, and sweeps drop expired entries. A table
/// is probed linearly over its entries, one cache line each, so that a
/// lookup usually reads one line of memory (see `memory/table.rs`).
///
/// **Memory is bounded.** At most [`max_keys`](MemoryStoreBuilder::max_keys)
/// keys are held (rounded up to a multiple of 64): each of the 64 shards
/// holds at most `max_keys / 64`, so with a random hash a shard fills up
/// a little before the whole store does. When a new key arrives at a full
/// shard, that shard's expired keys are
/// dropped first; if it is still full, the key closest to expiry among a
/// sample of 8 is evicted. The evicted key restarts from a fresh state, so
/// its own limit may over-admit by at most one limit; every other key keeps
/// its exact state, and memory never exceeds the cap.
///
/// Each key costs its entry, one 64-byte cache line holding the key inline
/// when the policy name and the key together take at most 21 bytes (a
/// longer key is boxed), and its share of the table's empty slots (a table
/// is between 3/8 and 3/4 full). A sliding log adds 16 bytes per entry and
/// a concurrency key 24 per lease. The resident bytes per key measured by
/// `cargo bench -p tollgate --bench memory` are in
/// [`benches/README.md`](https://github.com/tollgate-rs/tollgate/blob/main/crates/tollgate/benches/README.md#the-memory-store-and-directlimiter-benchesmemoryrs).
///
/// ```
/// use std::time::Duration;
/// use tollgate::{ManualClock, MemoryStore, Policy};
///
/// let clock = ManualClock::new(0);
/// let store = MemoryStore::with_clock(clock.clone());
/// let sms = Policy::sliding_log("sms", 3, Duration::from_secs(60))?;
/// for _ in 0..3 {
///     assert!(store.check_sync(&sms, b"+15550100", 1)?.allowed);
/// }
/// let denied = store.check_sync(&sms, b"+15550100", 1)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_secs(60));
/// clock.advance(Duration::from_secs(60));
/// assert!(store.check_sync(&sms, b"+15550100", 1)?.allowed);
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStore<C: Clock = MonotonicClock> {
    inner: Arc<Inner<C>>,
}

#[derive(Debug)]
struct Inner<C> {
    shards: Box<[Shard]>,
    hasher: foldhash::fast::RandomState,
    clock: C,
    keys_per_shard: usize,
    sweep_interval: u64,
    next_sweep: AtomicU64,
}

#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<ShardMap>);

/// One shard's entries, found by a hash computed once per call with the
/// store's hasher (its bits 32..38 pick the shard, its low bits the slot).
type ShardMap = Table<Entry>;

/// One key: 64 bytes, aligned to a cache line, so that a lookup that finds
/// its key (held inline) touches one line for the key, the state and the
/// expiry.
#[derive(Debug)]
#[repr(align(64))]
struct Entry {
    key: StoredKey,
    state: State,
    /// When `state` becomes the same as a fresh one (µs since the epoch).
    expires_at: u64,
}

impl<C: Clock> MemoryStore<C> {
    /// A store reading time from `clock`, with the default cap.
    pub fn with_clock(clock: C) -> Self {
        MemoryStoreBuilder::new().clock(clock).build()
    }

    /// The store's clock.
    pub fn clock(&self) -> &C {
        &self.inner.clock
    }

    /// Forgets every key (a fallback store is cleared this way when the
    /// primary store is back).
    pub fn clear(&self) {
        for shard in self.inner.shards.iter() {
            shard.0.lock().clear();
        }
    }

    /// How many keys are held (expired ones included until swept).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| s.0.lock().len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys this store holds.
    pub fn max_keys(&self) -> usize {
        self.inner.keys_per_shard * SHARDS
    }

    /// The key's hash, computed once per call: it picks the shard and the
    /// slot within it. By reference: passed by value, the freshly built
    /// key was copied with 16-byte loads of its 8-byte stores, a store
    /// forwarding stall on every call (perf showed it; a GCRA hot key is
    /// 3–4% faster without it).
    #[inline]
    fn hash(&self, key: &KeyRef<'_>) -> u64 {
        self.inner.hasher.hash_one(key)
    }

    /// Hashes a stored entry again, for a table that moves it.
    fn rehash(&self) -> impl Fn(&Entry) -> u64 + '_ {
        |e| self.inner.hasher.hash_one(e.key.borrowed())
    }
}

/// The shard of a key's hash: bits that the shard's table does not use
/// (it takes its slot from the low bits, at most 2^32 slots).
#[inline]
fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize & (SHARDS - 1)
}

/// A store on `clock` holding at most `max_keys`, sweeping only when
/// told to, for the unit tests of this store's parts.
#[cfg(test)]
fn test_store(clock: &crate::ManualClock, max_keys: usize) -> MemoryStore<crate::ManualClock> {
    MemoryStore::builder()
        .clock(clock.clone())
        .max_keys(max_keys)
        .sweep_interval(std::time::Duration::from_secs(3600))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_one_cache_line() {
        assert_eq!(size_of::<Entry>(), 64);
        // An empty slot takes no room of its own (the key's tag has spare
        // values), so a table's slot is one line too.
        assert_eq!(size_of::<Option<Entry>>(), 64);
    }
}
