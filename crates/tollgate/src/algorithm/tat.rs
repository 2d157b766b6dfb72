//! Charges and refunds on a theoretical arrival time: GCRA's TAT and the
//! leaky bucket's virtual finish time keep the same number, a time
//! `micros + frac / units_per_micro`, and usage moves it the same way.

use super::params::{MAX_DEBT, Rate, RateDivisors, units_ahead};
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
/// request of cost 1 would pass. In 64-bit arithmetic relative to `now`,
/// as GCRA's check decides (usage must cost what a check does); in 128-bit
/// arithmetic where a value would not fit (a time far ahead of `now`).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
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
    let time = (&mut *micros, &mut *frac);
    match apply_near(rate, div, limit, capacity, time, now, op, cost) {
        Some(verdict) => verdict,
        None => apply_wide(rate, div, limit, capacity, (micros, frac), now, op, cost),
    }
}

/// [`apply`] in 64-bit arithmetic on the debt `time − now`; `None`, and
/// the time untouched, when a value would not fit. Every step that may
/// not fit comes before the time is written, which it is at once (not
/// handed back to be written later, which kept the pointers and the new
/// time live across the verdict's arithmetic), and the division that
/// splits the new time is the one `reset_after` rounds up.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn apply_near(
    rate: &Rate,
    div: &RateDivisors,
    limit: u64,
    capacity: u64,
    (micros, frac): (&mut u64, &mut u64),
    now: u64,
    op: Move,
    cost: u64,
) -> Option<Verdict> {
    let debt = units_ahead(*micros, *frac, now, rate.units_per_micro)?;
    let need = cost.checked_mul(rate.units_per_token)?;
    let (after, allowed) = match op {
        Move::Charge => {
            let total = debt.checked_add(need)?;
            (total.min(MAX_DEBT), total <= capacity)
        }
        Move::Refund => (debt - need.min(debt), true),
    };
    // after <= max(debt, 2^52) and a token is below 2^50 units.
    let over = after
        .checked_add(rate.units_per_token)?
        .saturating_sub(capacity);
    let (whole, part) = div.per_micro.div_rem(after);
    if after != debt {
        *micros = now.checked_add(whole)?;
        *frac = part;
    }
    Some(Verdict {
        allowed,
        limit,
        remaining: div.per_token.div(capacity.saturating_sub(after)),
        reset_after: whole + (part != 0) as u64,
        // No division when a request of 1 would pass (the common case).
        retry_after: if over == 0 {
            0
        } else {
            div.per_micro.div_ceil(over)
        },
        delay: 0,
    })
}

/// [`apply`] on absolute times in 128-bit arithmetic.
#[allow(clippy::too_many_arguments)]
fn apply_wide(
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::params::near_cases;
    use super::*;

    /// The 64-bit path moves the time and answers exactly as the 128-bit
    /// one wherever it answers, on times near and far from `now`,
    /// fractions out of range and every rate shape.
    #[test]
    fn the_near_path_agrees_with_the_wide_one() {
        let mut rng = fastrand::Rng::with_seed(23);
        let mut answered = 0;
        for (rate, per, burst) in near_cases::RATES {
            let rate = Rate::new(rate, Duration::from_micros(per)).unwrap();
            let div = RateDivisors::new(&rate);
            let capacity = rate.capacity("burst", burst).unwrap();
            for _ in 0..20_000 {
                let (now, micros, frac, cost) =
                    near_cases::case(&mut rng, rate.units_per_micro, burst);
                let op = if rng.bool() {
                    Move::Charge
                } else {
                    Move::Refund
                };
                let (mut near_m, mut near_f) = (micros, frac);
                let near = (&mut near_m, &mut near_f);
                if let Some(verdict) = apply_near(&rate, &div, burst, capacity, near, now, op, cost)
                {
                    answered += 1;
                    let (mut m, mut f) = (micros, frac);
                    let wide = apply_wide(
                        &rate,
                        &div,
                        burst,
                        capacity,
                        (&mut m, &mut f),
                        now,
                        op,
                        cost,
                    );
                    assert_eq!(
                        verdict, wide,
                        "{op:?} {cost} on ({micros}, {frac}) at {now}"
                    );
                    assert_eq!(
                        (near_m, near_f),
                        (m, f),
                        "{op:?} {cost} on ({micros}, {frac}) at {now}"
                    );
                } else {
                    assert_eq!(
                        (near_m, near_f),
                        (micros, frac),
                        "untouched when it gives up"
                    );
                }
            }
        }
        assert!(answered > 50_000, "the near path answers most cases");
    }
}
