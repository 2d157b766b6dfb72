//! One key's lease: the units this instance holds and when they end, in
//! atomics, so that spending from it is a load, a load and a
//! compare-and-swap.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use crate::store::Stamp;
use crate::{Decision, Policy, Source};

/// Bits of a word that hold the units (or the end); the 16 above them
/// hold the generation.
const LOW_BITS: u32 = 48;
const LOW: u64 = (1 << LOW_BITS) - 1;

/// The most units one lease holds (a batch is never larger).
pub(super) const MAX_UNITS: u64 = LOW;

/// A key's lease.
///
/// Every batch starts a new generation: its end is written first, then
/// the units, both tagged with it. A check spends only when the units it
/// swaps and the end it read carry the same generation, so a unit is never
/// spent past the end of the batch it came in.
#[derive(Debug)]
pub(super) struct Slot {
    /// The policy the lease was taken for (a reload that changes it under
    /// the same name starts a new slot).
    pub(super) policy: Policy,
    /// `generation << 48 | units`: consumed in the store, not yet admitted.
    lease: AtomicU64,
    /// `generation << 48 | end`, in µs of the leasing store's clock.
    until: AtomicU64,
    /// The store's `remaining` at the last batch, and when its state
    /// resets (µs): what leased decisions estimate from.
    remaining: AtomicU64,
    reset_at: AtomicU64,
    /// Until when (µs) a check the lease cannot answer is denied here,
    /// without the store: set by a take that granted less than it asked
    /// (0: none). Units denied here since the last take, which the next
    /// batch is sized from as the traffic they are.
    denied_until: AtomicU64,
    denied: AtomicU64,
    /// Set, under the refill lock, once the slot has left the map (reset,
    /// forgotten, replaced): a batch taken into it would never be spent.
    pub(super) gone: AtomicBool,
    /// Held across the call that takes a batch, so that the key's other
    /// callers wait for it instead of each calling the store.
    pub(super) refill: tokio::sync::Mutex<Taken>,
    /// The sweep's: the lease word at its last pass, and how many passes
    /// in a row found it unchanged.
    pub(super) seen: AtomicU64,
    pub(super) quiet: AtomicU32,
}

/// A batch as the store granted it, its times in µs of the leasing
/// store's clock.
#[derive(Debug, Default)]
pub(super) struct Batch {
    /// The units consumed in the store.
    pub(super) granted: u64,
    /// Whether what the lease still holds joins them (same window).
    pub(super) keep: bool,
    /// The end of the batch: the units are spent before it or never.
    pub(super) until: u64,
    /// The store's `remaining` after it, and when its state resets.
    pub(super) remaining: u64,
    pub(super) reset_at: u64,
}

/// The last batch, kept under the refill lock: when it was asked for and
/// how many units the lease then held, from which the next batch is sized;
/// and for a bucket's, the stamp that gives its unused units back, with
/// the batch's generation.
#[derive(Debug, Default)]
pub(super) struct Taken {
    pub(super) at: u64,
    pub(super) units: u64,
    pub(super) stamp: Option<(u64, Stamp)>,
    /// Whether it was granted less than it asked: the key is saturated.
    pub(super) short: bool,
}

impl Slot {
    pub(super) fn new(policy: &Policy, now: u64) -> Slot {
        Slot {
            policy: policy.clone(),
            lease: AtomicU64::new(0),
            until: AtomicU64::new(0),
            remaining: AtomicU64::new(policy.limit()),
            reset_at: AtomicU64::new(now),
            denied_until: AtomicU64::new(0),
            denied: AtomicU64::new(0),
            gone: AtomicBool::new(false),
            refill: tokio::sync::Mutex::new(Taken {
                at: now,
                units: 0,
                stamp: None,
                short: false,
            }),
            seen: AtomicU64::new(0),
            quiet: AtomicU32::new(0),
        }
    }

    /// Admits `cost` from the lease if it holds that much and its batch
    /// has not ended at `now`; the units left.
    #[inline]
    pub(super) fn spend(&self, now: u64, cost: u64) -> Option<u64> {
        let mut word = self.lease.load(Ordering::Acquire);
        loop {
            let units = word & LOW;
            if units < cost {
                return None;
            }
            let until = self.until.load(Ordering::Acquire);
            if until >> LOW_BITS != word >> LOW_BITS || now >= until & LOW {
                return None;
            }
            match self.lease.compare_exchange_weak(
                word,
                word - cost,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(units - cost),
                Err(current) => word = current,
            }
        }
    }

