//! Taking a batch: how large, in one `check_at_most`, and until when it
//! may be spent.

use std::time::Duration;

use super::LeasingStore;
use super::pace::{SATURATED_INTERVALS, before_turn, bucket_pace, local_wait, store_retry};
use super::slot::{Batch, MAX_UNITS, Slot, Taken};
use crate::algorithm::Lease;
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
        // A bucket's batch lapses `hold` after it is taken, and the store
        // records it as taken then; a saturated bucket is taken from again
        // no sooner than its pace. A saturated sliding window is paced
        // over several intervals.
        let bucket = bucket_pace(policy, interval, cost);
        let full_hold = bucket.map(|b| b.hold);
        let pace = match (bucket, taken.short) {
            (Some(b), _) => b.saturated,
            (None, true) => SATURATED_INTERVALS * interval,
            (None, false) => interval,
        };
        // A bucket's batch is sized for half its life, so that it is spent
        // before it lapses.
        let span = full_hold.map_or(interval, |h| h / 2);
        let size = batch_size(
            taken.units.saturating_sub(slot.units()) + slot.take_denied(),
            now.saturating_sub(taken.at),
            window.map_or(span, |_| window_span(span, slot.until(), now)),
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
        let retry = match (taken.short, window) {
            (false, _) => 0,
            // A sliding window's last stretch before it turns is taken
            // from every interval, the last take just before the turn, so
            // that little of what it regained is left untaken.
            (true, Some(w)) if w > 0 => {
                let wait = local_wait(window, &d, pace);
                let turn = batch.until.saturating_sub(sent);
                sent + before_turn(wait, store_retry(&d), turn, interval)
            }
            (true, _) => sent + local_wait(window, &d, pace),
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

/// The units `policy` regains in `span` µs: a bucket's refill, a sliding
/// window's limit over its window; none for a fixed window, whose units
/// come back when it turns.
fn regains(policy: &Policy, span: u64) -> u64 {
    let rate = match policy.algorithm().lease() {
        Lease::Held { rate, .. } => rate,
        Lease::Window { length: 0, .. } | Lease::Refused => return 0,
        Lease::Window { length, limit } => {
            let per = u128::from(length);
            return (u128::from(limit) * u128::from(span) / per) as u64;
        }
    };
    (u128::from(span) * u128::from(rate.units_per_micro) / u128::from(rate.units_per_token)) as u64
}

/// The span (µs) a window's batch taken at `now` is sized for: `span`,
/// but no more than what is left of the window when the last batch's
/// (`until`) has not ended, since what is held when it ends lapses,
/// counted in the window and never admitted. The take just before a
/// saturated window turns then asks for what this instance can spend by
/// the turn, and leaves the rest to the others' last takes.
pub(super) fn window_span(span: u64, until: u64, now: u64) -> u64 {
    match until.checked_sub(now) {
        Some(left) if left > 0 => span.min(left),
        _ => span,
    }
}

/// A window's length in µs (0 for a fixed window, whose state resets when
/// the window ends); `None` for a bucket.
fn window_micros(policy: &Policy) -> Option<u64> {
    match policy.algorithm().lease() {
        Lease::Window { length, .. } => Some(length),
        Lease::Held { .. } | Lease::Refused => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{batch_size, regains, window_span};
    use crate::Policy;

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
    fn a_windows_batch_is_sized_for_no_more_than_what_is_left_of_it() {
        // 20 ms intervals; the last batch ends (its window turns) at 1 s.
        assert_eq!(window_span(20_000, 1_000_000, 500_000), 20_000);
        assert_eq!(window_span(20_000, 1_000_000, 990_000), 10_000);
        assert_eq!(window_span(20_000, 1_000_000, 999_999), 1);
        // Ended (the window turned since) or never taken: the whole span.
        assert_eq!(window_span(20_000, 1_000_000, 1_000_000), 20_000);
        assert_eq!(window_span(20_000, 0, 5_000), 20_000);
        // A flooded sliding window at 5x its limit of 3,000 a second: an
        // instance asked for 500 units in 100 ms (its third), and takes
        // again 10 ms before the turn: 50 units, what it admits by then,
        // where a batch sized for an interval would leave 50 to lapse.
        let span = window_span(20_000, 1_000_000, 990_000);
        let regain = regains(
            &Policy::sliding_window("sw", 3_000, Duration::from_secs(1)).unwrap(),
            100_000,
        );
        assert_eq!(batch_size(500, 100_000, span, 0, 3, 1, regain), 50);
        assert_eq!(batch_size(500, 100_000, 20_000, 0, 3, 1, regain), 100);
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
}
