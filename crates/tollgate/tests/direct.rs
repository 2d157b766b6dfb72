//! The direct limiter (one key, no map) decides exactly as the memory store
//! does for one key, on every algorithm, on each of its state forms (GCRA's
//! packed word, the token bucket's sequence-locked numbers, and the locked
//! state), and loses no update when threads race.
//!
//! Failing cases are kept in `direct.proptest-regressions`, next to this
//! file, and replayed first on every run.

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tollgate::{Algorithm, Clock, DirectLimiter, Error, ManualClock, MemoryStore, Policy};

/// Rate policies, with rates both coarse enough for GCRA's packed form
/// (≤ 4096 scaled units per µs) and finer (its locked form; a token
/// bucket is sequence-locked at any rate).
fn rate_policy() -> impl Strategy<Value = Policy> {
    let ms = |lo: u64, hi: u64| (lo..=hi).prop_map(Duration::from_millis);
    // Rates per µs in lowest terms: 7 per ms is 7 units per µs; a prime
    // rate per second above 4096·10^6/10^6 is not packed.
    let rate = prop_oneof![1..=7u64, Just(4_096_000_000u64), Just(4_097_000_001u64)];
    prop_oneof![
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::fixed_window("fw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_window("sw", l, w).unwrap()),
        (1..=10u64, ms(1, 5_000)).prop_map(|(l, w)| Policy::sliding_log("sl", l, w).unwrap()),
        (rate.clone(), ms(1, 3_000), 1..=10u64).prop_filter_map("scaled budget", |(r, p, b)| {
            Policy::token_bucket("tb", r, p, b).ok()
        }),
        (rate, ms(1, 3_000), 1..=10u64)
            .prop_filter_map("scaled budget", |(r, p, b)| Policy::gcra("gcra", r, p, b)
                .ok()),
        (1..=7u64, ms(1, 3_000), 1..=10u64)
            .prop_map(|(r, p, c)| Policy::leaky_bucket("lb", r, p, c).unwrap()),
    ]
}

/// One step: time moves by `dt` µs (backwards when negative, but never
/// before the start), then a check or a reservation.
#[derive(Debug, Clone, Copy)]
struct Step {
    dt: i64,
    cost: u64,
    /// A reservation with this longest wait, in µs.
    reserve: Option<u64>,
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let dt = prop_oneof![
        3 => Just(0i64),
        4 => 0..=50_000i64,
        2 => 0..=3_000_000i64,
        1 => -50_000..0i64,
        1 => -3_000_000..0i64,
        1 => -40_000_000..-16_000_000i64,
    ];
    let cost = prop_oneof![4 => 0..=2u64, 1 => 0..=12u64];
    let reserve = prop_oneof![3 => Just(None), 1 => (0..=2_000_000u64).prop_map(Some)];
    prop::collection::vec(
        (dt, cost, reserve).prop_map(|(dt, cost, reserve)| Step { dt, cost, reserve }),
        1..60,
    )
}

/// An answer comparable across the two: the decision, or the error code.
fn answer(r: Result<tollgate::Decision, Error>) -> Result<tollgate::Decision, &'static str> {
    r.map_err(|e| e.code())
}

