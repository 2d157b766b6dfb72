//! Token bucket: `burst` tokens, refilled continuously at `rate` per `per`.

use std::time::Duration;

use super::limits::Limits;
use super::params::{MAX_DEBT, Rate, RateDivisors};
use super::rule::{Lease, Rule, bucket_share, same_bucket};
use super::tat::Move;
use crate::decision::Verdict;
use crate::{Decision, Result};

/// A bucket that starts full with `burst` tokens and refills continuously at
/// `rate` tokens per `per`, capped at `burst`.
///
/// Tokens are kept exactly, in scaled units ([`Rate::units_per_token`] units
/// per token), so a rate of 3 per second never rounds.
///
/// A late request (its `now` behind the bucket's time, from a clock stepped
/// back or a caller whose clock is behind) is decided at the bucket's time,
/// so it never finds the bucket refilled; its `reset_after` and
/// `retry_after` count from its own `now`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::TokenBucket;
///
/// let bucket = TokenBucket::new(10, Duration::from_secs(1), 20)?;
/// let mut state = Default::default(); // a full bucket
/// assert_eq!(bucket.decide(&mut state, 0, 20).remaining, 0);
/// let d = bucket.decide(&mut state, 0, 1);
/// assert!(!d.allowed);
/// assert_eq!(d.retry_after, Duration::from_millis(100));
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokenBucket {
    rate: Rate,
    burst: u64,
    capacity: u64,
    div: RateDivisors,
}

/// The bucket at a time, as the tokens missing from a full bucket, so that
/// the default state is a full bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenBucketState {
    /// Tokens missing, in scaled units; above the capacity after a
    /// reservation borrowed from the future.
    pub deficit: u64,
    /// When `deficit` was measured (µs since the epoch).
    pub at: u64,
}

impl TokenBucket {
    /// Validates `rate` ≥ 1, `per` (1 ms..=365 days) and `burst` ≥ 1, with
    /// `burst` in scaled units below 2^50.
    pub fn new(rate: u64, per: Duration, burst: u64) -> Result<TokenBucket> {
        let rate = Rate::new(rate, per)?;
        let capacity = rate.capacity("burst", burst)?;
        Ok(TokenBucket {
            rate,
            burst,
            capacity,
            div: RateDivisors::new(&rate),
        })
    }

    /// The refill rate.
    pub fn rate(&self) -> Rate {
        self.rate
    }

    /// The bucket's size, in tokens.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Refills up to `now` (a stored time ahead of `now` is kept: a late
    /// request never refills the bucket).
    fn refill(&self, state: &mut TokenBucketState, now: u64) {
        if now > state.at {
            // Full once `elapsed · drip` covers the deficit: no division.
            let refill = (now - state.at).saturating_mul(self.rate.units_per_micro);
            state.deficit = state.deficit.saturating_sub(refill);
            state.at = now;
        }
    }

    /// Refills up to `now`, then caps the tokens at `burst − rate·hold`
    /// (`hold` µs; the deficit at least `hold` µs of refill, exact in
    /// scaled units): a held `check_at_most`'s grant then counts as taken
    /// `hold` from now. Returns the deficit to restore when nothing is
    /// granted.
    #[inline]
    pub(crate) fn hold_micros(
        &self,
        state: &mut TokenBucketState,
        now: u64,
        hold: u64,
    ) -> (u64, u64) {
        self.refill(state, now);
        let saved = state.deficit;
        // Stores validate hold ≤ capacity / units_per_micro; bounded as
        // any debt, whatever the caller.
        let held = hold.saturating_mul(self.rate.units_per_micro);
        state.deficit = saved.max(held.min(MAX_DEBT));
        (saved, 0)
    }

    /// Decides a request of `cost` (≤ burst) at `now`, updating `state`.
    pub fn decide(&self, state: &mut TokenBucketState, now: u64, cost: u64) -> Decision {
        self.reserve(state, now, cost, 0)
    }

