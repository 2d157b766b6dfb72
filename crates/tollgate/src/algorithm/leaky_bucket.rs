//! Leaky bucket as a shaper: admitted requests leave at a constant rate.

use std::time::Duration;

use super::params::{Rate, RateDivisors};
use crate::decision::Verdict;
use crate::{Decision, Result};

/// A queue of at most `capacity` requests drained at `rate` per `per`.
///
/// It keeps the virtual finish time `V` of the queue. A request is admitted
/// when it fits in the queue, and its [`delay`](Decision::delay) is the
/// backlog ahead of it: a caller that waits the delay never exceeds the rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeakyBucket {
    rate: Rate,
    capacity: u64,
    scaled_capacity: u64,
    div: RateDivisors,
}

/// The virtual finish time, exactly: `micros + frac / units_per_micro`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeakyBucketState {
    /// Whole microseconds of `V`.
    pub micros: u64,
    /// The fraction of a microsecond, in `1 / units_per_micro` steps.
    pub frac: u64,
}

impl LeakyBucket {
    /// Validates `rate` ≥ 1, `per` and `capacity` ≥ 1 (scaled below 2^50).
    pub fn new(rate: u64, per: Duration, capacity: u64) -> Result<LeakyBucket> {
        let rate = Rate::new(rate, per)?;
        let scaled = rate.capacity("capacity", capacity)?;
        Ok(LeakyBucket {
            rate,
            capacity,
            scaled_capacity: scaled,
            div: RateDivisors::new(&rate),
        })
    }

    /// The drain rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The queue's size, in requests of cost 1.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Decides a request of `cost` (≤ capacity) at `now`, updating `state`.
    pub fn decide(&self, state: &mut LeakyBucketState, now: u64, cost: u64) -> Decision {
        self.decide_micros(state, now, cost).decision()
    }

    /// [`decide`](Self::decide), times in whole microseconds.
    #[inline]
    pub(crate) fn decide_micros(
        &self,
        state: &mut LeakyBucketState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let drip = self.rate.units_per_micro as u128;
        let finish = state.micros as u128 * drip + state.frac as u128;
        let now_units = now as u128 * drip;
        let need = cost as u128 * self.rate.units_per_token as u128;
        let cap = self.scaled_capacity as u128;
        let backlog = finish.saturating_sub(now_units);
        let allowed = backlog + need <= cap;
        let backlog_after = if allowed {
            let finish = finish.max(now_units) + need;
            if cost > 0 {
                let (micros, frac) = self.div.per_micro.div_rem_wide(finish);
                *state = LeakyBucketState {
                    micros: micros as u64,
                    frac: frac as u64,
                };
            }
            finish - now_units
        } else {
            backlog
        };
        Verdict {
            allowed,
            limit: self.capacity,
            // A late request (client time behind the stored finish) can see
            // more backlog than the capacity: nothing remains then.
            remaining: self
                .div
                .per_token
                .div_rem_wide(cap.saturating_sub(backlog_after))
                .0 as u64,
            reset_after: self.div.micros_for(backlog_after),
            retry_after: if allowed {
                0
            } else {
                self.div.micros_for(backlog + need - cap)
            },
            delay: if allowed {
                self.div.micros_for(backlog)
            } else {
                0
            },
        }
    }
}
