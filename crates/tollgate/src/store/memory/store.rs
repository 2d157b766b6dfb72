//! The [`Store`] impl: the memory store never waits, so each operation is
//! its `_sync` twin's body on valid input, ready at once.

use std::time::Duration;

use super::MemoryStore;
use crate::algorithm::{LeaseId, Usage};
use crate::clock::Clock;
use crate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store, Valid, ready};
use crate::{Decision, Policy, Result};

impl<C: Clock> Store for MemoryStore<C> {
    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        ready(Ok(self.check_valid(policy, key, cost, valid)))
    }

    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        ready(Ok(self.reserve_valid(policy, key, cost, max_wait, valid)))
    }

    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        ready(Ok(self.check_many_valid(requests, atomic, valid)))
    }

    fn acquire_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<Lease>> {
        ready(Ok(self.acquire_lease_valid(policy, key, valid)))
    }

    fn release_lease_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
        valid: Valid,
    ) -> BoxFuture<'a, Result<bool>> {
        ready(Ok(self.release_lease_valid(policy, key, lease, valid)))
    }

    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        self.reset_valid(policy, key, valid);
        ready(Ok(()))
    }

    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        ready(Ok(self.usage_valid(policy, key, op, cost, valid)))
    }

    fn take_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        ready(Ok(self.take_held_valid(policy, key, max_cost, hold, valid)))
    }

    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        ready(Ok(self.refund_held_valid(policy, key, stamp, units, valid)))
    }
}
