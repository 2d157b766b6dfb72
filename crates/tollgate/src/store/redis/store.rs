//! The [`Store`] impl: on valid input, a decision, a batch or a lease.

use std::time::Duration;

use super::RedisStore;
use super::error::store_error;
use super::lease::LeaseOp;
use crate::algorithm::{LeaseId, Usage};
use crate::policy::wait_micros;
use crate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store, Valid};
use crate::{Decision, Policy, Result};

impl Store for RedisStore {
    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        _: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let decision = self.decide(policy, key, cost, 0).await?;
            Ok(decision.shadowed(policy))
        })
    }

    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        _: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move { self.decide(policy, key, cost, wait_micros(max_wait)).await })
    }

    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
        _: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
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

    fn acquire_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        _: Valid,
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

    fn release_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
        _: Valid,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { Ok(self.lease(policy, key, LeaseOp::Release, lease).await?.1) })
    }

    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        _: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
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

    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        _: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move { self.usage_op(policy, key, op, cost).await })
    }

    fn take_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
        _: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move { self.take_held_op(policy, key, max_cost, hold).await })
    }

    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
        _: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move { self.refund_held_op(policy, key, stamp, units).await })
    }
}
