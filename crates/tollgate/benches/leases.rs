//! Leases on one hot key, against a `redis-server` this benchmark starts:
//!
//! - steady load below the limit, 64 and 256 concurrent callers in one
//!   process: decisions/s, p99 latency and Redis script calls per decision
//!   (`INFO commandstats`), per-request (`RedisStore`) against leased
//!   (`LeasingStore` over it, interval 20 ms);
//! - the worst case for leases: offered load just above the limit
//!   (105%), spread over three instances (three stores, each with its own
//!   connection), paced every ms; the admissions of each whole window,
//!   per-request against leased, never above the limit.
//!
//! `cargo bench -p tollgate --features redis --bench leases [-- --seconds N]`

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tollgate::store::Store;
use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::{Clock, Policy, SystemClock};
use tollgate_testkit::RedisServer;

/// Script calls the server has run (`EVALSHA`), from `INFO commandstats`.
fn script_calls(server: &RedisServer) -> u64 {
    let info = server.cli(&["INFO", "commandstats"]);
    info.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

async fn steady(
    server: &RedisServer,
    store: Arc<dyn Store>,
    policy: Arc<Policy>,
    callers: usize,
    seconds: f64,
) -> (f64, f64, f64) {
    let stop = Arc::new(AtomicBool::new(false));
    let calls_before = script_calls(server);
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let (store, policy, stop) = (store.clone(), policy.clone(), stop.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    let d = store.check(&policy, b"hot", 1).await.unwrap();
                    assert!(d.allowed, "the steady load stays below the limit");
                    latencies.push(t.elapsed().as_nanos() as u64);
                }
                latencies
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed().as_secs_f64();
    let calls = script_calls(server) - calls_before;
    all.sort_unstable();
    let p99 = all[(all.len() - 1) * 99 / 100] as f64 / 1000.0;
    (
        all.len() as f64 / elapsed,
        calls as f64 / all.len() as f64,
        p99,
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
    let seconds = args
        .iter()
        .position(|a| a == "--seconds")
        .and_then(|i| args.get(i + 1))
        .map_or(3.0, |s| s.parse().expect("--seconds N"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = RedisServer::start();
    rt.block_on(async {
        let redis: Arc<dyn Store> = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
        let leasing: Arc<dyn Store> = Arc::new(LeasingStore::new(redis.clone()));
        println!("one hot key, fixed window far below its limit, {seconds} s per row");
        println!(
            "{:<12} {:>7} {:>13} {:>18} {:>10}",
            "store", "callers", "decisions/s", "Redis calls/dec", "p99 µs"
        );
        for callers in [64, 256] {
            let mut rates = Vec::new();
            for (name, store, leased) in [("per-request", &redis, false), ("leased", &leasing, true)] {
                let policy = Policy::fixed_window(&format!("steady-{callers}-{leased}"), 1 << 40, Duration::from_secs(3600))
                    .unwrap()
                    .with_lease(leased)
                    .unwrap();
                let (rate, calls, p99) = steady(&server, store.clone(), Arc::new(policy), callers, seconds).await;
                println!("{name:<12} {callers:>7} {rate:>13.0} {calls:>18.4} {p99:>10.1}");
                rates.push(rate);
            }
            println!("leased / per-request at {callers} callers: {:.1}x", rates[1] / rates[0]);
        }

        // The worst case: 105% of the limit over three instances.
        let limit = 20_000u64;
        let per_ms = limit * 105 / 100 / 1000;
        println!(
            "\nworst case: a limit of {limit} per 1 s window, {per_ms} checks offered per ms over 3 instances ({}% of the limit)",
            per_ms * 1000 * 100 / limit
        );
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
            let policy = Policy::fixed_window(&format!("worst-{leased}"), limit, Duration::from_secs(1))
                .unwrap()
                .with_lease(leased)
                .unwrap();
            let per_window = worst_case(stores, Arc::new(policy), per_ms, 4).await;
            let name = if leased { "leased" } else { "per-request" };
            // By the clock read after each admission, so an admission at a
            // window's very end may be counted in the next.
            let over = per_window.iter().filter(|&&n| n > limit).count();
            println!("{name:<12} admitted per window {per_window:?} ({over} above the limit)");
            totals.push(per_window.iter().sum::<u64>());
        }
        println!(
            "leased / per-request admitted: {:.4}",
            totals[1] as f64 / totals[0] as f64
        );
    });
}
