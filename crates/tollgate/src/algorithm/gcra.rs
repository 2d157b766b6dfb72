//! GCRA: the generic cell rate algorithm, one theoretical arrival time.

use std::time::Duration;

use super::params::{Rate, RateDivisors};
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

    /// Decides a request of `cost` (≤ burst) at `now`, updating `state`.
    pub fn decide(&self, state: &mut GcraState, now: u64, cost: u64) -> Decision {
        self.reserve(state, now, cost, 0)
    }

    /// Admits a request that would wait at most `max_wait` µs, pushing the
    /// TAT further into the future; the decision's `delay` is the wait.
    pub fn reserve(&self, state: &mut GcraState, now: u64, cost: u64, max_wait: u64) -> Decision {
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
        Decision::from_micros(
            allowed,
            self.burst,
            self.div
                .per_token
                .div_rem_wide(cap.saturating_sub(debt_after))
                .0 as u64,
            self.div.micros_for(debt_after),
            if allowed { 0 } else { wait - max_wait },
            if allowed { wait } else { 0 },
        )
    }
}
