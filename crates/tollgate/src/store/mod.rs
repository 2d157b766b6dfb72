//! Where state lives: the [`Store`] trait and its implementations.
//!
//! A store takes a policy, a key and a cost, moves the key's state through
//! the policy's algorithm, and answers with a [`Decision`]. The algorithms
//! are the same everywhere; stores differ only in where the state is kept and
//! whose clock they read.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::algorithm::{LeaseId, Usage};
use crate::{Decision, Error, Policy, Result};

pub use self::held::{HeldGrant, Stamp};
pub use self::request::{Lease, Request};
pub use self::validate::Valid;

pub mod deferred;
mod forward;
mod held;
pub(crate) mod key;
pub mod leasing;
pub mod memory;
#[cfg(feature = "redis")]
pub mod redis;
mod request;
pub mod resilient;
pub(crate) mod validate;

/// A boxed future, so that `Store` can be used as `dyn Store`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A call's answer, ready at once: bad input's error, or a store that never
/// waits.
#[inline]
pub(crate) fn ready<'a, T: Send + 'a>(result: Result<T>) -> BoxFuture<'a, Result<T>> {
    Box::pin(std::future::ready(result))
}

/// Bad input's error, answered at once.
#[inline]
fn failed<'a, T: Send + 'a>(error: Error) -> BoxFuture<'a, Result<T>> {
    ready(Err(error))
}

/// Where limiter state lives, and how decisions are made on it atomically.
///
/// A store implements the `*_unchecked` methods: each operation on input
/// already validated, which a [`Valid`] proves. Callers call the others:
/// each validates its input (key length, cost against the policy's limit,
/// the operation against the algorithm; `store/validate.rs`) before
/// anything touches state, so bad input costs nothing and changes nothing,
/// then calls its `*_unchecked` twin. A store that wraps another (the
/// resilient, deferred, leasing and regional stores) passes the
/// `*_unchecked` call on with its `Valid`, so a call is validated once,
/// however many stores it passes through. Implementations leave the
/// validating methods as they are.
pub trait Store: Debug + Send + Sync {
    /// [`check`](Self::check) on valid input.
    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>>;

    /// [`reserve`](Self::reserve) on valid input (`max_wait` is a whole
    /// number of µs the policy's rate keeps exact).
    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>>;

    /// [`check_many`](Self::check_many) on valid input.
    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>>;

    /// [`acquire_lease`](Self::acquire_lease) on valid input.
    fn acquire_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<Lease>>;

