//! Taking a batch: how large, in one `check_at_most`, and until when it
//! may be spent.

use std::time::Duration;

use super::LeasingStore;
use super::slot::{Batch, MAX_UNITS, Slot, Taken};
use crate::algorithm::Algorithm;
use crate::{Decision, Policy, Result};

/// What taking a batch came to.
pub(super) enum Took {
    /// The check is answered (admitted from the new batch, or denied by
    /// the store).
    Decided(Decision),
    /// The store failed: the failure policy answers (the caller lets go of
    /// the refill lock first).
    Failed,
}

/// A saturated key (its last take was granted less than it asked) is
/// paced over this many lease intervals: a bucket's batch is held that
/// long (within the bucket's own bound, see [`bucket_hold`]), and a
/// sliding window's or a bucket's short take is followed by the next no
/// sooner.
pub(super) const SATURATED_INTERVALS: u64 = 5;

/// The longest local denial (µs) when the lease interval is shorter than
/// it: a saturated key is asked again at least this often, whatever the
/// store's `retry_after`. It bounds how long a refund, reset or override
/// made elsewhere goes unseen here.
pub(super) const MAX_LOCAL_DENIAL: u64 = 1_000_000;

/// How many units to hold after the next batch: what this key was asked
/// for here over the last batch's life (`spent` in `elapsed` µs, denials
/// included), scaled to `span` µs, and at least `cost`; at most the
/// larger of the store's `remaining` over twice the expected `instances`
/// and twice this instance's share of what the key `regains` over its
/// pace (but never below `cost`). Near a window's limit a batch is one
/// request; a saturated bucket or sliding window is taken from in
/// batches of its refill.
pub(super) fn batch_size(
    spent: u64,
    elapsed: u64,
    span: u64,
    remaining: u64,
    instances: u64,
    cost: u64,
    regains: u64,
) -> u64 {
    let rate = match elapsed {
        0 => spent,
        _ => (u128::from(spent) * u128::from(span) / u128::from(elapsed)) as u64,
    };
    let share = (remaining / (2 * instances)).max(regains.saturating_mul(2) / instances);
    rate.min(share).max(cost).min(MAX_UNITS)
}

impl LeasingStore {
    /// Takes the next batch of `slot` (its refill lock held, `taken` the
    /// last batch) and answers the check of `cost` from it.
    pub(super) async fn take(
        &self,
        slot: &Slot,
        taken: &mut Taken,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        now: u64,
    ) -> Result<Took> {
        let interval = self.inner.interval;
        let window = window_micros(policy);
        // Only a window's units outlive a batch (until the window ends).
        let kept = if window.is_some() { slot.held(now) } else { 0 };
        // A saturated key is paced over several intervals.
        let pace = match taken.short {
            true => SATURATED_INTERVALS * interval,
            false => interval,
        };
        // A bucket's batch lapses `hold` after it is taken, and the store
        // records it as taken then.
        let full_hold = bucket_hold(policy, pace, cost);
        let pace = full_hold.unwrap_or(pace);
        let size = batch_size(
            taken.units.saturating_sub(slot.units()) + slot.take_denied(),
            now.saturating_sub(taken.at),
            // A bucket's batch is sized for half its life, so that it is
            // spent before it lapses.
            full_hold.map_or(interval, |h| h / 2),
            slot.remaining(),
            self.inner.instances,
            cost,
            regains(policy, pace),
        );
        let sent = self.now();
        self.inner
            .takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ask = size.saturating_sub(kept).max(1);
        // A batch of just this check is admitted now, with nothing left to
        // spend later: it needs no hold, so near the limit a bucket's lease
        // is the plain check, with no hold's refill given up.
        let hold = full_hold.map(|h| if ask <= cost { 0 } else { h });
        let store = &self.inner.store;
        // A bucket's batch comes with the stamp that gives back exactly
        // what is left of it (see sweep.rs).
        let (d, stamp) = match match hold {
            None => store
                .check_at_most(policy, key, ask)
                .await
                .map(|d| (d, None)),
            Some(h) => {
                let hold = Duration::from_micros(h);
                let held = store.take_held(policy, key, ask, hold).await;
                held.map(|h| (h.decision, h.stamp))
            }
        } {
            Ok(taken) => taken,
            Err(e) if e.is_store_failure() => return Ok(Took::Failed),
            Err(e) => return Err(e),
        };
        let reset_at = sent + d.reset_after.as_micros() as u64;
        let mut batch = Batch {
            granted: d.granted,
            keep: false,
            remaining: d.remaining,
            reset_at,
            until: match window {
                // A window's units are spent within the window they were
                // taken in, which ends when its state resets (a sliding
                // window's, one window later), counted from before the call.
                Some(w) => reset_at.saturating_sub(w),
                // A bucket's within its hold of being taken (the store's
                // time at the call is after `sent`): the store recorded the
                // grant as arriving no sooner than that.
                None => sent + hold.unwrap_or(0),
            },
        };
        if window.is_some() && kept > 0 && batch.until <= slot.until() + interval {
            // The same window: what is left joins the batch.
            batch.keep = true;
            batch.until = batch.until.min(slot.until());
        }
        let admitted = slot.publish(&batch, cost);
        taken.at = sent;
        taken.units = admitted.map_or_else(|held| held, |left| left + cost);
        taken.stamp = stamp.map(|s| (Slot::generation(slot.word()), s));
        // Granted less than it asked: the key is saturated, and once what
        // was granted is spent this instance denies here until capacity
        // returns (or its pace has passed).
        taken.short = d.granted < ask;
        let retry = match taken.short {
            true => sent + local_wait(window, &d, pace),
            false => 0,
        };
        slot.deny_until(retry);
        Ok(Took::Decided(match admitted {
            Ok(left) => slot.decision(self.now(), left),
            Err(_) => {
                let mut denied = d;
                denied.allowed = false;
                denied.granted = 0;
                if taken.short {
                    let wait = retry.saturating_sub(self.now());
                    denied.retry_after = Duration::from_micros(wait);
                }
                denied
            }
        }))
    }
}

