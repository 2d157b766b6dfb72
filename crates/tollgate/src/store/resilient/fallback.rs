//! The answers of the failure policy, one function per operation, and
//! the local limiter that `local` decides with.
//!
//! Requests reach these functions already validated by the resilient store
//! (`store/validate.rs`), so `allow` and `deny` never answer what every
//! store refuses.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::OnFailure;
use crate::algorithm::{Algorithm, LeaseId};
use crate::store::{Lease, Request, Valid};
use crate::{Clock, Decision, Error, MemoryStore, Policy, Result, Source};

/// A memory store whose policies are the callers' policies shared among
/// `instances` instances, so that together they stay near the global limit.
///
/// Its state is never cleared when the primary store comes back: a key's
/// local state lives until the local algorithm finds it fresh again (or
/// the key is evicted at `max_keys`, or reset), so that the local limiter
/// admits, over any interval and whatever the breaker did meanwhile, at
/// most what one limiter of the share admits over that interval.
#[derive(Debug)]
pub(crate) struct Fallback {
    store: MemoryStore<Arc<dyn Clock>>,
    instances: u64,
    /// Derived policies by name, with the algorithm they were derived from
    /// (a reloaded policy of the same name is derived again).
    shares: Mutex<HashMap<String, (Algorithm, Policy)>>,
}

impl Fallback {
    pub(crate) fn new(max_keys: usize, instances: u32, clock: Arc<dyn Clock>) -> Fallback {
        Fallback {
            store: MemoryStore::builder()
                .clock(clock)
                .max_keys(max_keys)
                .build(),
            instances: u64::from(instances),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// How many keys the local limiter holds.
    pub(crate) fn len(&self) -> usize {
        self.store.len()
    }

    /// This instance's share of `policy`.
    pub(crate) fn share(&self, policy: &Policy) -> Policy {
        if self.instances == 1 {
            return policy.clone();
        }
        let mut shares = self.shares.lock();
        if let Some((algorithm, share)) = shares.get(policy.name())
            && algorithm == policy.algorithm()
        {
            return share.clone();
        }
        let share = divide(policy, self.instances);
        shares.insert(
            policy.name().to_owned(),
            (*policy.algorithm(), share.clone()),
        );
        share
    }

    /// A check (`max_wait` `None`) or a reservation.
    pub(crate) fn check(
        &self,
        mode: OnFailure,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Result<Decision> {
        match mode {
            OnFailure::Deny => Err(Error::StoreUnavailable),
            OnFailure::Allow => Ok(admitted(policy, cost)),
            OnFailure::Local => {
                let share = self.share(policy);
                let d = match max_wait {
                    Some(w) => self.store.reserve_sync(&share, key, cost, w),
                    None => self.store.check_sync(&share, key, cost),
                }?;
                Ok(d.with_source(Source::Fallback))
            }
        }
    }

    /// A batch, each request under its own failure policy (`modes`): if any
    /// is `deny`, the whole batch is refused; the `local` ones are decided
    /// together (atomically if asked), the others admitted.
    pub(crate) fn check_many(
        &self,
        modes: &[OnFailure],
        requests: &[Request<'_>],
        atomic: bool,
    ) -> Result<Vec<Decision>> {
        if modes.contains(&OnFailure::Deny) {
            return Err(Error::StoreUnavailable);
        }
        let shares: Vec<Policy> = requests.iter().map(|r| self.share(r.policy)).collect();
        let local: Vec<Request<'_>> = requests
            .iter()
            .zip(&shares)
            .zip(modes)
            .filter(|(_, m)| **m == OnFailure::Local)
            .map(|((r, share), _)| Request {
                policy: share,
                key: r.key,
                cost: r.cost,
            })
            .collect();
        let mut decided = self.store.check_many_sync(&local, atomic)?.into_iter();
        Ok(requests
            .iter()
            .zip(modes)
            .map(|(r, mode)| match mode {
                OnFailure::Local => decided
                    .next()
                    .expect("one decision per local request")
                    .with_source(Source::Fallback),
                _ => admitted(r.policy, r.cost),
            })
            .collect())
    }

    /// A lease: from the local limiter, made up (`allow`), or refused.
    pub(crate) fn acquire_lease(
        &self,
        mode: OnFailure,
        policy: &Policy,
        key: &[u8],
    ) -> Result<Lease> {
        match mode {
            OnFailure::Deny => Err(Error::StoreUnavailable),
            OnFailure::Allow => {
                let limit = policy.limit();
                Ok(Lease {
                    decision: Decision::from_micros(true, limit, limit, 0, 0, 0)
                        .with_source(Source::Fallback),
                    id: Some(LeaseId::random()),
                })
            }
            OnFailure::Local => {
                let l = self.store.acquire_lease_sync(&self.share(policy), key)?;
                Ok(Lease {
                    decision: l.decision.with_source(Source::Fallback),
                    id: l.id,
                })
            }
        }
    }

    /// A lease given back: one taken from the local limiter is released
    /// there; one held in the primary store expires there by itself.
    pub(crate) fn release_lease(
        &self,
        mode: OnFailure,
        policy: &Policy,
        key: &[u8],
        lease: LeaseId,
    ) -> Result<bool> {
        match mode {
            OnFailure::Local => self
                .store
                .release_lease_sync(&self.share(policy), key, lease),
            OnFailure::Allow | OnFailure::Deny => Ok(false),
        }
    }

    /// Forgets `key` under `policy` locally (its key already valid; the
    /// others validate again, against the share's policy, whose limit is
    /// not the caller's).
    pub(crate) fn reset(&self, policy: &Policy, key: &[u8], valid: Valid) {
        self.store.reset_valid(&self.share(policy), key, valid);
    }
}

/// The answer of `allow`: admitted, as if the key were fresh.
fn admitted(policy: &Policy, cost: u64) -> Decision {
    let limit = policy.limit();
    Decision::from_micros(true, limit, limit - cost, 0, 0, 0).with_source(Source::Fallback)
}

/// `policy` with its limit, burst or capacity divided by `n` (rounded down,
/// at least 1) and its rate divided by `n` by stretching its period (exact,
/// where `rate / n` would round). A share that cannot be expressed (a
/// period beyond a year) keeps the rate and only divides the size.
fn divide(policy: &Policy, n: u64) -> Policy {
    let divided = (policy.algorithm().share(n)).and_then(|a| Policy::new(policy.name(), a));
    // Every share is valid when the policy is (smaller sizes, the same or
    // a longer period within bounds, else the original period).
    divided.unwrap_or_else(|_| policy.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_divide_sizes_and_rates() {
        let clock: Arc<dyn Clock> = Arc::new(crate::ManualClock::new(0));
        let f = Fallback::new(1024, 3, clock.clone());
        let fw = Policy::fixed_window("fw", 100, Duration::from_secs(60)).unwrap();
        assert_eq!(f.share(&fw).limit(), 33);
        let tb = Policy::token_bucket("tb", 10, Duration::from_secs(1), 20).unwrap();
        let Algorithm::TokenBucket(share) = *f.share(&tb).algorithm() else {
            panic!("a token bucket stays a token bucket");
        };
        assert_eq!(share.burst(), 6);
        assert_eq!((share.rate().rate, share.rate().per), (10, 3_000_000));
        let tiny = Policy::fixed_window("tiny", 2, Duration::from_secs(1)).unwrap();
        assert_eq!(f.share(&tiny).limit(), 1, "never below 1");
        let one = Fallback::new(1024, 1, clock);
        assert_eq!(one.share(&fw), fw);
    }
}