/// Runs `trace` from `t0` on a memory store and a direct limiter, which
/// must answer alike at every step.
fn replay(policy: &Policy, trace: &[Step], t0: u64) -> Result<(), TestCaseError> {
    let clock = ManualClock::new(t0);
    let store = MemoryStore::with_clock(clock.clone());
    let direct = DirectLimiter::with_clock(policy.clone(), clock.clone());
    let mut now = t0;
    for (i, s) in trace.iter().enumerate() {
        now = now.saturating_add_signed(s.dt).max(t0);
        clock.set(now);
        let (a, b) = match s.reserve {
            Some(wait) => {
                let wait = Duration::from_micros(wait);
                (
                    store.reserve_sync(policy, b"k", s.cost, wait),
                    direct.reserve(s.cost, wait),
                )
            }
            None => (store.check_sync(policy, b"k", s.cost), direct.check(s.cost)),
        };
        prop_assert_eq!(answer(a), answer(b), "step {}: {:?} at {}", i, s, now);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        ..ProptestConfig::default()
    })]

    #[test]
    fn decides_as_the_memory_store(
        policy in rate_policy(),
        trace in steps(),
        // Near 2^52 µs (the year 2112), where GCRA's packed word ends.
        t0 in prop_oneof![4 => 0u64..1_800_000_000_000_000, 1 => (1u64 << 52) - 100_000_000..1 << 52],
    ) {
        // GCRA's packed word keeps time only until then.
        prop_assume!(t0 < 1 << 51 || !matches!(policy.algorithm(), Algorithm::Gcra(_)));
        replay(&policy, &trace, t0)?;
    }

    /// Token buckets that refill within milliseconds, on steps of a few
    /// milliseconds either way: the rules for late requests (taken at the
    /// bucket's time, their reset and retry counted from their own) come
    /// up often.
    #[test]
    fn token_buckets_take_late_requests_as_the_memory_store(
        policy in (1..=7u64, 1..=20u64, 1..=5u64).prop_map(|(r, p, b)| {
            Policy::token_bucket("tb", r, Duration::from_millis(p), b).unwrap()
        }),
        trace in prop::collection::vec(
            (-4_000..=5_000i64, 0..=2u64, prop::option::weighted(0.2, 0..=20_000u64))
                .prop_map(|(dt, cost, reserve)| Step { dt, cost, reserve }),
            1..80,
        ),
        t0 in 0u64..1_800_000_000_000_000,
    ) {
        replay(&policy, &trace, t0)?;
    }

    /// Leases: the same grants, denials and releases as the memory store.
    #[test]
    fn leases_as_the_memory_store(
        limit in 1..=4u64,
        lease_ms in 1..=3_000u64,
        trace in prop::collection::vec((0..=2_000i64, any::<bool>(), 0..6usize), 1..40),
    ) {
        let policy = Policy::concurrency("cc", limit, Duration::from_millis(lease_ms)).unwrap();
        let clock = ManualClock::new(1_000_000);
        let store = MemoryStore::with_clock(clock.clone());
        let direct = DirectLimiter::with_clock(policy.clone(), clock.clone());
        let (mut held_store, mut held_direct) = (vec![], vec![]);
        let mut now = 1_000_000u64;
        for (i, &(dt_ms, take, which)) in trace.iter().enumerate() {
            now += dt_ms as u64 * 1_000;
            clock.set(now);
            if take || held_store.is_empty() {
                let a = store.acquire_lease_sync(&policy, b"k").unwrap();
                let b = direct.acquire_lease().unwrap();
                prop_assert_eq!(a.decision, b.decision, "step {}", i);
                prop_assert_eq!(a.id.is_some(), b.id.is_some());
                held_store.extend(a.id);
                held_direct.extend(b.id);
            } else {
                let at = which % held_store.len();
                let a = store.release_lease_sync(&policy, b"k", held_store.remove(at)).unwrap();
                let b = direct.release_lease(held_direct.remove(at)).unwrap();
                prop_assert_eq!(a, b, "step {}: release", i);
            }
        }
    }
}

