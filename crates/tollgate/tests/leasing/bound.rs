//! The bound, on memory and on Redis: three leasing stores, 24 tasks each;
//! and the case the hold is for, step by step on a manual clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::{Algorithm, Clock, ManualClock, MemoryStore, Policy, Source, Store, SystemClock};
use tollgate_testkit::RedisServer;

use crate::Counting;

/// An admission and the clock (µs) read just before the call and just
/// after it returned.
pub(crate) type Admission = (u64, u64, Source);

/// The lease interval the tests use.
const INTERVAL: Duration = Duration::from_millis(10);
/// Tasks per instance.
const TASKS: usize = 24;

/// How the tasks of [`hammer`] check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Load {
    /// All the time.
    Steady,
    /// 100 ms on, 100 ms off, all together: each pause leaves leases idle
    /// for ten intervals, and they go back.
    Bursts,
}

/// What [`hammer`] saw: admissions, batches taken, units that went back.
pub(crate) struct Hammered {
    pub(crate) admitted: usize,
    pub(crate) takes: u64,
    pub(crate) refunded: u64,
}

/// `instances` leasing stores over `stores` (one each, or shared), 24
/// tasks each checking one key for `run` (checks denied come back after
/// 200 µs), under `load`; checks the invariants and returns what it saw.
pub(crate) async fn hammer(
    stores: Vec<Arc<dyn Store>>,
    policy: Policy,
    run: Duration,
    load: Load,
) -> Hammered {
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
                    let phase = end.saturating_sub(before) / 100_000;
                    if load == Load::Bursts && phase % 2 == 1 {
                        let next = end - phase * 100_000;
                        tokio::time::sleep(Duration::from_micros(next.saturating_sub(before)))
                            .await;
                        continue;
                    }
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
    let lapsed: u64 = leasing.iter().map(LeasingStore::lapsed).sum();
    eprintln!(
        "{}: {} admissions ({from_leases} from leases), {takes} batches, granted {granted}, refunded {refunded}, lapsed after idling {lapsed}",
        policy.name(),
        admissions.len(),
    );
    Hammered {
        admitted: admissions.len(),
        takes,
        refunded,
    }
}

