//! GCRA: the generic cell rate algorithm, one theoretical arrival time.

use std::time::Duration;

use super::limits::Limits;
use super::params::{Rate, RateDivisors, units_ahead};
use super::rule::{Lease, Rule, bucket_share, same_bucket};
use super::tat::{self, Move};
use crate::decision::Verdict;
use crate::{Decision, Result};

/// The generic cell rate algorithm with emission interval `per / rate` and a
/// tolerance of `burst` cells. Its decisions are identical to
/// [`TokenBucket`](super::TokenBucket)'s with the same parameters; it keeps a
/// single number of state, the theoretical arrival time (TAT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    rate: Rate,
    burst: u64,
    capacity: u64,
    div: RateDivisors,
}

/// The theoretical arrival time, exactly: `micros + frac / units_per_micro`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcraState {
    /// Whole microseconds of the TAT.
    pub micros: u64,
    /// The fraction of a microsecond, in `1 / units_per_micro` steps
    /// (always below [`Rate::units_per_micro`]).
    pub frac: u64,
}

impl Gcra {
    /// Same parameters and bounds as [`TokenBucket::new`](super::TokenBucket::new).
    pub fn new(rate: u64, per: Duration, burst: u64) -> Result<Gcra> {
        let rate = Rate::new(rate, per)?;
        let capacity = rate.capacity("burst", burst)?;
        Ok(Gcra {
            rate,
            burst,
            capacity,
            div: RateDivisors::new(&rate),
        })
    }

    /// The emission rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The burst tolerance, in cells.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Moves the TAT to at least `now + hold` (`hold` µs): a held
    /// `check_at_most`'s grant then counts as arriving `hold` from now.
    /// Returns the TAT to restore when nothing is granted.
    #[inline]
    pub(crate) fn hold_micros(&self, state: &mut GcraState, now: u64, hold: u64) -> (u64, u64) {
        let saved = (state.micros, state.frac);
        let drip = u128::from(self.rate.units_per_micro);
        let tat = u128::from(state.micros) * drip + u128::from(state.frac);
        let held = now.saturating_add(hold);
        if tat < u128::from(held) * drip {
            (state.micros, state.frac) = (held, 0);
        }
        saved
    }

    /// Decides a request of `cost` (≤ burst) at `now`, updating `state`.
    pub fn decide(&self, state: &mut GcraState, now: u64, cost: u64) -> Decision {
        self.reserve(state, now, cost, 0)
    }

    /// Admits a request that would wait at most `max_wait` µs, pushing the
    /// TAT further into the future; the decision's `delay` is the wait.
    #[inline(always)]
    pub fn reserve(&self, state: &mut GcraState, now: u64, cost: u64, max_wait: u64) -> Decision {
        self.reserve_micros(state, now, cost, max_wait).decision()
    }

