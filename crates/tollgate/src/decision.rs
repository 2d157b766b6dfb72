//! What a store answers.

use std::time::Duration;

use crate::Policy;

/// Where a decision came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Source {
    /// The store of record (memory, or Redis when it answers).
    #[default]
    Store,
    /// The local fallback limiter, because the store failed.
    Fallback,
    /// A local cache of an earlier denial by the store.
    Cache,
    /// A lease: capacity this instance took from the store in a batch,
    /// or a denial while a flooded key waits for its next batch (see
    /// [`LeasingStore`](crate::store::leasing::LeasingStore)).
    Lease,
}

impl Source {
    /// `store`, `fallback`, `cache` or `lease`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Store => "store",
            Source::Fallback => "fallback",
            Source::Cache => "cache",
            Source::Lease => "lease",
        }
    }
}

/// The answer to "may this request pass?".
///
/// Times are rounded up to the microsecond, so waiting `retry_after` is
/// always enough.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Decision {
    /// Whether the request may proceed (after [`delay`](Decision::delay)).
    pub allowed: bool,
    /// The policy's `limit`, `burst` or `capacity`.
    pub limit: u64,
    /// What is left after this request (never negative).
    pub remaining: u64,
    /// Time until the state is back to empty (or full) if no more requests come.
    pub reset_after: Duration,
    /// When denied: the earliest time a request of the same cost would be
    /// allowed if no other request came. Zero when allowed.
    pub retry_after: Duration,
    /// How long the caller must wait before proceeding: the backlog of a
    /// leaky bucket, or the wait of a reservation. Zero otherwise.
    pub delay: Duration,
    /// What [`check_at_most`](crate::Store::check_at_most) granted of its
    /// `max_cost`, and consumed (possibly 0). 0 for every other operation.
    pub granted: u64,
    /// Where the decision came from.
    pub source: Source,
    /// Allowed only because the policy is in shadow mode: the store
    /// decided a denial (the other fields are that denial's, `remaining`
    /// and `retry_after` included) and the request passes anyway.
    pub shadow: bool,
}

impl Decision {
    /// A decision from its parts, in microseconds.
    #[inline]
    pub fn from_micros(
        allowed: bool,
        limit: u64,
        remaining: u64,
        reset_after: u64,
        retry_after: u64,
        delay: u64,
    ) -> Decision {
        Decision {
            allowed,
            limit,
            remaining,
            reset_after: Duration::from_micros(reset_after),
            retry_after: Duration::from_micros(retry_after),
            delay: Duration::from_micros(delay),
            granted: 0,
            source: Source::Store,
            shadow: false,
        }
    }

    /// The same decision, with `granted` units granted (see
    /// [`granted`](Decision::granted)).
    pub fn with_granted(mut self, granted: u64) -> Decision {
        self.granted = granted;
        self
    }

    /// The decision as a policy in shadow mode answers it: a denial
    /// becomes an admission marked [`shadow`](Decision::shadow), with the
    /// denial's other fields; anything else is unchanged (so applying it
    /// twice changes nothing).
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{Decision, Policy};
    ///
    /// let policy = Policy::fixed_window("new-limit", 10, Duration::from_secs(60))?.shadow();
    /// let denied = Decision::from_micros(false, 10, 0, 60_000_000, 5_000_000, 0);
    /// let answered = denied.shadowed(&policy);
    /// assert!(answered.allowed && answered.shadow);
    /// assert_eq!(answered.retry_after, Duration::from_secs(5));
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    #[inline]
    #[must_use]
    pub fn shadowed(mut self, policy: &Policy) -> Decision {
        if policy.is_shadow() && !self.allowed {
            self.allowed = true;
            self.shadow = true;
        }
        self
    }

    /// The same decision, marked as coming from `source`.
    pub fn with_source(mut self, source: Source) -> Decision {
        self.source = source;
        self
    }
}

/// A decision as the algorithms make it, times in whole microseconds: the
/// memory store takes a key's expiry from `reset_after` as it is and makes
/// the [`Decision`] (three `Duration`s) once, as a call returns, instead of
/// moving the larger value through every frame and converting back.
///
/// The fields are in a fixed order in which no two that a `Decision` holds
/// side by side (`limit` and `remaining`) are neighbours: a verdict just
/// returned through memory is then read field by field, each load from the
/// one store that wrote it, not two at once with a 16-byte load that must
/// wait for both stores to settle (a store-forwarding stall).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct Verdict {
    pub(crate) limit: u64,
    pub(crate) reset_after: u64,
    pub(crate) remaining: u64,
    pub(crate) retry_after: u64,
    pub(crate) delay: u64,
    pub(crate) allowed: bool,
}

impl Verdict {
    /// The decision, from the store of record.
    #[inline]
    pub(crate) fn decision(self) -> Decision {
        Decision::from_micros(
            self.allowed,
            self.limit,
            self.remaining,
            self.reset_after,
            self.retry_after,
            self.delay,
        )
    }
}
