//! Fixed window: a counter per window aligned to the Unix epoch.

use std::time::Duration;

use super::calendar::{Calendar, Period};
use super::limits::Limits;
use super::params::Rate;
use super::params::{Divisor, MAX_EXACT, MAX_OVERDRAFT, period, positive};
use super::rule::{Lease, Rule, micros, not_held, part};
use super::tat::Move;
use crate::decision::Verdict;
use crate::{Decision, Result};

/// At most `limit` per window `[k·window, (k+1)·window)`.
///
/// ```
/// use std::time::Duration;
/// use tollgate::algorithm::FixedWindow;
///
/// let books = FixedWindow::new(120, Duration::from_secs(60))?;
/// let mut state = Default::default();
/// let d = books.decide(&mut state, 90_000_000, 1);
/// assert!(d.allowed);
/// assert_eq!(d.remaining, 119);
/// assert_eq!(d.reset_after, Duration::from_secs(30));
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    limit: u64,
    window: u64,
    per_window: Divisor,
    /// For calendar windows: the period and zone whose windows these are
    /// (`window` is then the period's nominal length).
    calendar: Option<&'static Calendar>,
}

/// The counter of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FixedWindowState {
    /// The window's index `k` (`now / window`); for a calendar window, its
    /// first instant in µs.
    pub window: u64,
    /// What was admitted in it.
    pub count: u64,
}

impl FixedWindow {
    /// Validates `limit` (1..=2^52) and `window` (1 ms..=365 days).
    pub fn new(limit: u64, window: Duration) -> Result<FixedWindow> {
        let window = period("window", window)?;
        Ok(FixedWindow {
            limit: positive("limit", limit, MAX_EXACT / 2)?,
            window,
            per_window: Divisor::new(window),
            calendar: None,
        })
    }

    /// At most `limit` per calendar `period` in `zone` (an IANA name or
    /// `UTC`): windows from local midnight on the period's first day
    /// (weeks from Monday) to the next period's, with their real lengths.
    ///
    /// ```
    /// use tollgate::algorithm::{FixedWindow, Period};
    ///
    /// let monthly = FixedWindow::in_calendar(1_000_000, Period::Month, "Europe/Paris")?;
    /// let mut state = Default::default();
    /// // 2026-02-10 12:00 in Paris: February ends in 18 days and 12 hours.
    /// let now = 1_770_721_200_000_000;
    /// let d = monthly.decide(&mut state, now, 1_000);
    /// assert_eq!(d.remaining, 999_000);
    /// assert_eq!(d.reset_after.as_secs(), (18 * 24 + 12) * 3600);
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    pub fn in_calendar(limit: u64, period: Period, zone: &str) -> Result<FixedWindow> {
        let window = period.nominal_micros();
        Ok(FixedWindow {
            limit: positive("limit", limit, MAX_EXACT / 2)?,
            window,
            per_window: Divisor::new(window),
            calendar: Some(Calendar::new(period, zone)?),
        })
    }

