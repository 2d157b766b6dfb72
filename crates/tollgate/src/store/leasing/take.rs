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

/// How many units to hold after the next batch: what this key used here
/// over the last batch's life (`spent` in `elapsed` µs), scaled to one
/// `interval`, and at least `cost`; at most the store's `remaining` over
/// twice the expected `instances` (but never below `cost`), so that near
/// the limit a batch is one request.
pub(super) fn batch_size(
    spent: u64,
    elapsed: u64,
    interval: u64,
    remaining: u64,
    instances: u64,
    cost: u64,
) -> u64 {
    let rate = match elapsed {
        0 => spent,
        _ => (u128::from(spent) * u128::from(interval) / u128::from(elapsed)) as u64,
    };
    rate.min(remaining / (2 * instances))
        .max(cost)
        .min(MAX_UNITS)
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
        // records it as taken then.
        let hold = bucket_hold(policy, interval, cost);
        let size = batch_size(
            taken.units.saturating_sub(slot.units()),
            now.saturating_sub(taken.at),
            // A bucket's batch is sized for half its life, so that it is
            // spent before it lapses.
            hold.map_or(interval, |h| h / 2),
            slot.remaining(),
            self.inner.instances,
            cost,
        );
        let sent = self.now();
        self.inner
            .takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ask = size.saturating_sub(kept).max(1);
        // A batch of just this check is admitted now, with nothing left to
        // spend later: it needs no hold, so near the limit a bucket's lease
        // is the plain check, with no hold's refill given up.
        let hold = hold.map(|h| if ask <= cost { 0 } else { h });
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
        Ok(Took::Decided(match admitted {
            Ok(left) => slot.decision(self.now(), left),
            Err(_) => {
                let mut denied = d;
                denied.allowed = false;
                denied.granted = 0;
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
        _ => return None,
    };
    // Scaled units: a token is `units_per_token`, a µs refills
    // `units_per_micro`; the burst is below 2^50 of them.
    let refill = burst.saturating_sub(cost) * rate.units_per_token / rate.units_per_micro;
    Some(interval.min(refill / 2))
}

/// A window's length in µs (0 for a fixed window, whose state resets when
/// the window ends); `None` for a bucket.
fn window_micros(policy: &Policy) -> Option<u64> {
    match policy.algorithm() {
        Algorithm::SlidingWindow(a) => Some(a.window_micros()),
        Algorithm::FixedWindow(_) => Some(0),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{batch_size, bucket_hold};
    use crate::Policy;

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
        assert_eq!(batch_size(500, 10_000, 20_000, 1 << 30, 3, 1), 1_000);
        // A quiet key: the request itself.
        assert_eq!(batch_size(0, 10_000, 20_000, 1 << 30, 3, 5), 5);
        // At most remaining / (2 · instances)...
        assert_eq!(batch_size(500, 10_000, 20_000, 600, 3, 1), 100);
        // ...and near the limit a single request.
        assert_eq!(batch_size(500, 10_000, 20_000, 5, 3, 1), 1);
        assert_eq!(batch_size(500, 10_000, 20_000, 5, 3, 4), 4);
    }
}
