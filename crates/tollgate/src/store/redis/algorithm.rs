//! Each algorithm as the Redis store runs it in its own script, in one
//! table: [`side`] gives its row (the tag that names its state in keys and
//! batches, its check, usage and held-refund scripts, whether they take
//! the cost as text, where its usage script takes a held take's hold,
//! whether a refund across cluster slots is exact), [`params`] the
//! numbers its scripts take. Adding an algorithm adds its row and its
//! numbers here, and its scripts: `lua/` (with `batch.lua`'s branch for
//! its tag), their texts in `texts.rs` and their line in `scripts.rs`. The
//! server-clock forms (`server_window.rs`, `bucket_expiry.rs`) take only
//! the algorithms they name; their matches, and those of `regions/`, are
//! exhaustive, so the compiler lists them.

use super::scripts::{Script, Scripts};
use crate::algorithm::{Algorithm, Rate, Usage};

/// An algorithm's Redis side in its own script form: one row of the
/// table [`side`].
#[derive(Clone, Copy)]
pub(super) struct Side {
    /// The short name of its state in keys and in batch arguments.
    pub(super) tag: &'static str,
    /// Its check script (`lua/<algorithm>.lua`).
    pub(super) check: fn(&Scripts) -> &Script,
    /// Its usage script: charge, refund and check_at_most
    /// (`lua/*_usage.lua`, with the contract of `lua/usage_prologue.lua`).
    pub(super) usage: fn(&Scripts) -> &Script,
    /// Whether its scripts take the cost (a usage script, the change of
    /// count) as text too, as their last argument: the fixed window's, so
    /// that its `HINCRBY` need not print the number.
    pub(super) cost_text: bool,
    /// What its usage script reads after [`params`]' numbers.
    pub(super) usage_tail: UsageTail,
    /// Its held take's exact refund (`lua/*_refund_held.lua`; token
    /// buckets and GCRA only, the others refused by validation).
    pub(super) refund_held: fn(&Scripts) -> &Script,
    /// Whether a refund gives back exactly what a consume took, in an
    /// atomic batch across cluster slots (`cross_slot.rs`).
    pub(super) refund: Refund,
}

/// When a refund gives back exactly what an earlier consume took.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Refund {
    /// Whenever it runs: buckets and leases, whose refund gives back what
    /// it names.
    Exact,
    /// While the window the consume counted in lasts.
    InItsWindow,
    /// Never for certain: a sliding log's entries are the consume's own.
    Inexact,
}

/// What a usage script reads after the algorithm's numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum UsageTail {
    /// Nothing.
    None,
    /// A held take's hold, in place of the reservation's wait it ignores
    /// (`token_bucket_usage.lua`).
    HoldForWait,
    /// A held take's hold (`tat_usage.lua`, after the wait it reads as
    /// its `shaper`).
    Hold,
    /// `shaper` 1, then the hold (`tat_usage.lua` as a leaky bucket).
    ShaperHold,
}

