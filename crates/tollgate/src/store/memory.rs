//! The in-memory store: state in a sharded map, for one process and for tests.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use self::table::Table;
use super::composite::{KeyRef, StoredKey};
use super::{BoxFuture, Lease, Request, Store};
use crate::algorithm::{Algorithm, LeaseId, State};
use crate::clock::{Clock, MonotonicClock};
use crate::decision::Verdict;
use crate::{Decision, Policy, Result, validate_key};

mod table;

/// Number of independently locked shards (a power of two).
const SHARDS: usize = 64;

/// How many entries eviction looks at to pick a victim.
const EVICTION_SAMPLE: usize = 8;

/// The default cap on keys.
pub const DEFAULT_MAX_KEYS: usize = 1 << 20;

/// The default interval between sweeps of keys back to their fresh state.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(10);

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
/// Each key costs 85 to 171 bytes of resident memory for the window and
/// bucket algorithms: its entry, one 64-byte cache line holding the key
/// inline when the policy name and the key together take at most 21 bytes,
/// and the table's empty slots (a table is between 3/8 and 3/4 full; 134
/// bytes a key measured at 1,000,000 13-byte keys). A longer
/// key is boxed, which adds its length and about 16 bytes of allocator
/// overhead. A sliding log adds 16 bytes per entry and a concurrency key 24
/// per lease.
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

/// Builds a [`MemoryStore`] with a clock, a key cap and a sweep interval.
#[derive(Debug)]
pub struct MemoryStoreBuilder<C> {
    clock: C,
    max_keys: usize,
    sweep_interval: Duration,
}

