//! The [`Store`] impl: the memory store never waits, so each method is its
//! `_sync` twin, ready at once.

use std::time::Duration;

use super::MemoryStore;
use crate::algorithm::{LeaseId, Usage};
use crate::clock::Clock;
use crate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store};
use crate::{Decision, Policy, Result};

impl<C: Clock> Store for MemoryStore<C> {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(std::future::ready(self.check_sync(policy, key, cost)))
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(std::future::ready(
            self.reserve_sync(policy, key, cost, max_wait),
        ))
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(std::future::ready(self.check_many_sync(requests, atomic)))
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(std::future::ready(self.acquire_lease_sync(policy, key)))
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(std::future::ready(
            self.release_lease_sync(policy, key, lease),
        ))
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(self.reset_sync(policy, key)))
    }

    fn usage<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(std::future::ready(self.usage_sync(policy, key, op, cost)))
    }

    fn take_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(std::future::ready(
            self.take_held_sync(policy, key, max_cost, hold),
        ))
    }

    fn refund_held<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(std::future::ready(
            self.refund_held_sync(policy, key, stamp, units),
        ))
    }
}
