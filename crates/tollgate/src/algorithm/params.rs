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

/// How far past its limit a window or log counts: usage charged beyond
/// this (2^48 units over the limit) saturates. A key that far in debt is
/// denied until its window ends whatever else is charged.
pub const MAX_OVERDRAFT: u64 = 1 << 48;

/// The most debt a bucket keeps, in scaled units (2^52): usage charged
/// beyond saturates (at the slowest rate, 142 years of refill).
pub const MAX_DEBT: u64 = 1 << 52;

/// The largest cost a charge, a refund or `check_at_most` takes (2^52).
pub const MAX_USAGE_COST: u64 = 1 << 52;

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

/// Exact division by a divisor fixed when a policy is made: one multiply and
/// two shifts instead of a hardware divide (tens of cycles), on every
/// decision. This is the round-up method of Granlund and Montgomery
/// ("Division by invariant integers using multiplication", 1994, fig. 4.1),
/// exact for every 64-bit dividend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Divisor {
    d: u64,
    /// `floor(2^64 · (2^l − d) / d) + 1` with `l = ceil(log2 d)`; below 2^64.
    magic: u64,
    /// `min(l, 1)`.
    sh1: u32,
    /// `max(l − 1, 0)`.
    sh2: u32,
}

impl Divisor {
    /// Division by `d` (at least 1).
    pub(crate) fn new(d: u64) -> Divisor {
        assert!(d > 0, "a divisor is positive");
        let l = 64 - (d - 1).leading_zeros();
        let magic = ((1u128 << 64) * ((1u128 << l) - d as u128)) / d as u128 + 1;
        Divisor {
            d,
            magic: magic as u64,
            sh1: l.min(1),
            sh2: l.saturating_sub(1),
        }
    }

    /// `n / d`.
    #[inline]
    pub(crate) fn div(self, n: u64) -> u64 {
        let t = ((self.magic as u128 * n as u128) >> 64) as u64;
        (t + ((n - t) >> self.sh1)) >> self.sh2
    }

    /// `(n / d, n % d)`.
    #[inline]
    pub(crate) fn div_rem(self, n: u64) -> (u64, u64) {
        let q = self.div(n);
        (q, n - q * self.d)
    }

    /// `n / d`, rounded up.
    #[inline]
    pub(crate) fn div_ceil(self, n: u64) -> u64 {
        let (q, r) = self.div_rem(n);
        q + (r != 0) as u64
    }

    /// `(n / d, n % d)` of a 128-bit `n`: the fast path when it fits in 64
    /// bits, which it nearly always does.
    #[inline]
    pub(crate) fn div_rem_wide(self, n: u128) -> (u128, u128) {
        if n >> 64 == 0 {
            let (q, r) = self.div_rem(n as u64);
            (q as u128, r as u128)
        } else {
            (n / self.d as u128, n % self.d as u128)
        }
    }

    /// `n / d` of a 128-bit `n`, rounded up.
    #[inline]
    pub(crate) fn div_ceil_wide(self, n: u128) -> u128 {
        let (q, r) = self.div_rem_wide(n);
        q + (r != 0) as u128
    }
}

/// Scaled units from `now` until the time `micros + frac / drip` (0 once it
/// has passed): a TAT's debt or a queue's backlog, in 64-bit arithmetic
/// relative to `now` however far the absolute time is in scaled units.
/// `None` when it does not fit.
#[inline]
pub(crate) fn units_ahead(micros: u64, frac: u64, now: u64, drip: u64) -> Option<u64> {
    if micros >= now {
        (micros - now).checked_mul(drip)?.checked_add(frac)
    } else {
        Some(
            (now - micros)
                .checked_mul(drip)
                .map_or(0, |behind| frac.saturating_sub(behind)),
        )
    }
}

/// Rate shapes `(rate, per µs, burst)` and random cases for checking a
/// 64-bit path against the 128-bit one.
#[cfg(test)]
pub(crate) mod near_cases {
    /// From huge rates to one per hour, and a scale near the bounds.
    pub(crate) const RATES: [(u64, u64, u64); 5] = [
        (1_000_000_000, 1_000_000, 1_000_000_000),
        (3, 1_000_000, 10),
        (7, 3_600_000_000, 5),
        (1, 1_000, 1),
        (1 << 40, 1_000, 1 << 10),
    ];

