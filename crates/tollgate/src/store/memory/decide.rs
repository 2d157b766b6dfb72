//! The decide path: one operation on one key's state under its shard's
//! lock, the entry's expiry moved with the verdict; and the calls made of
//! it, without an executor.

use std::time::Duration;

use super::{MemoryStore, shard_of};
use crate::algorithm::{Algorithm, LeaseId, State, Usage};
use crate::clock::Clock;
use crate::decision::Verdict;
use crate::policy::wait_micros;
use crate::store::{Lease, Valid, validate};
use crate::{Decision, Policy, Result};

use crate::store::key::KeyRef;

/// What to do to one key's state.
#[derive(Debug, Clone, Copy)]
pub(super) enum Op {
    Check { cost: u64, max_wait: u64 },
    Usage { op: Usage, cost: u64 },
    Acquire(LeaseId),
    Release(LeaseId),
}

impl<C: Clock> MemoryStore<C> {
    /// Decides a request now, without an executor: the memory store never
    /// waits, so this is what [`Store::check`](crate::Store::check) does.
    #[inline]
    pub fn check_sync(&self, policy: &Policy, key: &[u8], cost: u64) -> Result<Decision> {
        let valid = validate::check(policy, key, cost)?;
        Ok(self.check_valid(policy, key, cost, valid))
    }

    /// [`check_sync`](Self::check_sync) on valid input.
    #[inline]
    pub(super) fn check_valid(&self, policy: &Policy, key: &[u8], cost: u64, _: Valid) -> Decision {
        self.apply(policy, key, Op::Check { cost, max_wait: 0 })
            .0
            .decision()
            .shadowed(policy)
    }

