//! Sliding window: the weighted two-window counter.

use std::time::Duration;

use super::limits::Limits;
use super::params::Rate;
use super::params::{Divisor, MAX_EXACT, period, positive};
use super::rule::{Lease, Rule, micros, not_held, part};
use super::tat::Move;
use crate::decision::Verdict;
use crate::{Decision, Error, Result};

/// At most `limit` in the estimated last `window`, where the estimate weighs
/// the previous window's count by the part of it still inside the sliding
/// window: with `e = now mod window`, `estimate·window = prev·(window − e) +
/// curr·window`, compared in integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingWindow {
    limit: u64,
    window: u64,
    per_window: Divisor,
    /// The most a window counts: `curr · window` stays below 2^52, so the
    /// weighted sum stays exact; usage charged beyond saturates (it is at
    /// least the limit, and denies the whole next window). Kept, not
    /// divided out on every charge.
    max_count: u64,
}

/// The counts of the current and the previous window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlidingWindowState {
    /// The current window's index `k`.
    pub window: u64,
    /// Admitted in window `k − 1`.
    pub prev: u64,
    /// Admitted in window `k`.
    pub curr: u64,
}

impl SlidingWindow {
    /// Validates `limit` and `window`; `2·limit·window` (µs) must stay below
    /// 2^53 so that the integer comparison is exact everywhere.
    pub fn new(limit: u64, window: Duration) -> Result<SlidingWindow> {
        let window = period("window", window)?;
        let limit = positive("limit", limit, MAX_EXACT)?;
        if 2 * limit as u128 * window as u128 > MAX_EXACT as u128 {
            return Err(Error::policy(
                "limit",
                format!(
                    "{limit} with a window of {window}us is too large for exact arithmetic (2·limit·window must stay below 2^53 µs); the largest limit for this window is {}",
                    MAX_EXACT / 2 / window
                ),
            ));
        }
        Ok(SlidingWindow {
            limit,
            window,
            per_window: Divisor::new(window),
            max_count: MAX_EXACT / 2 / window,
        })
    }

    /// The most admitted per (estimated) window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window, in microseconds.
    pub fn window_micros(&self) -> u64 {
        self.window
    }

    /// Decides a request of `cost` (≤ limit) at `now`, updating `state`.
    pub fn decide(&self, state: &mut SlidingWindowState, now: u64, cost: u64) -> Decision {
        self.decide_micros(state, now, cost).decision()
    }

    /// [`decide`](Self::decide), times in whole microseconds.
    #[inline]
    pub(crate) fn decide_micros(
        &self,
        state: &mut SlidingWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let (w, l) = (self.window, self.limit);
        let current = self.per_window.div(now);
        // The windows as of `now`; kept only by an admission of a cost > 0
        // (a denial or a peek leaves `state` as it was, as the Redis script
        // writes nothing then: the same counts while time moves forward,
        // and the same answers to a request that comes late afterwards).
        let (window, prev, curr) = if state.window + 1 == current {
            (current, state.curr, 0)
        } else if state.window < current {
            (current, 0, 0)
        } else {
            (state.window, state.prev, state.curr)
        };
        let start = window * w;
        let e = now.saturating_sub(start);
        // Everything below fits in u64: prev, curr ≤ limit and 2·limit·w < 2^53.
        let weighted_prev = prev * (w - e);
        let allowed = weighted_prev + (curr + cost) * w <= l * w;
        let curr_after = if allowed { curr + cost } else { curr };
        if curr_after != curr {
            *state = SlidingWindowState {
                window,
                prev,
                curr: curr_after,
            };
        }
        let remaining = self
            .per_window
            .div((l * w).saturating_sub(weighted_prev + curr_after * w));
        let retry_at = if allowed {
            now
        } else if curr + cost <= l {
            // Within this window, once prev's weight has shrunk enough:
            // prev·(w − e') ≤ (l − curr − cost)·w.
            start + w - (l - curr - cost) * w / prev
        } else {
            // In the next window, where prev' = curr and curr' = 0:
            // curr·(w − e'') ≤ (l − cost)·w.
            start + w + w.saturating_sub((l - cost) * w / curr)
        };
        let reset_at = if curr_after > 0 {
            start + 2 * w
        } else if prev > 0 {
            start + w
        } else {
            now
        };
        Verdict {
            allowed,
            limit: l,
            remaining,
            reset_after: reset_at.saturating_sub(now),
            retry_after: retry_at.saturating_sub(now),
            delay: 0,
        }
    }

