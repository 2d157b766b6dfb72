//! Charges and refunds on a theoretical arrival time: GCRA's TAT and the
//! leaky bucket's virtual finish time keep the same number, a time
//! `micros + frac / units_per_micro`, and usage moves it the same way.

use super::params::{MAX_DEBT, Rate, RateDivisors};
use crate::decision::Verdict;

/// A charge or a refund.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// Push the time `cost` later, whatever the capacity says.
    Charge,
    /// Pull it `cost` earlier, never before now.
    Refund,
}

/// Moves the time `micros + frac / units_per_micro` by `cost` at `now`
/// and returns the verdict (`limit` and `capacity` being the policy's in
/// its own units and in scaled units); the time is written only when it
/// moves. The
/// debt `max(time − now, 0)` grows by the cost (saturating at
/// [`MAX_DEBT`]) or shrinks by it (down to 0); `retry_after` is when a
/// request of cost 1 would pass. In 128-bit arithmetic: usage is not a hot
/// path, and a time far ahead of `now` must not overflow.
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply(
    rate: &Rate,
    div: &RateDivisors,
    limit: u64,
    capacity: u64,
    (micros, frac): (&mut u64, &mut u64),
    now: u64,
    op: Move,
    cost: u64,
) -> Verdict {
    let drip = rate.units_per_micro as u128;
    let time = *micros as u128 * drip + *frac as u128;
    let now_units = now as u128 * drip;
    let debt = time.saturating_sub(now_units);
    let need = cost as u128 * rate.units_per_token as u128;
    let cap = capacity as u128;
    let (after, allowed) = match op {
        Move::Charge => ((debt + need).min(MAX_DEBT as u128), debt + need <= cap),
        Move::Refund => (debt - need.min(debt), true),
    };
    if after != debt {
        let (whole, part) = div.per_micro.div_rem_wide(now_units + after);
        (*micros, *frac) = (whole as u64, part as u64);
    }
    let over = (after + rate.units_per_token as u128).saturating_sub(cap);
    Verdict {
        allowed,
        limit,
        remaining: div.per_token.div_rem_wide(cap.saturating_sub(after)).0 as u64,
        reset_after: div.micros_for(after),
        retry_after: div.micros_for(over),
        delay: 0,
    }
}
