//! Overrides on real stores: a key's count carries over when an override
//! raises or cuts its policy's parameters, on every algorithm, in memory
//! and on Redis (client time, and the server-clock forms, whose fixed
//! window names its key by its limit: an override with another limit
//! counts in the same key), standalone and Cluster.

use std::time::Duration;

use tollgate::overrides::{Limits, Override, Overrides, Resolved, Selector};
use tollgate::{ManualClock, MemoryStore, Policy, Store};

/// The policies of every algorithm, each of "size" `n` (limit, burst or
/// capacity) with a refill too slow to matter during a test.
fn policies(tag: &str, n: u64) -> Vec<Policy> {
    let hour = Duration::from_secs(3600);
    let name = |alg: &str| format!("{tag}-{alg}");
    vec![
        Policy::fixed_window(&name("fw"), n, hour).unwrap(),
        Policy::fixed_window(&name("fw1s"), n, Duration::from_secs(1000)).unwrap(),
        Policy::sliding_window(&name("sw"), n, hour).unwrap(),
        Policy::sliding_log(&name("sl"), n, hour).unwrap(),
        Policy::token_bucket(&name("tb"), 1, hour, n).unwrap(),
        Policy::gcra(&name("gcra"), 1, hour, n).unwrap(),
        Policy::leaky_bucket(&name("lb"), 1, hour, n).unwrap(),
        Policy::concurrency(&name("cc"), n, hour).unwrap(),
    ]
}

/// `n` as the policy's limit, burst or capacity.
fn sized(n: u64, policy: &Policy) -> Limits {
    let mut l = Limits::default();
    match tollgate::overrides::takes(policy.algorithm())[0] {
        "limit" => l.limit = Some(n),
        _ => match policy.algorithm() {
            tollgate::Algorithm::LeakyBucket(_) => l.capacity = Some(n),
            _ => l.burst = Some(n),
        },
    }
    l
}

/// `policy` as an override of `key` to size `n` makes it decide.
fn overridden(policy: &Policy, key: &[u8], n: u64) -> Policy {
    let o = Overrides::new();
    let sel = Selector::parse(key).unwrap();
    o.set(policy, sel, Override::limits(sized(n, policy)))
        .unwrap();
    match o.resolve(policy, key, None).unwrap() {
        Resolved::Decide { policy: p, by } => {
            assert_eq!(by.unwrap().bytes(), key);
            assert_eq!(p.limit(), n);
            p.into_owned()
        }
        other => panic!("{other:?}"),
    }
}

/// Takes `count` units of `key` under `policy`, in steps of 10.
async fn take(store: &dyn Store, policy: &Policy, key: &[u8], count: u64) {
    for _ in 0..count / 10 {
        if matches!(policy.algorithm(), tollgate::Algorithm::Concurrency(_)) {
            for _ in 0..10 {
                let lease = store.acquire_lease(policy, key).await.unwrap();
                assert!(lease.decision.allowed, "{}", policy.name());
            }
        } else {
            let d = store.check(policy, key, 10).await.unwrap();
            assert!(d.allowed, "{}: {d:?}", policy.name());
        }
    }
}

/// One more unit under `policy`: the decision.
async fn one(store: &dyn Store, policy: &Policy, key: &[u8]) -> tollgate::Decision {
    if matches!(policy.algorithm(), tollgate::Algorithm::Concurrency(_)) {
        store.acquire_lease(policy, key).await.unwrap().decision
    } else {
        store.check(policy, key, 1).await.unwrap()
    }
}

/// Raising 100 to 1,000 after 100 leaves 900 (899 after one more); cutting
/// 1,000 to 100 after 500 leaves nothing; and back under the policy's own,
/// the count is still there.
async fn the_count_carries_over(store: &dyn Store, tag: &str) {
    for policy in policies(&format!("{tag}-raise"), 100) {
        let name = policy.name().to_string();
        take(store, &policy, b"acme", 100).await;
        assert!(!one(store, &policy, b"acme").await.allowed, "{name}: full");
        let raised = overridden(&policy, b"acme", 1000);
        let d = one(store, &raised, b"acme").await;
        assert!(d.allowed, "{name}: raised {d:?}");
        assert_eq!((d.limit, d.remaining), (1000, 899), "{name}: raised");
        // The policy itself still sees its own limit passed.
        assert!(!one(store, &policy, b"acme").await.allowed, "{name}: base");
    }
    for policy in policies(&format!("{tag}-cut"), 1000) {
        let name = policy.name().to_string();
        take(store, &policy, b"acme", 500).await;
        let cut = overridden(&policy, b"acme", 100);
        let d = one(store, &cut, b"acme").await;
        assert!(!d.allowed, "{name}: cut {d:?}");
        assert_eq!((d.limit, d.remaining), (100, 0), "{name}: cut");
        let d = one(store, &policy, b"acme").await;
        assert!(d.allowed, "{name}: back {d:?}");
        assert_eq!(d.remaining, 499, "{name}: back");
    }
}

#[tokio::test]
async fn memory_carries_the_count_over() {
    let store = MemoryStore::builder()
        .clock(ManualClock::new(1_700_000_000_000_000))
        .build();
    the_count_carries_over(&store, "mem").await;
}

#[cfg(feature = "redis")]
mod redis {
    use std::sync::{Arc, OnceLock};

    use tollgate::ManualClock;
    use tollgate::store::redis::{RedisStore, TimeSource};
    use tollgate_testkit::{RedisCluster, RedisServer};

    use super::the_count_carries_over;

    fn server() -> &'static RedisServer {
        static SERVER: OnceLock<RedisServer> = OnceLock::new();
        SERVER.get_or_init(RedisServer::start)
    }

    async fn connect(urls: Vec<String>, prefix: &str, time: TimeSource) -> RedisStore {
        RedisStore::builder(urls)
            .prefix(prefix.to_string())
            .time_source(time)
            .connect()
            .await
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_on_the_servers_clock_carries_the_count_over() {
        let store = connect(vec![server().url()], "ovs:", TimeSource::Server).await;
        // The server-clock forms are the ones taken.
        let fw = tollgate::Policy::fixed_window("f", 5, std::time::Duration::from_secs(9)).unwrap();
        assert!(store.key_of(&fw, b"k").ends_with(b":fws:9000:5"));
        the_count_carries_over(&store, "srv").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_on_the_clients_clock_carries_the_count_over() {
        let clock = ManualClock::new(1_700_000_000_000_000);
        let time = TimeSource::Client(Arc::new(clock));
        let store = connect(vec![server().url()], "ovc:", time).await;
        the_count_carries_over(&store, "cli").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_cluster_carries_the_count_over() {
        let cluster = RedisCluster::start(3, 0);
        let store = connect(cluster.seed_urls(), "ovk:", TimeSource::Server).await;
        the_count_carries_over(&store, "clu").await;
    }
}
