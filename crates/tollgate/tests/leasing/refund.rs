//! A bucket's unused lease goes back exactly (`refund_held`): alone, to
//! the unit; and under many instances in bursts, where only the last
//! batch taken from the key can go back, without ever stretching the
//! bucket's bound.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::{ManualClock, MemoryStore, Policy, Store, SystemClock};
use tollgate_testkit::RedisServer;

use crate::bound::{Hammered, Load, hammer};

/// One instance spends part of a bucket's batch, then leaves it idle:
/// what it held goes back, to the unit, on a store whose clock stands
/// still (so nothing else moves the bucket). Without the refund the units
/// would lapse and the store would stay as it was.
async fn an_idle_buckets_lease_goes_back(store: Arc<dyn Store>) {
    // 10 a second: a batch's debt lasts seconds, longer than the test, on
    // Redis too (whose keys expire on the server's own clock).
    for policy in [
        Policy::token_bucket("idle-tb", 10, Duration::from_secs(1), 1_000).unwrap(),
        Policy::gcra("idle-gcra", 10, Duration::from_secs(1), 1_000).unwrap(),
    ] {
        let policy = policy.with_lease(true).unwrap();
        let name = policy.name();
        let leasing = LeasingStore::with(store.clone(), Duration::from_millis(50), 1);
        let mut done = false;
        // A sweep that comes between the burst and the readings below
        // spoils the attempt: another key, then.
        for attempt in 0..5 {
            let key = format!("k{attempt}");
            let key = key.as_bytes();
            let refunded = leasing.refunded();
            for _ in 0..100 {
                assert!(leasing.check(&policy, key, 1).await.unwrap().allowed);
            }
            let held = leasing.held(&policy, key);
            let left = store.check(&policy, key, 0).await.unwrap().remaining;
            if leasing.refunded() != refunded || held == 0 {
                continue;
            }
            let start = std::time::Instant::now();
            while leasing.refunded() == refunded && start.elapsed() < Duration::from_secs(5) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(leasing.refunded() - refunded, held, "{name}: all of it");
            assert_eq!(leasing.held(&policy, key), 0, "{name}");
            let now = store.check(&policy, key, 0).await.unwrap().remaining;
            assert_eq!(now, left + held, "{name}: back in the store");
            done = true;
            break;
        }
        assert!(done, "{name}: every attempt was spoiled");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_buckets_lease_goes_back_on_memory() {
    let clock = ManualClock::new(1_700_000_000_000_000);
    an_idle_buckets_lease_goes_back(Arc::new(MemoryStore::with_clock(clock))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_buckets_lease_goes_back_on_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_700_000_000_000_000);
    let store = RedisStore::builder([server.url()])
        .time_source(TimeSource::Client(Arc::new(clock)))
        .connect()
        .await
        .unwrap();
    an_idle_buckets_lease_goes_back(Arc::new(store)).await;
}

/// Buckets at their limit and one far below it, three instances of 24
/// tasks in bursts of 100 ms with pauses of 100 ms between: the bound
/// holds with refunds on (`hammer` checks it, and that the store consumed
/// every admission first), and on deep buckets, whose batches are large,
/// the last batch before a pause goes back.
async fn bursts(stores: Vec<Arc<dyn Store>>) {
    let run = Duration::from_millis(1_200);
    let mut policies = super::bound::policies();
    policies.retain(|p| p.name() == "tb" || p.name() == "gcra");
    for policy in policies {
        hammer(stores.clone(), policy, run, Load::Bursts).await;
    }
    // Busier than its rate, far from its burst: the TAT runs well ahead
    // of the clock through each pause, so there is something to give back
    // (a bucket full again by the sweep takes nothing back).
    let second = Duration::from_secs(1);
    for roomy in [
        Policy::token_bucket("deep-tb", 10_000, second, 1 << 20).unwrap(),
        Policy::gcra("deep-gcra", 10_000, second, 1 << 20).unwrap(),
    ] {
        let roomy = roomy.with_lease(true).unwrap();
        let name = roomy.name().to_owned();
        let Hammered { refunded, .. } = hammer(stores.clone(), roomy, run, Load::Bursts).await;
        assert!(refunded > 0, "{name}: no batch went back in six pauses");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_leases_go_back_between_bursts_on_memory() {
    let memory: Arc<dyn Store> = Arc::new(MemoryStore::builder().clock(SystemClock).build());
    bursts(vec![memory; 3]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_leases_go_back_between_bursts_on_redis() {
    let server = RedisServer::start();
    let mut stores: Vec<Arc<dyn Store>> = Vec::new();
    for _ in 0..3 {
        stores.push(Arc::new(RedisStore::connect(&server.url()).await.unwrap()));
    }
    bursts(stores).await;
}
