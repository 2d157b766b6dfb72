//! Each algorithm as the Redis store runs it, in one table: the trait
//! [`Redis`], whose implementation for an algorithm's parameters is its
//! row. [`Redis::side`] gives its scripts (the tag that names its state in
//! keys and batches, its check, usage and held-refund scripts, whether
//! they take the cost as text, where its usage script takes a held take's
//! hold, whether a refund across cluster slots is exact),
//! [`Redis::numbers`] the numbers they take, [`Redis::bucket_expiry`] and
//! [`Redis::backlog_state`] its bucket's server-clock form
//! (`bucket_expiry.rs`), [`Redis::global`] whether a region may share it
//! (`regions/`). (The fixed window's server-clock form,
//! `server_window.rs`, asks the pure side's `Rule::fixed_window`.) Every
//! method is required, so a new algorithm's row is complete or does not
//! compile. Adding an algorithm adds its row here, and its scripts: `lua/`
//! (with `batch.lua`'s branch for its tag), their texts in `texts.rs` and
//! their line in `scripts.rs`.
//!
//! Over 400 lines on purpose: the table, a row per algorithm read side by
//! side.

use super::scripts::{Script, Scripts};
use crate::algorithm::{
    Algorithm, Concurrency, FixedWindow, Gcra, GcraState, LeakyBucket, LeakyBucketState, Lease,
    Rate, Rule, SlidingLog, SlidingWindow, State, TokenBucket, TokenBucketState, Usage,
    each_algorithm,
};

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

/// An algorithm's row of the table: what the Redis store asks of it.
pub(super) trait Redis: Rule {
    /// Its scripts (a calendar window's are its own).
    fn side(&self) -> Side;

    /// Its numbers as its script reads them (after the time and the
    /// deadline), see [`params`].
    fn numbers(&self, cost: u64, max_wait: u64, near: u64) -> Vec<u64>;

    /// Its bucket's server-clock form, when it has one: its rate, its
    /// capacity in tokens and the form's key suffix (see
    /// `bucket_expiry.rs`).
    fn bucket_expiry(&self) -> Option<(Rate, u64, &'static str)>;

    /// The state at now = 0 whose time is `micros` ahead (the bucket
    /// form's reply), or why there is none.
    fn backlog_state(&self, micros: u64) -> Result<State, String>;

    /// Its window and limit (µs, units) when a policy of it may be global
    /// across regions (`leased` or not), or why not, in words.
    fn global(&self, leased: bool) -> Result<(u64, u64), &'static str>;
}

/// A row's scripts: its tag, check and usage scripts, where its usage
/// script reads a held take's hold and whether a refund is exact; the
/// cost as a number only, GCRA's held refund.
fn row(
    tag: &'static str,
    check: fn(&Scripts) -> &Script,
    usage: fn(&Scripts) -> &Script,
    usage_tail: UsageTail,
    refund: Refund,
) -> Side {
    Side {
        tag,
        check,
        usage,
        cost_text: false,
        usage_tail,
        refund_held: |s| &s.tat_refund_held,
        refund,
    }
}

/// Why a policy other than a fixed window cannot be global.
const ONLY_FIXED_WINDOWS: &str = "only fixed windows can be global: a bucket refills continuously, so a region's admissions have no per-window count to replicate (see docs/regions.md)";

/// The answers of an algorithm without a bucket's server-clock form.
macro_rules! no_bucket_expiry {
    () => {
        fn bucket_expiry(&self) -> Option<(Rate, u64, &'static str)> {
            None
        }

        fn backlog_state(&self, _: u64) -> Result<State, String> {
            Err(format!("but the policy is a {}", Self::NAME))
        }
    };
}

/// A window's numbers: limit, length (µs), cost.
fn window(limit: u64, length: u64, cost: u64) -> Vec<u64> {
    vec![limit, length, cost]
}

/// A bucket's numbers: its rate, `tokens` in scaled units, the cost.
fn bucket(r: Rate, tokens: u64, cost: u64) -> Vec<u64> {
    vec![
        r.units_per_micro,
        r.units_per_token,
        tokens * r.units_per_token,
        cost,
    ]
}

impl Redis for FixedWindow {
    fn side(&self) -> Side {
        let (tail, refund) = (UsageTail::None, Refund::InItsWindow);
        let side = match self.calendar() {
            Some(_) => row(
                "fw",
                |s| &s.fixed_window_calendar,
                |s| &s.fixed_window_calendar_usage,
                tail,
                refund,
            ),
            None => row(
                "fw",
                |s| &s.fixed_window,
                |s| &s.fixed_window_usage,
                tail,
                refund,
            ),
        };
        Side {
            cost_text: true,
            ..side
        }
    }

