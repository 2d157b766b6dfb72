//! One key under a flood, on a real `redis-server`: three instances (each
//! a leasing store over a resilient store over its own connection), 16
//! tasks each checking one key as fast as they can, for each of the four
//! leased algorithms. Admissions keep the bound (a window's limit, a
//! bucket's `burst + rate·T`); once the key is saturated the instances
//! deny locally, so the script calls (counted by the server, `INFO
//! commandstats`) stay within the bound the leases doc states; and a
//! reset or a refund made through another instance ends the local
//! denials within the longest local denial.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::ResilientStore;
use tollgate::{Algorithm, Clock, Policy, Source, Store, SystemClock};
use tollgate_testkit::RedisServer;

use crate::bound::{Admission, within_bucket_bound, within_each_window};

/// The lease interval here.
const INTERVAL: Duration = Duration::from_millis(10);
/// Tasks per instance.
const TASKS: usize = 16;
/// The longest local denial the leases doc states.
const MAX_LOCAL_DENIAL: Duration = Duration::from_secs(1);

/// Three instances on `server`, as `tollgate serve` stacks them.
async fn instances(server: &RedisServer) -> Vec<LeasingStore> {
    let mut out = Vec::new();
    for _ in 0..3 {
        let redis = RedisStore::connect(&server.url()).await.unwrap();
        let resilient = ResilientStore::builder(Arc::new(redis)).build().unwrap();
        out.push(LeasingStore::with(Arc::new(resilient), INTERVAL, 3));
    }
    out
}

/// Script calls the server has run.
fn script_calls(server: &RedisServer) -> u64 {
    server.command_calls("evalsha") + server.command_calls("eval")
}

/// What a flood came to.
struct Flooded {
    decisions: u64,
    admitted: Vec<Admission>,
    local_denials: u64,
}