    /// The units held that are still spendable at `now`.
    pub(super) fn held(&self, now: u64) -> u64 {
        let word = self.lease.load(Ordering::Acquire);
        let until = self.until.load(Ordering::Acquire);
        if until >> LOW_BITS != word >> LOW_BITS || now >= until & LOW {
            0
        } else {
            word & LOW
        }
    }

    /// The units in the lease, spendable or not (a batch that ended keeps
    /// them until the next one).
    pub(super) fn units(&self) -> u64 {
        self.lease.load(Ordering::Acquire) & LOW
    }

    /// The store's `remaining` at the last batch.
    pub(super) fn remaining(&self) -> u64 {
        self.remaining.load(Ordering::Relaxed)
    }

    /// The end of the current batch (µs).
    pub(super) fn until(&self) -> u64 {
        self.until.load(Ordering::Acquire) & LOW
    }

    /// The lease word, for the sweep to tell an idle lease.
    pub(super) fn word(&self) -> u64 {
        self.lease.load(Ordering::Acquire)
    }

    /// The generation of a lease word.
    pub(super) fn generation(word: u64) -> u64 {
        word >> LOW_BITS
    }

    /// Starts a new batch (under the refill lock) and admits `cost` from
    /// it: `Ok` with the units left, or `Err` with the units held when
    /// they are fewer than `cost`. The units the lease held before are counted in
    /// when `batch.keep`, and dropped otherwise.
    pub(super) fn publish(&self, batch: &Batch, cost: u64) -> Result<u64, u64> {
        self.remaining.store(batch.remaining, Ordering::Relaxed);
        self.reset_at.store(batch.reset_at, Ordering::Relaxed);
        let mut word = self.lease.load(Ordering::Acquire);
        let generation = ((word >> LOW_BITS) + 1) & 0xffff;
        // The end first: a check that sees the new units sees their end.
        self.until.store(
            generation << LOW_BITS | batch.until.min(LOW),
            Ordering::Release,
        );
        loop {
            let kept = if batch.keep { word & LOW } else { 0 };
            let units = (kept + batch.granted).min(LOW);
            let (left, admitted) = match units.checked_sub(cost) {
                Some(left) => (left, Ok(left)),
                None => (units, Err(units)),
            };
            match self.lease.compare_exchange_weak(
                word,
                generation << LOW_BITS | left,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return admitted,
                Err(current) => word = current,
            }
        }
    }

    /// Takes every unit held out of the lease if its word is still `word`
    /// (nothing spent since the sweep saw it): the units taken.
    pub(super) fn take_idle(&self, word: u64) -> Option<u64> {
        let units = word & LOW;
        (units > 0)
            .then(|| {
                self.lease
                    .compare_exchange(word, word & !LOW, Ordering::AcqRel, Ordering::Acquire)
                    .ok()
                    .map(|_| units)
            })
            .flatten()
    }

    /// A local denial of `cost` at `now`, if a short take set one that has
    /// not run out: `retry_after` and `reset_after` counted down from the
    /// store's answer, `remaining` the store's then and what is held here.
    #[inline]
    pub(super) fn denial(&self, now: u64, cost: u64) -> Option<Decision> {
        let until = self.denied_until.load(Ordering::Acquire);
        if now >= until {
            return None;
        }
        self.denied.fetch_add(cost, Ordering::Relaxed);
        let reset_at = self.reset_at.load(Ordering::Relaxed);
        let remaining = self.remaining().saturating_add(self.held(now));
        let mut d = Decision::from_micros(
            false,
            self.policy.limit(),
            remaining,
            reset_at.saturating_sub(now),
            until - now,
            0,
        );
        d.source = Source::Lease;
        Some(d)
    }

    /// Denies locally until `until` (µs; 0 lifts a denial).
    pub(super) fn deny_until(&self, until: u64) {
        self.denied_until.store(until, Ordering::Release);
    }

    /// The units denied here since the last call, which it starts again.
    pub(super) fn take_denied(&self) -> u64 {
        self.denied.swap(0, Ordering::Relaxed)
    }

    /// Empties the lease (a reset, or the slot replaced).
    pub(super) fn clear(&self) {
        self.deny_until(0);
        let _ = self.publish(&Batch::default(), 0);
    }

    /// A leased admission's decision, `left` units still held: `remaining`
    /// and `reset_after` estimated from the store's last answer.
    #[inline]
    pub(super) fn decision(&self, now: u64, left: u64) -> Decision {
        let remaining = self.remaining.load(Ordering::Relaxed);
        let reset_at = self.reset_at.load(Ordering::Relaxed);
        let mut d = Decision::from_micros(
            true,
            self.policy.limit(),
            remaining.saturating_add(left),
            reset_at.saturating_sub(now),
            0,
            0,
        );
        d.source = Source::Lease;
        d
    }
}
