//! Batches: several requests at once, in order; atomic ones under every
//! shard lock they need, all decided before any is written.

use parking_lot::MutexGuard;

use super::decide::Op;
use super::{MemoryStore, ShardMap, shard_of};
use crate::algorithm::State;
use crate::clock::Clock;
use crate::decision::Verdict;
use crate::store::key::KeyRef;
use crate::store::{Request, Valid, validate};
use crate::{Decision, Result};

impl<C: Clock> MemoryStore<C> {
    /// [`Store::check_many`](crate::Store::check_many) without an executor.
    pub fn check_many_sync(&self, requests: &[Request<'_>], atomic: bool) -> Result<Vec<Decision>> {
        let valid = validate::check_many(requests, atomic)?;
        Ok(self.check_many_valid(requests, atomic, valid))
    }

    /// [`check_many_sync`](Self::check_many_sync) on valid input.
    pub(super) fn check_many_valid(
        &self,
        requests: &[Request<'_>],
        atomic: bool,
        _: Valid,
    ) -> Vec<Decision> {
        if !atomic {
            return requests
                .iter()
                .map(|r| {
                    self.apply(
                        r.policy,
                        r.key,
                        Op::Check {
                            cost: r.cost,
                            max_wait: 0,
                        },
                    )
                    .0
                    .decision()
                    .shadowed(r.policy)
                })
                .collect();
        }
        let keys: Vec<KeyRef<'_>> = requests
            .iter()
            .map(|r| KeyRef::new(r.policy, r.key))
            .collect();
        let hashes: Vec<u64> = keys.iter().map(|k| self.hash(k)).collect();
        let mut shard_ids: Vec<usize> = hashes.iter().map(|&h| shard_of(h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        // Shards are always locked in ascending order, so batches never
        // deadlock with each other or with single checks (one shard each).
        let mut guards: Vec<(usize, MutexGuard<'_, ShardMap>)> = shard_ids
            .iter()
            .map(|&i| (i, self.inner.shards[i].0.lock()))
            .collect();
        let now = self.inner.clock.now_micros();
        // Decide every request on a copy of its state; write only if all pass.
        let mut states: Vec<State> = keys
            .iter()
            .zip(&hashes)
            .zip(requests)
            .map(|((k, &hash), r)| {
                let map = locked(&mut guards, shard_of(hash));
                map.find(hash, |e| k.matches(&e.key))
                    .map(|i| map.get(i))
                    .filter(|e| e.expires_at > now)
                    .map_or_else(|| r.policy.algorithm().fresh_state(), |e| e.state.clone())
            })
            .collect();
        let verdicts: Vec<Verdict> = requests
            .iter()
            .zip(&mut states)
            .map(|(r, state)| r.policy.algorithm().decide_micros(state, now, r.cost, 0))
            .collect();
        if verdicts.iter().all(|v| v.allowed) {
            for (((key, &hash), state), v) in keys.iter().zip(&hashes).zip(states).zip(&verdicts) {
                let map = locked(&mut guards, shard_of(hash));
                self.store_entry(map, hash, *key, state, now, v.reset_after);
            }
            return verdicts.into_iter().map(Verdict::decision).collect();
        }
        // Denied as a whole: nothing consumed. Report each key as a peek,
        // denied, with the retry of those that were over their own limit.
        drop(guards);
        requests
            .iter()
            .zip(verdicts)
            .map(|(r, v)| {
                let peek = self
                    .apply(
                        r.policy,
                        r.key,
                        Op::Check {
                            cost: 0,
                            max_wait: 0,
                        },
                    )
                    .0;
                Verdict {
                    allowed: false,
                    retry_after: v.retry_after,
                    delay: 0,
                    ..peek
                }
                .decision()
            })
            .collect()
    }
}

/// The locked map of `shard` among a batch's guards (sorted by shard).
fn locked<'g>(
    guards: &'g mut [(usize, MutexGuard<'_, ShardMap>)],
    shard: usize,
) -> &'g mut ShardMap {
    let at = guards.partition_point(|(s, _)| *s < shard);
    &mut guards[at].1
}