/// Every task of every instance checks `key` for `run`, yielding after a
/// denial.
async fn flood(
    leasing: &[LeasingStore],
    policy: &Policy,
    key: &'static [u8],
    run: Duration,
) -> Flooded {
    let end = SystemClock.now_micros() + run.as_micros() as u64;
    let decisions = Arc::new(AtomicU64::new(0));
    let local = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for store in leasing {
        for _ in 0..TASKS {
            let (store, policy) = (store.clone(), policy.clone());
            let (decisions, local) = (decisions.clone(), local.clone());
            tasks.push(tokio::spawn(async move {
                let mut mine = Vec::new();
                while SystemClock.now_micros() < end {
                    let before = SystemClock.now_micros();
                    let d = store.check(&policy, key, 1).await.unwrap();
                    let after = SystemClock.now_micros();
                    decisions.fetch_add(1, Ordering::Relaxed);
                    if d.allowed {
                        mine.push((before, after, d.source));
                    } else {
                        if d.source == Source::Lease {
                            local.fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::task::yield_now().await;
                    }
                }
                mine
            }));
        }
    }
    let mut admitted = Vec::new();
    for t in tasks {
        admitted.extend(t.await.unwrap());
    }
    Flooded {
        decisions: decisions.load(Ordering::Relaxed),
        admitted,
        local_denials: local.load(Ordering::Relaxed),
    }
}

/// A window of each kind and two buckets, each offered far more than its
/// limit: 600 a second on the windows, 500 a second on the buckets
/// (burst 100).
fn flooded_policies() -> Vec<Policy> {
    [
        Policy::fixed_window("flood-fw", 120, Duration::from_millis(200)).unwrap(),
        Policy::sliding_window("flood-sw", 120, Duration::from_millis(200)).unwrap(),
        Policy::token_bucket("flood-tb", 500, Duration::from_secs(1), 100).unwrap(),
        Policy::gcra("flood-gcra", 500, Duration::from_secs(1), 100).unwrap(),
    ]
    .into_iter()
    .map(|p| p.with_lease(true).unwrap())
    .collect()
}

/// The most script calls the leases doc allows three instances for a
/// saturated key over `run`: for a fixed window, per window, its batches
/// up to the limit (the sizing halves what is left, so about `2 ·
/// instances` per halving of the limit) and one denial per instance per
/// longest local denial or window; for a sliding window or a bucket, two
/// takes per instance per pace (a short take is followed by the next
/// no sooner than the pace, and a take granted in full by at most one
/// short one), and a sliding window's one an interval over the last five
/// intervals of each window (its last stretch). Plus the first batches,
/// and the sweep's refunds.
fn call_bound(policy: &Policy, run: Duration) -> u64 {
    let instances = 3;
    let run = run.as_micros() as u64;
    let interval = INTERVAL.as_micros() as u64;
    let per_instance = match policy.algorithm() {
        Algorithm::FixedWindow(a) => {
            let windows = run / a.window_micros() + 2;
            let halvings = 64 - policy.limit().leading_zeros() as u64;
            windows * (2 * halvings + 2)
        }
        Algorithm::SlidingWindow(a) => {
            2 * (run / (5 * interval) + 1) + 5 * (run / a.window_micros() + 1) + 16
        }
        Algorithm::TokenBucket(a) => bucket_calls(a.rate(), a.burst(), run, interval),
        Algorithm::Gcra(a) => bucket_calls(a.rate(), a.burst(), run, interval),
        _ => unreachable!("a leased algorithm"),
    };
    instances * per_instance
}

/// Two takes per pace, and the first batches. The pace: five intervals,
/// but at most 4/5 of the refill from `burst − 1` less the hold (two
/// intervals, at most 2/5 of that refill), and at least the hold.
fn bucket_calls(rate: tollgate::algorithm::Rate, burst: u64, run: u64, interval: u64) -> u64 {
    let refill = (burst - 1) * rate.units_per_token / rate.units_per_micro;
    let hold = (2 * interval).min(refill * 2 / 5);
    let pace = (5 * interval).min(refill * 4 / 5 - hold).max(hold);
    2 * (run / pace + 1) + 16
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooded_key_is_denied_locally_within_its_bound_on_redis() {
    let server = RedisServer::start();
    let leasing = instances(&server).await;
    let run = Duration::from_millis(1_000);
    for policy in flooded_policies() {
        let name = policy.name().to_owned();
        let calls = script_calls(&server);
        let Flooded {
            decisions,
            mut admitted,
            local_denials,
        } = flood(&leasing, &policy, b"flooded", run).await;
        let calls = script_calls(&server) - calls;
        eprintln!(
            "{name}: {decisions} decisions, {} admitted, {local_denials} denied locally, {calls} script calls ({:.4} a decision)",
            admitted.len(),
            calls as f64 / decisions as f64
        );
        match policy.algorithm() {
            Algorithm::TokenBucket(_) | Algorithm::Gcra(_) => {
                within_bucket_bound(&mut admitted, &policy, leasing.len())
            }
            _ => within_each_window(&admitted, &policy),
        }
        assert!(
            local_denials > 0,
            "{name}: no denial answered locally ({decisions} decisions)"
        );
        let bound = call_bound(&policy, run);
        assert!(
            calls <= bound,
            "{name}: {calls} script calls for {decisions} decisions, more than the bound {bound}"
        );
    }
}

/// `instance` floods `policy`'s key until it denies locally.
async fn until_denied_locally(instance: &LeasingStore, policy: &Policy, key: &[u8]) {
    for _ in 0..100_000 {
        let d = instance.check(policy, key, 1).await.unwrap();
        if !d.allowed && d.source == Source::Lease {
            assert!(
                d.retry_after <= MAX_LOCAL_DENIAL,
                "a local denial of {:?}",
                d.retry_after
            );
            return;
        }
    }
    panic!("{}: never denied locally", policy.name());
}

/// After something made elsewhere at `made` (µs) gives the key capacity,
/// `instance` checks until it is admitted: no local denial may start more
/// than the longest local denial after `made` (the denial it answers was
/// set by a take before then).
async fn denials_end_within_the_bound(
    instance: &LeasingStore,
    policy: &Policy,
    key: &[u8],
    made: u64,
) {
    let bound = made + MAX_LOCAL_DENIAL.as_micros() as u64;
    let give_up = made + 30_000_000;
    loop {
        let before = SystemClock.now_micros();
        assert!(before < give_up, "{}: never admitted again", policy.name());
        let d = instance.check(policy, key, 1).await.unwrap();
        if d.allowed {
            return;
        }
        // 10 ms for the two clocks' drift.
        assert!(
            d.source != Source::Lease || before < bound + 10_000,
            "{}: denied locally {} µs after the change elsewhere",
            policy.name(),
            before - made
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fixed window of a minute, spent: the store's `retry_after` is most of
/// a minute, the instances deny locally, and a reset, then a refund, made
/// through the third ends the other two's denials within a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_or_refund_elsewhere_ends_local_denials_within_the_bound() {
    let server = RedisServer::start();
    let leasing = instances(&server).await;
    let policies = [
        Policy::fixed_window("long-fw", 50, Duration::from_secs(60)).unwrap(),
        Policy::sliding_window("long-sw", 50, Duration::from_secs(60)).unwrap(),
        Policy::gcra("slow-gcra", 1, Duration::from_secs(60), 50).unwrap(),
    ];
    for policy in policies {
        let policy = policy.with_lease(true).unwrap();
        for change in ["reset", "refund"] {
            let key = change.as_bytes();
            for instance in &leasing[..2] {
                until_denied_locally(instance, &policy, key).await;
            }
            let made = SystemClock.now_micros();
            match change {
                "reset" => leasing[2].reset(&policy, key).await.unwrap(),
                _ => {
                    leasing[2].refund(&policy, key, 50).await.unwrap();
                }
            }
            for instance in &leasing[..2] {
                denials_end_within_the_bound(instance, &policy, key, made).await;
            }
        }
    }
}
