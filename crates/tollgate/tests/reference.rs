//! Every algorithm, driven through the memory store on a manual clock,
//! against a brute-force reference written from the definitions in the
//! crate's README, not from the crate's arithmetic.
//!
//! The references keep whatever is simplest (every window's count, every
//! admitted request, token counts as exact integers in the policy's own
//! units) and find `retry_after` and `reset_after` by searching time for
//! the first moment a condition holds, where the crate uses closed forms.
//! Failing cases are kept in `reference.proptest-regressions`, next to
//! this file, and replayed first on every run.
//!
//! Kept whole on purpose: the reference models and the runs that compare them with the store read together.

use std::collections::HashMap;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::algorithm::LeaseId;
use tollgate::store::memory::MemoryStore;
use tollgate::{Decision, ManualClock, Policy, Usage};

/// What a reference answers: a decision's numbers in µs, or an error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expect {
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_after: u64,
    retry_after: u64,
    delay: u64,
}

fn seen(d: &Decision) -> Expect {
    Expect {
        allowed: d.allowed,
        limit: d.limit,
        remaining: d.remaining,
        reset_after: d.reset_after.as_micros() as u64,
        retry_after: d.retry_after.as_micros() as u64,
        delay: d.delay.as_micros() as u64,
    }
}

/// The smallest `d` in `0..=hi` for which `holds(d)`; `holds` must be
/// monotone (false then true) and true at `hi`.
fn first(hi: u64, holds: impl Fn(u64) -> bool) -> u64 {
    assert!(holds(hi), "search bound {hi} too small");
    let (mut lo, mut hi) = (0u64, hi);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if holds(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

/// One step of a trace: time advances by `dt` µs, then a request on key
/// `key` (of a few) with `cost`.
#[derive(Debug, Clone, Copy)]
struct Step {
    dt: u64,
    key: u8,
    cost: u64,
    /// Reservations only: the longest wait accepted, µs.
    max_wait: u64,
    /// What the step does (checks, in the traces of checks).
    op: Op,
}

/// A step's operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Check,
    Charge,
    Refund,
    AtMost,
    /// `check_at_most` held for `Step::max_wait` µs (buckets only).
    AtMostHeld,
    /// The references' own step for it: cap a bucket's tokens at
    /// `burst − rate·hold` (the hold in the `max_wait` argument); `None`
    /// for a hold past the bucket's refill from empty.
    Hold,
}

/// Time steps scaled to the policy's period, with some standing still and
/// some long gaps; costs mostly small, some up to and beyond `limit`.
fn steps(period: u64, limit: u64, len: usize) -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![
        3 => Just(0u64),
        6 => 0..=period / 8,
        3 => 0..=period * 2,
        1 => 0..=period * 50,
    ];
    let cost = prop_oneof![
        6 => 0..=2u64.min(limit),
        3 => 0..=limit,
        1 => limit..=limit + 2,
    ];
    let step = (dt, 0..3u8, cost, 0..=period * 2).prop_map(|(dt, key, cost, max_wait)| Step {
        dt,
        key,
        cost,
        max_wait,
        op: Op::Check,
    });
    prop::collection::vec(step, 1..len)
}

/// Traces of checks, charges (up to three limits), refunds and
/// `check_at_most` (up to two limits), with `held` `check_at_most` held
/// too (up to one `limit + 1` periods, so past the refill from empty at
/// times).
fn usage_steps(
    period: u64,
    limit: u64,
    len: usize,
    held: bool,
) -> impl Strategy<Value = Vec<Step>> {
    let op = prop_oneof![
        4 => Just(Op::Check),
        3 => Just(Op::Charge),
        3 => Just(Op::Refund),
        2 => Just(Op::AtMost),
        if held { 2 } else { 0 } => Just(Op::AtMostHeld),
    ];
    (
        steps(period, limit, len),
        prop::collection::vec((op, 0..=3 * limit), len),
    )
        .prop_map(|(mut steps, ops)| {
            for (s, (op, big)) in steps.iter_mut().zip(ops) {
                s.op = op;
                if op != Op::Check && big % 3 == 0 {
                    s.cost = big;
                }
                if op == Op::AtMostHeld {
                    // max_wait is up to two periods: the hold up to
                    // `limit + 1` of them.
                    s.max_wait = s.max_wait * (big / 3 + 1) / 2;
                }
            }
            steps
        })
}

