#![doc = include_str!("../docs/algorithms.md")]

// Over 400 lines on purpose: the two enums, the one list of algorithms
// and the dispatch it writes, read together.

mod calendar;
mod concurrency;
mod fixed_window;
mod gcra;
mod held;
mod leaky_bucket;
pub(crate) mod limits;
mod params;
mod rule;
mod sliding_log;
mod sliding_window;
mod tat;
mod token_bucket;

pub use calendar::{Calendar, Period};
pub use concurrency::{Concurrency, ConcurrencyState, LeaseId};
pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::{Gcra, GcraState};
pub use leaky_bucket::{LeakyBucket, LeakyBucketState};
pub use params::{
    MAX_DEBT, MAX_EXACT, MAX_LOG_ENTRIES, MAX_OVERDRAFT, MAX_PERIOD, MAX_USAGE_COST, MIN_PERIOD,
    Rate,
};
pub use sliding_log::{SlidingLog, SlidingLogState};
pub use sliding_window::{SlidingWindow, SlidingWindowState};
pub use token_bucket::{TokenBucket, TokenBucketState};

pub(crate) use params::MAX_SCALED;
pub(crate) use rule::{Lease, Rule};

use self::tat::Move;

use crate::Decision;
use crate::decision::Verdict;

#[doc = include_str!("../docs/usage.md")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Usage {
    /// Consumes the cost whatever is left: the key may go into debt.
    Charge,
    /// Gives the cost back, never past a fresh state.
    Refund,
    /// Consumes as much of the cost as is available now (possibly 0).
    AtMost,
    /// [`AtMost`](Usage::AtMost) for units that will be admitted at any
    /// time within the hold from now (a lease's batch): a token bucket's
    /// or GCRA's grant is recorded as if it arrived at `now + hold`, so
    /// that admissions spread over the hold never exceed the bucket's own
    /// bound (see [`Store::check_at_most_held`](crate::Store::check_at_most_held)).
    /// Only on token_bucket and gcra policies, for a hold no longer than
    /// the bucket takes to refill entirely (`burst · per / rate`).
    AtMostHeld(std::time::Duration),
}

impl Usage {
    /// `charge`, `refund` or `check_at_most`.
    pub fn as_str(self) -> &'static str {
        match self {
            Usage::Charge => "charge",
            Usage::Refund => "refund",
            Usage::AtMost | Usage::AtMostHeld(_) => "check_at_most",
        }
    }

    /// Whether it is a `check_at_most`, held or not.
    #[inline]
    pub fn is_at_most(self) -> bool {
        matches!(self, Usage::AtMost | Usage::AtMostHeld(_))
    }
}

/// An algorithm with its validated parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// See [`FixedWindow`].
    FixedWindow(FixedWindow),
    /// See [`SlidingWindow`].
    SlidingWindow(SlidingWindow),
    /// See [`SlidingLog`].
    SlidingLog(SlidingLog),
    /// See [`TokenBucket`].
    TokenBucket(TokenBucket),
    /// See [`Gcra`].
    Gcra(Gcra),
    /// See [`LeakyBucket`].
    LeakyBucket(LeakyBucket),
    /// See [`Concurrency`].
    Concurrency(Concurrency),
}

/// The state of one key under any algorithm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// See [`FixedWindowState`].
    FixedWindow(FixedWindowState),
    /// See [`SlidingWindowState`].
    SlidingWindow(SlidingWindowState),
    /// See [`SlidingLogState`].
    SlidingLog(SlidingLogState),
    /// See [`TokenBucketState`].
    TokenBucket(TokenBucketState),
    /// See [`GcraState`].
    Gcra(GcraState),
    /// See [`LeakyBucketState`].
    LeakyBucket(LeakyBucketState),
    /// See [`ConcurrencyState`].
    Concurrency(ConcurrencyState),
}

/// The one list of algorithms: each variant of [`Algorithm`] with its
/// parameters' type and of [`State`] with its state's. Every question the
/// crate asks an algorithm goes through the dispatch this list writes
/// (`each_algorithm!`, `each_state!`) to its [`Rule`] implementation; the
/// list, the two enums above and the `From` impls below are what a new
/// algorithm adds here.
macro_rules! with_algorithms {
    ($then:ident! { $($args:tt)* }) => {
        $crate::algorithm::$then! {
            $($args)*;
            FixedWindow(FixedWindow, FixedWindowState),
            SlidingWindow(SlidingWindow, SlidingWindowState),
            SlidingLog(SlidingLog, SlidingLogState),
            TokenBucket(TokenBucket, TokenBucketState),
            Gcra(Gcra, GcraState),
            LeakyBucket(LeakyBucket, LeakyBucketState),
            Concurrency(Concurrency, ConcurrencyState)
        }
    };
}
pub(crate) use with_algorithms;

/// `match` on an algorithm, each arm `$body` with `$a` its parameters (the
/// arms of [`each_algorithm!`]).
macro_rules! match_algorithm {
    ($algorithm:expr, $a:ident => $body:expr; $($v:ident($p:ty, $s:ty)),*) => {
        match $algorithm {
            $($crate::algorithm::Algorithm::$v($a) => $body,)*
        }
    };
}
pub(crate) use match_algorithm;