    /// `(now, micros, frac, cost)`: a stored time near and far from `now`,
    /// a fraction sometimes out of range (a policy changed its rate), and
    /// a cost up to `limit` or beyond it (a direct caller).
    pub(crate) fn case(rng: &mut fastrand::Rng, drip: u64, limit: u64) -> (u64, u64, u64, u64) {
        let now = rng.u64(..1 << 52);
        let micros = match rng.u8(..4) {
            0 => now.saturating_sub(rng.u64(..1_000)),
            1 => now + rng.u64(..1_000_000),
            2 => rng.u64(..),
            _ => now,
        };
        let frac = match rng.u8(..3) {
            0 => rng.u64(..drip),
            1 => rng.u64(..),
            _ => 0,
        };
        let cost = match rng.u8(..3) {
            0 => 0,
            1 => rng.u64(..=limit),
            _ => rng.u64(..),
        };
        (now, micros, frac, cost)
    }
}

/// The divisors of a [`Rate`], for the decisions' arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct RateDivisors {
    /// By [`Rate::units_per_micro`]: scaled units to microseconds.
    pub(crate) per_micro: Divisor,
    /// By [`Rate::units_per_token`]: scaled units to tokens.
    pub(crate) per_token: Divisor,
}

impl RateDivisors {
    pub(crate) fn new(rate: &Rate) -> RateDivisors {
        RateDivisors {
            per_micro: Divisor::new(rate.units_per_micro),
            per_token: Divisor::new(rate.units_per_token),
        }
    }

    /// Microseconds, rounded up, for `units` scaled units to drip in (the
    /// rate's `units_per_micro`).
    #[inline]
    pub(crate) fn micros_for(&self, units: u128) -> u64 {
        self.per_micro.div_ceil_wide(units) as u64
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

    /// The divisions a [`Divisor`] replaces, on the divisors and dividends
    /// where the method could go wrong: powers of two and their neighbours,
    /// 1, the largest values, and random ones.
    #[test]
    fn divisors_divide_exactly() {
        let mut edges = vec![
            1u64,
            2,
            3,
            5,
            7,
            10,
            1_000,
            1_000_000,
            u64::MAX - 1,
            u64::MAX,
        ];
        for k in 1..64 {
            let p = 1u64 << k;
            edges.extend([p - 1, p, p + 1]);
        }
        let mut rng = fastrand::Rng::with_seed(7);
        let mut divisors = edges.clone();
        divisors.extend((0..200).map(|_| rng.u64(1..)));
        divisors.extend((0..200).map(|_| {
            let bits = rng.u32(1..40);
            rng.u64(1..1 << bits)
        }));
        let mut dividends = edges.clone();
        dividends.push(0);
        dividends.extend((0..200).map(|_| rng.u64(..)));
        dividends.extend((0..200).map(|_| {
            let bits = rng.u32(1..60);
            rng.u64(..1 << bits)
        }));
        for &d in &divisors {
            let v = Divisor::new(d);
            for &n in &dividends {
                assert_eq!(v.div_rem(n), (n / d, n % d), "{n} / {d}");
                assert_eq!(v.div_ceil(n), n.div_ceil(d), "{n} / {d} rounded up");
                let wide = (n as u128) << 3 | 5;
                assert_eq!(
                    v.div_rem_wide(wide),
                    (wide / d as u128, wide % d as u128),
                    "{wide} / {d}"
                );
            }
        }
    }

    #[test]
    fn periods_are_bounded() {
        assert!(period("window", Duration::from_micros(999)).is_err());
        assert!(period("window", Duration::from_nanos(1_000_500)).is_err());
        assert!(period("window", Duration::from_secs(366 * 86_400)).is_err());
        assert_eq!(period("window", Duration::from_millis(1)), Ok(1_000));
    }
}
