//! Sliding log: every admitted request recorded with its time and cost.

use std::collections::VecDeque;
use std::time::Duration;

use super::params::{MAX_LOG_ENTRIES, period, positive};
use crate::decision::Verdict;
use crate::{Decision, Result};

/// At most `limit` in every interval of one `window`: an entry recorded at
/// `s` counts at `t` iff `t − s < window`.
///
/// It keeps one entry per admitted request (costs at the same instant are
/// merged), so `limit` is capped at [`MAX_LOG_ENTRIES`](super::MAX_LOG_ENTRIES);
/// use [`SlidingWindow`](super::SlidingWindow) for large limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SlidingLog {
    limit: u64,
    window: u64,
}

/// The log: `(time, cost)` entries, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingLogState {
    /// Admitted requests still inside the window, oldest first.
    pub entries: VecDeque<(u64, u64)>,
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
        let entries = &mut state.entries;
        // A late request is taken at the newest entry's time: the log stays
        // sorted and time never moves backwards.
        let at = entries.back().map_or(now, |&(s, _)| s.max(now));
        while entries.front().is_some_and(|&(s, _)| s + w <= at) {
            entries.pop_front();
        }
        let used: u64 = entries.iter().map(|&(_, c)| c).sum();
        let allowed = used + cost <= self.limit;
        let retry_at = if allowed {
            now
        } else {
            // The oldest entries age out first; find the first moment enough
            // of them are gone.
            let mut left = used;
            entries
                .iter()
                .find(|&&(_, c)| {
                    left -= c;
                    left + cost <= self.limit
                })
                .map_or(at, |&(s, _)| s + w)
        };
        if allowed && cost > 0 {
            match entries.back_mut() {
                Some((s, c)) if *s == at => *c += cost,
                _ => entries.push_back((at, cost)),
            }
        }
        let used_after = if allowed { used + cost } else { used };
        let reset_at = entries.back().map_or(now, |&(s, _)| s + w);
        Verdict {
            allowed,
            limit: self.limit,
            remaining: self.limit - used_after,
            reset_after: reset_at.saturating_sub(now),
            retry_after: retry_at.saturating_sub(now),
            delay: 0,
        }
    }
}
