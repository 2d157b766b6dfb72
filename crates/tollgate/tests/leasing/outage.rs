//! A real outage under leases: Redis killed (`kill -9`) while an instance
//! holds a lease. The units held are still spent (`source: lease`), then
//! the resilient store's failure policy answers (`source: fallback`), and
//! neither admits past its bound: leased admissions at most what Redis
//! granted, the fallback's at most its share.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{OnFailure, ResilientStore};
use tollgate::{Policy, Source, Store};
use tollgate_testkit::RedisServer;

use crate::Counting;

/// A decision as a caller saw it: when its call started and ended (since
/// the test began), where it came from, whether it admitted.
type Seen = (Duration, Duration, Source, bool);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_leases_are_spent_through_an_outage_then_the_failure_policy_answers() {
    // 20,000 a minute; the fallback's share is a tenth of it (the test
    // keeps clear of a minute's end, so it runs in one window).
    clear_of_a_minutes_end();
    let policy = Policy::fixed_window("outage", 20_000, Duration::from_secs(60)).unwrap();
    outage(policy, |_| 2_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buckets_held_lease_is_spent_through_an_outage_then_the_failure_policy_answers() {
    // 20,000 a minute with a burst of 20,000: over the span the fallback
    // answered, its share is a tenth of the burst and of the refill.
    let policy =
        Policy::token_bucket("outage-bucket", 20_000, Duration::from_secs(60), 20_000).unwrap();
    outage(policy, |span| {
        2_000 + (span.as_micros() as u64 * 2_000).div_ceil(60_000_000)
    })
    .await;
}

/// Waits past the end of the minute when less than 5 s of it are left.
fn clear_of_a_minutes_end() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    if 60 - now % 60 < 5 {
        std::thread::sleep(Duration::from_secs(60 - now % 60 + 1));
    }
}

/// Eight callers on one hot key of `policy` (leased), Redis killed once
/// this instance holds a large lease; `share` bounds what the fallback
/// (a tenth of the policy, `expected_instances = 10`) may admit over the
/// span from its first answer's start to the last answer's end.
async fn outage(policy: Policy, share: impl Fn(Duration) -> u64) {
    let policy = policy.with_lease(true).unwrap();
    let server = RedisServer::start();
    let redis = RedisStore::builder([server.url()])
        .deadline(Duration::from_millis(50))
        .connect()
        .await
        .unwrap();
    // The service's order: leases over the resilient store over Redis
    // (with a counter between, of what Redis granted to the leases).
    let resilient = ResilientStore::builder(Arc::new(redis))
        .deadline(Duration::from_millis(50))
        .on_failure(OnFailure::Local)
        .expected_instances(10)
        .build()
        .unwrap();
    let counting = Arc::new(Counting::new(Arc::new(resilient.clone())));
    let leasing = LeasingStore::with(counting.clone(), Duration::from_millis(200), 3);

    // Eight callers, one check a ms each, for 1.5 s.
    let start = Instant::now();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (leasing, policy) = (leasing.clone(), policy.clone());
            tokio::spawn(async move {
                let mut seen: Vec<Seen> = Vec::new();
                while start.elapsed() < Duration::from_millis(1500) {
                    let before = start.elapsed();
                    let d = leasing
                        .check(&policy, b"hot", 1)
                        .await
                        .expect("no error reaches a caller");
                    seen.push((before, start.elapsed(), d.source, d.allowed));
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                seen
            })
        })
        .collect();

    // Kill Redis once the lease is large (a window's batch is sized for
    // 200 ms of traffic, a bucket's for half its hold).
    let held = loop {
        let held = leasing.held(&policy, b"hot");
        if held >= 200 {
            break held;
        }
        assert!(
            start.elapsed() < tollgate_testkit::PATIENCE,
            "no lease grew"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    server.kill9();
    let killed = start.elapsed();
    // Granted before the kill (nothing is granted after it).
    let granted = counting.granted.load(Ordering::SeqCst);

    let mut seen: Vec<Seen> = Vec::new();
    for t in tasks {
        seen.extend(t.await.unwrap());
    }
    let count = |f: &dyn Fn(&Seen) -> bool| seen.iter().filter(|s| f(s)).count() as u64;
    let leased_after = count(&|s| s.2 == Source::Lease && s.0 >= killed);
    let leased = count(&|s| s.2 == Source::Lease);
    let fallback = count(&|s| s.2 == Source::Fallback && s.3);
    let first_fallback = seen
        .iter()
        .filter(|s| s.2 == Source::Fallback)
        .map(|s| s.1)
        .min()
        .expect("the failure policy answered");
    let last_lease = seen
        .iter()
        .filter(|s| s.2 == Source::Lease)
        .map(|s| s.0)
        .max()
        .unwrap();
    let span = seen.iter().map(|s| s.1).max().unwrap()
        - seen
            .iter()
            .filter(|s| s.2 == Source::Fallback)
            .map(|s| s.0)
            .min()
            .unwrap();
    let share = share(span);
    eprintln!(
        "held {held} at the kill ({killed:?}); {leased} leased admissions ({leased_after} after the kill), \
         {fallback} fallback admissions (share {share}); last lease at {last_lease:?}, first fallback by {first_fallback:?}"
    );
    // Held units are still spent after the kill...
    assert!(leased_after > 0, "no lease was spent after the kill");
    // ...never more than Redis granted...
    assert!(
        leased <= granted,
        "{leased} leased admissions, {granted} granted"
    );
    // ...and before the failure policy answers: every leased check began
    // before the first fallback decision ended (once the lease is empty no
    // batch can be taken while Redis is down).
    assert!(
        last_lease < first_fallback,
        "a lease spent at {last_lease:?}, after the fallback answered by {first_fallback:?}"
    );
    // The failure policy admits, within its share of the limit.
    assert!(fallback > 0, "the fallback admitted nothing");
    assert!(
        fallback <= share,
        "{fallback} fallback admissions of a share of {share}"
    );
    // Nothing else decided: no store answer after the kill.
    assert_eq!(
        count(&|s| s.2 == Source::Store && s.3 && s.0 >= killed + Duration::from_millis(100)),
        0
    );
}
