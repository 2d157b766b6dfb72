#![doc = include_str!("../../docs/leases.md")]

mod pace;
mod slot;
mod sweep;
mod take;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hashbrown::HashMap;

use self::slot::Slot;
use self::take::Took;
use super::forward::{Forward, forward};
use super::key::{KeyRef, StoredKey};
use super::{BoxFuture, Stamp, Store, Valid, ready};
use crate::algorithm::Usage;
use crate::{Clock, Decision, MonotonicClock, Policy, Result};

/// A [`Store`] that answers leased policies from batches (see the module).
#[derive(Debug, Clone)]
pub struct LeasingStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn Store>,
    /// The lease interval, µs.
    interval: u64,
    instances: u64,
    clock: MonotonicClock,
    /// The clock's reading at the start: times are µs since then.
    start: u64,
    slots: parking_lot::RwLock<HashMap<StoredKey, Arc<Slot>, foldhash::fast::RandomState>>,
    /// Batches taken (`check_at_most` calls), units refunded, and units
    /// of idle buckets' batches that could not go back.
    takes: AtomicU64,
    refunds: AtomicU64,
    lapsed: AtomicU64,
    sweeping: AtomicBool,
}

impl Inner {
    #[inline]
    fn now(&self) -> u64 {
        self.clock.now_micros().saturating_sub(self.start)
    }
}

impl LeasingStore {
    /// Wraps `store`, with a lease interval of 20 ms and 3 expected
    /// instances.
    pub fn new(store: Arc<dyn Store>) -> LeasingStore {
        LeasingStore::with(store, Duration::from_millis(20), 3)
    }

    /// Wraps `store` with a lease `interval` (how much traffic a batch is
    /// sized for, how long an unused lease is kept, and how long a bucket's
    /// batch lasts; at least 1 ms) and the number of instances expected to
    /// share a key (at least 1).
    pub fn with(store: Arc<dyn Store>, interval: Duration, instances: u64) -> LeasingStore {
        let clock = MonotonicClock::new();
        LeasingStore {
            inner: Arc::new(Inner {
                store,
                interval: interval.max(Duration::from_millis(1)).as_micros() as u64,
                instances: instances.max(1),
                start: clock.now_micros(),
                clock,
                slots: parking_lot::RwLock::new(HashMap::default()),
                takes: AtomicU64::new(0),
                refunds: AtomicU64::new(0),
                lapsed: AtomicU64::new(0),
                sweeping: AtomicBool::new(false),
            }),
        }
    }

    /// How many batches this store took from the wrapped one.
    pub fn takes(&self) -> u64 {
        self.inner.takes.load(Ordering::Relaxed)
    }

    /// How many unused units it gave back: a window's, and a bucket's
    /// that went back exactly (see the module).
    pub fn refunded(&self) -> u64 {
        self.inner.refunds.load(Ordering::Relaxed)
    }

    /// How many unused units of idle buckets' batches could not go back,
    /// because the key had moved on since their batch (another instance
    /// took from it) or the store failed: they stay consumed and lapse.
    pub fn lapsed(&self) -> u64 {
        self.inner.lapsed.load(Ordering::Relaxed)
    }

    /// The units this instance holds for `key` of `policy` and may still
    /// spend (0 when it holds none).
    pub fn held(&self, policy: &Policy, key: &[u8]) -> u64 {
        let slot = self
            .inner
            .slots
            .read()
            .get(&KeyRef::new(policy, key))
            .cloned();
        slot.map_or(0, |s| s.held(self.now()))
    }

    #[inline]
    fn now(&self) -> u64 {
        self.inner.now()
    }

    /// Ends this instance's local denial of `key`, if any.
    fn lift_denial(&self, policy: &Policy, key: &[u8]) {
        if let Some(slot) = self.inner.slots.read().get(&KeyRef::new(policy, key)) {
            slot.deny_until(0);
        }
    }

