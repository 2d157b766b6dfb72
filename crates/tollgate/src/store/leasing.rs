//! Leases: a hot key's capacity taken from the store in batches and
//! spent locally, so that one Redis key is not one script call per
//! decision.
//!
//! [`LeasingStore`] wraps any [`Store`]. For a policy that opted in
//! ([`Policy::with_lease`]), a check is answered from the units this
//! instance holds for the key (`source: lease`); when they run out, one
//! [`check_at_most`](Store::check_at_most) takes the next batch: it
//! consumes up to the batch in the store and grants what is there, in one
//! atomic call. Every unit admitted from a lease was consumed in the store
//! first, so the store's count is never below what was admitted.
//!
//! **Windows only.** A lease is spent only within the window it was taken
//! in (fixed or sliding; it ends at the window's end as the store's answer
//! gives it, `reset_after` counted from before the call was sent), so a
//! window admits at most what the store counted in it, which is at most the
//! limit; for the sliding window, the previous window's count is what the
//! store counted, at least what was admitted. Buckets have no such
//! boundary: capacity consumed at one moment and spent later lets the
//! bucket refill meanwhile, and an interval could then see more than its
//! bound; they are not leased.
//!
//! **Batch size.** The units this key's checks asked for here over the
//! last lease interval (default 20 ms), at least the cost; at most what
//! the store had left at its last answer divided by twice the expected
//! number of instances (default 3), so that near the limit a lease is a
//! single unit and behaviour is the one without leases.
//!
//! **Idle leases go back.** A lease unused for an interval is refunded
//! (`refund`), if its window has more than two intervals left (a refund
//! must land in the window it came from).
//!
//! **Estimates.** `remaining` on a leased decision is the store's
//! `remaining` at the last batch plus the units still held here;
//! `reset_after` counts down from the store's. Other instances' leases are
//! not seen.
//!
//! **Reset.** [`reset`](Store::reset) drops this instance's lease of the
//! key; other instances spend theirs until the window ends or they run
//! out, at most one lease interval of their traffic.
//!
//! **Failures.** When the store cannot be reached, the held units are
//! still spent; then the check goes to the wrapped store's
//! [`check`](Store::check), whose failure policy (a
//! [`ResilientStore`](super::resilient::ResilientStore)'s fallback) answers.
//!
//! Kept whole on purpose: one concept, a lease's life (taken, spent, refilled, swept, given back), all on one key slot and its locks.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use super::{BoxFuture, Lease, Request, Store};
use crate::algorithm::{Algorithm, LeaseId, Usage};
use crate::{Decision, Policy, Result, Source};

/// A [`Store`] that answers leased policies from batches (see the module).
#[derive(Debug, Clone)]
pub struct LeasingStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    interval: Duration,
    instances: u64,
    /// Per policy name, per key (two levels, so a lookup allocates
    /// nothing).
    held: Mutex<HashMap<String, HashMap<Vec<u8>, Slot>>>,
    /// Batches taken (`check_at_most` calls) and units refunded.
    takes: AtomicU64,
    refunds: AtomicU64,
    sweeping: std::sync::atomic::AtomicBool,
}

/// One key's lease: its state under a lock held only to read and spend
/// it, and a second lock held across the call that refills it, so that
/// the key's other callers wait for that batch instead of each calling the
/// store.
type Slot = Arc<KeySlot>;

#[derive(Debug)]
struct KeySlot {
    held: Mutex<Held>,
    refill: tokio::sync::Mutex<()>,
}

impl KeySlot {
    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What this instance holds of one key.
#[derive(Debug)]
struct Held {
    policy: Policy,
    /// Units consumed in the store and not yet admitted here.
    units: u64,
    /// The end of the window they were taken in.
    until: Instant,
    /// The store's `remaining` and `limit` at the last batch, and when its
    /// state resets.
    remaining: u64,
    limit: u64,
    reset_at: Instant,
    /// Units asked for in the current interval, since `since`, and in the
    /// last whole one.
    asked: u64,
    since: Instant,
    asked_before: u64,
    last_used: Instant,
}

impl LeasingStore {
    /// Wraps `store`, with a lease interval of 20 ms and 3 expected
    /// instances.
    pub fn new(store: Arc<dyn Store>) -> LeasingStore {
        LeasingStore::with(store, Duration::from_millis(20), 3)
    }

