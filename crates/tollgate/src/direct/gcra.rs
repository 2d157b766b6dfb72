//! GCRA's state for a direct limiter in one atomic word.

use std::sync::atomic::{AtomicU64, Ordering};

use super::MAX_PACKED_DRIP;
use crate::algorithm::{Algorithm, Gcra};
use crate::decision::Verdict;
use crate::{Error, Result};

/// GCRA's theoretical arrival time in one `u64`, in the policy's scaled
/// units since the Unix epoch (µs times `units_per_micro`); 0 is fresh.
/// With at most [`MAX_PACKED_DRIP`] units a µs, that lasts until the year
/// 2112.
#[derive(Debug)]
pub(super) struct PackedGcra {
    gcra: Gcra,
    tat: AtomicU64,
}

impl PackedGcra {
    /// The packed form of a GCRA policy with at most [`MAX_PACKED_DRIP`]
    /// scaled units a µs.
    pub(super) fn new(algorithm: &Algorithm) -> Option<PackedGcra> {
        let Algorithm::Gcra(gcra) = algorithm else {
            return None;
        };
        if gcra.rate().units_per_micro > MAX_PACKED_DRIP {
            return None;
        }
        Some(PackedGcra {
            gcra: *gcra,
            tat: AtomicU64::new(0),
        })
    }

    #[inline(always)]
    pub(super) fn decide(&self, now: u64, cost: u64, max_wait: u64) -> Result<Verdict> {
        let now_units = now
            .checked_mul(self.gcra.rate().units_per_micro)
            .ok_or_else(beyond_range)?;
        let mut current = self.tat.load(Ordering::Acquire);
        loop {
            let debt = current.saturating_sub(now_units);
            let (verdict, debt_after) = self
                .gcra
                .reserve_debt(debt, cost, max_wait)
                .ok_or_else(beyond_range)?;
            // The memory store's rule needs only this: a TAT at or before
            // now decides as a fresh one (0) would, and once a decision
            // says so (nothing to reset) the state becomes the fresh one,
            // as the store drops the entry.
            // (`reset_after` is 0 exactly when the debt after is.)
            let next = if debt_after == 0 {
                0
            } else if verdict.allowed && cost > 0 {
                now_units.checked_add(debt_after).ok_or_else(beyond_range)?
            } else {
                current
            };
            if next == current {
                // A denial, or a peek: nothing to write.
                return Ok(verdict);
            }
            match self
                .tat
                .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(verdict),
                Err(seen) => current = seen,
            }
        }
    }

    /// Back to fresh.
    pub(super) fn reset(&self) {
        self.tat.store(0, Ordering::Release);
    }
}

#[cold]
fn beyond_range() -> Error {
    Error::argument(
        "now",
        "a direct GCRA limiter keeps time until the year 2112",
    )
}