/// Racing threads on a frozen clock: exactly `burst` admitted, so no
/// update is lost, in every form: GCRA packed and locked, the token
/// bucket's sequence lock (now and past 2^52 µs), a mutex.
#[test]
fn racing_threads_lose_no_update() {
    let packed = Policy::gcra("packed", 10, Duration::from_secs(1), 5_000).unwrap();
    let locked = Policy::gcra("locked", 4_097_000_001, Duration::from_secs(1), 5_000).unwrap();
    let bucket = Policy::token_bucket("bucket", 10, Duration::from_secs(1), 5_000).unwrap();
    let window = Policy::fixed_window("window", 5_000, Duration::from_secs(60)).unwrap();
    for (policy, now) in [
        (packed, 7),
        (locked, 7),
        (bucket.clone(), 7),
        (bucket, 1 << 53),
        (window, 7),
    ] {
        let limiter = Arc::new(DirectLimiter::with_clock(
            policy.clone(),
            ManualClock::new(now),
        ));
        let admitted: u64 = std::thread::scope(|s| {
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let limiter = &limiter;
                    s.spawn(move || {
                        (0..2_500)
                            .filter(|_| limiter.check(1).unwrap().allowed)
                            .count() as u64
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(admitted, 5_000, "{}", policy.name());
        let last = limiter.check(0).unwrap();
        assert_eq!(last.remaining, 0, "{}", policy.name());
    }
}

/// Each thread's clock is frozen, some threads behind the others.
#[derive(Debug)]
struct TwoClocks;

thread_local! {
    static BEHIND: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl Clock for TwoClocks {
    fn now_micros(&self) -> u64 {
        1_000_000_000 - BEHIND.get()
    }
}

/// A token bucket raced by threads on time and threads late (1 ms or 20 s),
/// all for the sequence lock; still exactly the burst is admitted. (One an
/// hour, so that the lateness refills less than a token.)
#[test]
fn racing_late_threads_lose_no_update() {
    let policy = Policy::token_bucket("bucket", 1, Duration::from_secs(3600), 5_000).unwrap();
    for late in [1_000, 20_000_000] {
        let limiter = DirectLimiter::with_clock(policy.clone(), TwoClocks);
        let start = std::sync::Barrier::new(4);
        let admitted: u64 = std::thread::scope(|s| {
            let workers: Vec<_> = [0, 0, late, late]
                .into_iter()
                .map(|behind| {
                    let (limiter, start) = (&limiter, &start);
                    s.spawn(move || {
                        BEHIND.set(behind);
                        start.wait();
                        (0..2_500)
                            .filter(|_| limiter.check(1).unwrap().allowed)
                            .count() as u64
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).sum()
        });
        assert_eq!(admitted, 5_000, "{late} µs late");
        assert_eq!(limiter.check(0).unwrap().remaining, 0, "{late} µs late");
    }
}

#[test]
fn wrong_operations_are_errors() {
    let clock = ManualClock::new(0);
    let window = Policy::fixed_window("w", 3, Duration::from_secs(1)).unwrap();
    let leases = Policy::concurrency("c", 3, Duration::from_secs(1)).unwrap();
    let gcra = Policy::gcra("g", 3, Duration::from_secs(1), 3).unwrap();

    let w = DirectLimiter::with_clock(window, clock.clone());
    assert_eq!(w.check(4).unwrap_err().code(), "cost_exceeds_limit");
    assert_eq!(
        w.reserve(1, Duration::from_secs(1)).unwrap_err().code(),
        "unsupported"
    );
    assert_eq!(w.acquire_lease().unwrap_err().code(), "unsupported");

    let c = DirectLimiter::with_clock(leases, clock.clone());
    assert_eq!(c.check(1).unwrap_err().code(), "unsupported");
    let lease = c.acquire_lease().unwrap();
    let id = lease.id.expect("a lease is free");
    assert!(c.release_lease(id).unwrap());
    assert!(!c.release_lease(id).unwrap(), "released twice");

    let g = DirectLimiter::with_clock(gcra, clock);
    assert_eq!(g.check(4).unwrap_err().code(), "cost_exceeds_limit");
    assert_eq!(g.release_lease(id).unwrap_err().code(), "unsupported");
}

/// `reset` makes the limiter fresh in every form.
#[test]
fn reset_forgets() {
    for (policy, now) in [
        (Policy::gcra("g", 1, Duration::from_secs(60), 2).unwrap(), 1),
        (
            Policy::token_bucket("t", 1, Duration::from_secs(60), 2).unwrap(),
            1,
        ),
        (
            Policy::token_bucket("t", 1, Duration::from_secs(60), 2).unwrap(),
            1 << 53,
        ),
        (
            Policy::sliding_log("s", 2, Duration::from_secs(60)).unwrap(),
            1,
        ),
    ] {
        let limiter = DirectLimiter::with_clock(policy, ManualClock::new(now));
        assert!(limiter.check(2).unwrap().allowed);
        assert!(!limiter.check(1).unwrap().allowed);
        limiter.reset();
        assert_eq!(limiter.check(0).unwrap().remaining, 2);
    }
}

#[test]
fn a_shadow_policy_counts_but_never_denies() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let policy = Policy::gcra("shadow", 2, Duration::from_secs(1), 2)
        .unwrap()
        .shadow();
    let limiter = DirectLimiter::with_clock(policy, clock);
    for _ in 0..2 {
        let d = limiter.check(1).unwrap();
        assert!(d.allowed && !d.shadow);
    }
    let d = limiter.check(1).unwrap();
    assert!(d.allowed && d.shadow, "{d:?}");
    assert_eq!(d.remaining, 0);
    assert!(!d.retry_after.is_zero());
}
