//! Sliding log: every admitted request recorded with its time and cost.

use std::collections::VecDeque;
use std::time::Duration;

use super::limits::Limits;
use super::params::Rate;
use super::params::{MAX_LOG_ENTRIES, MAX_OVERDRAFT, period, positive};
use super::rule::{Lease, Rule, micros, not_held, part};
use super::tat::Move;
use crate::decision::Verdict;
use crate::{Decision, Result};

/// At most `limit` in every interval of one `window`: an entry recorded at
/// `s` counts at `t` iff `t − s < window`.
///
/// It keeps one entry per admitted request (costs at the same instant are
/// merged), so `limit` is capped at [`MAX_LOG_ENTRIES`];
/// use [`SlidingWindow`](super::SlidingWindow) for large limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window: u64,
}

/// The log of admitted requests still inside the window, oldest first.
///
/// Each entry is `(time, total)`, where `total` is the cost admitted up to
/// and including it since the log began (wrapping), and the log starts with
/// one more entry: the last that aged out (`(0, 0)` at first). So the cost
/// that counts is the newest total minus that first entry's, one
/// subtraction instead of a sum over the log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingLogState {
    log: VecDeque<(u64, u64)>,
}

impl SlidingLogState {
    /// The admitted requests still in the log, oldest first, as `(time,
    /// cost)`.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.log
            .iter()
            .zip(self.log.iter().skip(1))
            .map(|(&(_, before), &(s, total))| (s, total.wrapping_sub(before)))
    }

    /// The newest entry's time, if any entry is left.
    fn newest(&self) -> Option<u64> {
        match self.log.back() {
            Some(&(s, _)) if self.log.len() > 1 => Some(s),
            _ => None,
        }
    }
}

impl SlidingLog {
    /// Validates `limit` (1..=10,000) and `window`.
    pub fn new(limit: u64, window: Duration) -> Result<SlidingLog> {
        Ok(SlidingLog {
            limit: positive("limit", limit, MAX_LOG_ENTRIES)?,
            window: period("window", window)?,
        })
    }

    /// The most admitted in any window.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// The window, in microseconds.
    pub fn window_micros(&self) -> u64 {
        self.window
    }

    /// Decides a request of `cost` (≤ limit) at `now`, updating `state`
    /// (entries that aged out are dropped whatever the answer).
    pub fn decide(&self, state: &mut SlidingLogState, now: u64, cost: u64) -> Decision {
        self.decide_micros(state, now, cost).decision()
    }

    /// [`decide`](Self::decide), times in whole microseconds.
    #[inline]
    pub(crate) fn decide_micros(
        &self,
        state: &mut SlidingLogState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let w = self.window;
        // A late request is taken at the newest entry's time: the log stays
        // sorted and time never moves backwards.
        let at = state.newest().map_or(now, |s| s.max(now));
        let log = &mut state.log;
        // Entries that aged out: each in turn becomes the first, the base.
        while log.get(1).is_some_and(|&(s, _)| s + w <= at) {
            log.pop_front();
        }
        let (base, total) = match (log.front(), log.back()) {
            (Some(&(_, base)), Some(&(_, total))) => (base, total),
            _ => (0, 0),
        };
        let used = total.wrapping_sub(base);
        let allowed = used + cost <= self.limit;
        let retry_at = if allowed {
            now
        } else {
            // The oldest entries age out first; find the first moment enough
            // of them are gone (what is left after an entry goes is the
            // newest total minus its own).
            log.iter()
                .skip(1)
                .find(|&&(_, t)| total.wrapping_sub(t) + cost <= self.limit)
                .map_or(at, |&(s, _)| s + w)
        };
        if allowed && cost > 0 {
            match log.back_mut() {
                // The newest entry (not the base: something counts) is at
                // this instant: costs at one instant share an entry.
                Some((s, t)) if used > 0 && *s == at => *t = t.wrapping_add(cost),
                _ => {
                    if log.is_empty() {
                        log.push_back((0, 0));
                    }
                    log.push_back((at, total.wrapping_add(cost)));
                }
            }
        }
        let used_after = if allowed { used + cost } else { used };
        let reset_at = state.newest().map_or(now, |s| s + w);
        Verdict {
            allowed,
            limit: self.limit,
            // A charge may have left the log past the limit.
            remaining: self.limit.saturating_sub(used_after),
            reset_after: reset_at.saturating_sub(now),
            retry_after: retry_at.saturating_sub(now),
            delay: 0,
        }
    }

