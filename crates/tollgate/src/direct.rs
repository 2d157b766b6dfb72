//! A limiter for one key: the memory store's decisions without the map.
//!
//! When a process limits one thing as a whole (its calls to a partner API,
//! the rate of a background job) there is no key to look up: the state
//! sits next to the policy, and a decision is a clock read and the
//! algorithm's arithmetic. Decisions are exactly those of
//! [`MemoryStore`](crate::MemoryStore) for a single key.
//!
//! GCRA keeps its single number, the theoretical arrival time, in one
//! atomic word updated by compare-and-swap, so no caller ever waits for a
//! lock (a rate finer than 4096 scaled units a µs keeps it behind a mutex
//! instead). The token bucket, which takes a late request (one whose time
//! is behind the bucket's) at the bucket's time, needs two numbers: that
//! time and its deficit; they sit behind a sequence lock, whose readers
//! copy them without writing and whose one writer holds it for two stores,
//! at the price of one 64-bit compare-and-swap. Every other algorithm
//! keeps its state behind a mutex. All follow the memory store's rule for
//! a state whose reset time has passed: it is a fresh one.

mod bucket;
mod gcra;

use std::time::Duration;

use parking_lot::Mutex;

use self::bucket::SeqBucket;
use self::gcra::PackedGcra;
use crate::algorithm::{ConcurrencyState, LeaseId, State};
use crate::clock::{Clock, MonotonicClock};
use crate::decision::Verdict;
use crate::store::Lease;
use crate::{Decision, Policy, Result};

/// One policy's limit for a single key, in this process.
///
/// ```
/// use std::time::Duration;
/// use tollgate::{DirectLimiter, ManualClock, Policy};
///
/// let clock = ManualClock::new(0);
/// let partner = Policy::gcra("partner-api", 10, Duration::from_secs(1), 2)?;
/// let limiter = DirectLimiter::with_clock(partner, clock.clone());
/// assert!(limiter.check(1)?.allowed);
/// assert!(limiter.check(1)?.allowed);
/// let denied = limiter.check(1)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(100));
/// clock.advance(Duration::from_millis(100));
/// assert!(limiter.check(1)?.allowed);
/// # Ok::<(), tollgate::Error>(())
/// ```
#[doc = include_str!("docs/direct.md")]
#[derive(Debug)]
pub struct DirectLimiter<C: Clock = MonotonicClock> {
    policy: Policy,
    clock: C,
    cell: Cell,
}

/// The finest rate packed in an atomic word: 4096 scaled units a µs, so
/// that a time in scaled units fits 64 bits until the year 2112.
const MAX_PACKED_DRIP: u64 = 1 << 12;

/// Where the state lives.
#[derive(Debug)]
enum Cell {
    /// GCRA's TAT in one atomic word.
    Gcra(PackedGcra),
    /// A token bucket's state behind a sequence lock.
    Bucket(SeqBucket),
    /// Any algorithm's state behind a lock.
    Locked(Mutex<Slot>),
}

/// A state and when it becomes fresh again, as a memory store entry.
#[derive(Debug)]
struct Slot {
    state: State,
    /// µs; at or before now, the state is a fresh one.
    expires_at: u64,
}

impl DirectLimiter {
    /// A limiter for `policy` on the monotonic clock.
    pub fn new(policy: Policy) -> DirectLimiter {
        DirectLimiter::with_clock(policy, MonotonicClock::new())
    }
}

