//! When a key is taken from: a bucket's hold and pace, and how long a
//! short take's local denial lasts.

use crate::algorithm::Lease;
use crate::{Decision, Policy};

/// A saturated key (its last take was granted less than it asked) is
/// paced over this many lease intervals: a sliding window's or a bucket's
/// short take is followed by the next no sooner (a bucket's, within its
/// own bound, see [`bucket_pace`]).
pub(super) const SATURATED_INTERVALS: u64 = 5;

/// A bucket's batch is held for this many lease intervals (within its
/// own bound, see [`bucket_pace`]) and sized for half of that: one take
/// per instance per interval while its traffic holds steady.
pub(super) const HELD_INTERVALS: u64 = 2;

/// The longest local denial (µs) when the lease interval is shorter than
/// it: a saturated key is asked again at least this often, whatever the
/// store's `retry_after`. It bounds how long a refund, reset or override
/// made elsewhere goes unseen here.
pub(super) const MAX_LOCAL_DENIAL: u64 = 1_000_000;

/// A bucket's times (µs) for batches whose first `cost` units answer the
/// check that takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BucketPace {
    /// How long a batch is held: [`HELD_INTERVALS`] lease intervals, but
    /// at most 2/5 of the bucket's refill from `burst − cost` (`τ`), so
    /// that a full bucket still grants the check (a held grant needs
    /// `rate · hold + cost ≤ burst`) and more than half its burst beside.
    pub(super) hold: u64,
    /// How long after a short take the next one waits (the local denial
    /// between them): [`SATURATED_INTERVALS`] lease intervals, but at most
    /// `4τ/5 − hold`, and at least the hold. A drained bucket's TAT is
    /// about `τ` ahead of the take that drained it; the next take (of any
    /// instance, the latest a pace later) must find it still at least the
    /// hold ahead, or the hold gives up the refill in between. A fifth of
    /// `τ` is left for the take's own delays.
    pub(super) saturated: u64,
}

/// A bucket's [`BucketPace`] for `cost` under a lease `interval`; `None`
/// for a window, whose batch needs no hold.
pub(super) fn bucket_pace(policy: &Policy, interval: u64, cost: u64) -> Option<BucketPace> {
    let (rate, burst) = match policy.algorithm().lease() {
        Lease::Held { rate, burst } => (rate, burst),
        Lease::Window { .. } | Lease::Refused => return None,
    };
    // Scaled units: a token is `units_per_token`, a µs refills
    // `units_per_micro`; the burst is below 2^50 of them.
    let refill = burst.saturating_sub(cost) * rate.units_per_token / rate.units_per_micro;
    let hold = (HELD_INTERVALS * interval).min(refill * 2 / 5);
    let saturated = (SATURATED_INTERVALS * interval)
        .min((refill * 4 / 5).saturating_sub(hold))
        .max(hold);
    Some(BucketPace { hold, saturated })
}

/// A sliding window's local denial (µs after its take) of `wait`, which
/// the store's `retry` allowed, ending early when it would last into the
/// window's last stretch: at the earliest of the times ½, 1½, ...,
/// [`SATURATED_INTERVALS`] − ½ intervals before the window `turn`s that
/// lies after `retry` and before `wait`. What the window regains up to its end counts in it only if taken
/// and spent by then (what is left is the next window's allowance), and a
/// take this close to the turn can ask only for what this instance admits
/// before it (see take.rs): so the last stretch is taken from every
/// interval, and the last take leaves half an interval's regain untaken.
pub(super) fn before_turn(wait: u64, retry: u64, turn: u64, interval: u64) -> u64 {
    (0..SATURATED_INTERVALS)
        .filter_map(|j| turn.checked_sub(interval / 2 + j * interval))
        .filter(|&at| retry < at && at < wait)
        .min()
        .unwrap_or(wait)
}

/// The store's own `retry_after` (µs) in a take's answer `d` (0 when it
/// granted something).
pub(super) fn store_retry(d: &Decision) -> u64 {
    match d.allowed {
        true => 0,
        false => u64::try_from(d.retry_after.as_micros()).unwrap_or(u64::MAX),
    }
}

