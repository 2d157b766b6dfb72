//! Each algorithm as the Redis store runs it in its own script: the tag
//! that names its state in keys and batches, its script, and the numbers
//! the script takes. Adding an algorithm touches this file, its script in
//! `lua/` (with its constant and field in `scripts.rs`) and `batch.lua`;
//! the server-clock forms (`server_window.rs`, `bucket_expiry.rs`) take
//! only the algorithms they name.

use super::scripts::{Script, Scripts};
use crate::algorithm::{Algorithm, Rate};

/// The short name of an algorithm in keys and in batch arguments.
pub(super) fn tag(algorithm: &Algorithm) -> &'static str {
    match algorithm {
        Algorithm::FixedWindow(_) => "fw",
        Algorithm::SlidingWindow(_) => "sw",
        Algorithm::SlidingLog(_) => "sl",
        Algorithm::TokenBucket(_) => "tb",
        Algorithm::Gcra(_) => "gcra",
        Algorithm::LeakyBucket(_) => "lb",
        Algorithm::Concurrency(_) => "cc",
    }
}

/// The algorithm's own script (`lua/<algorithm>.lua`).
pub(super) fn script<'s>(scripts: &'s Scripts, algorithm: &Algorithm) -> &'s Script {
    match algorithm {
        Algorithm::FixedWindow(a) if a.calendar().is_some() => &scripts.fixed_window_calendar,
        Algorithm::FixedWindow(_) => &scripts.fixed_window,
        Algorithm::SlidingWindow(_) => &scripts.sliding_window,
        Algorithm::SlidingLog(_) => &scripts.sliding_log,
        Algorithm::TokenBucket(_) => &scripts.token_bucket,
        Algorithm::Gcra(_) => &scripts.gcra,
        Algorithm::LeakyBucket(_) => &scripts.leaky_bucket,
        Algorithm::Concurrency(_) => &scripts.concurrency,
    }
}

/// Whether the script takes the cost as text too, as its last argument:
/// the fixed window's, so that its `HINCRBY` need not print the number.
pub(super) fn takes_cost_text(algorithm: &Algorithm) -> bool {
    matches!(algorithm, Algorithm::FixedWindow(_))
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
