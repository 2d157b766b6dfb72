//! The background pass over the leases, every interval: a window's lease
//! idle for an interval goes back to the store (`refund`), and a key idle
//! for 100 intervals is forgotten.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Inner;

/// Passes until the leasing store is dropped.
pub(super) async fn sweep(inner: Weak<Inner>, interval: Duration) {
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = inner.upgrade() else { return };
        pass(&inner).await;
    }
}

async fn pass(inner: &Arc<Inner>) {
    let now = inner.now();
    let slots: Vec<_> = inner
        .slots
        .read()
        .iter()
        .map(|(k, s)| (k.clone(), s.clone()))
        .collect();
    for (stored, slot) in slots {
        let word = slot.word();
        let unchanged = slot.seen.swap(word, Ordering::Relaxed) == word;
        let quiet = if unchanged {
            slot.quiet.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            slot.quiet.store(0, Ordering::Relaxed);
            0
        };
        if quiet == 0 {
            continue;
        }
        // Not while a batch is being taken.
        let Ok(_refill) = slot.refill.try_lock() else {
            continue;
        };
        if quiet >= 100 && slot.held(now) == 0 {
            let mut slots = inner.slots.write();
            if slots
                .get(&stored)
                .is_some_and(|current| Arc::ptr_eq(current, &slot))
            {
                slots.remove(&stored);
                slot.gone.store(true, Ordering::Release);
            }
            continue;
        }
        // Idle for an interval: a window's units go back if the window
        // has more than two intervals left (a refund must land in the
        // window it came from). A bucket's lapse at their batch's end: a
        // refund after the bucket refilled around them could stretch its
        // bound (see the module).
        let is_window = matches!(
            slot.policy.algorithm(),
            crate::Algorithm::FixedWindow(_) | crate::Algorithm::SlidingWindow(_)
        );
        if !is_window || slot.until().saturating_sub(now) <= 2 * inner.interval {
            continue;
        }
        // The units leave the lease before the refund is sent, so no check
        // spends them.
        let Some(units) = slot.take_idle(word) else {
            continue;
        };
        let key = stored.borrowed().key_bytes();
        if inner.store.refund(&slot.policy, key, units).await.is_ok() {
            inner.refunds.fetch_add(units, Ordering::Relaxed);
        }
    }
}
