//! A held batch's exact refund on a token bucket or GCRA: the stamp of
//! the state a held `check_at_most` wrote, and the refund that applies
//! only while the state is still that bucket (see
//! [`Store::refund_held`](crate::Store::refund_held)). The Redis scripts
//! `token_bucket_refund_held.lua` and `tat_refund_held.lua` compare alike.

use super::{Algorithm, Rule, State, Usage, each_state};
use crate::decision::Verdict;

impl Algorithm {
    /// The stamp of a bucket's state, as the stores keep it: GCRA's TAT
    /// (whole µs, fraction), the token bucket's (deficit, time). `None`
    /// for any other algorithm or a state of another one.
    pub(crate) fn stamp_of(&self, state: &State) -> Option<[u64; 2]> {
        each_state!(self, state, (a, s) => a.stamp(s), _other => None)
    }

    /// Refunds `units` (validated: at most what the take granted) if
    /// `state` is still the bucket `stamp` names and is not full at `now`:
    /// the refund's verdict and `true`. Otherwise the state is only
    /// peeked: its verdict and `false`.
    ///
    /// The same bucket is the same time at which it is full again: GCRA's
    /// TAT to the fraction; a token bucket's `at + deficit / drip`,
    /// whichever time its level was measured at (the memory store's
    /// denials and peeks move that time, refilling, which changes nothing
    /// else). From that bucket a refund of `units` moves the time
    /// `units` emission intervals earlier, exactly where a held take of
    /// fewer units would have put it, never before `now`.
    pub(crate) fn refund_held_micros(
        &self,
        state: &mut State,
        now: u64,
        stamp: [u64; 2],
        units: u64,
    ) -> (Verdict, bool) {
        if self.is_stamped(state, now, stamp) {
            return (self.usage_micros(state, now, Usage::Refund, units).0, true);
        }
        (self.decide_micros(state, now, 0, 0), false)
    }

    /// Whether `state` is the bucket `stamp` names, not full at `now`.
    fn is_stamped(&self, state: &State, now: u64, stamp: [u64; 2]) -> bool {
        each_state!(self, state, (a, s) => a.is_stamped(s, now, stamp), _other => false)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Policy;

    /// On both buckets: a held take of 30 refunded 12 is, to the last
    /// scaled unit, a held take of 18; a state moved since is left alone;
    /// a refund after the hold ended is still exact, and one at a bucket
    /// full again gives nothing.
    #[test]
    fn a_refund_makes_the_state_of_the_smaller_take() {
        let s = Duration::from_secs(1);
        let hold = Usage::AtMostHeld(Duration::from_millis(500));
        for policy in [
            Policy::token_bucket("tb", 7, s, 100).unwrap(),
            Policy::gcra("g", 7, s, 100).unwrap(),
        ] {
            let a = policy.algorithm();
            let t0 = 1_000_000;
            let mut taken = a.fresh_state();
            let mut twin = a.fresh_state();
            a.usage(&mut taken, t0, Usage::Charge, 3);
            a.usage(&mut twin, t0, Usage::Charge, 3);
            let before = taken.clone();
            assert_eq!(a.usage(&mut taken, t0, hold, 30).granted, 30);
            assert_eq!(a.usage(&mut twin, t0, hold, 18).granted, 18);
            let stamp = a.stamp_of(&taken).unwrap();
            // Refunded after the hold ended (900 ms on), still exact.
            let now = t0 + 900_000;
            let (verdict, applied) = a.refund_held_micros(&mut taken, now, stamp, 12);
            assert!(applied, "{}", a.name());
            let mut twin_now = twin.clone();
            let twin_verdict = a.decide_micros(&mut twin_now, now, 0, 0);
            assert_eq!(verdict.remaining, twin_verdict.remaining, "{}", a.name());
            assert_eq!(verdict.reset_after, twin_verdict.reset_after);
            for cost in [1, 50, 100] {
                let (mut x, mut y) = (taken.clone(), twin.clone());
                assert_eq!(
                    a.usage(&mut x, now, Usage::AtMost, cost),
                    a.usage(&mut y, now, Usage::AtMost, cost),
                    "{} at most {cost}",
                    a.name()
                );
            }
            // Once refunded, the state moved: a second refund does nothing.
            let moved = taken.clone();
            assert!(!a.refund_held_micros(&mut taken, now, stamp, 1).1);
            assert_eq!(a.stamp_of(&taken), a.stamp_of(&moved));
            // A refund of everything is never fresher than before the take.
            let mut all = before.clone();
            a.usage(&mut all, t0, hold, 30);
            let stamp = a.stamp_of(&all).unwrap();
            assert!(a.refund_held_micros(&mut all, t0, stamp, 30).1);
            let (mut x, mut y) = (all, before);
            assert!(
                a.decide_micros(&mut x, t0, 0, 0).remaining
                    <= a.decide_micros(&mut y, t0, 0, 0).remaining
            );
            // A bucket full again is fresh: nothing to give back.
            let mut full = a.fresh_state();
            a.usage(&mut full, t0, hold, 2);
            let stamp = a.stamp_of(&full).unwrap();
            assert!(!a.refund_held_micros(&mut full, t0 + 60_000_000, stamp, 1).1);
        }
    }

    /// A token bucket refilled by a denial in between (the memory store
    /// writes that refill) is the same bucket: the refund applies; a check
    /// that consumed in between moved it.
    #[test]
    fn a_token_bucket_is_the_same_bucket_at_another_time() {
        let policy = Policy::token_bucket("tb", 10, Duration::from_secs(1), 20).unwrap();
        let a = policy.algorithm();
        let hold = Usage::AtMostHeld(Duration::from_millis(100));
        let mut state = a.fresh_state();
        assert_eq!(a.usage(&mut state, 0, hold, 19).granted, 19);
        let stamp = a.stamp_of(&state).unwrap();
        // 20 of 20 cannot fit: denied, and refilled to 50 ms.
        assert!(!a.decide_micros(&mut state, 50_000, 20, 0).allowed);
        assert_ne!(a.stamp_of(&state), Some(stamp));
        let mut consumed = state.clone();
        assert!(a.refund_held_micros(&mut state, 60_000, stamp, 5).1);
        assert!(a.decide_micros(&mut consumed, 600_000, 1, 0).allowed);
        assert!(!a.refund_held_micros(&mut consumed, 600_000, stamp, 5).1);
    }
}