impl MemoryStoreBuilder<MonotonicClock> {
    fn new() -> Self {
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

/// What to do to one key's state.
#[derive(Debug, Clone, Copy)]
enum Op {
    Check { cost: u64, max_wait: u64 },
    Acquire(LeaseId),
    Release(LeaseId),
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

    /// Decides a request now, without an executor: the memory store never
    /// waits, so this is what [`Store::check`] does.
    #[inline]
    pub fn check_sync(&self, policy: &Policy, key: &[u8], cost: u64) -> Result<Decision> {
        validate_key(key)?;
        policy.require_rate("check")?;
        policy.validate_cost(cost)?;
        Ok(self
            .apply(policy, key, Op::Check { cost, max_wait: 0 })
            .0
            .decision())
    }

    /// [`Store::reserve`] without an executor.
    pub fn reserve_sync(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision> {
        validate_key(key)?;
        let max_wait = policy.validate_reservation(cost, max_wait)?;
        Ok(self
            .apply(policy, key, Op::Check { cost, max_wait })
            .0
            .decision())
    }

    /// [`Store::acquire_lease`] without an executor.
    pub fn acquire_lease_sync(&self, policy: &Policy, key: &[u8]) -> Result<Lease> {
        validate_key(key)?;
        policy.require_concurrency("acquire_lease")?;
        let id = LeaseId::random();
        let (verdict, _) = self.apply(policy, key, Op::Acquire(id));
        Ok(Lease {
            decision: verdict.decision(),
            id: verdict.allowed.then_some(id),
        })
    }

    /// [`Store::release_lease`] without an executor.
    pub fn release_lease_sync(&self, policy: &Policy, key: &[u8], lease: LeaseId) -> Result<bool> {
        validate_key(key)?;
        policy.require_concurrency("release_lease")?;
        Ok(self.apply(policy, key, Op::Release(lease)).1)
    }

    /// [`Store::check_many`] without an executor.
    pub fn check_many_sync(&self, requests: &[Request<'_>], atomic: bool) -> Result<Vec<Decision>> {
        for r in requests {
            validate_key(r.key)?;
            r.policy.require_rate("check_many")?;
            r.policy.validate_cost(r.cost)?;
        }
        if !atomic {
            return Ok(requests
                .iter()
                .map(|r| {
                    self.apply(
                        r.policy,
                        r.key,
                        Op::Check {
                            cost: r.cost,
                            max_wait: 0,
                        },
                    )
                    .0
                    .decision()
                })
                .collect());
        }
        let keys: Vec<KeyRef<'_>> = requests
            .iter()
            .map(|r| KeyRef::new(r.policy, r.key))
            .collect();
        if let Some(i) = (1..keys.len()).find(|&i| keys[..i].contains(&keys[i])) {
            return Err(super::duplicate_in_batch(requests[i].policy));
        }
        let hashes: Vec<u64> = keys.iter().map(|k| self.hash(k)).collect();
        let mut shard_ids: Vec<usize> = hashes.iter().map(|&h| shard_of(h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        // Shards are always locked in ascending order, so batches never
        // deadlock with each other or with single checks (one shard each).
        let mut guards: Vec<(usize, MutexGuard<'_, ShardMap>)> = shard_ids
            .iter()
            .map(|&i| (i, self.inner.shards[i].0.lock()))
            .collect();
        let now = self.inner.clock.now_micros();
        // Decide every request on a copy of its state; write only if all pass.
        let mut states: Vec<State> = keys
            .iter()
            .zip(&hashes)
            .zip(requests)
            .map(|((k, &hash), r)| {
                let map = locked(&mut guards, shard_of(hash));
                map.find(hash, |e| k.matches(&e.key))
                    .map(|i| map.get(i))
                    .filter(|e| e.expires_at > now)
                    .map_or_else(|| r.policy.algorithm().fresh_state(), |e| e.state.clone())
            })
            .collect();
        let verdicts: Vec<Verdict> = requests
            .iter()
            .zip(&mut states)
            .map(|(r, state)| r.policy.algorithm().decide_micros(state, now, r.cost, 0))
            .collect();
        if verdicts.iter().all(|v| v.allowed) {
            for (((key, &hash), state), v) in keys.iter().zip(&hashes).zip(states).zip(&verdicts) {
                let map = locked(&mut guards, shard_of(hash));
                self.store_entry(map, hash, *key, state, now, v.reset_after);
            }
            return Ok(verdicts.into_iter().map(Verdict::decision).collect());
        }
        // Denied as a whole: nothing consumed. Report each key as a peek,
        // denied, with the retry of those that were over their own limit.
        drop(guards);
        Ok(requests
            .iter()
            .zip(verdicts)
            .map(|(r, v)| {
                let peek = self
                    .apply(
                        r.policy,
                        r.key,
                        Op::Check {
                            cost: 0,
                            max_wait: 0,
                        },
                    )
                    .0;
                Verdict {
                    allowed: false,
                    retry_after: v.retry_after,
                    delay: 0,
                    ..peek
                }
                .decision()
            })
            .collect())
    }

    /// Forgets `key` under `policy`.
    pub fn reset_sync(&self, policy: &Policy, key: &[u8]) -> Result<()> {
        validate_key(key)?;
        let k = KeyRef::new(policy, key);
        let hash = self.hash(&k);
        let mut map = self.inner.shards[shard_of(hash)].0.lock();
        if let Some(i) = map.find(hash, |e| k.matches(&e.key)) {
            map.remove(i, self.rehash());
        }
        Ok(())
    }

    /// Forgets every key (a fallback store is cleared this way when the
    /// primary store is back).
    pub fn clear(&self) {
        for shard in self.inner.shards.iter() {
            shard.0.lock().clear();
        }
    }

    /// Drops every key whose state is back to fresh; returns how many.
    pub fn sweep(&self) -> usize {
        let now = self.inner.clock.now_micros();
        self.inner
            .shards
            .iter()
            .map(|shard| shard.0.lock().retain(|e| e.expires_at > now, self.rehash()))
            .sum()
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

    /// Runs `op` on the key's state under its shard's lock. Returns the
    /// verdict and, for a release, whether the lease was held (a verdict,
    /// not a `Decision`: the callers make that inline, where it is used,
    /// rather than copying a freshly written one at once, which stalls).
    fn apply(&self, policy: &Policy, key: &[u8], op: Op) -> (Verdict, bool) {
        let k = KeyRef::new(policy, key);
        let hash = self.hash(&k);
        let algorithm = policy.algorithm();
        let mut inserted = false;
        let now = self.inner.clock.now_micros();
        let result = {
            let mut map = self.inner.shards[shard_of(hash)].0.lock();
            match map.find_mut(hash, |e| k.matches(&e.key)) {
                Some((i, entry)) => {
                    if entry.expires_at <= now {
                        entry.state = algorithm.fresh_state();
                    }
                    let (verdict, held) = run(algorithm, &mut entry.state, now, op);
                    if verdict.reset_after == 0 {
                        map.remove(i, self.rehash());
                    } else {
                        entry.expires_at = now + verdict.reset_after;
                    }
                    (verdict, held)
                }
                None => {
                    let mut state = algorithm.fresh_state();
                    let (verdict, held) = run(algorithm, &mut state, now, op);
                    if verdict.reset_after != 0 {
                        let reset = verdict.reset_after;
                        self.insert_new(&mut map, hash, k, state, now, reset);
                        inserted = true;
                    }
                    (verdict, held)
                }
            }
        };
        if inserted {
            self.maybe_sweep(now);
        }
        result
    }

    /// Inserts or replaces an entry, keeping the shard within its cap.
    fn store_entry(
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
    fn insert_new(
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
    fn maybe_sweep(&self, now: u64) {
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

/// The shard of a key's hash: bits that the shard's table does not use
/// (it takes its slot from the low bits, at most 2^32 slots).
#[inline]
fn shard_of(hash: u64) -> usize {
    (hash >> 32) as usize & (SHARDS - 1)
}

/// The locked map of `shard` among a batch's guards (sorted by shard).
fn locked<'g>(
    guards: &'g mut [(usize, MutexGuard<'_, ShardMap>)],
    shard: usize,
) -> &'g mut ShardMap {
    let at = guards.partition_point(|(s, _)| *s < shard);
    &mut guards[at].1
}

/// One operation on a state that belongs to `algorithm`.
#[inline]
fn run(algorithm: &Algorithm, state: &mut State, now: u64, op: Op) -> (Verdict, bool) {
    match (algorithm, op) {
        (_, Op::Check { cost, max_wait }) => {
            (algorithm.decide_micros(state, now, cost, max_wait), false)
        }
        (Algorithm::Concurrency(c), Op::Acquire(id)) => match state {
            State::Concurrency(s) => (c.acquire_micros(s, now, id), false),
            _ => {
                let mut fresh = Default::default();
                let v = c.acquire_micros(&mut fresh, now, id);
                *state = State::Concurrency(fresh);
                (v, false)
            }
        },
        (Algorithm::Concurrency(c), Op::Release(id)) => match state {
            State::Concurrency(s) => {
                let held = c.release(s, now, id);
                (c.peek_micros(s, now), held)
            }
            _ => (algorithm.decide_micros(state, now, 0, 0), false),
        },
        // Leases are refused before reaching here for other algorithms.
        (_, Op::Acquire(_) | Op::Release(_)) => (algorithm.decide_micros(state, now, 0, 0), false),
    }
}

impl<C: Clock> Store for MemoryStore<C> {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(std::future::ready(self.check_sync(policy, key, cost)))
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(std::future::ready(
            self.reserve_sync(policy, key, cost, max_wait),
        ))
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(std::future::ready(self.check_many_sync(requests, atomic)))
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(std::future::ready(self.acquire_lease_sync(policy, key)))
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(std::future::ready(
            self.release_lease_sync(policy, key, lease),
        ))
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(self.reset_sync(policy, key)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn store(clock: &ManualClock, max_keys: usize) -> MemoryStore<ManualClock> {
        MemoryStore::builder()
            .clock(clock.clone())
            .max_keys(max_keys)
            .sweep_interval(Duration::from_secs(3600))
            .build()
    }

    #[test]
    fn an_entry_is_one_cache_line() {
        assert_eq!(size_of::<Entry>(), 64);
        // An empty slot takes no room of its own (the key's tag has spare
        // values), so a table's slot is one line too.
        assert_eq!(size_of::<Option<Entry>>(), 64);
    }

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

    #[test]
    fn a_policy_that_changes_algorithm_starts_fresh() {
        let clock = ManualClock::new(0);
        let store = store(&clock, 1024);
        let minute = Duration::from_secs(60);
        // A window to a log, to a window again, to the buckets and back to
        // a log: each change finds the key's state of another algorithm,
        // which counts as fresh, and the state left behind does not come
        // back.
        let sequence = [
            Policy::fixed_window("api", 1, minute).unwrap(),
            Policy::sliding_log("api", 1, minute).unwrap(),
            Policy::fixed_window("api", 1, minute).unwrap(),
            Policy::token_bucket("api", 1, minute, 1).unwrap(),
            Policy::gcra("api", 1, minute, 1).unwrap(),
            Policy::sliding_log("api", 1, minute).unwrap(),
        ];
        for policy in &sequence {
            let name = policy.algorithm().name();
            assert!(store.check_sync(policy, b"k", 1).unwrap().allowed, "{name}");
            assert!(
                !store.check_sync(policy, b"k", 1).unwrap().allowed,
                "{name}"
            );
            assert_eq!(store.len(), 1, "{name}: the key is held once");
        }
    }

    #[test]
    fn racing_callers_on_one_key_lose_no_update() {
        // A frozen clock: nothing refills or ages out, so exactly `limit`
        // of the racing requests are admitted, however they interleave.
        let clock = ManualClock::new(1_000_000_000);
        let store = store(&clock, 1024);
        let hour = Duration::from_secs(3600);
        let limit = 20_000;
        let policies = [
            Policy::fixed_window("fw", limit, hour).unwrap(),
            Policy::sliding_window("sw", limit, hour).unwrap(),
            Policy::token_bucket("tb", 1, hour, limit).unwrap(),
            Policy::gcra("gcra", 1, hour, limit).unwrap(),
            Policy::leaky_bucket("lb", 1, hour, limit).unwrap(),
            Policy::sliding_log("sl", 5_000, hour).unwrap(),
        ];
        for policy in &policies {
            let admitted = AtomicU64::new(0);
            let (bound, _) = policy.algorithm().limit();
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for _ in 0..bound / 3 {
                            if store.check_sync(policy, b"hot", 1).unwrap().allowed {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            let name = policy.algorithm().name();
            assert_eq!(admitted.into_inner(), bound, "{name}");
            let peek = store.check_sync(policy, b"hot", 0).unwrap();
            assert_eq!(peek.remaining, 0, "{name}");
        }
    }
}
