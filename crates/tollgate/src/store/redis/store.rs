//! The [`Store`] impl: validation, then a decision, a batch or a lease.

use std::time::Duration;

use super::RedisStore;
use super::error::store_error;
use super::lease::LeaseOp;
use crate::algorithm::{LeaseId, Usage};
use crate::store::validate;
use crate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store};
use crate::{Decision, Policy, Result};

impl Store for RedisStore {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            validate::check(policy, key, cost)?;
            let decision = self.decide(policy, key, cost, 0).await?;
            Ok(decision.shadowed(policy))
        })
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let max_wait = validate::reserve(policy, key, cost, max_wait)?;
            self.decide(policy, key, cost, max_wait).await
        })
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
            validate::check_many(requests, atomic)?;
            if requests.is_empty() {
                return Ok(Vec::new());
            }
            if atomic {
                return self.batch(requests).await;
            }
            // Concurrent EVALSHAs on the multiplexed connection go out as
            // one pipeline (one per node on a cluster), each reloading its
            // script on NOSCRIPT by itself.
            let decisions = futures_util::future::join_all(requests.iter().map(|r| async move {
                Ok(self
                    .decide(r.policy, r.key, r.cost, 0)
                    .await?
                    .shadowed(r.policy))
            }))
            .await;
            decisions.into_iter().collect()
        })
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            let id = LeaseId::random();
            let (decision, taken) = self.lease(policy, key, LeaseOp::Acquire, id).await?;
            Ok(Lease {
                decision,
                id: taken.then_some(id),
            })
        })
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { Ok(self.lease(policy, key, LeaseOp::Release, lease).await?.1) })
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            validate::reset(key)?;
            let mut cmd = redis::cmd("DEL");
            cmd.arg(self.key_of(policy, key));
            self.inner
                .conn
                .query(&cmd)
                .await
                .map_err(|e| store_error(&e))?;
            Ok(())
        })
    }

    fn usage<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            validate::usage(policy, key, op, cost)?;
            self.usage_op(policy, key, op, cost).await
        })
    }

    fn take_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move {
            validate::usage(policy, key, Usage::AtMostHeld(hold), max_cost)?;
            self.take_held_op(policy, key, max_cost, hold).await
        })
    }

    fn refund_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move {
            validate::refund_held(policy, key, &stamp, units)?;
            self.refund_held_op(policy, key, stamp, units).await
        })
    }
}