    /// The log as of `now` with aged entries dropped: the time requests
    /// are taken at and the cost that counts.
    #[inline]
    fn trim(&self, state: &mut SlidingLogState, now: u64) -> (u64, u64) {
        let at = state.newest().map_or(now, |s| s.max(now));
        let log = &mut state.log;
        while log.get(1).is_some_and(|&(s, _)| s + self.window <= at) {
            log.pop_front();
        }
        let used = match (log.front(), log.back()) {
            (Some(&(_, base)), Some(&(_, total))) => total.wrapping_sub(base),
            _ => 0,
        };
        (at, used)
    }

    /// Records `cost` (≤ 2^52) already used as an entry, whatever is left:
    /// the log may count past its limit (by at most [`MAX_OVERDRAFT`]). A
    /// log already holding `limit` entries adds the cost to its newest
    /// entry and moves that entry to now, so a log never holds more than
    /// `limit` entries and debt is never forgotten early.
    pub fn charge(&self, state: &mut SlidingLogState, now: u64, cost: u64) -> Decision {
        self.charge_micros(state, now, cost).decision()
    }

    /// [`charge`](Self::charge), times in whole microseconds.
    #[inline(always)]
    pub(crate) fn charge_micros(
        &self,
        state: &mut SlidingLogState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let (at, used) = self.trim(state, now);
        let allowed = used + cost <= self.limit;
        let add = cost.min(self.limit + MAX_OVERDRAFT - used);
        let log = &mut state.log;
        let entries = log.len().saturating_sub(1) as u64;
        if add > 0 {
            match log.back_mut() {
                Some((s, t)) if used > 0 && (*s == at || entries >= self.limit) => {
                    *s = at;
                    *t = t.wrapping_add(add);
                }
                _ => {
                    let total = log.back().map_or(0, |&(_, t)| t);
                    if log.is_empty() {
                        log.push_back((0, 0));
                    }
                    log.push_back((at, total.wrapping_add(add)));
                }
            }
        }
        self.after_usage(state, now, at, allowed)
    }

    /// Gives `cost` back, the newest entries first, down to an empty log.
    pub fn refund(&self, state: &mut SlidingLogState, now: u64, cost: u64) -> Decision {
        self.refund_micros(state, now, cost).decision()
    }

    /// [`refund`](Self::refund), times in whole microseconds.
    #[inline(always)]
    pub(crate) fn refund_micros(
        &self,
        state: &mut SlidingLogState,
        now: u64,
        cost: u64,
    ) -> Verdict {
        let (at, _) = self.trim(state, now);
        let log = &mut state.log;
        let mut left = cost;
        while left > 0 && log.len() > 1 {
            let before = log[log.len() - 2].1;
            let (_, total) = log.back_mut().expect("two entries");
            let entry = total.wrapping_sub(before);
            if entry <= left {
                left -= entry;
                log.pop_back();
            } else {
                *total = total.wrapping_sub(left);
                left = 0;
            }
        }
        if log.len() == 1 {
            log.clear();
        }
        self.after_usage(state, now, at, true)
    }