/// A bucket's hold (µs) for a batch whose first `cost` units answer the
/// check that takes it: the lease `interval`, but at most half the
/// bucket's refill from `burst − cost`, so that a full bucket still
/// grants the check (a held grant needs `rate · hold + cost ≤ burst`) and
/// about half its burst beside. `None` for a window, whose batch needs no
/// hold.
fn bucket_hold(policy: &Policy, interval: u64, cost: u64) -> Option<u64> {
    let (rate, burst) = match policy.algorithm() {
        Algorithm::TokenBucket(a) => (a.rate(), a.burst()),
        Algorithm::Gcra(a) => (a.rate(), a.burst()),
        Algorithm::FixedWindow(_)
        | Algorithm::SlidingWindow(_)
        | Algorithm::SlidingLog(_)
        | Algorithm::LeakyBucket(_)
        | Algorithm::Concurrency(_) => return None,
    };
    // Scaled units: a token is `units_per_token`, a µs refills
    // `units_per_micro`; the burst is below 2^50 of them.
    let refill = burst.saturating_sub(cost) * rate.units_per_token / rate.units_per_micro;
    Some(interval.min(refill / 2))
}

/// How long (µs) after a short take, answered `d`, this instance denies
/// locally: until the store's `retry_after` (a fixed window spent to 0
/// returns at its reset), and no sooner than `pace` for a sliding window
/// or a bucket, whose capacity comes back a unit at a time and waits in
/// the store meanwhile; at most [`MAX_LOCAL_DENIAL`] (or the pace).
fn local_wait(window: Option<u64>, d: &Decision, pace: u64) -> u64 {
    let micros = |t: Duration| u64::try_from(t.as_micros()).unwrap_or(u64::MAX);
    let fixed = window == Some(0);
    let retry = if !d.allowed {
        micros(d.retry_after)
    } else if fixed && d.remaining == 0 {
        micros(d.reset_after)
    } else {
        0
    };
    let pace = if fixed { 0 } else { pace };
    retry.max(pace).min(MAX_LOCAL_DENIAL.max(pace))
}