/// A period in µs: whole µs from 1 ms to ten hours, with round and odd values.
fn period() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1_000u64),
        Just(1_000_000),
        Just(60_000_000),
        1_000..=5_000u64,
        1_000..=3_600_000_000u64,
        1_000..=36_000_000_000u64,
    ]
}

/// Where the clock starts: zero, a recent Unix time, or anywhere below 2^52.
fn start() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1_763_870_400_000_000), 0..(1u64 << 52)]
}

fn store_at(t0: u64) -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(t0);
    (MemoryStore::with_clock(clock.clone()), clock)
}

fn key_of(k: u8) -> [u8; 2] {
    [b'k', k]
}

/// Replays `trace` on the store and on the reference and compares every
/// answer. `reserve` sends reservations instead of checks.
fn replay(
    policy: &Policy,
    t0: u64,
    trace: &[Step],
    reserve: bool,
    mut reference: impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect>,
) -> Result<(), TestCaseError> {
    let (store, clock) = store_at(t0);
    let mut now = t0;
    for (i, s) in trace.iter().enumerate() {
        now += s.dt;
        clock.set(now);
        let key = key_of(s.key);
        let got = if reserve {
            store.reserve_sync(policy, &key, s.cost, Duration::from_micros(s.max_wait))
        } else {
            store.check_sync(policy, &key, s.cost)
        };
        let max_wait = if reserve { s.max_wait } else { 0 };
        match (reference(now, s.key, Op::Check, s.cost, max_wait), got) {
            (Some(want), Ok(d)) => prop_assert_eq!(seen(&d), want, "step {} {:?} at {}", i, s, now),
            (None, Err(e)) => prop_assert_eq!(e.code(), "cost_exceeds_limit", "step {}", i),
            (want, got) => prop_assert!(false, "step {i} {s:?}: want {want:?}, got {got:?}"),
        }
    }
    Ok(())
}