    /// Wraps `store` with a lease `interval` (how much traffic a batch is
    /// sized for, and how long an unused lease is kept; at least 1 ms) and
    /// the number of instances expected to share a key (at least 1).
    pub fn with(store: Arc<dyn Store>, interval: Duration, instances: u64) -> LeasingStore {
        LeasingStore {
            inner: Arc::new(Inner {
                store,
                interval: interval.max(Duration::from_millis(1)),
                instances: instances.max(1),
                held: Mutex::new(HashMap::new()),
                takes: AtomicU64::new(0),
                refunds: AtomicU64::new(0),
                sweeping: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    /// How many batches this store took from the wrapped one.
    pub fn takes(&self) -> u64 {
        self.inner.takes.load(Ordering::Relaxed)
    }

    /// How many unused units it gave back.
    pub fn refunded(&self) -> u64 {
        self.inner.refunds.load(Ordering::Relaxed)
    }

    fn slot(&self, policy: &Policy, key: &[u8]) -> Slot {
        let mut held = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = held.get(policy.name()).and_then(|keys| keys.get(key)) {
            return slot.clone();
        }
        let now = Instant::now();
        held.entry(policy.name().to_owned())
            .or_default()
            .entry(key.to_vec())
            .or_insert_with(|| {
                Arc::new(KeySlot {
                    refill: tokio::sync::Mutex::new(()),
                    held: Mutex::new(Held {
                        policy: policy.clone(),
                        units: 0,
                        until: now,
                        remaining: policy.limit(),
                        limit: policy.limit(),
                        reset_at: now,
                        asked: 0,
                        since: now,
                        asked_before: 0,
                        last_used: now,
                    }),
                })
            })
            .clone()
    }

    async fn leased_check(&self, policy: &Policy, key: &[u8], cost: u64) -> Result<Decision> {
        self.start_sweeping();
        let slot = self.slot(policy, key);
        {
            let mut held = slot.lock();
            let now = Instant::now();
            held.ask(now, cost, self.inner.interval);
            if let Some(d) = held.spend(now, policy, cost) {
                return Ok(d);
            }
        }
        // One refill at a time; whoever waited may find it done.
        let _refill = slot.refill.lock().await;
        let want = {
            let mut held = slot.lock();
            if let Some(d) = held.spend(Instant::now(), policy, cost) {
                return Ok(d);
            }
            held.batch(cost, self.inner.interval, self.inner.instances) - held.units
        };
        let sent = Instant::now();
        self.inner.takes.fetch_add(1, Ordering::Relaxed);
        let d = match self.inner.store.check_at_most(policy, key, want).await {
            Ok(d) => d,
            // Held units are spent first; then the wrapped store's own
            // failure policy answers.
            Err(e) if e.is_transient() || e.is_store_failure() => {
                return self.inner.store.check(policy, key, cost).await;
            }
            Err(e) => return Err(e),
        };
        let window = match policy.algorithm() {
            Algorithm::SlidingWindow(a) => Duration::from_micros(a.window_micros()),
            _ => Duration::ZERO,
        };
        // The store's state resets at its window's end (a sliding
        // window's, one window later).
        let mut held = slot.lock();
        held.until = sent + d.reset_after.saturating_sub(window);
        held.reset_at = sent + d.reset_after;
        held.remaining = d.remaining;
        held.limit = d.limit;
        held.units += d.granted;
        if held.units >= cost {
            held.units -= cost;
            return Ok(held.decision(Instant::now()));
        }
        let mut denied = d;
        denied.allowed = false;
        denied.granted = 0;
        Ok(denied)
    }

    /// Starts the task that refunds idle leases, once, if a runtime runs.
    fn start_sweeping(&self) {
        if self.inner.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.sweeping.store(false, Ordering::Relaxed);
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(sweep(weak, self.inner.interval));
    }
}

/// Every interval: refunds leases idle for an interval whose window has
/// more than two intervals left, and forgets keys idle for 100 intervals.
async fn sweep(inner: Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else { return };
        let now = Instant::now();
        let slots: Vec<_> = {
            let mut held = inner.held.lock().unwrap_or_else(|e| e.into_inner());
            for keys in held.values_mut() {
                keys.retain(|_, slot| {
                    slot.held
                        .try_lock()
                        .map_or(true, |h| now.duration_since(h.last_used) < interval * 100)
                });
            }
            held.retain(|_, keys| !keys.is_empty());
            held.values()
                .flat_map(|keys| keys.iter().map(|(k, v)| (k.clone(), v.clone())))
                .collect()
        };
        for (key, slot) in slots {
            // Not while a refill is under way; the units leave the lease
            // before the refund is sent, so no check spends them.
            let Ok(_refill) = slot.refill.try_lock() else {
                continue;
            };
            let (units, policy) = {
                let mut held = slot.lock();
                if held.units == 0
                    || now.duration_since(held.last_used) < interval
                    || held.until.saturating_duration_since(now) <= interval * 2
                {
                    continue;
                }
                (std::mem::take(&mut held.units), held.policy.clone())
            };
            if inner.store.refund(&policy, &key, units).await.is_ok() {
                inner.refunds.fetch_add(units, Ordering::Relaxed);
            }
        }
    }
}

impl Held {
    /// Admits `cost` from the lease if it holds that much in its window;
    /// drops a lease whose window ended (the store counted those units in
    /// it) or whose policy changed under its name.
    fn spend(&mut self, now: Instant, policy: &Policy, cost: u64) -> Option<Decision> {
        if now >= self.until || self.policy != *policy {
            self.units = 0;
            if self.policy != *policy {
                self.policy = policy.clone();
            }
        }
        if self.units < cost {
            return None;
        }
        self.units -= cost;
        Some(self.decision(now))
    }

    /// Counts a check's units towards the key's rate here.
    fn ask(&mut self, now: Instant, cost: u64, interval: Duration) {
        let elapsed = now.duration_since(self.since);
        if elapsed >= interval {
            // Scaled to one interval; a gap of several counts as quiet.
            self.asked_before = if elapsed >= interval * 2 {
                0
            } else {
                (u128::from(self.asked) * interval.as_nanos() / elapsed.as_nanos().max(1)) as u64
            };
            self.asked = 0;
            self.since = now;
        }
        self.asked += cost;
        self.last_used = now;
    }

    /// How many units to hold after the next batch: an interval's traffic
    /// here, at least `cost`, at most the store's remaining over twice the
    /// instances (but never below `cost`).
    fn batch(&self, cost: u64, _interval: Duration, instances: u64) -> u64 {
        let expected = self.asked_before.max(self.asked).max(cost);
        let cap = self.remaining / (2 * instances);
        expected.min(cap).max(cost)
    }

    /// A leased admission's decision, with `remaining` and `reset_after`
    /// estimated from the store's last answer.
    fn decision(&self, now: Instant) -> Decision {
        let mut d = Decision::from_micros(
            true,
            self.limit,
            self.remaining + self.units,
            self.reset_at.saturating_duration_since(now).as_micros() as u64,
            0,
            0,
        );
        d.source = Source::Lease;
        d
    }
}

impl Store for LeasingStore {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        if !policy.leased() || cost == 0 {
            return self.inner.store.check(policy, key, cost);
        }
        Box::pin(async move {
            crate::store::validate::check(policy, key, cost)?;
            self.leased_check(policy, key, cost).await
        })
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.inner.store.reserve(policy, key, cost, max_wait)
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        self.inner.store.check_many(requests, atomic)
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        self.inner.store.acquire_lease(policy, key)
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        self.inner.store.release_lease(policy, key, lease)
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let slot = {
                let mut held = self.inner.held.lock().unwrap_or_else(|e| e.into_inner());
                held.get_mut(policy.name())
                    .and_then(|keys| keys.remove(key))
            };
            if let Some(slot) = slot {
                slot.lock().units = 0;
            }
            self.inner.store.reset(policy, key).await
        })
    }

    fn usage<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.inner.store.usage(policy, key, op, cost)
    }
}