/// `$body` for the algorithm's parameters, named `$a`: the one dispatch
/// from [`Algorithm`] to its [`Rule`] (static: each arm calls its type).
macro_rules! each_algorithm {
    ($algorithm:expr, $a:ident => $body:expr) => {
        $crate::algorithm::with_algorithms!(match_algorithm! { $algorithm, $a => $body })
    };
}
pub(crate) use each_algorithm;

/// `match` on an algorithm and a state (the arms of [`each_state!`]).
macro_rules! match_state {
    (
        $algorithm:expr, $state:expr, ($a:ident, $st:ident) => $body:expr, $other:ident => $mismatch:expr;
        $($v:ident($p:ty, $s:ty)),*
    ) => {
        match ($algorithm, $state) {
            $(($crate::algorithm::Algorithm::$v($a), $crate::algorithm::State::$v($st)) => $body,)*
            ($($crate::algorithm::Algorithm::$v(_))|*, $other) => $mismatch,
        }
    };
}
pub(crate) use match_state;

/// `$body` for the algorithm's parameters `$a` and its state `$st`, or
/// `$mismatch` with `$other` the state when it is another algorithm's.
macro_rules! each_state {
    ($algorithm:expr, $state:expr, ($a:ident, $st:ident) => $body:expr, $other:ident => $mismatch:expr) => {
        $crate::algorithm::with_algorithms!(match_state! {
            $algorithm, $state, ($a, $st) => $body, $other => $mismatch
        })
    };
}
pub(crate) use each_state;

/// Each algorithm's parameters into [`Algorithm`], its state into
/// [`State`].
macro_rules! froms {
    (; $($v:ident($p:ty, $s:ty)),*) => {
        $(
            impl From<$p> for Algorithm {
                #[inline]
                fn from(a: $p) -> Algorithm {
                    Algorithm::$v(a)
                }
            }

            impl From<$s> for State {
                #[inline]
                fn from(s: $s) -> State {
                    State::$v(s)
                }
            }
        )*
    };
}
pub(crate) use froms;

with_algorithms!(froms! {});