    /// The calendar, for calendar windows.
    pub fn calendar(&self) -> Option<&'static Calendar> {
        self.calendar
    }

    /// The calendar window holding `t`: `[start, end)` in µs. Past the
    /// calendar's range (years beyond 9999, which no clock of the stores
    /// reaches) windows of the nominal length from the epoch.
    pub fn calendar_window(&self, calendar: &Calendar, t: u64) -> (u64, u64) {
        calendar.window(t).unwrap_or_else(|_| {
            let k = self.per_window.div(t);
            (k * self.window, (k + 1) * self.window)
        })
    }

    /// A calendar window's state as of `now` (a stored window ahead of
    /// `now` stays current), and the µs to its end.
    #[cold]
    fn roll_calendar(&self, calendar: &Calendar, state: &mut FixedWindowState, now: u64) -> u64 {
        let (start, end) = self.calendar_window(calendar, now);
        if state.window < start {
            *state = FixedWindowState {
                window: start,
                count: 0,
            };
        }
        if state.window == start {
            end - now
        } else {
            self.calendar_window(calendar, state.window).1 - now
        }
    }

    /// The most admitted per window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window, in microseconds (for a calendar window, its period's
    /// nominal length).
    pub fn window_micros(&self) -> u64 {
        self.window
    }

    /// Decides a request of `cost` (≤ limit) at `now` (µs since the epoch),
    /// updating `state` when the request is admitted.
    pub fn decide(&self, state: &mut FixedWindowState, now: u64, cost: u64) -> Decision {
        self.decide_micros(state, now, cost).decision()
    }

    /// [`decide`](Self::decide), times in whole microseconds.
    #[inline]
    pub(crate) fn decide_micros(
        &self,
        state: &mut FixedWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let until_end = match self.calendar {
            None => {
                let current = self.per_window.div(now);
                // A stored window ahead of `now` (a late request) stays
                // current: time never moves backwards.
                if state.window < current {
                    *state = FixedWindowState {
                        window: current,
                        count: 0,
                    };
                }
                (state.window + 1) * self.window - now
            }
            Some(calendar) => self.roll_calendar(calendar, state, now),
        };
        let allowed = state.count + cost <= self.limit;
        if allowed {
            state.count += cost;
        }
        Verdict {
            allowed,
            limit: self.limit,
            // A charge may have left the count past the limit.
            remaining: self.limit.saturating_sub(state.count),
            reset_after: if state.count == 0 { 0 } else { until_end },
            retry_after: if allowed { 0 } else { until_end },
            delay: 0,
        }
    }

    /// The window as of `now` (a stored window ahead of `now` stays
    /// current, as in [`decide`](Self::decide)), and the µs to its end.
    #[inline]
    fn roll(&self, state: &mut FixedWindowState, now: u64) -> u64 {
        if let Some(calendar) = self.calendar {
            return self.roll_calendar(calendar, state, now);
        }
        let current = self.per_window.div(now);
        if state.window < current {
            *state = FixedWindowState {
                window: current,
                count: 0,
            };
        }
        (state.window + 1) * self.window - now
    }

    /// Records `cost` (≤ 2^52) already used: counted whatever is left, so
    /// the window may go past its limit (by at most [`MAX_OVERDRAFT`], where
    /// the count saturates). `allowed` says whether it fitted.
    pub fn charge(&self, state: &mut FixedWindowState, now: u64, cost: u64) -> Decision {
        self.charge_micros(state, now, cost).decision()
    }

    /// [`charge`](Self::charge), times in whole microseconds.
    #[inline]
    pub(crate) fn charge_micros(
        &self,
        state: &mut FixedWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let until_end = self.roll(state, now);
        let allowed = state.count + cost <= self.limit;
        state.count = (state.count + cost).min(self.limit + MAX_OVERDRAFT);
        self.after_usage(state.count, until_end, allowed)
    }

    /// Gives `cost` back to the current window, down to an empty one.
    pub fn refund(&self, state: &mut FixedWindowState, now: u64, cost: u64) -> Decision {
        self.refund_micros(state, now, cost).decision()
    }

    /// [`refund`](Self::refund), times in whole microseconds.
    #[inline]
    pub(crate) fn refund_micros(
        &self,
        state: &mut FixedWindowState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let until_end = self.roll(state, now);
        state.count -= cost.min(state.count);
        self.after_usage(state.count, until_end, true)
    }

    /// The verdict of a charge or refund that left `count`: `retry_after`
    /// is when a request of cost 1 would pass.
    #[inline]
    fn after_usage(&self, count: u64, until_end: u64, allowed: bool) -> Verdict {
        Verdict {
            allowed,
            limit: self.limit,
            remaining: self.limit.saturating_sub(count),
            reset_after: if count == 0 { 0 } else { until_end },
            retry_after: if count < self.limit { 0 } else { until_end },
            delay: 0,
        }
    }
}

impl Rule for FixedWindow {
    type State = FixedWindowState;
    const NAME: &'static str = "fixed_window";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.limit, "limit")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.window
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut FixedWindowState, now: u64, cost: u64, _: u64) -> Verdict {
        self.decide_micros(state, now, cost)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut FixedWindowState, now: u64, op: Move, cost: u64) -> Verdict {
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
            length: 0,
            limit: self.limit,
        }
    }

    not_held!(FixedWindowState);

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        self.calendar.is_none().then_some((self.limit, self.window))
    }

    /// A calendar window's length is its period, which an override does
    /// not change.
    fn takes(&self) -> &'static [&'static str] {
        match self.calendar {
            Some(_) => &["limit"],
            None => &["limit", "window"],
        }
    }

    fn with_limits(&self, limits: &Limits) -> Result<FixedWindow> {
        let (limit, window) = limits.limit_window(self.limit, self.window);
        match self.calendar {
            Some(c) => FixedWindow::in_calendar(limit, c.period(), c.zone()),
            None => FixedWindow::new(limit, window),
        }
    }

    /// (A calendar window's share is a window of its nominal length.)
    fn share(&self, n: u64) -> Result<FixedWindow> {
        FixedWindow::new(part(self.limit, n), micros(self.window))
    }
}