    /// Admits a request that would have to wait at most `max_wait` µs,
    /// borrowing from future refills; the decision's `delay` is the wait.
    pub fn reserve(
        &self,
        state: &mut TokenBucketState,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Decision {
        self.reserve_micros(state, now, cost, max_wait).decision()
    }

    /// [`reserve`](Self::reserve), times in whole microseconds.
    ///
    /// A late request (`now` behind the bucket's time) is decided, and its
    /// reservation waits, at the bucket's time; its `reset_after` and
    /// `retry_after` count from its own `now`, so that a store keeps the
    /// state until the bucket is really full (a state forgotten sooner
    /// would hand a late caller a full bucket early).
    ///
    /// A denial or a peek keeps the refill it computed (the bucket's time
    /// moves up to `now`), which the Redis script does not write: while
    /// time moves forward that is the same bucket, but a request that comes
    /// late after a denial finds, in memory, the tokens refilled up to the
    /// denial's time. Leaving the state untouched then would make the two
    /// stores agree; measured, it cost `DirectLimiter`'s bucket 15% a
    /// decision as a copy committed on admission, and 30–90% (GCRA's direct
    /// path too, through code layout) as a conditional write in place, so
    /// it waits for a form that costs nothing.
    #[inline]
    pub(crate) fn reserve_micros(
        &self,
        state: &mut TokenBucketState,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Verdict {
        self.refill(state, now);
        // The refill leaves the bucket's time at or after `now`.
        let late = state.at - now;
        let need = cost * self.rate.units_per_token;
        // The wait for the request to fit: none, without a division, when
        // it fits now (the common case).
        let over = (state.deficit + need).saturating_sub(self.capacity);
        let wait = if over == 0 {
            0
        } else {
            self.div.per_micro.div_ceil(over)
        };
        let allowed = wait <= max_wait;
        if allowed {
            state.deficit += need;
        }
        Verdict {
            allowed,
            limit: self.burst,
            remaining: self
                .div
                .per_token
                .div(self.capacity.saturating_sub(state.deficit)),
            reset_after: match state.deficit {
                0 => 0,
                deficit => late + self.div.per_micro.div_ceil(deficit),
            },
            retry_after: if allowed { 0 } else { late + wait - max_wait },
            delay: if allowed { wait } else { 0 },
        }
    }

    /// Records `cost` (≤ 2^52) already used, whatever is left: the bucket
    /// may go negative (by at most [`MAX_DEBT`] scaled units, where the
    /// deficit saturates), and refills from there. `allowed` says whether
    /// it fitted.
    pub fn charge(&self, state: &mut TokenBucketState, now: u64, cost: u64) -> Decision {
        self.charge_micros(state, now, cost).decision()
    }

    /// [`charge`](Self::charge), times in whole microseconds.
    #[inline(always)]
    pub(crate) fn charge_micros(
        &self,
        state: &mut TokenBucketState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        self.refill(state, now);
        let total = state
            .deficit
            .saturating_add(cost.saturating_mul(self.rate.units_per_token));
        let allowed = total <= self.capacity;
        state.deficit = total.min(MAX_DEBT);
        self.after_usage(state, now, allowed)
    }

    /// Gives `cost` back, up to a full bucket.
    pub fn refund(&self, state: &mut TokenBucketState, now: u64, cost: u64) -> Decision {
        self.refund_micros(state, now, cost).decision()
    }

    /// [`refund`](Self::refund), times in whole microseconds.
    #[inline(always)]
    pub(crate) fn refund_micros(
        &self,
        state: &mut TokenBucketState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        self.refill(state, now);
        let back = cost.saturating_mul(self.rate.units_per_token);
        state.deficit -= back.min(state.deficit);
        self.after_usage(state, now, true)
    }

    /// The verdict on the bucket a charge or refund left: `retry_after` is
    /// when a request of cost 1 would pass.
    #[inline]
    fn after_usage(&self, state: &TokenBucketState, now: u64, allowed: bool) -> Verdict {
        let late = state.at - now;
        let over = (state.deficit + self.rate.units_per_token).saturating_sub(self.capacity);
        Verdict {
            allowed,
            limit: self.burst,
            remaining: self
                .div
                .per_token
                .div(self.capacity.saturating_sub(state.deficit)),
            reset_after: match state.deficit {
                0 => 0,
                deficit => late + self.div.per_micro.div_ceil(deficit),
            },
            retry_after: match over {
                0 => 0,
                over => late + self.div.per_micro.div_ceil(over),
            },
            delay: 0,
        }
    }
}

impl Rule for TokenBucket {
    type State = TokenBucketState;
    const NAME: &'static str = "token_bucket";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.burst(), "burst")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.rate().per
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut TokenBucketState, now: u64, cost: u64, wait: u64) -> Verdict {
        self.reserve_micros(state, now, cost, wait)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut TokenBucketState, now: u64, op: Move, cost: u64) -> Verdict {
        match op {
            Move::Charge => self.charge_micros(state, now, cost),
            Move::Refund => self.refund_micros(state, now, cost),
        }
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
    fn hold_at(&self, state: &mut TokenBucketState, now: u64, hold: u64) -> (u64, u64) {
        self.hold_micros(state, now, hold)
    }

    #[inline(always)]
    fn unhold(&self, state: &mut TokenBucketState, (deficit, _): (u64, u64)) {
        state.deficit = deficit;
    }

    fn stamp(&self, state: &TokenBucketState) -> Option<[u64; 2]> {
        Some([state.deficit, state.at])
    }

    /// The same bucket is full again at the same time: `at + deficit /
    /// drip`, whichever time its level was measured at.
    fn is_stamped(&self, state: &TokenBucketState, now: u64, stamp: [u64; 2]) -> bool {
        let drip = u128::from(self.rate().units_per_micro);
        let at = |deficit: u64, time: u64| u128::from(time) * drip + u128::from(deficit);
        same_bucket(
            drip,
            at(state.deficit, state.at),
            at(stamp[0], stamp[1]),
            now,
        )
    }

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["rate", "per", "burst"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<TokenBucket> {
        let (rate, per) = limits.rate_per(self.rate());
        TokenBucket::new(rate, per, limits.burst.unwrap_or(self.burst()))
    }

    fn share(&self, n: u64) -> Result<TokenBucket> {
        bucket_share(self.rate(), self.burst(), n, TokenBucket::new)
    }
}