/// The table: each algorithm's row (a calendar window's scripts are its
/// own). The held refund's script is GCRA's unless the row says
/// otherwise.
pub(super) fn side(algorithm: &Algorithm) -> Side {
    let row = |tag, check, usage, usage_tail, refund| Side {
        tag,
        check,
        usage,
        cost_text: false,
        usage_tail,
        refund_held: |s| &s.tat_refund_held,
        refund,
    };
    match algorithm {
        Algorithm::FixedWindow(a) if a.calendar().is_some() => Side {
            cost_text: true,
            ..row(
                "fw",
                |s| &s.fixed_window_calendar,
                |s| &s.fixed_window_calendar_usage,
                UsageTail::None,
                Refund::InItsWindow,
            )
        },
        Algorithm::FixedWindow(_) => Side {
            cost_text: true,
            ..row(
                "fw",
                |s| &s.fixed_window,
                |s| &s.fixed_window_usage,
                UsageTail::None,
                Refund::InItsWindow,
            )
        },
        Algorithm::SlidingWindow(_) => row(
            "sw",
            |s| &s.sliding_window,
            |s| &s.sliding_window_usage,
            UsageTail::None,
            Refund::InItsWindow,
        ),
        Algorithm::SlidingLog(_) => row(
            "sl",
            |s| &s.sliding_log,
            |s| &s.sliding_log_usage,
            UsageTail::None,
            Refund::Inexact,
        ),
        Algorithm::TokenBucket(_) => Side {
            refund_held: |s| &s.token_bucket_refund_held,
            ..row(
                "tb",
                |s| &s.token_bucket,
                |s| &s.token_bucket_usage,
                UsageTail::HoldForWait,
                Refund::Exact,
            )
        },
        Algorithm::Gcra(_) => row(
            "gcra",
            |s| &s.gcra,
            |s| &s.tat_usage,
            UsageTail::Hold,
            Refund::Exact,
        ),
        Algorithm::LeakyBucket(_) => row(
            "lb",
            |s| &s.leaky_bucket,
            |s| &s.tat_usage,
            UsageTail::ShaperHold,
            Refund::Exact,
        ),
        // Usage is refused before coming here: a concurrency policy has
        // none.
        Algorithm::Concurrency(_) => row(
            "cc",
            |s| &s.concurrency,
            |s| &s.tat_usage,
            UsageTail::None,
            Refund::Exact,
        ),
    }
}

/// A held `check_at_most`'s hold in the bucket's scaled units (0 for any
/// other operation): `units_per_micro` per µs, exact.
pub(super) fn hold_units(algorithm: &Algorithm, op: Usage) -> f64 {
    let Usage::AtMostHeld(hold) = op else {
        return 0.0;
    };
    let rate = match algorithm {
        Algorithm::TokenBucket(a) => a.rate(),
        Algorithm::Gcra(a) => a.rate(),
        Algorithm::FixedWindow(_)
        | Algorithm::SlidingWindow(_)
        | Algorithm::SlidingLog(_)
        | Algorithm::LeakyBucket(_)
        | Algorithm::Concurrency(_) => return 0.0,
    };
    (hold.as_micros() as u64 * rate.units_per_micro) as f64
}

/// The algorithm's numbers as its script reads them (after the time and
/// the deadline). All are below 2^53 (the policy's validation sees to it),
/// so each is exact as a double. A calendar window's window is 0, and the
/// bounds of the window holding `near` (our best idea of the script's
/// now, µs, see [`RedisStore::calendar_time`]) and of the next follow.
///
/// [`RedisStore::calendar_time`]: super::RedisStore::calendar_time
pub(super) fn params(algorithm: &Algorithm, cost: u64, max_wait: u64, near: u64) -> Vec<f64> {
    let bucket = |r: Rate, tokens: u64| {
        vec![
            r.units_per_micro,
            r.units_per_token,
            tokens * r.units_per_token,
            cost,
        ]
    };
    let numbers = match algorithm {
        Algorithm::FixedWindow(a) => match a.calendar() {
            None => vec![a.limit(), a.window_micros(), cost],
            Some(calendar) => {
                let (s0, e0) = a.calendar_window(calendar, near);
                let (_, e1) = a.calendar_window(calendar, e0);
                vec![a.limit(), 0, cost, s0, e0, e1]
            }
        },
        Algorithm::SlidingWindow(a) => vec![a.limit(), a.window_micros(), cost],
        Algorithm::SlidingLog(a) => vec![a.limit(), a.window_micros(), cost],
        // Rate, capacity in scaled units, cost; a reservation's wait last
        // where the algorithm reserves.
        Algorithm::TokenBucket(a) => [bucket(a.rate(), a.burst()), vec![max_wait]].concat(),
        Algorithm::Gcra(a) => [bucket(a.rate(), a.burst()), vec![max_wait]].concat(),
        Algorithm::LeakyBucket(a) => bucket(a.rate(), a.capacity()),
        Algorithm::Concurrency(a) => vec![a.limit(), a.lease_micros()],
    };
    numbers.into_iter().map(|n| n as f64).collect()
}
