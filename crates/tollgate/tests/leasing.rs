//! Leases never over-admit: many instances, many tasks, one hot key. Every
//! admission from a lease was consumed in the store first (the store's
//! consumed units, granted less refunded, are never below the
//! admissions), and no window admits more than its limit.

#![cfg(feature = "redis")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tollgate::algorithm::{LeaseId, Usage};
use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::store::{BoxFuture, Lease, Request, Store};
use tollgate::{Clock, Decision, MemoryStore, Policy, Result, Source, SystemClock};
use tollgate_testkit::RedisServer;

/// A store that counts what `check_at_most` granted and what was
/// refunded through it.
#[derive(Debug)]
struct Counting {
    store: Arc<dyn Store>,
    granted: AtomicU64,
    refunded: AtomicU64,
}

impl Store for Counting {
    fn check<'a>(&'a self, p: &'a Policy, k: &'a [u8], c: u64) -> BoxFuture<'a, Result<Decision>> {
        self.store.check(p, k, c)
    }
    fn reserve<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        w: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.store.reserve(p, k, c, w)
    }
    fn check_many<'a>(
        &'a self,
        r: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        self.store.check_many(r, atomic)
    }
    fn acquire_lease<'a>(&'a self, p: &'a Policy, k: &'a [u8]) -> BoxFuture<'a, Result<Lease>> {
        self.store.acquire_lease(p, k)
    }
    fn release_lease<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        l: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        self.store.release_lease(p, k, l)
    }
    fn reset<'a>(&'a self, p: &'a Policy, k: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        self.store.reset(p, k)
    }
    fn usage<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        op: Usage,
        c: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let d = self.store.usage(p, k, op, c).await?;
            match op {
                Usage::AtMost => self.granted.fetch_add(d.granted, Ordering::Relaxed),
                Usage::Refund => self.refunded.fetch_add(c, Ordering::Relaxed),
                _ => 0,
            };
            Ok(d)
        })
    }
}

/// An admission and the clock (µs) read just before the call and just
/// after it returned.
type Admission = (u64, u64, Source);

/// `instances` leasing stores over `stores` (one each, or shared), 24
/// tasks each checking one key for `run` (checks denied come back after
/// 200 µs); checks the invariants and returns (admissions, batches
/// taken).
async fn hammer(stores: Vec<Arc<dyn Store>>, policy: Policy, run: Duration) -> (usize, u64) {
    let window = policy.time_span().as_micros() as u64;
    let limit = policy.limit();
    let counting: Vec<Arc<Counting>> = stores
        .into_iter()
        .map(|store| {
            Arc::new(Counting {
                store,
                granted: AtomicU64::new(0),
                refunded: AtomicU64::new(0),
            })
        })
        .collect();
    let leasing: Vec<LeasingStore> = counting
        .iter()
        .map(|c| LeasingStore::with(c.clone(), Duration::from_millis(10), 3))
        .collect();
    let admissions = Arc::new(Mutex::new(Vec::<Admission>::new()));
    let end = SystemClock.now_micros() + run.as_micros() as u64;
    let mut tasks = Vec::new();
    for store in &leasing {
        for _ in 0..24 {
            let (store, policy, admissions) = (store.clone(), policy.clone(), admissions.clone());
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while SystemClock.now_micros() < end {
                    let before = SystemClock.now_micros();
                    let d = store.check(&policy, b"hot", 1).await.unwrap();
                    let after = SystemClock.now_micros();
                    if d.allowed {
                        mine.push((before, after, d.source));
                    }
                    if !d.allowed {
                        // Denied until the window ends: come back soon.
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
    let admissions = admissions.lock().unwrap().clone();
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
    // No window admits more than its limit: counting each admission whose
    // call lay wholly inside one window there (an admission straddling a
    // boundary may belong to either, and is left out).
    let mut per_window = std::collections::BTreeMap::<u64, u64>::new();
    for (before, after, _) in &admissions {
        if before / window == after / window {
            *per_window.entry(before / window).or_default() += 1;
        }
    }
    for (k, n) in &per_window {
        assert!(*n <= limit, "window {k} admitted {n} of a limit of {limit}");
    }
    let takes: u64 = leasing.iter().map(LeasingStore::takes).sum();
    eprintln!(
        "{} admissions ({from_leases} from leases) in {} windows, {takes} batches, granted {granted}, refunded {refunded}; per window {:?}",
        admissions.len(),
        per_window.len(),
        per_window.values().collect::<Vec<_>>()
    );
    (admissions.len(), takes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_on_a_memory_store_never_over_admit() {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::builder().clock(SystemClock).build());
    for policy in [
        Policy::fixed_window("fw", 2_000, Duration::from_millis(200)).unwrap(),
        Policy::sliding_window("sw", 2_000, Duration::from_millis(200)).unwrap(),
    ] {
        let policy = policy.with_lease(true).unwrap();
        hammer(vec![memory.clone(); 3], policy, Duration::from_millis(1200)).await;
    }
    // Below the limit, a batch serves many checks.
    let roomy = Policy::fixed_window("roomy", 1 << 40, Duration::from_secs(3600))
        .unwrap()
        .with_lease(true)
        .unwrap();
    let (admitted, takes) =
        hammer(vec![memory.clone(); 3], roomy, Duration::from_millis(500)).await;
    assert!(
        takes * 10 < admitted as u64,
        "{takes} batches for {admitted} admissions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_of_three_instances_on_redis_never_over_admit() {
    let server = RedisServer::start();
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        stores.push(Arc::new(RedisStore::connect(&server.url()).await.unwrap()));
    }
    for policy in [
        Policy::fixed_window("fw", 2_000, Duration::from_millis(200)).unwrap(),
        Policy::sliding_window("sw", 2_000, Duration::from_millis(200)).unwrap(),
    ] {
        let policy = policy.with_lease(true).unwrap();
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