    /// The key's slot, made (or remade, for a policy changed under its
    /// name) when needed.
    #[inline]
    fn slot(&self, policy: &Policy, key: &[u8]) -> Arc<Slot> {
        let k = KeyRef::new(policy, key);
        if let Some(slot) = self.inner.slots.read().get(&k)
            && slot.policy.algorithm() == policy.algorithm()
        {
            return slot.clone();
        }
        let mut slots = self.inner.slots.write();
        if let Some(slot) = slots.get(&k)
            && slot.policy.algorithm() == policy.algorithm()
        {
            return slot.clone();
        }
        let slot = Arc::new(Slot::new(policy, self.now()));
        if let Some(old) = slots.insert(StoredKey::new(k), slot.clone()) {
            // Its units were taken for another policy: dropped.
            old.gone.store(true, Ordering::Release);
            old.clear();
        }
        slot
    }

    /// Answers from the lease when it holds `cost`, or denies when a short
    /// take said the key is saturated until later (no store call), under
    /// the map's read lock: the slot is borrowed, not cloned, so spending
    /// touches no reference count.
    #[inline]
    fn spend(&self, policy: &Policy, key: &[u8], cost: u64) -> Option<Decision> {
        let slots = self.inner.slots.read();
        let slot = slots.get(&KeyRef::new(policy, key))?;
        if slot.policy.algorithm() != policy.algorithm() {
            return None;
        }
        let now = self.now();
        answer(slot, now, cost)
    }

    async fn leased_check(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        valid: Valid,
    ) -> Result<Decision> {
        self.start_sweeping();
        loop {
            let slot = self.slot(policy, key);
            if let Some(d) = answer(&slot, self.now(), cost) {
                return Ok(d);
            }
            // One batch at a time; whoever waited may find it taken (or
            // the key saturated).
            let mut taken = slot.refill.lock().await;
            if slot.gone.load(Ordering::Acquire) {
                continue;
            }
            let now = self.now();
            if let Some(d) = answer(&slot, now, cost) {
                return Ok(d);
            }
            match self.take(&slot, &mut taken, policy, key, cost, now).await? {
                Took::Decided(d) => return Ok(d),
                Took::Failed => {
                    // The units held were spent first; now the wrapped
                    // store's failure policy answers, without the lock.
                    drop(taken);
                    return (self.inner.store)
                        .check_unchecked(policy, key, cost, valid)
                        .await;
                }
            }
        }
    }

    /// Starts the task that sweeps the leases, once, if a runtime runs.
    fn start_sweeping(&self) {
        if self.inner.sweeping.load(Ordering::Relaxed)
            || self.inner.sweeping.swap(true, Ordering::Relaxed)
        {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.inner.sweeping.store(false, Ordering::Relaxed);
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        runtime.spawn(sweep::sweep(
            weak,
            Duration::from_micros(self.inner.interval),
        ));
    }
}

/// The lease's answer without the store: an admission from the units it
/// holds, or a local denial while a short take's retry runs.
#[inline]
fn answer(slot: &Slot, now: u64, cost: u64) -> Option<Decision> {
    match slot.spend(now, cost) {
        Some(left) => Some(slot.decision(now, left)),
        None => slot.denial(now, cost),
    }
}

impl Forward for LeasingStore {
    #[inline]
    fn target(&self) -> Result<&dyn Store> {
        Ok(&*self.inner.store)
    }
}

impl Store for LeasingStore {
    forward!(
        reserve_unchecked,
        check_many_unchecked,
        acquire_lease_unchecked,
        release_lease_unchecked,
        take_held_unchecked,
    );

    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        if !policy.leased() || cost == 0 {
            return self.inner.store.check_unchecked(policy, key, cost, valid);
        }
        // The common case, without the async machinery.
        if let Some(d) = self.spend(policy, key, cost) {
            return ready(Ok(d));
        }
        Box::pin(self.leased_check(policy, key, cost, valid))
    }

    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            let slot = self.inner.slots.write().remove(&KeyRef::new(policy, key));
            if let Some(slot) = slot {
                let _refill = slot.refill.lock().await;
                slot.gone.store(true, Ordering::Release);
                slot.clear();
            }
            self.inner.store.reset_unchecked(policy, key, valid).await
        })
    }

    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        if op == Usage::Refund {
            // A refund may end the saturation this instance denies for.
            self.lift_denial(policy, key);
        }
        self.inner
            .store
            .usage_unchecked(policy, key, op, cost, valid)
    }

    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        self.lift_denial(policy, key);
        (self.inner.store).refund_held_unchecked(policy, key, stamp, units, valid)
    }
}
