//! Concurrency: at most `limit` requests in flight, each holding a lease.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use super::limits::Limits;
use super::params::Rate;
use super::params::{MAX_LOG_ENTRIES, period, positive};
use super::rule::{Lease, Rule, micros, not_held, part};
use super::tat::Move;
use crate::decision::Verdict;
use crate::{Decision, Result};

/// At most `limit` leases held at once; a lease not released within `lease`
/// expires by itself, so a crashed holder cannot leak capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Concurrency {
    limit: u64,
    lease: u64,
}

/// The identity of one lease: 128 random bits, written as 32 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub u128);

impl LeaseId {
    /// A fresh random id.
    pub fn random() -> LeaseId {
        LeaseId(fastrand::u128(..))
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for LeaseId {
    type Err = crate::Error;

    fn from_str(s: &str) -> Result<LeaseId> {
        if s.len() != 32 {
            return Err(crate::Error::argument(
                "lease",
                format!("must be 32 hex digits, got {s:?}"),
            ));
        }
        u128::from_str_radix(s, 16).map(LeaseId).map_err(|_| {
            crate::Error::argument("lease", format!("must be 32 hex digits, got {s:?}"))
        })
    }
}

/// The leases held: `(id, expires_at)`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConcurrencyState {
    /// Leases not yet released, in no particular order.
    pub leases: Vec<(LeaseId, u64)>,
}

impl Concurrency {
    /// Validates `limit` (1..=10,000) and `lease` (1 ms..=365 days).
    pub fn new(limit: u64, lease: Duration) -> Result<Concurrency> {
        Ok(Concurrency {
            limit: positive("limit", limit, MAX_LOG_ENTRIES)?,
            lease: period("lease", lease)?,
        })
    }

    /// The most leases held at once.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How long a lease lives unless released, in microseconds.
    pub fn lease_micros(&self) -> u64 {
        self.lease
    }

    /// Takes a lease named `id` at `now` if one is free.
    pub fn acquire(&self, state: &mut ConcurrencyState, now: u64, id: LeaseId) -> Decision {
        self.acquire_micros(state, now, id).decision()
    }

    /// [`acquire`](Self::acquire), times in whole microseconds.
    pub(crate) fn acquire_micros(
        &self,
        state: &mut ConcurrencyState,
        now: u64,
        id: LeaseId,
    ) -> Verdict {
        state.leases.retain(|&(_, expires)| expires > now);
        let allowed = (state.leases.len() as u64) < self.limit;
        if allowed {
            state.leases.push((id, now + self.lease));
        }
        let expiries = state.leases.iter().map(|&(_, e)| e);
        let reset_at = expiries.clone().max().unwrap_or(now);
        let retry_at = if allowed {
            now
        } else {
            expiries.min().unwrap_or(now)
        };
        Verdict {
            allowed,
            limit: self.limit,
            remaining: self.limit.saturating_sub(state.leases.len() as u64),
            reset_after: reset_at - now,
            retry_after: retry_at - now,
            delay: 0,
        }
    }

    /// The holders at `now`, without taking a lease.
    pub fn peek(&self, state: &mut ConcurrencyState, now: u64) -> Decision {
        self.peek_micros(state, now).decision()
    }

    /// [`peek`](Self::peek), times in whole microseconds.
    pub(crate) fn peek_micros(&self, state: &mut ConcurrencyState, now: u64) -> Verdict {
        state.leases.retain(|&(_, expires)| expires > now);
        let expiries = state.leases.iter().map(|&(_, e)| e);
        let reset_at = expiries.clone().max().unwrap_or(now);
        let allowed = (state.leases.len() as u64) < self.limit;
        let retry_at = if allowed {
            now
        } else {
            expiries.min().unwrap_or(now)
        };
        Verdict {
            allowed,
            limit: self.limit,
            remaining: self.limit.saturating_sub(state.leases.len() as u64),
            reset_after: reset_at - now,
            retry_after: retry_at - now,
            delay: 0,
        }
    }

    /// Gives back lease `id`; returns whether it was held. Idempotent.
    pub fn release(&self, state: &mut ConcurrencyState, now: u64, id: LeaseId) -> bool {
        let held = state
            .leases
            .iter()
            .any(|&(held, expires)| held == id && expires > now);
        state
            .leases
            .retain(|&(held, expires)| held != id && expires > now);
        held
    }
}

impl Rule for Concurrency {
    type State = ConcurrencyState;
    const NAME: &'static str = "concurrency";

    #[inline]
    fn largest_cost(&self) -> (u64, &'static str) {
        (self.limit(), "limit")
    }

    #[inline]
    fn time_span_micros(&self) -> u64 {
        self.lease_micros()
    }

    /// A concurrency policy peeks (its leases are the store's `acquire`
    /// and `release`).
    #[inline(always)]
    fn decide_at(&self, state: &mut ConcurrencyState, now: u64, _: u64, _: u64) -> Verdict {
        self.peek_micros(state, now)
    }

    /// Peeks: stores refuse usage on a concurrency policy before coming
    /// here.
    #[inline(always)]
    fn move_at(&self, state: &mut ConcurrencyState, now: u64, _: Move, _: u64) -> Verdict {
        self.peek_micros(state, now)
    }

    #[inline]
    fn reservation_rate(&self) -> Option<Rate> {
        None
    }

    #[inline]
    fn lease(&self) -> Lease {
        Lease::Refused
    }

    not_held!(ConcurrencyState);

    #[inline]
    fn fixed_window(&self) -> Option<(u64, u64)> {
        None
    }

    fn takes(&self) -> &'static [&'static str] {
        &["limit", "lease"]
    }

    fn with_limits(&self, limits: &Limits) -> Result<Concurrency> {
        Concurrency::new(
            limits.limit.unwrap_or(self.limit()),
            limits.lease.unwrap_or(micros(self.lease_micros())),
        )
    }

    fn share(&self, n: u64) -> Result<Concurrency> {
        Concurrency::new(part(self.limit(), n), micros(self.lease_micros()))
    }
}