    /// A calendar window's window is 0, and the bounds of the window
    /// holding `near` and of the next follow.
    fn numbers(&self, cost: u64, _: u64, near: u64) -> Vec<u64> {
        match self.calendar() {
            None => window(self.limit(), self.window_micros(), cost),
            Some(calendar) => {
                let (s0, e0) = self.calendar_window(calendar, near);
                let (_, e1) = self.calendar_window(calendar, e0);
                vec![self.limit(), 0, cost, s0, e0, e1]
            }
        }
    }

    no_bucket_expiry!();

    fn global(&self, leased: bool) -> Result<(u64, u64), &'static str> {
        if self.calendar().is_some() {
            return Err(
                "a calendar window's length varies; regions must name every window alike, so only fixed-length windows can be global",
            );
        }
        if leased {
            return Err(
                "leases take batches that may be given back, and a region's G-counter component never shrinks",
            );
        }
        Ok((self.window_micros(), self.limit()))
    }
}

impl Redis for SlidingWindow {
    fn side(&self) -> Side {
        row(
            "sw",
            |s| &s.sliding_window,
            |s| &s.sliding_window_usage,
            UsageTail::None,
            Refund::InItsWindow,
        )
    }

    fn numbers(&self, cost: u64, _: u64, _: u64) -> Vec<u64> {
        window(self.limit(), self.window_micros(), cost)
    }

    no_bucket_expiry!();

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

impl Redis for SlidingLog {
    fn side(&self) -> Side {
        row(
            "sl",
            |s| &s.sliding_log,
            |s| &s.sliding_log_usage,
            UsageTail::None,
            Refund::Inexact,
        )
    }

    fn numbers(&self, cost: u64, _: u64, _: u64) -> Vec<u64> {
        window(self.limit(), self.window_micros(), cost)
    }

    no_bucket_expiry!();

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

impl Redis for TokenBucket {
    fn side(&self) -> Side {
        Side {
            refund_held: |s| &s.token_bucket_refund_held,
            ..row(
                "tb",
                |s| &s.token_bucket,
                |s| &s.token_bucket_usage,
                UsageTail::HoldForWait,
                Refund::Exact,
            )
        }
    }

    /// Rate, capacity in scaled units, cost, a reservation's wait.
    fn numbers(&self, cost: u64, max_wait: u64, _: u64) -> Vec<u64> {
        [bucket(self.rate(), self.burst(), cost), vec![max_wait]].concat()
    }

    fn bucket_expiry(&self) -> Option<(Rate, u64, &'static str)> {
        Some((self.rate(), self.burst(), "tbs"))
    }

    fn backlog_state(&self, micros: u64) -> Result<State, String> {
        let deficit = micros
            .checked_mul(self.rate().units_per_micro)
            .filter(|&d| d <= MAX_BACKLOG_UNITS)
            .ok_or_else(|| "a backlog beyond any this policy keeps".to_string())?;
        Ok(State::from(TokenBucketState { deficit, at: 0 }))
    }

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

impl Redis for Gcra {
    fn side(&self) -> Side {
        row(
            "gcra",
            |s| &s.gcra,
            |s| &s.tat_usage,
            UsageTail::Hold,
            Refund::Exact,
        )
    }