    /// [`reserve`](Self::reserve), times in whole microseconds.
    #[inline(always)]
    pub(crate) fn reserve_micros(
        &self,
        state: &mut GcraState,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Verdict {
        match self.reserve_near(state, now, cost, max_wait) {
            Some(verdict) => verdict,
            None => self.reserve_wide(state, now, cost, max_wait),
        }
    }

    /// [`reserve`](Gcra::reserve) in 64-bit arithmetic relative to `now`:
    /// the debt `TAT − now` stays within the capacity and a reservation's
    /// wait, far below 2^64, however large the absolute TAT in scaled units
    /// is. `None` (and `state` untouched) when a value would overflow: a
    /// TAT far ahead of `now` after the clock stepped back, or a cost above
    /// the burst from a direct caller.
    #[inline(always)]
    fn reserve_near(
        &self,
        state: &mut GcraState,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<Verdict> {
        let debt = units_ahead(state.micros, state.frac, now, self.rate.units_per_micro)?;
        let (verdict, debt_after) = self.reserve_debt(debt, cost, max_wait)?;
        if verdict.allowed && cost > 0 {
            // TAT' = now·drip + debt_after, split into whole µs and frac.
            let (micros, frac) = self.div.per_micro.div_rem(debt_after);
            *state = GcraState {
                micros: now.checked_add(micros)?,
                frac,
            };
        }
        Some(verdict)
    }

    /// The decision on a debt, `max(TAT − now, 0)` in scaled units, and the
    /// debt after it (the TAT after it is `now` plus that debt, when it
    /// admits a cost > 0). 64-bit; `None` when a value would overflow. The
    /// one place GCRA decides: [`reserve`](Gcra::reserve) and the packed
    /// state of [`DirectLimiter`](crate::DirectLimiter) both come here.
    #[inline(always)]
    pub(crate) fn reserve_debt(
        &self,
        debt: u64,
        cost: u64,
        max_wait: u64,
    ) -> Option<(Verdict, u64)> {
        let need = cost.checked_mul(self.rate.units_per_token)?;
        let total = debt.checked_add(need)?;
        // The wait for the request to fit: none, without a division, when
        // it fits now (the common case).
        let over = total.saturating_sub(self.capacity);
        let wait = if over == 0 {
            0
        } else {
            self.div.per_micro.div_ceil(over)
        };
        let allowed = wait <= max_wait;
        let debt_after = if allowed { total } else { debt };
        let verdict = Verdict {
            allowed,
            limit: self.burst,
            remaining: self
                .div
                .per_token
                .div(self.capacity.saturating_sub(debt_after)),
            reset_after: self.div.per_micro.div_ceil(debt_after),
            retry_after: if allowed { 0 } else { wait - max_wait },
            delay: if allowed { wait } else { 0 },
        };
        Some((verdict, debt_after))
    }

    /// [`reserve`](Gcra::reserve) on absolute times in 128-bit arithmetic.
    fn reserve_wide(&self, state: &mut GcraState, now: u64, cost: u64, max_wait: u64) -> Verdict {
        let drip = self.rate.units_per_micro as u128;
        let tat = state.micros as u128 * drip + state.frac as u128;
        let now_units = now as u128 * drip;
        let need = cost as u128 * self.rate.units_per_token as u128;
        let cap = self.capacity as u128;
        let debt = tat.saturating_sub(now_units);
        let wait = self.div.micros_for((debt + need).saturating_sub(cap));
        let allowed = wait <= max_wait;
        let debt_after = if allowed {
            let new_tat = tat.max(now_units) + need;
            if cost > 0 {
                let (micros, frac) = self.div.per_micro.div_rem_wide(new_tat);
                *state = GcraState {
                    micros: micros as u64,
                    frac: frac as u64,
                };
            }
            new_tat - now_units
        } else {
            debt
        };
        Verdict {
            allowed,
            limit: self.burst,
            remaining: self
                .div
                .per_token
                .div_rem_wide(cap.saturating_sub(debt_after))
                .0 as u64,
            reset_after: self.div.micros_for(debt_after),
            retry_after: if allowed { 0 } else { wait - max_wait },
            delay: if allowed { wait } else { 0 },
        }
    }

    /// Records `cost` (≤ 2^52) already used, whatever is left: the TAT moves past the burst tolerance (by at most
    /// [`MAX_DEBT`](super::MAX_DEBT) scaled units of debt, where it
    /// saturates). `allowed` says whether it fitted.
    pub fn charge(&self, state: &mut GcraState, now: u64, cost: u64) -> Decision {
        self.usage_micros(state, now, Move::Charge, cost).decision()
    }

    /// Gives `cost` back: the time moves earlier, never before `now`.
    pub fn refund(&self, state: &mut GcraState, now: u64, cost: u64) -> Decision {
        self.usage_micros(state, now, Move::Refund, cost).decision()
    }

    /// A charge or a refund, times in whole microseconds.
    #[inline]
    pub(crate) fn usage_micros(
        &self,
        state: &mut GcraState,
        now: u64,
        op: Move,
        cost: u64,
    ) -> Verdict {
        let time = (&mut state.micros, &mut state.frac);
        let (rate, div) = (&self.rate, &self.div);
        tat::apply(rate, div, self.burst, self.capacity, time, now, op, cost)
    }
}

impl Rule for Gcra {
    type State = GcraState;
    const NAME: &'static str = "gcra";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.burst(), "burst")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.rate().per
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut GcraState, now: u64, cost: u64, max_wait: u64) -> Verdict {
        self.reserve_micros(state, now, cost, max_wait)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut GcraState, now: u64, op: Move, cost: u64) -> Verdict {
        self.usage_micros(state, now, op, cost)
    }

    #[inline]
    fn reservation_rate(&self) -> Option<Rate> {
        Some(self.rate())
    }

    #[inline]
    fn lease(&self) -> Lease {
        Lease::Held {
            rate: self.rate(),
            burst: self.burst(),
        }
    }

    #[inline(always)]
    fn hold_at(&self, state: &mut GcraState, now: u64, hold: u64) -> (u64, u64) {
        self.hold_micros(state, now, hold)
    }

    #[inline(always)]
    fn unhold(&self, state: &mut GcraState, saved: (u64, u64)) {
        (state.micros, state.frac) = saved;
    }

    fn stamp(&self, state: &GcraState) -> Option<[u64; 2]> {
        Some([state.micros, state.frac])
    }

    /// The same bucket is the same TAT, to the fraction.
    fn is_stamped(&self, state: &GcraState, now: u64, stamp: [u64; 2]) -> bool {
        if [state.micros, state.frac] != stamp {
            return false;
        }
        let drip = u128::from(self.rate().units_per_micro);
        let tat = u128::from(state.micros) * drip + u128::from(state.frac);
        same_bucket(drip, tat, tat, now)
    }

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["rate", "per", "burst"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<Gcra> {
        let (rate, per) = limits.rate_per(self.rate());
        Gcra::new(rate, per, limits.burst.unwrap_or(self.burst()))
    }

    fn share(&self, n: u64) -> Result<Gcra> {
        bucket_share(self.rate(), self.burst(), n, Gcra::new)
    }
}

#[cfg(test)]
mod tests {
    use super::super::params::near_cases;
    use super::*;

    /// The 64-bit path decides exactly as the 128-bit one wherever it
    /// answers, on states near and far from `now`, fractions out of range
    /// (a policy changed its rate), and every rate shape.
    #[test]
    fn the_near_path_agrees_with_the_wide_one() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut answered = 0;
        for (rate, per, burst) in near_cases::RATES {
            let g = Gcra::new(rate, Duration::from_micros(per), burst).unwrap();
            for _ in 0..20_000 {
                let (now, micros, frac, cost) =
                    near_cases::case(&mut rng, g.rate.units_per_micro, burst);
                let max_wait = if rng.bool() { 0 } else { rng.u64(..1 << 20) };
                let start = GcraState { micros, frac };
                let (mut near, mut wide) = (start, start);
                if let Some(d) = g.reserve_near(&mut near, now, cost, max_wait) {
                    answered += 1;
                    assert_eq!(d, g.reserve_wide(&mut wide, now, cost, max_wait));
                    assert_eq!(near, wide, "{start:?} at {now}, cost {cost}");
                } else {
                    assert_eq!(near, start, "untouched when it gives up");
                }
            }
        }
        assert!(answered > 50_000, "the near path answers most cases");
    }
}