/// The units `policy` regains in `span` µs: a bucket's refill, a sliding
/// window's limit over its window; none for a fixed window, whose units
/// come back when it turns.
fn regains(policy: &Policy, span: u64) -> u64 {
    let rate = match policy.algorithm() {
        Algorithm::TokenBucket(a) => a.rate(),
        Algorithm::Gcra(a) => a.rate(),
        Algorithm::SlidingWindow(a) => {
            let per = u128::from(a.window_micros().max(1));
            return (u128::from(policy.limit()) * u128::from(span) / per) as u64;
        }
        Algorithm::FixedWindow(_)
        | Algorithm::SlidingLog(_)
        | Algorithm::LeakyBucket(_)
        | Algorithm::Concurrency(_) => return 0,
    };
    (u128::from(span) * u128::from(rate.units_per_micro) / u128::from(rate.units_per_token)) as u64
}

/// A window's length in µs (0 for a fixed window, whose state resets when
/// the window ends); `None` for a bucket.
fn window_micros(policy: &Policy) -> Option<u64> {
    match policy.algorithm() {
        Algorithm::SlidingWindow(a) => Some(a.window_micros()),
        Algorithm::FixedWindow(_) => Some(0),
        Algorithm::SlidingLog(_)
        | Algorithm::TokenBucket(_)
        | Algorithm::Gcra(_)
        | Algorithm::LeakyBucket(_)
        | Algorithm::Concurrency(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{MAX_LOCAL_DENIAL, batch_size, bucket_hold, local_wait, regains};
    use crate::{Decision, Policy};

    #[test]
    fn a_buckets_hold_is_the_interval_or_half_its_refill_from_burst_less_cost() {
        let s = Duration::from_secs(1);
        // 1,000 a second: a token refills in 1 ms.
        let big = Policy::token_bucket("tb", 1_000, s, 1_000).unwrap();
        assert_eq!(bucket_hold(&big, 20_000, 1), Some(20_000));
        let small = Policy::gcra("g", 1_000, s, 10).unwrap();
        // (10 − 1) ms / 2, and (10 − 4) ms / 2.
        assert_eq!(bucket_hold(&small, 20_000, 1), Some(4_500));
        assert_eq!(bucket_hold(&small, 20_000, 4), Some(3_000));
        // A check of the whole burst: no hold, the batch is the check.
        assert_eq!(bucket_hold(&small, 20_000, 10), Some(0));
        let window = Policy::fixed_window("fw", 10, s).unwrap();
        assert_eq!(bucket_hold(&window, 20_000, 1), None);
    }

    #[test]
    fn a_batch_follows_the_rate_and_shrinks_near_the_limit() {
        // 500 units in 10 ms, sized for 20 ms: 1,000, with room for it.
        assert_eq!(batch_size(500, 10_000, 20_000, 1 << 30, 3, 1, 0), 1_000);
        // A quiet key: the request itself.
        assert_eq!(batch_size(0, 10_000, 20_000, 1 << 30, 3, 5, 0), 5);
        // At most remaining / (2 · instances)...
        assert_eq!(batch_size(500, 10_000, 20_000, 600, 3, 1, 0), 100);
        // ...and near a window's limit a single request.
        assert_eq!(batch_size(500, 10_000, 20_000, 5, 3, 1, 0), 1);
        assert_eq!(batch_size(500, 10_000, 20_000, 5, 3, 4, 0), 4);
        // A saturated bucket regaining 300 over its pace: twice a third.
        assert_eq!(batch_size(500, 10_000, 20_000, 0, 3, 1, 300), 200);
        // ...but never more than this instance was asked for.
        assert_eq!(batch_size(50, 10_000, 20_000, 0, 3, 1, 300), 100);
    }

    #[test]
    fn what_a_policy_regains_over_a_span() {
        let s = Duration::from_secs(1);
        let tb = Policy::token_bucket("tb", 1_000, s, 200).unwrap();
        assert_eq!(regains(&tb, 20_000), 20);
        let g = Policy::gcra("g", 3, Duration::from_millis(1), 10).unwrap();
        assert_eq!(regains(&g, 100_000), 300);
        let sw = Policy::sliding_window("sw", 3_000, Duration::from_secs(2)).unwrap();
        assert_eq!(regains(&sw, 100_000), 150);
        let fw = Policy::fixed_window("fw", 3_000, Duration::from_secs(2)).unwrap();
        assert_eq!(regains(&fw, 100_000), 0);
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
}
