#![doc = include_str!("../../docs/resilient.md")]

mod attempt;
mod breaker;
mod builder;
mod deny_cache;
mod fallback;
mod on_failure;
mod probe;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use self::attempt::Attempt;
use self::breaker::Breaker;
pub use self::breaker::BreakerState;
pub use self::builder::ResilientStoreBuilder;
pub use self::deny_cache::DenyCache;
use self::fallback::Fallback;
pub use self::on_failure::OnFailure;
use self::probe::Probe;
use super::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store, Valid};
use crate::algorithm::{LeaseId, Usage};
use crate::{Clock, Decision, Error, Policy, Result};

/// A [`Store`] that survives the failures of its primary store. See the
/// [module documentation](self).
#[derive(Debug, Clone)]
pub struct ResilientStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    primary: Arc<dyn Store>,
    deadline: Duration,
    on_failure: OnFailure,
    overrides: HashMap<String, OnFailure>,
    breaker: Breaker,
    fallback: Fallback,
    deny_cache: Option<DenyCache>,
    clock: Arc<dyn Clock>,
    probe: Probe,
}

impl ResilientStore {
    /// A builder around `primary`.
    pub fn builder(primary: Arc<dyn Store>) -> ResilientStoreBuilder {
        ResilientStoreBuilder::new(primary)
    }

    /// Whether decisions currently go to the primary store.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// The failure policy that applies to `policy`.
    pub fn on_failure_for(&self, policy: &Policy) -> OnFailure {
        self.inner
            .overrides
            .get(policy.name())
            .copied()
            .unwrap_or(self.inner.on_failure)
    }

    /// How many keys the local fallback holds (their state is kept across
    /// recoveries until it is fresh again; see the module docs).
    pub fn fallback_keys(&self) -> usize {
        self.inner.fallback.len()
    }

    /// How long decisions have come from the failure policy: `None` while
    /// the breaker is closed.
    pub fn open_for(&self) -> Option<Duration> {
        self.inner.breaker.open_for()
    }

    /// How many keys the deny cache holds a denial for; `None` when the
    /// deny cache is off.
    pub fn deny_cache_keys(&self) -> Option<usize> {
        self.inner.deny_cache.as_ref().map(DenyCache::len)
    }
}

impl Store for ResilientStore {
    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let sent = self.inner.clock.now_micros();
            if let Some(cache) = &self.inner.deny_cache
                && let Some(d) = cache.lookup(policy, key, cost, sent)
            {
                return Ok(d.shadowed(policy));
            }
            let result = match self
                .attempt(|| self.inner.primary.check_unchecked(policy, key, cost, valid))
                .await
            {
                Attempt::Answered(result) => {
                    if let (Ok(d), Some(cache)) = (&result, &self.inner.deny_cache) {
                        cache.remember(policy, key, cost, d, sent);
                    }
                    result
                }
                Attempt::Unavailable => {
                    let mode = self.on_failure_for(policy);
                    self.inner.fallback.check(mode, policy, key, cost, None)
                }
            };
            result.map(|d| d.shadowed(policy))
        })
    }

    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .reserve_unchecked(policy, key, cost, max_wait, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => {
                    let mode = self.on_failure_for(policy);
                    (self.inner.fallback).check(mode, policy, key, cost, Some(max_wait))
                }
            }
        })
    }

    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
            let mut result = match self
                .attempt(|| {
                    self.inner
                        .primary
                        .check_many_unchecked(requests, atomic, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => {
                    let modes: Vec<OnFailure> = requests
                        .iter()
                        .map(|r| self.on_failure_for(r.policy))
                        .collect();
                    self.inner.fallback.check_many(&modes, requests, atomic)
                }
            };
            if let Ok(decisions) = &mut result {
                for (r, d) in requests.iter().zip(decisions) {
                    *d = d.shadowed(r.policy);
                }
            }
            result
        })
    }

    fn acquire_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .acquire_lease_unchecked(policy, key, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => {
                    let mode = self.on_failure_for(policy);
                    self.inner.fallback.acquire_lease(mode, policy, key)
                }
            }
        })
    }

    fn release_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
        valid: Valid,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .release_lease_unchecked(policy, key, lease, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => {
                    let mode = self.on_failure_for(policy);
                    self.inner.fallback.release_lease(mode, policy, key, lease)
                }
            }
        })
    }

    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if let Some(cache) = &self.inner.deny_cache {
                cache.forget(policy, key);
            }
            self.inner.fallback.reset(policy, key, valid);
            match self
                .attempt(|| self.inner.primary.reset_unchecked(policy, key, valid))
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => Err(Error::StoreUnavailable),
            }
        })
    }

    /// Passed through to the primary store. While it is unavailable the
    /// answer is [`Error::StoreUnavailable`], whatever the failure policy:
    /// a usage record is the caller's to keep and retry, never dropped or
    /// kept only in a local fallback that is discarded when the store is
    /// back. A refund forgets the key's cached denial, which it may have
    /// ended.
    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            if op == Usage::Refund
                && let Some(cache) = &self.inner.deny_cache
            {
                cache.forget(policy, key);
            }
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .usage_unchecked(policy, key, op, cost, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => Err(Error::StoreUnavailable),
            }
        })
    }

    /// Passed through to the primary store, as
    /// [`usage_unchecked`](Self::usage_unchecked) is.
    fn take_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move {
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .take_held_unchecked(policy, key, max_cost, hold, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => Err(Error::StoreUnavailable),
            }
        })
    }

    /// Passed through to the primary store, as a refund is (and forgets
    /// the key's cached denial); no fallback can compare the primary's
    /// state, so while it is unavailable the answer is an error.
    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move {
            if let Some(cache) = &self.inner.deny_cache {
                cache.forget(policy, key);
            }
            match self
                .attempt(|| {
                    self.inner
                        .primary
                        .refund_held_unchecked(policy, key, stamp, units, valid)
                })
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => Err(Error::StoreUnavailable),
            }
        })
    }
}