    /// The verdict on the log a charge or refund left: `retry_after` is
    /// when a request of cost 1 would pass.
    #[inline(always)]
    fn after_usage(&self, state: &SlidingLogState, now: u64, at: u64, allowed: bool) -> Verdict {
        let log = &state.log;
        let n = log.len();
        // The newest entry, read once: its time is the reset's and, deep
        // in debt, the retry's.
        let (base, (newest, total)) = match (log.front(), log.back()) {
            (Some(&(_, base)), Some(&back)) => (base, back),
            _ => (0, (0, 0)),
        };
        let used = total.wrapping_sub(base);
        let retry_at = if used < self.limit {
            now
        } else {
            // As in `decide_micros`: the first entry whose going leaves
            // room. Deep in debt (the entry before the newest does not),
            // the newest (which always does: nothing is left after it),
            // asked first as it is a charge's steady state; without debt
            // the oldest; else found by bisection (what is left after each
            // entry shrinks from the oldest to the newest, so at most one
            // of the first two holds, or both name the newest; and the
            // base, whose remainder is all that is used, never leaves
            // room).
            let fits = |&(_, t): &(u64, u64)| total.wrapping_sub(t) < self.limit;
            if n >= 2 && !fits(&log[n - 2]) {
                newest + self.window
            } else if let Some(first) = log.get(1).filter(|e| fits(e)) {
                first.0 + self.window
            } else {
                log.get(log.partition_point(|e| !fits(e)))
                    .map_or(at, |&(s, _)| s + self.window)
            }
        };
        let reset_at = if n > 1 { newest + self.window } else { now };
        Verdict {
            allowed,
            limit: self.limit,
            remaining: self.limit.saturating_sub(used),
            reset_after: reset_at.saturating_sub(now),
            retry_after: retry_at.saturating_sub(now),
            delay: 0,
        }
    }
}

impl Rule for SlidingLog {
    type State = SlidingLogState;
    const NAME: &'static str = "sliding_log";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.limit(), "limit")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.window_micros()
    }

    #[inline(always)]
    fn decide_at(&self, state: &mut SlidingLogState, now: u64, cost: u64, _: u64) -> Verdict {
        self.decide_micros(state, now, cost)
    }

    #[inline(always)]
    fn move_at(&self, state: &mut SlidingLogState, now: u64, op: Move, cost: u64) -> Verdict {
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
        Lease::Refused
    }

    not_held!(SlidingLogState);

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["limit", "window"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<SlidingLog> {
        let (limit, window) = limits.limit_window(self.limit(), self.window_micros());
        SlidingLog::new(limit, window)
    }

    fn share(&self, n: u64) -> Result<SlidingLog> {
        SlidingLog::new(part(self.limit(), n), micros(self.window_micros()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_lists_what_counts_with_each_cost() {
        let ms = 1000;
        let sl = SlidingLog::new(10, Duration::from_millis(100)).unwrap();
        let mut state = SlidingLogState::default();
        assert_eq!(state.entries().count(), 0);
        for (now, cost) in [(0, 2), (0, 1), (50 * ms, 3), (120 * ms, 4)] {
            assert!(sl.decide(&mut state, now, cost).allowed);
        }
        // The two at 0 were merged, then aged out at 100 ms.
        let entries: Vec<_> = state.entries().collect();
        assert_eq!(entries, [(50 * ms, 3), (120 * ms, 4)]);
        let d = sl.decide(&mut state, 130 * ms, 4);
        assert!(!d.allowed);
        assert_eq!(d.remaining, 3);
        assert_eq!(
            d.retry_after,
            Duration::from_millis(20),
            "when (50, 3) ages out"
        );
        assert_eq!(d.reset_after, Duration::from_millis(90));
        assert_eq!(
            sl.decide(&mut state, 300 * ms, 0).reset_after,
            Duration::ZERO
        );
        assert_eq!(state.entries().count(), 0);
        // A late request at the very time of the entry that aged out last:
        // a new entry, not a cost added to the base.
        let one = SlidingLog::new(1, Duration::from_millis(100)).unwrap();
        assert!(one.decide(&mut state, 300 * ms, 1).allowed);
        assert_eq!(one.decide(&mut state, 500 * ms, 0).remaining, 1);
        assert!(one.decide(&mut state, 300 * ms, 1).allowed);
        assert!(!one.decide(&mut state, 300 * ms, 1).allowed);
    }
}
