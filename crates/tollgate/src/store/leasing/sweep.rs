//! The background pass over the leases, every interval: a window's lease
//! idle for an interval goes back to the store (`refund`), a bucket's
//! idle for an interval or past its batch's end goes back exactly
//! (`refund_held`, when the key is still the state its batch left), and a
//! key idle for 100 intervals is forgotten.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::Inner;
use super::slot::Slot;

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
        let is_window = matches!(
            slot.policy.algorithm().lease(),
            crate::algorithm::Lease::Window { .. }
        );
        // A bucket's batch that ended can be spent no more: its units go
        // back at once, busy or not.
        let ended = !is_window && slot.units() > 0 && slot.until() <= now;
        if quiet == 0 && !ended {
            continue;
        }
        // Not while a batch is being taken.
        let Ok(mut taken) = slot.refill.try_lock() else {
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
        let key = stored.borrowed().key_bytes();
        if !is_window {
            // A bucket's units go back only through the stamp of the batch
            // they came in: exactly, if the key is still the state that
            // batch left (no other instance's take since), else not at all
            // (a refund after the bucket refilled around them could
            // stretch its bound, see the module).
            let Some((generation, stamp)) = taken.stamp else {
                continue;
            };
            if Slot::generation(word) != generation {
                continue;
            }
            // The units leave the lease before the refund is sent, so no
            // check spends them; the stamp is spent with them.
            let Some(units) = slot.take_idle(word) else {
                continue;
            };
            taken.stamp = None;
            taken.units = taken.units.saturating_sub(units);
            match inner
                .store
                .refund_held(&slot.policy, key, stamp, units)
                .await
            {
                Ok(Some(_)) => {
                    inner.refunds.fetch_add(units, Ordering::Relaxed);
                }
                _ => {
                    inner.lapsed.fetch_add(units, Ordering::Relaxed);
                }
            }
            continue;
        }
        // Idle for an interval: a window's units go back if the window
        // has more than two intervals left (a refund must land in the
        // window it came from).
        if slot.until().saturating_sub(now) <= 2 * inner.interval {
            continue;
        }
        // The units leave the lease before the refund is sent, so no check
        // spends them.
        let Some(units) = slot.take_idle(word) else {
            continue;
        };
        taken.units = taken.units.saturating_sub(units);
        if inner.store.refund(&slot.policy, key, units).await.is_ok() {
            inner.refunds.fetch_add(units, Ordering::Relaxed);
        }
    }
}
