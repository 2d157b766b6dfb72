//! What every algorithm answers, in one trait: [`Rule`], implemented by
//! each algorithm's parameter type in its own file (`fixed_window.rs`,
//! `token_bucket.rs`, ...). [`Algorithm`](super::Algorithm) reaches them
//! through the one list of algorithms in `mod.rs` (`each_algorithm!`,
//! `each_state!`), so the rest of the crate asks the enum and never
//! matches on it. Every method is required: a new algorithm that leaves
//! one out does not compile.
//!
//! The dispatch is a `match` written once by those macros, each arm a
//! call on the concrete type: static, inlined where the callers were
//! before (the checks' and usage's hot path).

use std::time::Duration;

use super::limits::Limits;
use super::params::Rate;
use super::tat::Move;
use crate::Result;
use crate::decision::Verdict;

/// How a [`LeasingStore`](crate::store::leasing::LeasingStore)'s batch of
/// an algorithm's capacity is spent (see
/// [`Policy::with_lease`](crate::Policy::with_lease)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lease {
    /// Not at all: the policy refuses `lease`.
    Refused,
    /// Within the window it was taken in, which ends when the state
    /// resets: a fixed window's (`length` 0) or a sliding window's
    /// (`length` µs, regaining `limit` per length).
    Window { length: u64, limit: u64 },
    /// Within a hold, recorded as taken at the hold's end: a bucket
    /// refilling at `rate` up to `burst`, which a held `check_at_most`
    /// ([`Usage::AtMostHeld`](super::Usage::AtMostHeld)) and its exact
    /// refund take from (token buckets and GCRA).
    Held { rate: Rate, burst: u64 },
}

/// One algorithm's answers. `Self` is its parameters, `Self::State` the
/// state of one key.
pub(crate) trait Rule: Copy {
    /// Its state of one key; the default is a fresh key's.
    type State: Default;

    /// The name used in policy files (`fixed_window`, ...).
    const NAME: &'static str;

    /// The largest cost a request can ever have, with its parameter's
    /// name (`limit`, `burst`, `capacity`).
    fn largest_cost(&self) -> (u64, &'static str);

    /// The time span the quota is counted over, µs: a window's length, a
    /// bucket's `per`, a concurrency lease.
    fn time_span_micros(&self) -> u64;

    /// Decides a request of `cost` (validated) at `now`; `max_wait` is a
    /// reservation's window (0 for a check: only an algorithm whose
    /// [`reservation_rate`](Rule::reservation_rate) is `Some` reads it).
    fn decide_at(&self, state: &mut Self::State, now: u64, cost: u64, max_wait: u64) -> Verdict;

    /// A charge or a refund of `cost` at `now` (usage).
    fn move_at(&self, state: &mut Self::State, now: u64, op: Move, cost: u64) -> Verdict;

    /// The rate a reservation borrows at, when the algorithm reserves.
    fn reservation_rate(&self) -> Option<Rate>;

    /// How a lease's batch of it is spent.
    fn lease(&self) -> Lease;

    /// Raises a held bucket's debt to at least `hold` µs of refill,
    /// returning what [`unhold`](Rule::unhold) restores ((0, 0), holding
    /// nothing, unless [`lease`](Rule::lease) is [`Lease::Held`]:
    /// validation lets no other algorithm take a held check).
    fn hold_at(&self, state: &mut Self::State, now: u64, hold: u64) -> (u64, u64);

    /// Undoes [`hold_at`](Rule::hold_at).
    fn unhold(&self, state: &mut Self::State, saved: (u64, u64));

    /// The stamp of a held bucket's state, as the stores keep it (`None`
    /// unless [`lease`](Rule::lease) is [`Lease::Held`]).
    fn stamp(&self, state: &Self::State) -> Option<[u64; 2]>;

    /// Whether `state` is still the bucket `stamp` names, not full at
    /// `now` (see `held.rs`).
    fn is_stamped(&self, state: &Self::State, now: u64, stamp: [u64; 2]) -> bool;

    /// A fixed window of one length (not a calendar's): its limit and
    /// length, µs. A policy derived from it (a tier's, an override's)
    /// keeps naming its state by them, and the Redis store's server-clock
    /// window runs them.
    fn fixed_window(&self) -> Option<(u64, u64)>;

    /// The parameters an override or a tier may replace, by name.
    fn takes(&self) -> &'static [&'static str];

    /// These parameters with `limits`' in place of some (their fields
    /// already checked against [`takes`](Rule::takes)), validated as its
    /// constructor validates.
    fn with_limits(&self, limits: &Limits) -> Result<Self>;

    /// One of `n` instances' share: its sizes divided by `n` (rounded
    /// down, at least 1), its rate divided by stretching its period, or
    /// kept where that period would be out of bounds.
    fn share(&self, n: u64) -> Result<Self>;
}

/// Whether a bucket full again at `full_at` is the one `stamped` (times
/// in scaled units, `drip` per µs: below 2^64 · 2^13, u128), not full at
/// `now` (see [`Rule::is_stamped`] and `held.rs`).
pub(crate) fn same_bucket(drip: u128, full_at: u128, stamped: u128, now: u64) -> bool {
    full_at == stamped && stamped > u128::from(now) * drip
}

/// `limit` over `n`, rounded down, at least 1 (a share's size).
pub(crate) fn part(limit: u64, n: u64) -> u64 {
    (limit / n).max(1)
}

/// The held-take answers of an algorithm that holds nothing (its
/// [`lease`](Rule::lease) is not [`Lease::Held`], so validation lets no
/// held take or held refund reach it): nothing held, no stamp. Written
/// in its `impl Rule` as `not_held!(ItsState);`, an answer given rather
/// than a default left out.
macro_rules! not_held {
    ($state:ty) => {
        #[inline(always)]
        fn hold_at(&self, _: &mut $state, _: u64, _: u64) -> (u64, u64) {
            (0, 0)
        }

        #[inline(always)]
        fn unhold(&self, _: &mut $state, _: (u64, u64)) {}

        fn stamp(&self, _: &$state) -> Option<[u64; 2]> {
            None
        }

        fn is_stamped(&self, _: &$state, _: u64, _: [u64; 2]) -> bool {
            false
        }
    };
}
pub(crate) use not_held;

/// A bucket's share (see [`Rule::share`]): `new(rate, per, size)` with
/// its size divided by `n` and its period stretched `n` times, or only
/// its size divided when that period is out of bounds.
pub(crate) fn bucket_share<B>(
    rate: Rate,
    size: u64,
    n: u64,
    new: fn(u64, Duration, u64) -> Result<B>,
) -> Result<B> {
    let size = part(size, n);
    new(rate.rate, slower(rate.per, n), size).or_else(|_| new(rate.rate, micros(rate.per), size))
}

/// `us` µs as a duration.
pub(crate) fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// A period `per` µs stretched `n` times (a share's rate).
pub(crate) fn slower(per: u64, n: u64) -> Duration {
    micros(per.saturating_mul(n))
}