impl Algorithm {
    /// The name used in policy files: `fixed_window`, `sliding_window`,
    /// `sliding_log`, `token_bucket`, `gcra`, `leaky_bucket`, `concurrency`.
    pub fn name(&self) -> &'static str {
        fn name<R: Rule>(_: &R) -> &'static str {
            R::NAME
        }
        each_algorithm!(self, a => name(a))
    }

    /// The largest cost a request can ever have: `limit`, `burst` or
    /// `capacity`, with its name.
    #[inline]
    pub fn limit(&self) -> (u64, &'static str) {
        each_algorithm!(self, a => a.largest_cost())
    }

    /// A fresh state for this algorithm.
    pub fn fresh_state(&self) -> State {
        fn fresh<R: Rule>(_: &R) -> State
        where
            R::State: Into<State>,
        {
            R::State::default().into()
        }
        each_algorithm!(self, a => fresh(a))
    }

    /// Whether `state` belongs to this algorithm (a policy renamed onto
    /// another algorithm finds old state of the wrong kind, which counts as
    /// fresh).
    #[inline]
    pub fn owns(&self, state: &State) -> bool {
        std::mem::discriminant(&self.fresh_state()) == std::mem::discriminant(state)
    }

    /// Decides a request of `cost` at `now` (cost already validated),
    /// updating `state`. A state of another algorithm is replaced by a fresh
    /// one first. `max_wait` is the reservation window (0 for a plain check);
    /// only token buckets and GCRA honour it. Concurrency policies peek.
    #[inline]
    pub fn decide(&self, state: &mut State, now: u64, cost: u64, max_wait: u64) -> Decision {
        self.decide_micros(state, now, cost, max_wait).decision()
    }

    /// [`decide`](Self::decide), times in whole microseconds.
    #[inline]
    pub(crate) fn decide_micros(
        &self,
        state: &mut State,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> Verdict {
        each_state!(self, state, (a, s) => a.decide_at(s, now, cost, max_wait), other => {
            // A state of another algorithm (a policy renamed onto another
            // one): made fresh, which the arms above then match.
            *other = self.fresh_state();
            self.decide_micros(other, now, cost, max_wait)
        })
    }

    /// Applies a usage operation of `cost` at `now` (cost at most
    /// [`MAX_USAGE_COST`]; a [`Usage::AtMostHeld`] only on a token bucket
    /// or GCRA, its hold at most their refill from empty, as stores
    /// validate), updating `state`; the decision's `granted` is what
    /// [`Usage::AtMost`] granted. A state of another algorithm is
    /// replaced by a fresh one first. Concurrency policies peek (stores
    /// refuse usage on them before coming here).
    pub fn usage(&self, state: &mut State, now: u64, op: Usage, cost: u64) -> Decision {
        let (verdict, granted) = self.usage_micros(state, now, op, cost);
        verdict.decision().with_granted(granted)
    }

    /// [`usage`](Self::usage), times in whole microseconds, with what was
    /// granted. Each operation goes to one function shaped as
    /// [`decide_micros`](Self::decide_micros) (a charge or refund to
    /// [`move_micros`](Self::move_micros), `check_at_most` to a check), so
    /// that it costs what a check does: one match on the state, the
    /// verdict written where the caller wants it.
    #[inline(always)]
    pub(crate) fn usage_micros(
        &self,
        state: &mut State,
        now: u64,
        op: Usage,
        cost: u64,
    ) -> (Verdict, u64) {
        let charge = match op {
            Usage::Charge => Move::Charge,
            Usage::Refund => Move::Refund,
            Usage::AtMost => return self.at_most_micros(state, now, cost),
            Usage::AtMostHeld(hold) => return self.held_at_most_micros(state, now, hold, cost),
        };
        (self.move_micros(state, now, charge, cost), 0)
    }

    /// A charge or a refund of `cost` at `now`. A state of another
    /// algorithm is replaced by a fresh one first.
    #[inline(never)]
    fn move_micros(&self, state: &mut State, now: u64, op: Move, cost: u64) -> Verdict {
        each_state!(self, state, (a, s) => a.move_at(s, now, op, cost), other => {
            // A state of another algorithm: made fresh, as in
            // `decide_micros`.
            *other = self.fresh_state();
            self.move_micros(other, now, op, cost)
        })
    }

    /// A held `check_at_most` (see [`Usage::AtMostHeld`]): the bucket
    /// raised to the hold, then a `check_at_most`, the hold undone when
    /// nothing was granted.
    fn held_at_most_micros(
        &self,
        state: &mut State,
        now: u64,
        hold: std::time::Duration,
        cost: u64,
    ) -> (Verdict, u64) {
        if !self.owns(state) {
            *state = self.fresh_state();
        }
        let hold = u64::try_from(hold.as_micros()).unwrap_or(u64::MAX);
        let saved = self.hold_micros(state, now, hold);
        let (verdict, granted) = self.at_most_micros(state, now, cost);
        if granted == 0 {
            // Nothing was consumed: the hold is not recorded.
            self.unhold(state, saved);
        }
        (verdict, granted)
    }

    /// `check_at_most` of `cost` at `now` (a state of another algorithm
    /// is made fresh by the check).
    #[inline]
    fn at_most_micros(&self, state: &mut State, now: u64, cost: u64) -> (Verdict, u64) {
        // A check of all of it (no more than the limit, which is all
        // a check may ask), which is all there is to do when it fits
        // (the common case: one pass, as a check). Denied, it
        // consumed nothing and its `remaining` is what a peek leaves
        // (less than the cost): the grant is then a check of that, or,
        // when nothing is left, a check of 1, denied with its retry
        // (the first check's own when the cost was 1, or 0).
        let most = cost.min(self.limit().0);
        let mut out = (self.decide_micros(state, now, most, 0), most);
        if !out.0.allowed {
            let granted = most.min(out.0.remaining);
            out.1 = granted;
            if granted > 0 || cost > 1 {
                let ask = if granted == 0 { 1 } else { granted };
                out.0 = self.decide_micros(state, now, ask, 0);
            }
        }
        out
    }

    /// Raises a bucket's debt to at least `hold` µs of refill (the held
    /// `check_at_most`: its grant is recorded as arriving `hold` from now),
    /// returning the state's number to restore when nothing is granted.
    /// Validation let only token buckets and GCRA through, with a hold of
    /// at most their capacity.
    #[inline]
    fn hold_micros(&self, state: &mut State, now: u64, hold: u64) -> (u64, u64) {
        // A state of another algorithm, which a held check made fresh
        // before coming here, holds nothing.
        each_state!(self, state, (a, s) => a.hold_at(s, now, hold), _other => (0, 0))
    }

    /// Undoes [`hold_micros`](Self::hold_micros).
    #[inline]
    fn unhold(&self, state: &mut State, saved: (u64, u64)) {
        each_state!(self, state, (a, s) => a.unhold(s, saved), _other => {})
    }

    /// The time span the quota is counted over, µs (see
    /// [`Policy::time_span`](crate::Policy::time_span)).
    pub(crate) fn time_span_micros(&self) -> u64 {
        each_algorithm!(self, a => a.time_span_micros())
    }

    /// The rate a reservation borrows at, when the algorithm reserves
    /// (token buckets and GCRA).
    pub(crate) fn reservation_rate(&self) -> Option<Rate> {
        each_algorithm!(self, a => a.reservation_rate())
    }

    /// How a lease's batch of it is spent.
    #[inline]
    pub(crate) fn lease(&self) -> Lease {
        each_algorithm!(self, a => a.lease())
    }

    /// A fixed window of one length (not a calendar's): its limit and
    /// length, µs.
    #[inline]
    pub(crate) fn fixed_window(&self) -> Option<(u64, u64)> {
        each_algorithm!(self, a => a.fixed_window())
    }

    /// One of `n` instances' share of these parameters (see
    /// [`Rule::share`]).
    pub(crate) fn share(&self, n: u64) -> crate::Result<Algorithm> {
        each_algorithm!(self, a => a.share(n).map(Algorithm::from))
    }
}