impl<C: Clock> DirectLimiter<C> {
    /// A limiter for `policy` reading time from `clock`.
    pub fn with_clock(policy: Policy, clock: C) -> DirectLimiter<C> {
        let algorithm = policy.algorithm();
        let cell = if let Some(packed) = PackedGcra::new(algorithm) {
            Cell::Gcra(packed)
        } else if let Some(bucket) = SeqBucket::new(algorithm) {
            Cell::Bucket(bucket)
        } else {
            Cell::Locked(Mutex::new(Slot {
                state: algorithm.fresh_state(),
                expires_at: 0,
            }))
        };
        DirectLimiter {
            policy,
            clock,
            cell,
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Decides a request of `cost` now (0 peeks without consuming). Errors
    /// when `cost` exceeds the policy's limit, for a concurrency policy
    /// (which takes leases instead), and for a GCRA policy kept in one
    /// atomic word when the clock reads past the year 2112.
    #[inline(always)]
    pub fn check(&self, cost: u64) -> Result<Decision> {
        self.policy.require_rate("check")?;
        self.policy.validate_cost(cost)?;
        Ok(self.decide(cost, 0)?.shadowed(&self.policy))
    }

    /// Admits a request that would wait at most `max_wait`, consuming
    /// future capacity; the decision's `delay` is the wait (token bucket
    /// and GCRA only). A request that would wait longer is denied and
    /// consumes nothing.
    pub fn reserve(&self, cost: u64, max_wait: Duration) -> Result<Decision> {
        let max_wait = self.policy.validate_reservation(cost, max_wait)?;
        self.decide(cost, max_wait)
    }

    /// Reserves with a wait of at most `timeout`, then sleeps the wait
    /// (Guava's `tryAcquire`); a denial consumed nothing and slept not.
    pub async fn acquire(&self, cost: u64, timeout: Duration) -> Result<Decision> {
        let decision = self.reserve(cost, timeout)?;
        if decision.allowed && !decision.delay.is_zero() {
            tokio::time::sleep(decision.delay).await;
        }
        Ok(decision)
    }

    /// Takes a lease (concurrency policies only).
    pub fn acquire_lease(&self) -> Result<Lease> {
        let c = self.policy.require_concurrency("acquire_lease")?;
        let id = LeaseId::random();
        let (verdict, ()) = self.with_leases(|s, now| (c.acquire_micros(s, now, id), ()));
        let decision = verdict.decision();
        Ok(Lease {
            decision,
            id: decision.allowed.then_some(id),
        })
    }

    /// Gives a lease back; `false` when it was not held (released before,
    /// or expired). Idempotent.
    pub fn release_lease(&self, lease: LeaseId) -> Result<bool> {
        let c = self.policy.require_concurrency("release_lease")?;
        let (_, held) = self.with_leases(|s, now| {
            let held = c.release(s, now, lease);
            (c.peek_micros(s, now), held)
        });
        Ok(held)
    }

    /// Forgets all state: the limiter is fresh again.
    pub fn reset(&self) {
        match &self.cell {
            Cell::Gcra(packed) => packed.reset(),
            Cell::Bucket(bucket) => bucket.reset(),
            Cell::Locked(slot) => slot.lock().expires_at = 0,
        }
    }

    #[inline(always)]
    fn decide(&self, cost: u64, max_wait: u64) -> Result<Decision> {
        let now = self.clock.now_micros();
        let verdict = match &self.cell {
            Cell::Gcra(packed) => packed.decide(now, cost, max_wait)?,
            Cell::Bucket(bucket) => bucket.decide(now, cost, max_wait),
            Cell::Locked(slot) => {
                self.locked(slot, now, |state| {
                    let algorithm = self.policy.algorithm();
                    (algorithm.decide_micros(state, now, cost, max_wait), ())
                })
                .0
            }
        };
        Ok(verdict.decision())
    }

    /// Runs `f` on the locked state as the memory store runs an operation
    /// on an entry: a state past its expiry is fresh first, and the
    /// decision's `reset_after` sets the next expiry.
    fn locked<R>(
        &self,
        slot: &Mutex<Slot>,
        now: u64,
        f: impl FnOnce(&mut State) -> (Verdict, R),
    ) -> (Verdict, R) {
        let mut slot = slot.lock();
        if slot.expires_at <= now {
            slot.state = self.policy.algorithm().fresh_state();
        }
        let (verdict, result) = f(&mut slot.state);
        slot.expires_at = if verdict.reset_after == 0 {
            0
        } else {
            now.saturating_add(verdict.reset_after)
        };
        (verdict, result)
    }

    /// Runs `f` on the lease table, which a concurrency limiter holds
    /// behind its lock (a fresh table should it hold anything else).
    fn with_leases<R>(
        &self,
        f: impl FnOnce(&mut ConcurrencyState, u64) -> (Verdict, R),
    ) -> (Verdict, R) {
        let now = self.clock.now_micros();
        let Cell::Locked(slot) = &self.cell else {
            // Only rate algorithms are packed, and they take no leases.
            return f(&mut ConcurrencyState::default(), now);
        };
        self.locked(slot, now, |state| match state {
            State::Concurrency(leases) => f(leases, now),
            other => {
                let mut leases = ConcurrencyState::default();
                let result = f(&mut leases, now);
                *other = State::Concurrency(leases);
                result
            }
        })
    }
}