    /// [`Store::reserve`](crate::Store::reserve) without an executor.
    pub fn reserve_sync(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision> {
        let valid = validate::reserve(policy, key, cost, max_wait)?;
        Ok(self.reserve_valid(policy, key, cost, max_wait, valid))
    }

    /// [`reserve_sync`](Self::reserve_sync) on valid input.
    pub(super) fn reserve_valid(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Duration,
        _: Valid,
    ) -> Decision {
        let max_wait = wait_micros(max_wait);
        self.apply(policy, key, Op::Check { cost, max_wait })
            .0
            .decision()
    }

    /// [`Store::usage`](crate::Store::usage) without an executor:
    /// [`Store::charge`](crate::Store::charge),
    /// [`Store::refund`](crate::Store::refund) and
    /// [`Store::check_at_most`](crate::Store::check_at_most).
    #[inline(always)]
    pub fn usage_sync(
        &self,
        policy: &Policy,
        key: &[u8],
        op: Usage,
        cost: u64,
    ) -> Result<Decision> {
        let valid = validate::usage(policy, key, op, cost)?;
        Ok(self.usage_valid(policy, key, op, cost, valid))
    }

    /// [`usage_sync`](Self::usage_sync) on valid input.
    #[inline(always)]
    pub(super) fn usage_valid(
        &self,
        policy: &Policy,
        key: &[u8],
        op: Usage,
        cost: u64,
        _: Valid,
    ) -> Decision {
        let (verdict, granted) = self.apply(policy, key, Op::Usage { op, cost });
        verdict.decision().with_granted(granted)
    }

    /// [`Store::acquire_lease`](crate::Store::acquire_lease) without an executor.
    pub fn acquire_lease_sync(&self, policy: &Policy, key: &[u8]) -> Result<Lease> {
        let valid = validate::lease(policy, key, "acquire_lease")?;
        Ok(self.acquire_lease_valid(policy, key, valid))
    }

    /// [`acquire_lease_sync`](Self::acquire_lease_sync) on valid input.
    pub(super) fn acquire_lease_valid(&self, policy: &Policy, key: &[u8], _: Valid) -> Lease {
        let id = LeaseId::random();
        let (verdict, _) = self.apply(policy, key, Op::Acquire(id));
        Lease {
            decision: verdict.decision(),
            id: verdict.allowed.then_some(id),
        }
    }

    /// [`Store::release_lease`](crate::Store::release_lease) without an executor.
    pub fn release_lease_sync(&self, policy: &Policy, key: &[u8], lease: LeaseId) -> Result<bool> {
        let valid = validate::lease(policy, key, "release_lease")?;
        Ok(self.release_lease_valid(policy, key, lease, valid))
    }

    /// [`release_lease_sync`](Self::release_lease_sync) on valid input.
    pub(super) fn release_lease_valid(
        &self,
        policy: &Policy,
        key: &[u8],
        lease: LeaseId,
        _: Valid,
    ) -> bool {
        self.apply(policy, key, Op::Release(lease)).1 == 1
    }

    /// Forgets `key` under `policy`.
    pub fn reset_sync(&self, policy: &Policy, key: &[u8]) -> Result<()> {
        let valid = validate::reset(key)?;
        self.reset_valid(policy, key, valid);
        Ok(())
    }

    /// [`reset_sync`](Self::reset_sync) on a valid key.
    pub(crate) fn reset_valid(&self, policy: &Policy, key: &[u8], _: Valid) {
        let k = KeyRef::new(policy, key);
        let hash = self.hash(&k);
        let mut map = self.inner.shards[shard_of(hash)].0.lock();
        if let Some(i) = map.find(hash, |e| k.matches(&e.key)) {
            map.remove(i, self.rehash());
        }
    }

    /// Runs `op` on the key's state under its shard's lock. Returns the
    /// verdict and its count (1 when a released lease was held, what a
    /// `check_at_most` granted; a verdict,
    /// not a `Decision`: the callers make that inline, where it is used,
    /// rather than copying a freshly written one at once, which stalls).
    pub(super) fn apply(&self, policy: &Policy, key: &[u8], op: Op) -> (Verdict, u64) {
        on_key!(self, policy, key, |algorithm, state, now| run(
            algorithm, state, now, op
        ))
    }

    /// [`apply`](Self::apply) of any step on the key's state at `now`,
    /// returning the verdict (which moves the entry's expiry) and what
    /// else the step answers. (Not `apply`'s own body: made generic, the
    /// checks' path came out some 20 instructions dearer a call.)
    pub(super) fn apply_with<R>(
        &self,
        policy: &Policy,
        key: &[u8],
        step: impl FnOnce(&Algorithm, &mut State, u64) -> (Verdict, R),
    ) -> (Verdict, R) {
        on_key!(self, policy, key, |algorithm, state, now| step(
            algorithm, state, now
        ))
    }
}

/// The body of [`MemoryStore::apply`] and [`MemoryStore::apply_with`]:
/// finds the key's entry under its shard's lock (a fresh state when it is
/// missing or expired), runs the step on its state at `now`, then keeps
/// the entry until the verdict's reset (or removes it at once), and
/// sweeps after an insertion.
macro_rules! on_key {
    ($store:ident, $policy:ident, $key:ident, |$algorithm:ident, $state:ident, $now:ident| $step:expr) => {{
        let k = KeyRef::new($policy, $key);
        let hash = $store.hash(&k);
        let $algorithm = $policy.algorithm();
        let mut inserted = false;
        let $now = $store.inner.clock.now_micros();
        let result = {
            let mut map = $store.inner.shards[shard_of(hash)].0.lock();
            match map.find_mut(hash, |e| k.matches(&e.key)) {
                Some((i, entry)) => {
                    if entry.expires_at <= $now {
                        entry.state = $algorithm.fresh_state();
                    }
                    let $state = &mut entry.state;
                    let (verdict, held) = $step;
                    if verdict.reset_after == 0 {
                        map.remove(i, $store.rehash());
                    } else {
                        entry.expires_at = $now + verdict.reset_after;
                    }
                    (verdict, held)
                }
                None => {
                    let mut fresh = $algorithm.fresh_state();
                    let $state = &mut fresh;
                    let (verdict, held) = $step;
                    if verdict.reset_after != 0 {
                        let reset = verdict.reset_after;
                        $store.insert_new(&mut map, hash, k, fresh, $now, reset);
                        inserted = true;
                    }
                    (verdict, held)
                }
            }
        };
        if inserted {
            $store.maybe_sweep($now);
        }
        result
    }};
}
use on_key;

/// One operation on a state that belongs to `algorithm`, with its count:
/// 1 when a released lease was held, what a `check_at_most` granted.
#[inline]
fn run(algorithm: &Algorithm, state: &mut State, now: u64, op: Op) -> (Verdict, u64) {
    match (algorithm, op) {
        (_, Op::Check { cost, max_wait }) => {
            (algorithm.decide_micros(state, now, cost, max_wait), 0)
        }
        (_, Op::Usage { op, cost }) => algorithm.usage_micros(state, now, op, cost),
        (Algorithm::Concurrency(c), Op::Acquire(id)) => match state {
            State::Concurrency(s) => (c.acquire_micros(s, now, id), 0),
            _ => {
                let mut fresh = Default::default();
                let v = c.acquire_micros(&mut fresh, now, id);
                *state = State::Concurrency(fresh);
                (v, 0)
            }
        },
        (Algorithm::Concurrency(c), Op::Release(id)) => match state {
            State::Concurrency(s) => {
                let held = c.release(s, now, id);
                (c.peek_micros(s, now), held as u64)
            }
            _ => (algorithm.decide_micros(state, now, 0, 0), 0),
        },
        // Leases are refused before reaching here for other algorithms
        // (a question only concurrency answers yes to).
        (_, Op::Acquire(_) | Op::Release(_)) => (algorithm.decide_micros(state, now, 0, 0), 0),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::ManualClock;

    use super::super::test_store as store;

    #[test]
    fn a_policy_that_changes_algorithm_starts_fresh() {
        let clock = ManualClock::new(0);
        let store = store(&clock, 1024);
        let minute = Duration::from_secs(60);
        // A window to a log, to a window again, to the buckets and back to
        // a log: each change finds the key's state of another algorithm,
        // which counts as fresh, and the state left behind does not come
        // back.
        let sequence = [
            Policy::fixed_window("api", 1, minute).unwrap(),
            Policy::sliding_log("api", 1, minute).unwrap(),
            Policy::fixed_window("api", 1, minute).unwrap(),
            Policy::token_bucket("api", 1, minute, 1).unwrap(),
            Policy::gcra("api", 1, minute, 1).unwrap(),
            Policy::sliding_log("api", 1, minute).unwrap(),
        ];
        for policy in &sequence {
            let name = policy.algorithm().name();
            assert!(store.check_sync(policy, b"k", 1).unwrap().allowed, "{name}");
            assert!(
                !store.check_sync(policy, b"k", 1).unwrap().allowed,
                "{name}"
            );
            assert_eq!(store.len(), 1, "{name}: the key is held once");
        }
    }

    #[test]
    fn racing_callers_on_one_key_lose_no_update() {
        // A frozen clock: nothing refills or ages out, so exactly `limit`
        // of the racing requests are admitted, however they interleave.
        let clock = ManualClock::new(1_000_000_000);
        let store = store(&clock, 1024);
        let hour = Duration::from_secs(3600);
        let limit = 20_000;
        let policies = [
            Policy::fixed_window("fw", limit, hour).unwrap(),
            Policy::sliding_window("sw", limit, hour).unwrap(),
            Policy::token_bucket("tb", 1, hour, limit).unwrap(),
            Policy::gcra("gcra", 1, hour, limit).unwrap(),
            Policy::leaky_bucket("lb", 1, hour, limit).unwrap(),
            Policy::sliding_log("sl", 5_000, hour).unwrap(),
        ];
        for policy in &policies {
            let admitted = AtomicU64::new(0);
            let (bound, _) = policy.algorithm().limit();
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        for _ in 0..bound / 3 {
                            if store.check_sync(policy, b"hot", 1).unwrap().allowed {
                                admitted.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            let name = policy.algorithm().name();
            assert_eq!(admitted.into_inner(), bound, "{name}");
            let peek = store.check_sync(policy, b"hot", 0).unwrap();
            assert_eq!(peek.remaining, 0, "{name}");
        }
    }
}
