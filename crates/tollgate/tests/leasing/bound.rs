//! The bound, on memory and on Redis: three leasing stores, 24 tasks each.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::{Algorithm, Clock, MemoryStore, Policy, Source, Store, SystemClock};
use tollgate_testkit::RedisServer;

use crate::Counting;

/// An admission and the clock (µs) read just before the call and just
/// after it returned.
type Admission = (u64, u64, Source);

/// The lease interval the tests use.
const INTERVAL: Duration = Duration::from_millis(10);
/// Tasks per instance.
const TASKS: usize = 24;

/// `instances` leasing stores over `stores` (one each, or shared), 24
/// tasks each checking one key for `run` (checks denied come back after
/// 200 µs); checks the invariants and returns (admissions, batches
/// taken).
async fn hammer(stores: Vec<Arc<dyn Store>>, policy: Policy, run: Duration) -> (usize, u64) {
    let counting: Vec<Arc<Counting>> = stores
        .into_iter()
        .map(|store| Arc::new(Counting::new(store)))
        .collect();
    let leasing: Vec<LeasingStore> = counting
        .iter()
        .map(|c| LeasingStore::with(c.clone(), INTERVAL, 3))
        .collect();
    let admissions = Arc::new(Mutex::new(Vec::<Admission>::new()));
    // Admissions from leases so far, on every instance.
    let leased = Arc::new(AtomicU64::new(0));
    let end = SystemClock.now_micros() + run.as_micros() as u64;
    let mut tasks = Vec::new();
    for store in &leasing {
        for _ in 0..TASKS {
            let (store, policy, admissions) = (store.clone(), policy.clone(), admissions.clone());
            let (leased, counting) = (leased.clone(), counting.clone());
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while SystemClock.now_micros() < end {
                    let before = SystemClock.now_micros();
                    let d = store.check(&policy, b"hot", 1).await.unwrap();
                    let after = SystemClock.now_micros();
                    if d.allowed {
                        mine.push((before, after, d.source));
                        // At every moment: the admissions made so far were
                        // consumed in the store (read in this order, each
                        // count only grows, and a refund is counted after
                        // its units left the lease).
                        let admitted = leased.fetch_add(1, Ordering::SeqCst) + 1;
                        let consumed: u64 = counting
                            .iter()
                            .map(|c| {
                                c.granted.load(Ordering::SeqCst) - c.refunded.load(Ordering::SeqCst)
                            })
                            .sum();
                        assert!(
                            consumed >= admitted,
                            "{admitted} admitted, {consumed} consumed"
                        );
                    } else {
                        // Denied: come back soon.
                        tokio::time::sleep(Duration::from_micros(200)).await;
                    }
                }
                admissions.lock().unwrap().extend(mine);
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    let mut admissions = admissions.lock().unwrap().clone();
    // Consumed in the store, less what went back, is at least what was
    // admitted (a lease still held at the end is consumed and unspent).
    let granted: u64 = counting
        .iter()
        .map(|c| c.granted.load(Ordering::Relaxed))
        .sum();
    let refunded: u64 = counting
        .iter()
        .map(|c| c.refunded.load(Ordering::Relaxed))
        .sum();
    // (The store answers no check here: every admission is a lease's.)
    let from_leases = admissions.iter().filter(|a| a.2 == Source::Lease).count() as u64;
    assert_eq!(
        from_leases,
        admissions.len() as u64,
        "an admission not from a lease"
    );
    assert!(
        granted - refunded >= from_leases,
        "granted {granted}, refunded {refunded}, admitted {from_leases}: more than consumed"
    );
    match policy.algorithm() {
        Algorithm::TokenBucket(_) | Algorithm::Gcra(_) => {
            within_bucket_bound(&mut admissions, &policy, leasing.len())
        }
        _ => within_each_window(&admissions, &policy),
    }
    let takes: u64 = leasing.iter().map(LeasingStore::takes).sum();
    eprintln!(
        "{}: {} admissions ({from_leases} from leases), {takes} batches, granted {granted}, refunded {refunded}",
        policy.name(),
        admissions.len(),
    );
    (admissions.len(), takes)
}

/// No window admits more than its limit: counting each admission whose
/// call lay wholly inside one window there (an admission straddling a
/// boundary may belong to either, and is left out).
fn within_each_window(admissions: &[Admission], policy: &Policy) {
    let window = policy.time_span().as_micros() as u64;
    let mut per_window = std::collections::BTreeMap::<u64, u64>::new();
    for (before, after, _) in admissions {
        if before / window == after / window {
            *per_window.entry(before / window).or_default() += 1;
        }
    }
    for (k, n) in &per_window {
        assert!(
            *n <= policy.limit(),
            "window {k} admitted {n} of a limit of {}",
            policy.limit()
        );
    }
    eprintln!("per window {:?}", per_window.values().collect::<Vec<_>>());
}

/// No span `T` admits more than `burst + rate·(T + interval)`, the leased
/// bucket's bound: a bucket of that size refilled at the rate never runs
/// dry on the admissions, each at the time its call returned. That time
/// may be late by the call's duration, so an admission made just before a
/// span may be counted in it: at most one per task in flight, which the
/// bucket is given on top.
fn within_bucket_bound(admissions: &mut [Admission], policy: &Policy, instances: usize) {
    let (rate, per, burst) = match policy.algorithm() {
        Algorithm::TokenBucket(a) => (a.rate().rate, a.rate().per, a.burst()),
        Algorithm::Gcra(a) => (a.rate().rate, a.rate().per, a.burst()),
        _ => unreachable!("a bucket"),
    };
    let in_flight = (instances * TASKS) as u64;
    let interval = INTERVAL.as_micros() as u64;
    // In units of 1 / per: a token is `per` of them, and a µs refills
    // `rate`.
    let capacity = (burst + in_flight) * per + rate * interval;
    admissions.sort_unstable_by_key(|a| a.1);
    let (mut level, mut at) = (capacity, admissions.first().map_or(0, |a| a.1));
    // The strict bound `burst + rate·T`, for the report only.
    let strict = burst * per;
    let (mut strict_level, mut worst) = (strict, 0i128);
    for &(_, after, _) in admissions.iter() {
        let refill = (after - at) * rate;
        level = (level + refill).min(capacity);
        strict_level = (strict_level + refill).min(strict);
        at = after;
        assert!(
            level >= per,
            "at {after} µs more than burst + rate·(T + interval) admitted ({} units short)",
            per - level
        );
        level -= per;
        worst = worst.max(per as i128 - strict_level as i128);
        strict_level = strict_level.saturating_sub(per);
    }
    eprintln!(
        "bucket: the strict bound burst + rate·T was exceeded by at most {:.1} units (by the time each call returned)",
        worst.max(0) as f64 / per as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_a_memory_store_never_over_admit() {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::builder().clock(SystemClock).build());
    for policy in policies() {
        hammer(vec![memory.clone(); 3], policy, Duration::from_millis(1200)).await;
    }
    // Below the limit, a batch serves many checks.
    for roomy in [
        Policy::fixed_window("roomy", 1 << 40, Duration::from_secs(3600)).unwrap(),
        Policy::gcra("roomy-gcra", 1 << 30, Duration::from_secs(1), 1 << 20).unwrap(),
    ] {
        let roomy = roomy.with_lease(true).unwrap();
        let (admitted, takes) =
            hammer(vec![memory.clone(); 3], roomy, Duration::from_millis(500)).await;
        assert!(
            takes * 10 < admitted as u64,
            "{takes} batches for {admitted} admissions"
        );
    }
}

/// A window of each kind, and buckets refilling 20,000 a second with a
/// burst of 2,000: the load (72 tasks) keeps every one at its limit.
fn policies() -> Vec<Policy> {
    [
        Policy::fixed_window("fw", 2_000, Duration::from_millis(200)).unwrap(),
        Policy::sliding_window("sw", 2_000, Duration::from_millis(200)).unwrap(),
        Policy::token_bucket("tb", 20_000, Duration::from_secs(1), 2_000).unwrap(),
        Policy::gcra("gcra", 2_000, Duration::from_millis(100), 2_000).unwrap(),
    ]
    .into_iter()
    .map(|p| p.with_lease(true).unwrap())
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_three_instances_on_redis_never_over_admit() {
    let server = RedisServer::start();
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        stores.push(Arc::new(RedisStore::connect(&server.url()).await.unwrap()));
    }
    for policy in policies() {
        hammer(stores.clone(), policy, Duration::from_millis(1200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_lease_goes_back_and_a_reset_drops_it() {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::new());
    let leasing = LeasingStore::with(memory.clone(), Duration::from_millis(10), 1);
    let policy = Policy::fixed_window("idle", 1_000, Duration::from_secs(3600))
        .unwrap()
        .with_lease(true)
        .unwrap();
    // A burst makes the next batch larger than one unit.
    for _ in 0..200 {
        assert!(leasing.check(&policy, b"k", 1).await.unwrap().allowed);
    }
    let held = 1_000 - memory.check(&policy, b"k", 0).await.unwrap().remaining - 200;
    assert!(held > 0, "no lease held after a burst");
    // Idle for a few intervals: what was held goes back.
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(leasing.refunded(), held);
    assert_eq!(memory.check(&policy, b"k", 0).await.unwrap().remaining, 800);
    // A reset drops this instance's lease with the key.
    for _ in 0..200 {
        leasing.check(&policy, b"k", 1).await.unwrap();
    }
    leasing.reset(&policy, b"k").await.unwrap();
    // The next check takes a batch of one from the fresh key (a kept
    // lease would have answered without the store).
    assert!(leasing.check(&policy, b"k", 1).await.unwrap().allowed);
    assert_eq!(memory.check(&policy, b"k", 0).await.unwrap().remaining, 999);
}
