//! A held batch's take with its stamp, and its exact refund: each one
//! step on the key's state under its shard's lock, so the stamp is the
//! state the take wrote and the refund compares the state it changes.

use std::time::Duration;

use super::MemoryStore;
use crate::algorithm::Usage;
use crate::clock::Clock;
use crate::store::{HeldGrant, Stamp, validate};
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
        let op = Usage::AtMostHeld(hold);
        validate::usage(policy, key, op, max_cost)?;
        let (verdict, (granted, stamp)) = self.apply_with(policy, key, |algorithm, state, now| {
            let (verdict, granted) = algorithm.usage_micros(state, now, op, max_cost);
            let stamp = (granted > 0).then(|| algorithm.stamp_of(state)).flatten();
            (verdict, (granted, stamp))
        });
        Ok(HeldGrant {
            decision: verdict.decision().with_granted(granted),
            stamp: stamp.map(|s| Stamp::new(s, granted)),
        })
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
        validate::refund_held(policy, key, &stamp, units)?;
        let (verdict, applied) = self.apply_with(policy, key, |algorithm, state, now| {
            algorithm.refund_held_micros(state, now, stamp.state(), units)
        });
        Ok(applied.then(|| verdict.decision()))
    }
}
