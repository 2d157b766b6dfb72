//! Leases on one hot key, against a `redis-server` this benchmark starts:
//!
//! - steady load below the limit, 64 and 256 concurrent callers in one
//!   process, a fixed window and GCRA: decisions/s, p99 latency and Redis
//!   script calls per decision (`INFO commandstats`), per-request
//!   (`RedisStore`) against leased (`LeasingStore` over it, interval
//!   20 ms), side by side, `--rounds` times, with the median ratio;
//! - the worst case for leases: offered load just above the limit
//!   (105%), spread over three instances (three stores, each with its own
//!   connection), paced every ms; the admissions of each whole second,
//!   per-request against leased, for a fixed window and a token bucket.
//!
//! `cargo bench -p tollgate --features redis --bench leases [-- --seconds N --rounds N] [--leased-only]`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate::store::Store;
use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::{Clock, Policy, SystemClock};
use tollgate_testkit::RedisServer;

/// Latencies in buckets of about 6% (16 a power of two), in ns.
struct Histogram([u64; 64 * 16]);

impl Histogram {
    fn bucket(ns: u64) -> usize {
        let ns = ns.max(16);
        let msb = 63 - ns.leading_zeros() as usize;
        msb * 16 + ((ns >> (msb - 4)) & 15) as usize
    }

    /// The bucket's upper end.
    fn upper(i: usize) -> u64 {
        let (msb, sub) = (i / 16, (i % 16) as u64);
        (16 + sub + 1) << (msb - 4)
    }

    fn quantile(&self, q: f64) -> u64 {
        let total: u64 = self.0.iter().sum();
        let mut seen = 0;
        for (i, n) in self.0.iter().enumerate() {
            seen += n;
            if seen as f64 >= q * total as f64 {
                return Histogram::upper(i);
            }
        }
        0
    }
}