/// Replays a trace of checks, charges, refunds and `check_at_most` on the
/// store and on the reference. A reference knows checks, charges and
/// refunds; `check_at_most` is defined from them: a peek says what is
/// available, then a check of what is granted, or of 1 (denied) when
/// nothing is.
fn replay_usage(
    policy: &Policy,
    t0: u64,
    trace: &[Step],
    mut reference: impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone,
) -> Result<(), TestCaseError> {
    let (store, clock) = store_at(t0);
    let mut now = t0;
    for (i, s) in trace.iter().enumerate() {
        now += s.dt;
        clock.set(now);
        let key = key_of(s.key);
        let (got, want, granted) = match s.op {
            Op::Check => (
                store.check_sync(policy, &key, s.cost),
                reference(now, s.key, Op::Check, s.cost, 0),
                0,
            ),
            Op::Charge | Op::Refund => {
                let usage = if s.op == Op::Charge {
                    Usage::Charge
                } else {
                    Usage::Refund
                };
                (
                    store.usage_sync(policy, &key, usage, s.cost),
                    reference(now, s.key, s.op, s.cost, 0),
                    0,
                )
            }
            Op::AtMost => {
                let peek = reference(now, s.key, Op::Check, 0, 0).expect("a peek");
                let granted = s.cost.min(peek.remaining);
                let ask = if granted == 0 { s.cost.min(1) } else { granted };
                (
                    store.usage_sync(policy, &key, Usage::AtMost, s.cost),
                    reference(now, s.key, Op::Check, ask, 0),
                    granted,
                )
            }
            // check_at_most on the bucket capped at `burst − rate·hold`,
            // which stays capped only when something was granted.
            _ => {
                let hold = Usage::AtMostHeld(Duration::from_micros(s.max_wait));
                let got = store.usage_sync(policy, &key, hold, s.cost);
                let before = reference.clone();
                if reference(now, s.key, Op::Hold, 0, s.max_wait).is_none() {
                    (got, None, 0)
                } else {
                    let peek = reference(now, s.key, Op::Check, 0, 0).expect("a peek");
                    let granted = s.cost.min(peek.remaining);
                    let ask = if granted == 0 { s.cost.min(1) } else { granted };
                    let want = reference(now, s.key, Op::Check, ask, 0);
                    if granted == 0 {
                        reference = before;
                    }
                    (got, want, granted)
                }
            }
        };
        match (want, got) {
            (Some(want), Ok(d)) => {
                prop_assert_eq!(seen(&d), want, "step {} {:?} at {}", i, s, now);
                prop_assert_eq!(d.granted, granted, "step {} {:?}", i, s);
            }
            (None, Err(e)) => {
                let code = match s.op {
                    Op::AtMostHeld => "invalid_argument",
                    _ => "cost_exceeds_limit",
                };
                prop_assert_eq!(e.code(), code, "step {}", i)
            }
            (want, got) => prop_assert!(false, "step {i} {s:?}: want {want:?}, got {got:?}"),
        }
    }
    Ok(())
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 192,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- fixed window

/// Every window's count, by key and window index.
/// A charge counts whatever is left; a refund takes back down to 0.
fn fixed_window_reference(
    limit: u64,
    w: u64,
) -> impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone {
    let mut counts: HashMap<(u8, u64), u64> = HashMap::new();
    move |now, key, op, cost, _| {
        if op == Op::Check && cost > limit {
            return None;
        }
        let count = counts.entry((key, now / w)).or_default();
        let end = (now / w + 1) * w - now;
        let fits = *count + cost <= limit;
        let allowed = match op {
            Op::Charge => {
                *count += cost;
                fits
            }
            Op::Refund => {
                *count = count.saturating_sub(cost);
                true
            }
            _ => {
                if fits {
                    *count += cost;
                }
                fits
            }
        };
        // After a check, its own retry; after usage, a request of 1's.
        let retry_after = match op {
            Op::Check if allowed => 0,
            Op::Check => end,
            _ if *count < limit => 0,
            _ => end,
        };
        Some(Expect {
            allowed,
            limit,
            remaining: limit.saturating_sub(*count),
            reset_after: if *count == 0 { 0 } else { end },
            retry_after,
            delay: 0,
        })
    }
}

// ----------------------------------------------------------------- sliding log

/// Every admitted request, never trimmed: the count at `t` is a sum over
/// the whole list. Requests at one instant are one entry. A charge records
/// an entry whatever is left, unless `limit` entries already count: then it
/// adds to the newest, which moves to now. A refund takes from the newest
/// entries that count first.
fn sliding_log_reference(
    limit: u64,
    w: u64,
) -> impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone {
    let mut log: HashMap<u8, Vec<(u64, u64)>> = HashMap::new();
    move |now, key, op, cost, _| {
        if op == Op::Check && cost > limit {
            return None;
        }
        let entries = log.entry(key).or_default();
        entries.retain(|&(_, c)| c > 0);
        let used_at = |entries: &[(u64, u64)], t: u64| -> u64 {
            entries
                .iter()
                .filter(|&&(s, _)| s <= t && t - s < w)
                .map(|&(_, c)| c)
                .sum()
        };
        let live =
            |entries: &[(u64, u64)]| entries.iter().filter(|&&(s, _)| now - s < w).count() as u64;
        // The first moment a request of `cost` fits, if nothing else comes.
        let retry = |entries: &[(u64, u64)], cost: u64| -> u64 {
            if used_at(entries, now) + cost <= limit {
                return 0;
            }
            // Only entries ageing out change the count: try those moments.
            let mut ends: Vec<u64> = entries.iter().map(|&(s, _)| s + w).collect();
            ends.sort_unstable();
            let t = ends
                .into_iter()
                .filter(|&t| t > now)
                .find(|&t| used_at(entries, t) + cost <= limit)
                .expect("the last entry ages out");
            t - now
        };
        let used = used_at(entries, now);
        let fits = used + cost <= limit;
        let record = |entries: &mut Vec<(u64, u64)>, merge_any: bool| match entries.last_mut() {
            Some((s, c)) if now - *s < w && (*s == now || merge_any) => {
                *s = now;
                *c += cost;
            }
            _ => entries.push((now, cost)),
        };
        let (allowed, retry_after) = match op {
            Op::Check => {
                let retry_after = retry(entries, cost);
                if fits && cost > 0 {
                    record(entries, false);
                }
                (fits, retry_after)
            }
            Op::Charge => {
                if cost > 0 {
                    let full = live(entries) >= limit;
                    record(entries, full);
                }
                (fits, retry(entries, 1))
            }
            _ => {
                let mut left = cost;
                for (s, c) in entries.iter_mut().rev() {
                    if now - *s >= w {
                        break;
                    }
                    let take = left.min(*c);
                    *c -= take;
                    left -= take;
                }
                entries.retain(|&(_, c)| c > 0);
                (true, retry(entries, 1))
            }
        };
        let used = used_at(entries, now);
        let newest = entries
            .iter()
            .map(|&(s, _)| s + w)
            .filter(|&e| e > now)
            .max();
        Some(Expect {
            allowed,
            limit,
            remaining: limit.saturating_sub(used),
            reset_after: newest.map_or(0, |e| e - now),
            retry_after,
            delay: 0,
        })
    }
}

// -------------------------------------------------------------- sliding window

/// Every window's count; the weighted estimate is computed at any moment
/// from the counts of that moment's window and the one before. A charge
/// counts in the current window whatever is left (a window's count
/// saturating at 2^52 / window, as documented); a refund takes from the
/// current window, then from the previous one.
fn sliding_window_reference(
    limit: u64,
    w: u64,
) -> impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone {
    let mut counts: HashMap<(u8, u64), u64> = HashMap::new();
    move |now, key, op, cost, _| {
        if op == Op::Check && cost > limit {
            return None;
        }
        // estimate·w at time t, if nothing else is admitted.
        let estimate = |counts: &HashMap<(u8, u64), u64>, t: u64| -> u128 {
            let k = t / w;
            let curr = counts.get(&(key, k)).copied().unwrap_or(0) as u128;
            let prev = if k == 0 {
                0
            } else {
                counts.get(&(key, k - 1)).copied().unwrap_or(0) as u128
            };
            prev * (w - t % w) as u128 + curr * w as u128
        };
        let fits = |counts: &HashMap<(u8, u64), u64>, t: u64, cost: u64| {
            estimate(counts, t) + cost as u128 * w as u128 <= (limit * w) as u128
        };
        let horizon = (now / w + 2) * w - now;
        let retry = |counts: &HashMap<(u8, u64), u64>, cost: u64| {
            first(horizon, |d| fits(counts, now + d, cost))
        };
        let k = now / w;
        let (allowed, retry_after) = match op {
            Op::Check => {
                let allowed = fits(&counts, now, cost);
                let retry_after = retry(&counts, cost);
                if allowed {
                    *counts.entry((key, k)).or_default() += cost;
                }
                (allowed, retry_after)
            }
            Op::Charge => {
                let allowed = fits(&counts, now, cost);
                let count = counts.entry((key, k)).or_default();
                *count = (*count + cost).min((1u64 << 52) / w);
                (allowed, retry(&counts, 1))
            }
            _ => {
                let curr = counts.entry((key, k)).or_default();
                let from_curr = cost.min(*curr);
                *curr -= from_curr;
                if k > 0 {
                    let prev = counts.entry((key, k - 1)).or_default();
                    *prev -= (cost - from_curr).min(*prev);
                }
                (true, retry(&counts, 1))
            }
        };
        let e = estimate(&counts, now);
        Some(Expect {
            allowed,
            limit,
            remaining: ((limit * w) as u128).saturating_sub(e) as u64 / w,
            reset_after: first(horizon, |d| estimate(&counts, now + d) == 0),
            retry_after,
            delay: 0,
        })
    }
}

// ------------------------------------------------- token bucket, with reserve

/// Tokens as an exact integer count of 1/per-µs token fractions: one token
/// is `per` units and the bucket gains `rate` units a microsecond. Never
/// reduced by a common divisor, unlike the crate. A charge takes its tokens
/// whatever is left (the count goes negative); a refund puts them back, up
/// to a full bucket.
fn token_bucket_reference(
    rate: u64,
    per: u64,
    burst: u64,
) -> impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone {
    let cap = (burst as i128) * per as i128;
    // The most debt, as documented: 2^52 of the crate's reduced units.
    let floor = cap - (1i128 << 52) * gcd(rate, per) as i128;
    let mut buckets: HashMap<u8, (i128, u64)> = HashMap::new();
    move |now, key, op, cost, max_wait| {
        if op == Op::Check && cost > burst {
            return None;
        }
        let (tokens, at) = buckets.entry(key).or_insert((cap, now));
        *tokens = (*tokens + (now - *at) as i128 * rate as i128).min(cap);
        *at = now;
        if op == Op::Hold {
            let hold = max_wait as i128 * rate as i128;
            if hold > cap {
                return None;
            }
            *tokens = (*tokens).min(cap - hold);
            return Some(Expect {
                allowed: true,
                limit: burst,
                remaining: 0,
                reset_after: 0,
                retry_after: 0,
                delay: 0,
            });
        }
        let need = (cost as i128) * per as i128;
        let level = *tokens;
        let wait_for = |level: i128, need: i128| {
            first(u64::MAX / 4, |d| {
                level + d.min(1 << 62) as i128 * rate as i128 >= need
            })
        };
        let wait = wait_for(level, need);
        let allowed = match op {
            Op::Check => {
                let allowed = wait <= max_wait;
                if allowed {
                    *tokens -= need;
                }
                allowed
            }
            Op::Charge => {
                *tokens = (*tokens - need).max(floor);
                level >= need
            }
            _ => {
                *tokens = (*tokens + need).min(cap);
                true
            }
        };
        let level = *tokens;
        let full_after = |d: u64| level + d as i128 * rate as i128 >= cap;
        let (retry_after, delay) = match op {
            Op::Check if allowed => (0, wait),
            Op::Check => (wait - max_wait, 0),
            _ => (wait_for(level, per as i128), 0),
        };
        Some(Expect {
            allowed,
            limit: burst,
            remaining: (level.max(0) / per as i128) as u64,
            reset_after: first(u64::MAX / 4, |d| full_after(d.min(1 << 62))),
            retry_after,
            delay,
        })
    }
}

// ---------------------------------------------------------------- leaky bucket

/// The virtual finish time in 1/rate-µs units: a request of cost c adds
/// `c·per` units of work and the bucket drains `rate` units a microsecond.
/// A charge adds its work whatever the capacity; a refund takes work back,
/// never leaving the finish time before now.
fn leaky_bucket_reference(
    rate: u64,
    per: u64,
    capacity: u64,
) -> impl FnMut(u64, u8, Op, u64, u64) -> Option<Expect> + Clone {
    let cap = capacity as u128 * per as u128;
    // The most backlog, as documented: 2^52 of the crate's reduced units.
    let most = (1u128 << 52) * gcd(rate, per) as u128;
    let mut finish: HashMap<u8, u128> = HashMap::new();
    move |now, key, op, cost, _| {
        if op == Op::Check && cost > capacity {
            return None;
        }
        let v = finish.entry(key).or_insert(0);
        let now_units = now as u128 * rate as u128;
        let backlog_at = |v: u128, d: u64| v.saturating_sub(now_units + d as u128 * rate as u128);
        let when = |v: u128, need: u128| {
            first(u64::MAX / 4, |d| {
                backlog_at(v, d.min(1 << 62)) + need <= cap
            })
        };
        let need = cost as u128 * per as u128;
        let backlog = backlog_at(*v, 0);
        let fits = backlog + need <= cap;
        let (allowed, delay) = match op {
            Op::Check => {
                let v0 = *v;
                let delay = if fits {
                    first(u64::MAX / 4, |d| backlog_at(v0, d.min(1 << 62)) == 0)
                } else {
                    0
                };
                if fits && cost > 0 {
                    *v = (*v).max(now_units) + need;
                }
                (fits, delay)
            }
            Op::Charge => {
                *v = (*v).max(now_units) + need.min(most - backlog);
                (fits, 0)
            }
            _ => {
                *v = v.saturating_sub(need).max(now_units);
                (true, 0)
            }
        };
        let retry_after = match op {
            Op::Check if fits => 0,
            Op::Check => when(*v, need),
            _ => when(*v, per as u128),
        };
        let after = backlog_at(*v, 0);
        let v1 = *v;
        Some(Expect {
            allowed,
            limit: capacity,
            remaining: (cap.saturating_sub(after) / per as u128) as u64,
            reset_after: first(u64::MAX / 4, |d| backlog_at(v1, d.min(1 << 62)) == 0),
            retry_after,
            delay,
        })
    }
}

// ------------------------------------------------------------------ properties

proptest! {
    #![proptest_config(config())]

    #[test]
    fn fixed_window_matches_reference(
        limit in prop_oneof![1..=5u64, 1..=1000u64],
        w in period(),
        t0 in start(),
        trace in (period(), 1..=1000u64).prop_flat_map(|(p, l)| steps(p, l, 60)),
    ) {
        let policy = Policy::fixed_window("p", limit, Duration::from_micros(w)).unwrap();
        replay(&policy, t0, &trace, false, fixed_window_reference(limit, w))?;
    }

    #[test]
    fn fixed_window_matches_reference_on_its_own_scale(
        (limit, w, trace) in (1..=20u64, period()).prop_flat_map(|(l, w)| (Just(l), Just(w), steps(w, l, 80))),
        t0 in start(),
    ) {
        let policy = Policy::fixed_window("p", limit, Duration::from_micros(w)).unwrap();
        replay(&policy, t0, &trace, false, fixed_window_reference(limit, w))?;
    }

    #[test]
    fn sliding_log_matches_reference(
        (limit, w, trace) in (prop_oneof![1..=5u64, 1..=200u64], period())
            .prop_flat_map(|(l, w)| (Just(l), Just(w), steps(w, l, 80))),
        t0 in start(),
    ) {
        let policy = Policy::sliding_log("p", limit, Duration::from_micros(w)).unwrap();
        replay(&policy, t0, &trace, false, sliding_log_reference(limit, w))?;
    }

    #[test]
    fn sliding_window_matches_reference(
        (limit, w, trace) in (prop_oneof![1..=5u64, 1..=100_000u64], period())
            .prop_flat_map(|(l, w)| (Just(l), Just(w), steps(w, l, 80))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::sliding_window("p", limit, Duration::from_micros(w)) else {
            return Ok(());
        };
        replay(&policy, t0, &trace, false, sliding_window_reference(limit, w))?;
    }

    #[test]
    fn token_bucket_matches_reference(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), steps(p / r.min(p) + 1, b, 80))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::token_bucket("p", rate, Duration::from_micros(per), burst) else {
            return Ok(());
        };
        replay(&policy, t0, &trace, false, token_bucket_reference(rate, per, burst))?;
    }

    #[test]
    fn token_bucket_reservations_match_reference(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), steps(p / r.min(p) + 1, b, 80))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::token_bucket("p", rate, Duration::from_micros(per), burst) else {
            return Ok(());
        };
        replay(&policy, t0, &trace, true, token_bucket_reference(rate, per, burst))?;
    }

    #[test]
    fn gcra_matches_token_bucket_reference(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), steps(p / r.min(p) + 1, b, 80))),
        t0 in start(),
        reserve in any::<bool>(),
    ) {
        let Ok(policy) = Policy::gcra("p", rate, Duration::from_micros(per), burst) else {
            return Ok(());
        };
        replay(&policy, t0, &trace, reserve, token_bucket_reference(rate, per, burst))?;
    }

    /// The property the issue names: on the same sequence of checks and
    /// reservations, GCRA and the token bucket decide identically.
    #[test]
    fn gcra_and_token_bucket_decide_identically(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), steps(p / r.min(p) + 1, b, 120))),
        t0 in start(),
        reserves in prop::collection::vec(any::<bool>(), 120),
    ) {
        let per_d = Duration::from_micros(per);
        let (Ok(tb), Ok(gcra)) = (
            Policy::token_bucket("tb", rate, per_d, burst),
            Policy::gcra("gcra", rate, per_d, burst),
        ) else {
            return Ok(());
        };
        let (store, clock) = store_at(t0);
        let mut now = t0;
        for (i, s) in trace.iter().enumerate() {
            now += s.dt;
            clock.set(now);
            let key = key_of(s.key);
            let (a, b) = if reserves[i] {
                let wait = Duration::from_micros(s.max_wait);
                (store.reserve_sync(&tb, &key, s.cost, wait), store.reserve_sync(&gcra, &key, s.cost, wait))
            } else {
                (store.check_sync(&tb, &key, s.cost), store.check_sync(&gcra, &key, s.cost))
            };
            match (a, b) {
                (Ok(a), Ok(b)) => prop_assert_eq!(seen(&a), seen(&b), "step {} {:?}", i, s),
                (Err(a), Err(b)) => prop_assert_eq!(a.code(), b.code()),
                (a, b) => prop_assert!(false, "step {i}: token bucket {a:?}, gcra {b:?}"),
            }
        }
    }

    #[test]
    fn leaky_bucket_matches_reference(
        (rate, per, capacity, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), steps(p / r.min(p) + 1, b, 80))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::leaky_bucket("p", rate, Duration::from_micros(per), capacity) else {
            return Ok(());
        };
        replay(&policy, t0, &trace, false, leaky_bucket_reference(rate, per, capacity))?;
    }

    #[test]
    fn fixed_window_usage_matches_reference(
        (limit, w, trace) in (prop_oneof![1..=5u64, 1..=1000u64], period())
            .prop_flat_map(|(l, w)| (Just(l), Just(w), usage_steps(w, l, 80, false))),
        t0 in start(),
    ) {
        let policy = Policy::fixed_window("p", limit, Duration::from_micros(w)).unwrap();
        replay_usage(&policy, t0, &trace, fixed_window_reference(limit, w))?;
    }

    #[test]
    fn sliding_log_usage_matches_reference(
        (limit, w, trace) in (prop_oneof![1..=5u64, 1..=200u64], period())
            .prop_flat_map(|(l, w)| (Just(l), Just(w), usage_steps(w, l, 80, false))),
        t0 in start(),
    ) {
        let policy = Policy::sliding_log("p", limit, Duration::from_micros(w)).unwrap();
        replay_usage(&policy, t0, &trace, sliding_log_reference(limit, w))?;
    }

    #[test]
    fn sliding_window_usage_matches_reference(
        (limit, w, trace) in (prop_oneof![1..=5u64, 1..=100_000u64], period())
            .prop_flat_map(|(l, w)| (Just(l), Just(w), usage_steps(w, l, 80, false))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::sliding_window("p", limit, Duration::from_micros(w)) else {
            return Ok(());
        };
        replay_usage(&policy, t0, &trace, sliding_window_reference(limit, w))?;
    }

    #[test]
    fn token_bucket_usage_matches_reference(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), usage_steps(p / r.min(p) + 1, b, 80, true))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::token_bucket("p", rate, Duration::from_micros(per), burst) else {
            return Ok(());
        };
        replay_usage(&policy, t0, &trace, token_bucket_reference(rate, per, burst))?;
    }

    #[test]
    fn gcra_usage_matches_token_bucket_reference(
        (rate, per, burst, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), usage_steps(p / r.min(p) + 1, b, 80, true))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::gcra("p", rate, Duration::from_micros(per), burst) else {
            return Ok(());
        };
        replay_usage(&policy, t0, &trace, token_bucket_reference(rate, per, burst))?;
    }

    #[test]
    fn leaky_bucket_usage_matches_reference(
        (rate, per, capacity, trace) in rate_per_burst()
            .prop_flat_map(|(r, p, b)| (Just(r), Just(p), Just(b), usage_steps(p / r.min(p) + 1, b, 80, false))),
        t0 in start(),
    ) {
        let Ok(policy) = Policy::leaky_bucket("p", rate, Duration::from_micros(per), capacity) else {
            return Ok(());
        };
        replay_usage(&policy, t0, &trace, leaky_bucket_reference(rate, per, capacity))?;
    }

    #[test]
    fn concurrency_matches_reference(
        limit in 1..=6u64,
        lease in period(),
        t0 in start(),
        ops in prop::collection::vec((0..=3u8, 0..2u8, 0..16usize, prop_oneof![Just(0u64), 0..=1_000u64]), 1..80),
    ) {
        let policy = Policy::concurrency("p", limit, Duration::from_micros(lease)).unwrap();
        let (store, clock) = store_at(t0);
        // The reference: every lease taken, with its key and expiry.
        let mut held: Vec<(u8, LeaseId, u64)> = Vec::new();
        let mut taken: Vec<(u8, LeaseId)> = Vec::new();
        let mut now = t0;
        for (i, &(op, key, pick, dt_permille)) in ops.iter().enumerate() {
            now += lease * dt_permille / 1000;
            clock.set(now);
            held.retain(|&(_, _, expires)| expires > now);
            let live = |held: &[(u8, LeaseId, u64)]| -> Vec<u64> {
                held.iter().filter(|&&(k, _, _)| k == key).map(|&(_, _, e)| e).collect()
            };
            if op == 0 && !taken.is_empty() {
                let (k, id) = taken[pick % taken.len()];
                let was_held = held.iter().any(|&(hk, hid, _)| hk == k && hid == id);
                held.retain(|&(hk, hid, _)| !(hk == k && hid == id));
                let released = store.release_lease_sync(&policy, &key_of(k), id).unwrap();
                prop_assert_eq!(released, was_held, "step {}: release", i);
                continue;
            }
            let lease_got = store.acquire_lease_sync(&policy, &key_of(key)).unwrap();
            let before = live(&held);
            let allowed = (before.len() as u64) < limit;
            if allowed {
                let id = lease_got.id.expect("an admitted lease has an id");
                held.push((key, id, now + lease));
                taken.push((key, id));
            } else {
                prop_assert!(lease_got.id.is_none());
            }
            let after = live(&held);
            let want = Expect {
                allowed,
                limit,
                remaining: limit - after.len() as u64,
                reset_after: after.iter().max().map_or(0, |e| e - now),
                retry_after: if allowed { 0 } else { before.iter().min().unwrap() - now },
                delay: 0,
            };
            prop_assert_eq!(seen(&lease_got.decision), want, "step {}", i);
        }
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Rates, periods and bursts, including ones whose ratio is not a whole
/// number of microseconds.
fn rate_per_burst() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop_oneof![1..=3u64, 1..=1_000u64, 1..=1_000_000u64],
        period(),
        prop_oneof![1..=3u64, 1..=200u64, 1..=100_000u64],
    )
}