    /// Rate, capacity in scaled units, cost, a reservation's wait.
    fn numbers(&self, cost: u64, max_wait: u64, _: u64) -> Vec<u64> {
        [bucket(self.rate(), self.burst(), cost), vec![max_wait]].concat()
    }

    fn bucket_expiry(&self) -> Option<(Rate, u64, &'static str)> {
        Some((self.rate(), self.burst(), "gcras"))
    }

    fn backlog_state(&self, micros: u64) -> Result<State, String> {
        Ok(State::from(GcraState { micros, frac: 0 }))
    }

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

impl Redis for LeakyBucket {
    fn side(&self) -> Side {
        row(
            "lb",
            |s| &s.leaky_bucket,
            |s| &s.tat_usage,
            UsageTail::ShaperHold,
            Refund::Exact,
        )
    }

    /// Rate, capacity in scaled units, cost.
    fn numbers(&self, cost: u64, _: u64, _: u64) -> Vec<u64> {
        bucket(self.rate(), self.capacity(), cost)
    }

    fn bucket_expiry(&self) -> Option<(Rate, u64, &'static str)> {
        Some((self.rate(), self.capacity(), "lbs"))
    }

    fn backlog_state(&self, micros: u64) -> Result<State, String> {
        Ok(State::from(LeakyBucketState { micros, frac: 0 }))
    }

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

impl Redis for Concurrency {
    /// Usage is refused before coming here: a concurrency policy has
    /// none.
    fn side(&self) -> Side {
        row(
            "cc",
            |s| &s.concurrency,
            |s| &s.tat_usage,
            UsageTail::None,
            Refund::Exact,
        )
    }

    /// Limit, lease (µs).
    fn numbers(&self, _: u64, _: u64, _: u64) -> Vec<u64> {
        vec![self.limit(), self.lease_micros()]
    }

    no_bucket_expiry!();

    fn global(&self, _: bool) -> Result<(u64, u64), &'static str> {
        Err(ONLY_FIXED_WINDOWS)
    }
}

/// The algorithm's row of scripts.
pub(super) fn side(algorithm: &Algorithm) -> Side {
    each_algorithm!(algorithm, a => a.side())
}

/// A held `check_at_most`'s hold in the bucket's scaled units (0 for any
/// other operation): `units_per_micro` per µs, exact.
pub(super) fn hold_units(algorithm: &Algorithm, op: Usage) -> f64 {
    let Usage::AtMostHeld(hold) = op else {
        return 0.0;
    };
    let rate = match algorithm.lease() {
        Lease::Held { rate, .. } => rate,
        Lease::Window { .. } | Lease::Refused => return 0.0,
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
    let numbers = each_algorithm!(algorithm, a => a.numbers(cost, max_wait, near));
    numbers.into_iter().map(|n| n as f64).collect()
}

/// The state at now = 0 whose time is `micros` ahead, from a bucket
/// form's reply, or why it cannot be.
pub(super) fn backlog_state(algorithm: &Algorithm, micros: u64) -> Result<State, String> {
    each_algorithm!(algorithm, a => a.backlog_state(micros))
}

/// A bucket's server-clock form's rate, capacity in tokens and suffix.
pub(super) fn bucket_expiry(algorithm: &Algorithm) -> Option<(Rate, u64, &'static str)> {
    each_algorithm!(algorithm, a => a.bucket_expiry())
}

/// A global policy's window and limit, or why it cannot be global.
pub(super) fn global(policy: &crate::Policy) -> Result<(u64, u64), &'static str> {
    each_algorithm!(policy.algorithm(), a => a.global(policy.leased()))
}

/// The most backlog, in scaled units, a bucket form's reply may name: a
/// state's debt stays within the capacity plus the longest reservation
/// (each below 2^50, see `Policy::validate_reservation`), or within what a
/// charge leaves, [`MAX_DEBT`](crate::algorithm::MAX_DEBT).
const MAX_BACKLOG_UNITS: u64 = crate::algorithm::MAX_DEBT;