    /// The windows as of `now`: `(window, prev, curr)`, as
    /// [`decide`](Self::decide) reads them.
    #[inline]
    fn roll(&self, state: &SlidingWindowState, now: u64) -> (u64, u64, u64) {
        let current = self.per_window.div(now);
        if state.window + 1 == current {
            (current, state.curr, 0)
        } else if state.window < current {
            (current, 0, 0)
        } else {
            (state.window, state.prev, state.curr)
        }
    }

    /// Records `cost` (≤ 2^52) already used, in the current window,
    /// whatever is left: the estimate may go past the limit.
    pub fn charge(&self, state: &mut SlidingWindowState, now: u64, cost: u64) -> Decision {
        self.charge_micros(state, now, cost).decision()
    }

    /// [`charge`](Self::charge), times in whole microseconds.
    #[inline]
    pub(crate) fn charge_micros(
        &self,
        state: &mut SlidingWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let (window, prev, curr) = self.roll(state, now);
        let w = self.window;
        let weighted_prev = prev * (w - now.saturating_sub(window * w));
        // curr + cost above the limit never fits, so the product is only
        // formed when it is small.
        let allowed =
            curr + cost <= self.limit && weighted_prev + (curr + cost) * w <= self.limit * w;
        let curr = (curr + cost).min(self.max_count);
        *state = SlidingWindowState { window, prev, curr };
        self.after_usage(now, window, prev, curr, allowed)
    }

    /// Gives `cost` back, from the current window first, then from the
    /// previous one, down to empty windows.
    pub fn refund(&self, state: &mut SlidingWindowState, now: u64, cost: u64) -> Decision {
        self.refund_micros(state, now, cost).decision()
    }

    /// [`refund`](Self::refund), times in whole microseconds.
    #[inline]
    pub(crate) fn refund_micros(
        &self,
        state: &mut SlidingWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let (window, prev, curr) = self.roll(state, now);
        let from_curr = cost.min(curr);
        let prev = prev - (cost - from_curr).min(prev);
        let curr = curr - from_curr;
        *state = SlidingWindowState { window, prev, curr };
        self.after_usage(now, window, prev, curr, true)
    }

    /// The verdict on the counts a charge or refund left: `retry_after` is
    /// when a request of cost 1 would pass.
    #[inline]
    fn after_usage(&self, now: u64, window: u64, prev: u64, curr: u64, allowed: bool) -> Verdict {
        let (w, l) = (self.window, self.limit);
        let start = window * w;
        // prev, curr ≤ max_count, so each product is below 2^52.
        let weighted_prev = prev * (w - now.saturating_sub(start));
        let used = weighted_prev + curr * w;
        let retry_at = if used + w <= l * w {
            now
        } else if curr < l {
            // prev > 0 here, else the request would fit.
            start + w - (l - curr - 1) * w / prev
        } else {
            start + w + w.saturating_sub((l - 1) * w / curr)
        };
        let reset_at = if curr > 0 {
            start + 2 * w
        } else if prev > 0 {
            start + w
        } else {
            now
        };
        Verdict {
            allowed,
            limit: l,
            remaining: self.per_window.div((l * w).saturating_sub(used)),
            reset_after: reset_at.saturating_sub(now),
            retry_after: retry_at.saturating_sub(now),
            delay: 0,
        }
    }
}

impl Rule for SlidingWindow {
    type State = SlidingWindowState;
    const NAME: &'static str = "sliding_window";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.limit(), "limit")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.window_micros()
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut SlidingWindowState, now: u64, cost: u64, _: u64) -> Verdict {
        self.decide_micros(state, now, cost)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut SlidingWindowState, now: u64, op: Move, cost: u64) -> Verdict {
        match op {
            Move::Charge => self.charge_micros(state, now, cost),
            Move::Refund => self.refund_micros(state, now, cost),
        }
    }

    #[inline]
    fn reservation_rate(&self) -> Option<Rate> {
        None
    }

    #[inline]
    fn lease(&self) -> Lease {
        Lease::Window {
            length: self.window_micros(),
            limit: self.limit(),
        }
    }

    not_held!(SlidingWindowState);

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["limit", "window"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<SlidingWindow> {
        let (limit, window) = limits.limit_window(self.limit(), self.window_micros());
        SlidingWindow::new(limit, window)
    }

    fn share(&self, n: u64) -> Result<SlidingWindow> {
        SlidingWindow::new(part(self.limit(), n), micros(self.window_micros()))
    }
}