/// `callers` tasks checking one key until `seconds` have passed, each
/// yielding to the others every 64 checks (a leased check never waits, and
/// a caller that never yields would starve the rest); every 8th check
/// timed. Decisions/s, script calls per decision, p99 (µs).
async fn steady(
    server: &RedisServer,
    store: Arc<dyn Store>,
    policy: Arc<Policy>,
    callers: usize,
    seconds: f64,
) -> (f64, f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let calls_before = server.command_calls("evalsha");
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
            tokio::spawn(async move {
                let mut latencies = Box::new(Histogram([0; 64 * 16]));
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    if n.is_multiple_of(8) {
                        let t = Instant::now();
                        let d = store.check(&policy, b"hot", 1).await.unwrap();
                        latencies.0[Histogram::bucket(t.elapsed().as_nanos() as u64)] += 1;
                        assert!(d.allowed, "the steady load stays below the limit");
                    } else {
                        let d = store.check(&policy, b"hot", 1).await.unwrap();
                        assert!(d.allowed, "the steady load stays below the limit");
                    }
                    if n.is_multiple_of(64) {
                        tokio::task::yield_now().await;
                    }
                }
                (n, latencies)
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Histogram([0; 64 * 16]);
    let mut decisions = 0;
    for t in tasks {
        let (n, h) = t.await.unwrap();
        decisions += n;
        for (a, b) in all.0.iter_mut().zip(h.0.iter()) {
            *a += b;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let calls = server.command_calls("evalsha") - calls_before;
    (
        decisions as f64 / elapsed,
        calls as f64 / decisions as f64,
        all.quantile(0.99) as f64 / 1000.0,
    )
}

/// Three instances offering `per_ms` checks each per ms in all (split
/// evenly) for `windows` whole windows of 1 s; the admissions of each
/// whole window (by the clock at admission).
async fn worst_case(
    stores: Vec<Arc<dyn Store>>,
    policy: Arc<Policy>,
    per_ms: u64,
    windows: u64,
) -> Vec<u64> {
    let window = 1_000_000u64;
    // Start at the next window's beginning, and run `windows` of them.
    let now = SystemClock.now_micros();
    let first = now / window + 1;
    tokio::time::sleep(Duration::from_micros(first * window - now)).await;
    let end = (first + windows) * window;
    let admitted: Arc<Vec<AtomicU64>> = Arc::new((0..windows).map(|_| AtomicU64::new(0)).collect());
    let tasks: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(i, store)| {
            let (policy, admitted) = (policy.clone(), admitted.clone());
            let share = per_ms / 3 + u64::from((i as u64) < per_ms % 3);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_millis(1));
                loop {
                    tick.tick().await;
                    if SystemClock.now_micros() >= end {
                        break;
                    }
                    let checks: Vec<_> = (0..share)
                        .map(|_| {
                            let (store, policy, admitted) =
                                (store.clone(), policy.clone(), admitted.clone());
                            tokio::spawn(async move {
                                let d = store.check(&policy, b"worst", 1).await.unwrap();
                                let k = SystemClock.now_micros() / window;
                                if d.allowed && k >= first && k < first + windows {
                                    admitted[(k - first) as usize].fetch_add(1, Ordering::Relaxed);
                                }
                            })
                        })
                        .collect();
                    drop(checks);
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str, default: f64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |s| {
                s.parse().unwrap_or_else(|_| panic!("{name} N"))
            })
    };
    let seconds = flag("--seconds", 3.0);
    let rounds = flag("--rounds", 1.0) as usize;
    // Only the leased fixed window rows (to profile the fast path under
    // `perf record`).
    let leased_only = args.iter().any(|a| a == "--leased-only");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    rt.block_on(async {
        let redis: Arc<dyn Store> = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
        let leasing: Arc<dyn Store> = Arc::new(LeasingStore::new(redis.clone()));
        println!("one hot key far below its limit, {seconds} s per row, {rounds} round(s), rows of a round side by side");
        println!(
            "{:<6} {:<12} {:<8} {:>7} {:>13} {:>18} {:>10}",
            "round", "store", "policy", "callers", "decisions/s", "Redis calls/dec", "p99 µs"
        );
        let mut ratios: Vec<(String, Vec<f64>)> = Vec::new();
        for round in 0..rounds {
            for (kind, callers) in [("fixed", 64), ("fixed", 256), ("gcra", 64), ("gcra", 256)] {
                let mut rates = Vec::new();
                for (name, store, leased) in [("per-request", &redis, false), ("leased", &leasing, true)] {
                    if leased_only && (!leased || kind != "fixed") {
                        rates.push(f64::NAN);
                        continue;
                    }
                    let id = format!("steady-{kind}-{callers}-{leased}-{round}");
                    let policy = match kind {
                        "fixed" => Policy::fixed_window(&id, 1 << 40, Duration::from_secs(3600)),
                        _ => Policy::gcra(&id, 1 << 30, Duration::from_secs(1), 1 << 20),
                    }
                    .unwrap()
                    .with_lease(leased)
                    .unwrap();
                    let (rate, calls, p99) =
                        steady(&server, store.clone(), Arc::new(policy), callers, seconds).await;
                    println!("{round:<6} {name:<12} {kind:<8} {callers:>7} {rate:>13.0} {calls:>18.6} {p99:>10.1}");
                    rates.push(rate);
                }
                let row = format!("{kind} {callers}");
                let ratio = rates[1] / rates[0];
                match ratios.iter_mut().find(|(r, _)| *r == row) {
                    Some((_, v)) => v.push(ratio),
                    None => ratios.push((row, vec![ratio])),
                }
            }
        }
        for (row, mut v) in ratios {
            v.sort_by(f64::total_cmp);
            println!(
                "leased / per-request, {row} callers: median {:.1}x of {:?}",
                v[v.len() / 2],
                v.iter().map(|r| format!("{r:.1}")).collect::<Vec<_>>()
            );
        }

        if leased_only {
            return;
        }
        // The worst case: 105% of the limit over three instances, for a
        // fixed window of 1 s and for a token bucket refilling the same
        // per second (burst 2,000), counted per second.
        let limit = 20_000u64;
        let per_ms = limit * 105 / 100 / 1000;
        println!(
            "\nworst case: {limit} a second, {per_ms} checks offered per ms over 3 instances ({}% of the limit)",
            per_ms * 1000 * 100 / limit
        );
        for kind in ["fixed", "bucket"] {
            let mut totals = Vec::new();
            for leased in [false, true] {
                let mut stores: Vec<Arc<dyn Store>> = Vec::new();
                for _ in 0..3 {
                    let redis: Arc<dyn Store> = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
                    stores.push(if leased {
                        Arc::new(LeasingStore::new(redis))
                    } else {
                        redis
                    });
                }
                let id = format!("worst-{kind}-{leased}");
                let policy = match kind {
                    "fixed" => Policy::fixed_window(&id, limit, Duration::from_secs(1)),
                    _ => Policy::token_bucket(&id, limit, Duration::from_secs(1), 2_000),
                }
                .unwrap()
                .with_lease(leased)
                .unwrap();
                let per_window = worst_case(stores, Arc::new(policy), per_ms, 4).await;
                let name = if leased { "leased" } else { "per-request" };
                // What one second may admit: a window its limit; a bucket,
                // leased or not, its burst and a second's refill.
                let bound = match kind {
                    "fixed" => limit,
                    _ => 2_000 + limit,
                };
                // By the clock read after each admission, so an admission at a
                // window's very end may be counted in the next.
                let over = per_window.iter().filter(|&&n| n > bound).count();
                println!("{kind:<7} {name:<12} admitted per second {per_window:?} ({over} above {bound})");
                totals.push(per_window.iter().sum::<u64>());
            }
            println!(
                "{kind:<7} leased / per-request admitted: {:.4}",
                totals[1] as f64 / totals[0] as f64
            );
        }
    });
    println!(
        "load average: {}",
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
}
