//! A held batch's take with its stamp, and its exact refund: each one
//! step on the key's state under its shard's lock, so the stamp is the
//! state the take wrote and the refund compares the state it changes.

use std::time::Duration;

use super::MemoryStore;
use crate::algorithm::Usage;
use crate::clock::Clock;
use crate::store::{HeldGrant, Stamp, Valid, validate};
use crate::{Decision, Policy, Result};

impl<C: Clock> MemoryStore<C> {
    /// [`Store::take_held`](crate::Store::take_held) without an executor.
    pub fn take_held_sync(
        &self,
        policy: &Policy,
        key: &[u8],
        max_cost: u64,
        hold: Duration,
    ) -> Result<HeldGrant> {
        let valid = validate::usage(policy, key, Usage::AtMostHeld(hold), max_cost)?;
        Ok(self.take_held_valid(policy, key, max_cost, hold, valid))
    }

    /// [`take_held_sync`](Self::take_held_sync) on valid input.
    pub(super) fn take_held_valid(
        &self,
        policy: &Policy,
        key: &[u8],
        max_cost: u64,
        hold: Duration,
        _: Valid,
    ) -> HeldGrant {
        let op = Usage::AtMostHeld(hold);
        let (verdict, (granted, stamp)) = self.apply_with(policy, key, |algorithm, state, now| {
            let (verdict, granted) = algorithm.usage_micros(state, now, op, max_cost);
            let stamp = (granted > 0).then(|| algorithm.stamp_of(state)).flatten();
            (verdict, (granted, stamp))
        });
        HeldGrant {
            decision: verdict.decision().with_granted(granted),
            stamp: stamp.map(|s| Stamp::new(s, granted)),
        }
    }

    /// [`Store::refund_held`](crate::Store::refund_held) without an
    /// executor.
    pub fn refund_held_sync(
        &self,
        policy: &Policy,
        key: &[u8],
        stamp: Stamp,
        units: u64,
    ) -> Result<Option<Decision>> {
        let valid = validate::refund_held(policy, key, &stamp, units)?;
        Ok(self.refund_held_valid(policy, key, stamp, units, valid))
    }

    /// [`refund_held_sync`](Self::refund_held_sync) on valid input.
    pub(super) fn refund_held_valid(
        &self,
        policy: &Policy,
        key: &[u8],
        stamp: Stamp,
        units: u64,
        _: Valid,
    ) -> Option<Decision> {
        let (verdict, applied) = self.apply_with(policy, key, |algorithm, state, now| {
            algorithm.refund_held_micros(state, now, stamp.state(), units)
        });
        applied.then(|| verdict.decision())
    }
}
