//! Taking a batch: how large, in one `check_at_most`, and until when it
//! may be spent.

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
        let size = batch_size(
            taken.units.saturating_sub(slot.units()),
            now.saturating_sub(taken.at),
            // A bucket's batch lapses an interval after it is taken: sized
            // for half of one, so that it is spent before.
            if window.is_some() {
                interval
            } else {
                interval / 2
            },
            slot.remaining(),
            self.inner.instances,
            cost,
        );
        let sent = self.now();
        self.inner
            .takes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let d = match self
            .inner
            .store
            .check_at_most(policy, key, size.saturating_sub(kept).max(1))
            .await
        {
            Ok(d) => d,
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
                // A bucket's within one interval of being taken: the refill
                // meanwhile is all a lease adds to the bucket's bound.
                None => sent + interval,
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
    use super::batch_size;

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