/// No window admits more than its limit: counting each admission whose
/// call lay wholly inside one window there (an admission straddling a
/// boundary may belong to either, and is left out).
pub(crate) fn within_each_window(admissions: &[Admission], policy: &Policy) {
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

/// No span `T` admits more than `burst + rate·T`, the bucket's own bound
/// (leases held or not): a bucket of that size refilled at the rate never
/// runs dry on the admissions, each at the time its call returned. That
/// time may be late by the call's duration, so an admission made just
/// before a span may be counted in it: at most one per task in flight,
/// which the bucket is given on top.
pub(crate) fn within_bucket_bound(admissions: &mut [Admission], policy: &Policy, instances: usize) {
    let (rate, per, burst) = match policy.algorithm() {
        Algorithm::TokenBucket(a) => (a.rate().rate, a.rate().per, a.burst()),
        Algorithm::Gcra(a) => (a.rate().rate, a.rate().per, a.burst()),
        _ => unreachable!("a bucket"),
    };
    let in_flight = (instances * TASKS) as u64;
    // In units of 1 / per: a token is `per` of them, and a µs refills
    // `rate`.
    let capacity = (burst + in_flight) * per;
    admissions.sort_unstable_by_key(|a| a.1);
    let (mut level, mut at) = (capacity, admissions.first().map_or(0, |a| a.1));
    let mut lowest = capacity;
    for &(_, after, _) in admissions.iter() {
        level = (level + (after - at) * rate).min(capacity);
        at = after;
        assert!(
            level >= per,
            "at {after} µs more than burst + rate·T admitted ({:.1} units short)",
            (per - level) as f64 / per as f64
        );
        level -= per;
        lowest = lowest.min(level);
    }
    eprintln!(
        "bucket: at least {:.1} units of burst + rate·T + in_flight left at every admission",
        lowest as f64 / per as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_a_memory_store_never_over_admit() {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::builder().clock(SystemClock).build());
    for policy in policies() {
        let run = Duration::from_millis(1200);
        hammer(vec![memory.clone(); 3], policy, run, Load::Steady).await;
    }
    // Below the limit, a batch serves many checks.
    for roomy in [
        Policy::fixed_window("roomy", 1 << 40, Duration::from_secs(3600)).unwrap(),
        Policy::gcra("roomy-gcra", 1 << 30, Duration::from_secs(1), 1 << 20).unwrap(),
    ] {
        let roomy = roomy.with_lease(true).unwrap();
        let run = Duration::from_millis(500);
        let Hammered {
            admitted, takes, ..
        } = hammer(vec![memory.clone(); 3], roomy, run, Load::Steady).await;
        assert!(
            takes * 10 < admitted as u64,
            "{takes} batches for {admitted} admissions"
        );
    }
}

/// A window of each kind, and buckets refilling 20,000 a second with a
/// burst of 2,000: the load (72 tasks) keeps every one at its limit.
pub(crate) fn policies() -> Vec<Policy> {
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
        let run = Duration::from_millis(1200);
        hammer(stores.clone(), policy, run, Load::Steady).await;
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
    // Idle for a few intervals: what was held goes back (in the
    // background, however late it runs on a busy machine), all of it.
    let t = std::time::Instant::now();
    while leasing.refunded() < held {
        assert!(
            t.elapsed() < tollgate_testkit::PATIENCE,
            "refunded {} of {held}",
            leasing.refunded()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
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

/// The case a bucket's hold is for, on the store's manual clock: two
/// instances take batches from a full bucket, the bucket refills for
/// 400 ms (less than their batches' life), a third instance takes all
/// there is, and the first two spend what they hold, all at one instant.
/// Recorded as taken when they were, their batches would meet the refill
/// the third spent (admitting up to `burst + rate·400 ms` at once); held,
/// every span admits at most `burst + rate·T`.
async fn held_batches_never_meet_the_refill(store: Arc<dyn Store>, clock: &ManualClock) {
    let policy = Policy::token_bucket("held", 1_000, Duration::from_secs(1), 1_000)
        .unwrap()
        .with_lease(true)
        .unwrap();
    // Batches that last (in real time) through the test: their life in
    // the store's time is the hold, 499.5 ms here.
    let leasing: Vec<LeasingStore> = (0..3)
        .map(|_| LeasingStore::with(store.clone(), Duration::from_secs(10), 1))
        .collect();
    let mut admissions: Vec<Admission> = Vec::new();
    let mut spend = async |leasing: &LeasingStore, most: usize| {
        for _ in 0..most {
            let d = leasing.check(&policy, b"k", 1).await.unwrap();
            if !d.allowed {
                break;
            }
            let now = clock.now_micros();
            admissions.push((now, now, d.source));
        }
    };
    // A batch is sized from the checks since the last one, over real
    // time: a few checks make it large, more if the machine stalls.
    for l in &leasing[..2] {
        for _ in 0..200 {
            spend(l, 1).await;
            if l.held(&policy, b"k") >= 60 {
                break;
            }
        }
    }
    let held = leasing[0].held(&policy, b"k") + leasing[1].held(&policy, b"k");
    assert!(held > 100, "the first two hold {held}");
    clock.advance(Duration::from_millis(400));
    spend(&leasing[2], 5_000).await;
    spend(&leasing[0], 5_000).await;
    spend(&leasing[1], 5_000).await;
    eprintln!(
        "held: {} admitted, {held} held before the refill",
        admissions.len()
    );
    // Exactly the bucket's bound, nothing in flight.
    within_bucket_bound(&mut admissions, &policy, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_batches_never_meet_the_refill_on_memory() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    held_batches_never_meet_the_refill(store, &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_batches_never_meet_the_refill_on_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = RedisStore::builder([server.url()])
        .time_source(TimeSource::Client(Arc::new(clock.clone())))
        .connect()
        .await
        .unwrap();
    held_batches_never_meet_the_refill(Arc::new(store), &clock).await;
}
