//! Leaky bucket as a shaper: admitted requests leave at a constant rate.

use std::time::Duration;

use super::limits::Limits;
use super::params::{Rate, RateDivisors, units_ahead};
use super::rule::{Lease, Rule, bucket_share, not_held};
use super::tat::{self, Move};
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
        match self.decide_near(state, now, cost) {
            Some(verdict) => verdict,
            None => self.decide_wide(state, now, cost),
        }
    }

    /// [`decide`](Self::decide) in 64-bit arithmetic relative to `now`, as
    /// [`Gcra`](super::Gcra) does: the backlog stays within the capacity,
    /// far below 2^64. `None` (and `state` untouched) when a value would
    /// overflow: a finish time far ahead of `now`, or a cost above the
    /// capacity from a direct caller.
    #[inline]
    fn decide_near(&self, state: &mut LeakyBucketState, now: u64, cost: u64) -> Option<Verdict> {
        let backlog = units_ahead(state.micros, state.frac, now, self.rate.units_per_micro)?;
        let need = cost.checked_mul(self.rate.units_per_token)?;
        let total = backlog.checked_add(need)?;
        let cap = self.scaled_capacity;
        let allowed = total <= cap;
        let backlog_after = if allowed { total } else { backlog };
        if allowed && cost > 0 {
            // V' = now·drip + backlog_after, split into whole µs and frac.
            let (micros, frac) = self.div.per_micro.div_rem(backlog_after);
            *state = LeakyBucketState {
                micros: now.checked_add(micros)?,
                frac,
            };
        }
        let micros_for = |units| self.div.per_micro.div_ceil(units);
        Some(Verdict {
            allowed,
            limit: self.capacity,
            remaining: self.div.per_token.div(cap.saturating_sub(backlog_after)),
            reset_after: micros_for(backlog_after),
            retry_after: if allowed { 0 } else { micros_for(total - cap) },
            delay: if allowed { micros_for(backlog) } else { 0 },
        })
    }

    /// [`decide`](Self::decide) on absolute times in 128-bit arithmetic.
    fn decide_wide(&self, state: &mut LeakyBucketState, now: u64, cost: u64) -> Verdict {
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

    /// Records `cost` (≤ 2^52) already used, whatever is left: the finish time moves past the capacity (by at most
    /// [`MAX_DEBT`](super::MAX_DEBT) scaled units of debt, where it
    /// saturates). `allowed` says whether it fitted.
    pub fn charge(&self, state: &mut LeakyBucketState, now: u64, cost: u64) -> Decision {
        self.usage_micros(state, now, Move::Charge, cost).decision()
    }

    /// Gives `cost` back: the time moves earlier, never before `now`.
    pub fn refund(&self, state: &mut LeakyBucketState, now: u64, cost: u64) -> Decision {
        self.usage_micros(state, now, Move::Refund, cost).decision()
    }

    /// A charge or a refund, times in whole microseconds.
    #[inline]
    pub(crate) fn usage_micros(
        &self,
        state: &mut LeakyBucketState,
        now: u64,
        op: Move,
        cost: u64,
    ) -> Verdict {
        let time = (&mut state.micros, &mut state.frac);
        let (rate, div) = (&self.rate, &self.div);
        tat::apply(
            rate,
            div,
            self.capacity,
            self.scaled_capacity,
            time,
            now,
            op,
            cost,
        )
    }
}

impl Rule for LeakyBucket {
    type State = LeakyBucketState;
    const NAME: &'static str = "leaky_bucket";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.capacity(), "capacity")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.rate().per
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut LeakyBucketState, now: u64, cost: u64, _: u64) -> Verdict {
        self.decide_micros(state, now, cost)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut LeakyBucketState, now: u64, op: Move, cost: u64) -> Verdict {
        self.usage_micros(state, now, op, cost)
    }

    #[inline]
    fn reservation_rate(&self) -> Option<Rate> {
        None
    }

    #[inline]
    fn lease(&self) -> Lease {
        Lease::Refused
    }

    not_held!(LeakyBucketState);

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["rate", "per", "capacity"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<LeakyBucket> {
        let (rate, per) = limits.rate_per(self.rate());
        LeakyBucket::new(rate, per, limits.capacity.unwrap_or(self.capacity()))
    }

    fn share(&self, n: u64) -> Result<LeakyBucket> {
        bucket_share(self.rate(), self.capacity(), n, LeakyBucket::new)
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::near_cases;
    use super::*;

    /// The 64-bit path decides exactly as the 128-bit one wherever it
    /// answers (the cases of GCRA's same test).
    #[test]
    fn the_near_path_agrees_with_the_wide_one() {
        let mut rng = fastrand::Rng::with_seed(12);
        let mut answered = 0;
        for (rate, per, capacity) in near_cases::RATES {
            let lb = LeakyBucket::new(rate, Duration::from_micros(per), capacity).unwrap();
            for _ in 0..20_000 {
                let (now, micros, frac, cost) =
                    near_cases::case(&mut rng, lb.rate.units_per_micro, capacity);
                let start = LeakyBucketState { micros, frac };
                let (mut near, mut wide) = (start, start);
                if let Some(v) = lb.decide_near(&mut near, now, cost) {
                    answered += 1;
                    assert_eq!(v, lb.decide_wide(&mut wide, now, cost));
                    assert_eq!(near, wide, "{start:?} at {now}, cost {cost}");
                } else {
                    assert_eq!(near, start, "untouched when it gives up");
                }
            }
        }
        assert!(answered > 50_000, "the near path answers most cases");
    }
}