/// How long (µs) after a short take, answered `d`, this instance denies
/// locally: until the store's `retry_after` (a fixed window spent to 0
/// returns at its reset), and no sooner than `pace` for a sliding window
/// or a bucket, whose capacity comes back a unit at a time and waits in
/// the store meanwhile; at most [`MAX_LOCAL_DENIAL`] (or the pace).
pub(super) fn local_wait(window: Option<u64>, d: &Decision, pace: u64) -> u64 {
    let fixed = window == Some(0);
    let retry = if !d.allowed {
        store_retry(d)
    } else if fixed && d.remaining == 0 {
        u64::try_from(d.reset_after.as_micros()).unwrap_or(u64::MAX)
    } else {
        0
    };
    let pace = if fixed { 0 } else { pace };
    retry.max(pace).min(MAX_LOCAL_DENIAL.max(pace))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BucketPace, MAX_LOCAL_DENIAL, before_turn, bucket_pace, local_wait};
    use crate::{Decision, Policy};

    #[test]
    fn a_buckets_hold_and_pace_keep_to_its_refill_from_burst_less_cost() {
        let s = Duration::from_secs(1);
        let paced = |hold, saturated| Some(BucketPace { hold, saturated });
        // 1,000 a second: a token refills in 1 ms. A large burst: two
        // intervals' hold, five intervals' pace.
        let big = Policy::token_bucket("tb", 1_000, s, 1_000).unwrap();
        assert_eq!(bucket_pace(&big, 20_000, 1), paced(40_000, 100_000));
        // A burst of a tenth of the rate (the benchmark's): its refill,
        // 99.9 ms, bounds both to 2/5 of it, so that a drained bucket's
        // next take, a pace later, still finds it a hold ahead.
        let tenth = Policy::token_bucket("tenth", 10_000, s, 1_000).unwrap();
        assert_eq!(bucket_pace(&tenth, 20_000, 1), paced(39_960, 39_960));
        let small = Policy::gcra("g", 1_000, s, 10).unwrap();
        // 2/5 of (10 − 1) ms, and of (10 − 4) ms.
        assert_eq!(bucket_pace(&small, 20_000, 1), paced(3_600, 3_600));
        assert_eq!(bucket_pace(&small, 20_000, 4), paced(2_400, 2_400));
        // A check of the whole burst: no hold, the batch is the check.
        assert_eq!(bucket_pace(&small, 20_000, 10), paced(0, 0));
        // The flood test's: 500 a second, burst 100, 10 ms intervals.
        let flood = Policy::gcra("f", 500, s, 100).unwrap();
        let p = bucket_pace(&flood, 10_000, 1).unwrap();
        assert_eq!(
            p,
            BucketPace {
                hold: 20_000,
                saturated: 50_000
            }
        );
        // Hold, pace and a fifth of the refill for the take's delays fit
        // in the refill.
        assert!(p.hold + p.saturated + 198_000 / 5 <= 198_000);
        let window = Policy::fixed_window("fw", 10, s).unwrap();
        assert_eq!(bucket_pace(&window, 20_000, 1), None);
    }

    #[test]
    fn a_local_denial_lasts_until_the_retry_paced_and_capped() {
        let denied = |retry: u64, reset: u64| Decision::from_micros(false, 10, 0, reset, retry, 0);
        let spent = Decision::from_micros(true, 10, 0, 700_000, 0, 0);
        let partial = Decision::from_micros(true, 10, 3, 700_000, 0, 0);
        // A fixed window: its retry, or its reset when spent to 0; no pace.
        assert_eq!(
            local_wait(Some(0), &denied(300_000, 300_000), 100_000),
            300_000
        );
        assert_eq!(local_wait(Some(0), &denied(5_000, 5_000), 100_000), 5_000);
        assert_eq!(local_wait(Some(0), &spent, 100_000), 700_000);
        assert_eq!(local_wait(Some(0), &partial, 100_000), 0);
        // A sliding window or a bucket: at least the pace.
        assert_eq!(
            local_wait(Some(2_000_000), &denied(700, 0), 100_000),
            100_000
        );
        assert_eq!(local_wait(None, &spent, 99_500), 99_500);
        assert_eq!(local_wait(None, &denied(400_000, 0), 99_500), 400_000);
        // At most a second (a key in debt for a minute is asked again).
        assert_eq!(
            local_wait(None, &denied(60_000_000, 0), 99_500),
            MAX_LOCAL_DENIAL
        );
        assert_eq!(
            local_wait(None, &denied(60_000_000, 0), 2_000_000),
            2_000_000
        );
    }

    #[test]
    fn a_sliding_windows_denial_ends_just_before_it_turns() {
        // A pace of 100 ms, the window turning in 60 ms, 20 ms intervals:
        // the next take comes 50 ms before the turn, then 30 and 10.
        assert_eq!(before_turn(100_000, 0, 60_000, 20_000), 10_000);
        assert_eq!(before_turn(100_000, 0, 50_000, 20_000), 20_000);
        assert_eq!(before_turn(100_000, 0, 30_000, 20_000), 20_000);
        assert_eq!(before_turn(100_000, 0, 10_000, 20_000), 100_000);
        // The turn 150 ms away: the pace would pass 90 ms before it; the
        // last stretch starts 90 ms before.
        assert_eq!(before_turn(100_000, 0, 150_000, 20_000), 60_000);
        // The store's retry first: the first of them after it.
        assert_eq!(before_turn(100_000, 25_000, 60_000, 20_000), 30_000);
        // The turn after the pace: the pace.
        assert_eq!(before_turn(100_000, 0, 500_000, 20_000), 100_000);
        // Nothing left before the turn (the store's retry is past it), or
        // the turn too close: the pace.
        assert_eq!(before_turn(100_000, 70_000, 60_000, 20_000), 100_000);
        assert_eq!(before_turn(100_000, 0, 8_000, 20_000), 100_000);
    }
}
