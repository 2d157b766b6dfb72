//! The checks every store makes before it touches state, written once.
//!
//! Each [`Store`](super::Store) operation starts with the function of the
//! same name here, whichever store answers: memory, Redis, or the
//! resilient store (before its failure policy, so a request that every
//! store refuses is refused while the primary store is down too). The order
//! is the same everywhere: the key, then the operation against the
//! algorithm, then the cost.

use std::time::Duration;

use super::key::KeyRef;
use super::{Request, Stamp};
use crate::algorithm::{Algorithm, Concurrency, Usage};
use crate::{Error, Policy, Result, validate_key};

/// A check (or a peek) of `cost`: not on a concurrency policy, which only
/// takes leases.
#[inline]
pub(crate) fn check(policy: &Policy, key: &[u8], cost: u64) -> Result<()> {
    validate_key(key)?;
    policy.require_rate("check")?;
    policy.validate_cost(cost)
}

/// A reservation: token buckets and GCRA only, and a `max_wait` kept
/// exact. Returns `max_wait` in microseconds.
#[inline]
pub(crate) fn reserve(policy: &Policy, key: &[u8], cost: u64, max_wait: Duration) -> Result<u64> {
    validate_key(key)?;
    policy.validate_reservation(cost, max_wait)
}

/// Taking or giving back a lease (`operation` names which): concurrency
/// policies only. Returns their parameters.
#[inline]
pub(crate) fn lease<'p>(
    policy: &'p Policy,
    key: &[u8],
    operation: &'static str,
) -> Result<&'p Concurrency> {
    validate_key(key)?;
    policy.require_concurrency(operation)
}

/// A batch: every request as a check; in an atomic batch, no (policy, key)
/// pair twice.
pub(crate) fn check_many(requests: &[Request<'_>], atomic: bool) -> Result<()> {
    for r in requests {
        validate_key(r.key)?;
        r.policy.require_rate("check_many")?;
        r.policy.validate_cost(r.cost)?;
    }
    if atomic {
        let keys: Vec<KeyRef<'_>> = requests
            .iter()
            .map(|r| KeyRef::new(r.policy, r.key))
            .collect();
        if let Some(i) = (1..keys.len()).find(|&i| keys[..i].contains(&keys[i])) {
            return Err(Error::argument(
                "checks",
                format!(
                    "policy `{}` and the same key appear twice in one atomic batch",
                    requests[i].policy.name()
                ),
            ));
        }
    }
    Ok(())
}

/// A charge, a refund or a `check_at_most`: not on a concurrency policy,
/// a cost of at most 2^52.
#[inline]
pub(crate) fn usage(policy: &Policy, key: &[u8], op: Usage, cost: u64) -> Result<()> {
    validate_key(key)?;
    policy.validate_usage(op, cost)
}

/// A held take's refund: a token bucket or GCRA (`unsupported`
/// otherwise, as a reservation), and 1 to the units the take granted.
#[inline]
pub(crate) fn refund_held(policy: &Policy, key: &[u8], stamp: &Stamp, units: u64) -> Result<()> {
    validate_key(key)?;
    if !matches!(
        policy.algorithm(),
        Algorithm::TokenBucket(_) | Algorithm::Gcra(_)
    ) {
        return Err(Error::Unsupported {
            operation: "refund_held",
            algorithm: policy.algorithm().name(),
        });
    }
    if units == 0 || units > stamp.granted() {
        return Err(Error::argument(
            "units",
            format!(
                "must be 1 to the {} units the held take granted, got {units}",
                stamp.granted()
            ),
        ));
    }
    Ok(())
}

/// A reset: any policy, a valid key.
#[inline]
pub(crate) fn reset(key: &[u8]) -> Result<()> {
    validate_key(key)
}
