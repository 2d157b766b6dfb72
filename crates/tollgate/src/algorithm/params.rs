//! Validation shared by the policy constructors.
//!
//! The Redis store runs the same arithmetic in Lua, whose numbers are doubles
//! and exact only below 2^53, so every bound here keeps each intermediate
//! value of the scripts below [`MAX_EXACT`].

use std::time::Duration;

use crate::{Error, Result};

/// Every number a script computes stays below this (2^53).
pub const MAX_EXACT: u64 = 1 << 53;

/// The shortest window, `per` or lease: 1 ms.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);

/// The longest window, `per` or lease: 365 days.
pub const MAX_PERIOD: Duration = Duration::from_secs(365 * 86_400);

/// The largest `limit` of a sliding log or a concurrency policy: both keep
/// one entry per admitted request.
pub const MAX_LOG_ENTRIES: u64 = 10_000;

/// Budget for a bucket's scaled level (`burst * per`, reservation debt
/// included): 2^50, so that sums of a few of them stay exact.
pub(crate) const MAX_SCALED: u64 = 1 << 50;

pub(crate) fn period(field: &'static str, d: Duration) -> Result<u64> {
    if !d.subsec_nanos().is_multiple_of(1_000) {
        return Err(Error::policy(
            field,
            format!("must be a whole number of microseconds, got {d:?}"),
        ));
    }
    if d < MIN_PERIOD {
        return Err(Error::policy(
            field,
            format!("must be at least 1ms, got {d:?}"),
        ));
    }
    if d > MAX_PERIOD {
        return Err(Error::policy(
            field,
            format!("must be at most 365 days, got {d:?}"),
        ));
    }
    Ok(d.as_micros() as u64)
}

pub(crate) fn positive(field: &'static str, value: u64, max: u64) -> Result<u64> {
    if value == 0 {
        return Err(Error::policy(field, "must be at least 1, got 0"));
    }
    if value > max {
        return Err(Error::policy(
            field,
            format!("must be at most {max}, got {value}"),
        ));
    }
    Ok(value)
}

pub(crate) fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

pub(crate) fn ceil_div(a: u128, b: u128) -> u128 {
    let (q, r) = div_rem(a, b);
    if r > 0 { q + 1 } else { q }
}

/// `(a / b, a % b)`. Most operands fit in 64 bits, and a 64-bit division is
/// one instruction where a 128-bit one is a library call several times
/// slower, on every decision of GCRA and the leaky bucket.
pub(crate) fn div_rem(a: u128, b: u128) -> (u128, u128) {
    if (a | b) >> 64 == 0 {
        let (a, b) = (a as u64, b as u64);
        ((a / b) as u128, (a % b) as u128)
    } else {
        (a / b, a % b)
    }
}

/// A rate of `rate` per `per`, reduced to lowest terms: one token is `per`
/// scaled units and `rate` units drip in per microsecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate {
    /// Tokens per `per`, as configured.
    pub rate: u64,
    /// The period, in microseconds, as configured.
    pub per: u64,
    /// Scaled units that drip in per microsecond (`rate / gcd`).
    pub units_per_micro: u64,
    /// Scaled units in one token (`per / gcd`).
    pub units_per_token: u64,
}

impl Rate {
    pub(crate) fn new(rate: u64, per: Duration) -> Result<Rate> {
        let per = period("per", per)?;
        let rate = positive("rate", rate, MAX_SCALED)?;
        let g = gcd(rate, per);
        Ok(Rate {
            rate,
            per,
            units_per_micro: rate / g,
            units_per_token: per / g,
        })
    }

    /// Scaled units of `tokens` tokens, checked against the budget.
    pub(crate) fn capacity(&self, field: &'static str, tokens: u64) -> Result<u64> {
        let tokens = positive(field, tokens, MAX_SCALED)?;
        let scaled = tokens as u128 * self.units_per_token as u128;
        if scaled > MAX_SCALED as u128 {
            return Err(Error::policy(
                field,
                format!(
                    "{tokens} at a rate of {} per {}us needs {scaled} scaled units, more than the exact budget of 2^50; lower `{field}` or use a coarser `per`",
                    self.rate, self.per
                ),
            ));
        }
        Ok(scaled as u64)
    }

    /// Microseconds, rounded up, for `units` scaled units to drip in.
    pub(crate) fn micros_for(&self, units: u128) -> u64 {
        ceil_div(units, self.units_per_micro as u128) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_reduced() {
        let r = Rate::new(1_000_000, Duration::from_secs(86_400)).unwrap();
        assert_eq!((r.units_per_micro, r.units_per_token), (1, 86_400));
        let r = Rate::new(3, Duration::from_secs(1)).unwrap();
        assert_eq!((r.units_per_micro, r.units_per_token), (3, 1_000_000));
    }

    #[test]
    fn periods_are_bounded() {
        assert!(period("window", Duration::from_micros(999)).is_err());
        assert!(period("window", Duration::from_nanos(1_000_500)).is_err());
        assert!(period("window", Duration::from_secs(366 * 86_400)).is_err());
        assert_eq!(period("window", Duration::from_millis(1)), Ok(1_000));
    }
}