    /// [`release_lease`](Self::release_lease) on valid input.
    fn release_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
        valid: Valid,
    ) -> BoxFuture<'a, Result<bool>>;

    /// [`reset`](Self::reset) on a valid key.
    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>>;

    /// [`usage`](Self::usage) on valid input.
    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>>;

    /// [`take_held`](Self::take_held) on valid input. A store that cannot
    /// stamp answers no stamp (what this default does): its units can
    /// only lapse.
    fn take_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        let usage = self.usage_unchecked(policy, key, Usage::AtMostHeld(hold), max_cost, valid);
        Box::pin(async move { Ok(HeldGrant::unstamped(usage.await?)) })
    }

    /// [`refund_held`](Self::refund_held) on valid input. A store that
    /// cannot compare states (this default) answers `unsupported`.
    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        _key: &'a [u8],
        _stamp: Stamp,
        _units: u64,
        _valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        ready(Err(Error::Unsupported {
            operation: "refund_held",
            algorithm: policy.algorithm().name(),
        }))
    }

    /// Decides a request of `cost` on `key` under `policy`; cost 0 peeks.
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        validate::check(policy, key, cost).map_or_else(failed, |valid| {
            self.check_unchecked(policy, key, cost, valid)
        })
    }

    /// For token buckets and GCRA: admits a request that would wait at most
    /// `max_wait`, consuming future capacity; the decision's `delay` is the
    /// wait. A request that would wait longer is denied and consumes nothing.
    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        validate::reserve(policy, key, cost, max_wait).map_or_else(failed, |valid| {
            self.reserve_unchecked(policy, key, cost, max_wait, valid)
        })
    }

    /// Decides several requests at once, in order. With `atomic`, either all
    /// are admitted and consume, or none consumes: then every decision is a
    /// denial, and those that would have passed alone have a zero
    /// `retry_after`. A (policy, key) pair may appear only once in an atomic
    /// batch.
    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        validate::check_many(requests, atomic).map_or_else(failed, |valid| {
            self.check_many_unchecked(requests, atomic, valid)
        })
    }

    /// For concurrency policies: takes a lease if one is free.
    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        validate::lease(policy, key, "acquire_lease").map_or_else(failed, |valid| {
            self.acquire_lease_unchecked(policy, key, valid)
        })
    }

    /// Gives a lease back; returns whether it was still held. Idempotent.
    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        validate::lease(policy, key, "release_lease").map_or_else(failed, |valid| {
            self.release_lease_unchecked(policy, key, lease, valid)
        })
    }

    /// Forgets everything about `key` under `policy`.
    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        validate::reset(key).map_or_else(failed, |valid| self.reset_unchecked(policy, key, valid))
    }

    /// A usage operation of `cost` (at most 2^52) on `key`: what
    /// [`charge`](Self::charge), [`refund`](Self::refund) and
    /// [`check_at_most`](Self::check_at_most) do, one atomic step on the
    /// key's state. Concurrency policies answer `unsupported`.
    fn usage<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        validate::usage(policy, key, op, cost).map_or_else(failed, |valid| {
            self.usage_unchecked(policy, key, op, cost, valid)
        })
    }

    /// Records usage that already happened: consumes `cost` even past the
    /// limit, so the key may go into debt (a window counts past its limit,
    /// a bucket goes negative, GCRA's TAT moves past the burst tolerance, a
    /// sliding log records the entry), and later requests are denied until
    /// time has paid the debt back. The decision describes the state after
    /// the charge: `allowed` says whether the charge fitted without debt,
    /// `retry_after` when a request of cost 1 would pass.
    fn charge<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.usage(policy, key, Usage::Charge, cost)
    }

    /// Gives back capacity consumed but not used, never making the key
    /// fresher than fresh: a count not below 0, a bucket not above its
    /// burst, a TAT not before now; a sliding log gives back its newest
    /// entries first. The decision describes the state after the refund
    /// (`allowed` is true; `retry_after` is when a request of cost 1 would
    /// pass).
    fn refund<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.usage(policy, key, Usage::Refund, cost)
    }

    /// Grants as much of `max_cost` as is available now, possibly 0, and
    /// consumes exactly that: the decision's
    /// [`granted`](Decision::granted). When nothing is granted (and
    /// `max_cost` > 0) it is a denial whose `retry_after` is when a
    /// request of cost 1 would pass. `max_cost` may exceed the limit.
    fn check_at_most<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.usage(policy, key, Usage::AtMost, max_cost)
    }

    /// [`check_at_most`](Self::check_at_most) for units the caller will
    /// admit at any time within `hold` from now (a lease's batch, spent
    /// over its life): on a token bucket or GCRA the grant is recorded as
    /// if it arrived `hold` from now, its TAT (or the bucket's level) at
    /// least that far ahead, while it is still decided now. Admissions
    /// spread over the hold then never exceed the bucket's own bound
    /// `burst + rate·T` over any span `T`, however many callers hold
    /// batches (see the [leasing store](crate::store::leasing)); the cost
    /// is up to `rate · hold` of capacity not granted when the bucket is
    /// nearly full, none when it is busy. A grant of nothing records
    /// nothing. `hold` is at most the bucket's refill from empty
    /// (`burst · per / rate`); on any other algorithm the answer is
    /// `invalid_argument` naming `hold` (a window's batch, spent within
    /// its window, needs none). Redis's server-clock form holds whole ms,
    /// rounded up.
    fn check_at_most_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.usage(policy, key, Usage::AtMostHeld(hold), max_cost)
    }

    /// [`check_at_most_held`](Self::check_at_most_held), answering also
    /// with the [`Stamp`] of the state the take wrote, which
    /// [`refund_held`](Self::refund_held) compares to give unused units
    /// back exactly. A store that cannot stamp answers no stamp: its units
    /// can only lapse.
    fn take_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        validate::usage(policy, key, Usage::AtMostHeld(hold), max_cost)
            .map_or_else(failed, |valid| {
                self.take_held_unchecked(policy, key, max_cost, hold, valid)
            })
    }

    /// Gives back `units` (1 to what was granted) of the held take that
    /// answered `stamp`, only if the key's state is still the bucket that
    /// take left: no other operation moved it since (a denial, which
    /// consumes nothing, does not count; time passing does not either),
    /// and it is not full again. The state then becomes exactly what a
    /// held take of the grant less `units` would have written (GCRA's TAT
    /// `units` emission intervals earlier, the token bucket's level as
    /// much higher), so the history is that of a smaller batch and the
    /// bucket's bound holds as for any held take (see the
    /// [leasing store](crate::store::leasing)); the state is never fresher
    /// than before the take. Answers the decision after the refund, or
    /// `None` when the state moved: then nothing is written, and the units
    /// stay consumed. Token buckets and GCRA only; a store that cannot
    /// compare states answers `unsupported`.
    fn refund_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        validate::refund_held(policy, key, &stamp, units).map_or_else(failed, |valid| {
            self.refund_held_unchecked(policy, key, stamp, units, valid)
        })
    }

    /// Settles a request admitted with cost `estimate` whose work turned
    /// out to cost `actual`: charges `actual − estimate` when positive,
    /// refunds `estimate − actual` when negative (a charge of 0 otherwise,
    /// which only reads the state). So the units charged to the key add up
    /// to the sum of the actual costs exactly, as long as each settle
    /// comes while the state still holds its estimate (see the crate docs,
    /// "Usage-based limits").
    fn settle<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        estimate: u64,
        actual: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        if actual >= estimate {
            self.usage(policy, key, Usage::Charge, actual - estimate)
        } else {
            self.usage(policy, key, Usage::Refund, estimate - actual)
        }
    }
}

/// Waits for a reservation: reserves `cost` with a wait of at most
/// `timeout`, then sleeps the wait (Guava's `tryAcquire`). Returns the
/// decision; when it is a denial nothing was consumed and nothing slept.
pub async fn acquire<S: Store + ?Sized>(
    store: &S,
    policy: &Policy,
    key: &[u8],
    cost: u64,
    timeout: Duration,
) -> Result<Decision> {
    let decision = store.reserve(policy, key, cost, timeout).await?;
    if decision.allowed && !decision.delay.is_zero() {
        tokio::time::sleep(decision.delay).await;
    }
    Ok(decision)
}
