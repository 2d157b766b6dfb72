//! Overrides on real stores: a key's count carries over when an override
//! raises or cuts its policy's parameters, on every algorithm, in memory
//! and on Redis (client time, and the server-clock forms, whose fixed
//! window names its key by its limit: an override with another limit
//! counts in the same key), standalone and Cluster.

use std::time::Duration;

pub(crate) use tollgate::overrides::{Limits, Override, Overrides, Resolved, Selector};
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

    /// Two instances on one Redis: a change made by one reaches the other
    /// at its next sync, an ended override leaves both (and Redis), and a
    /// new instance (a restart) loads what is stored.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn overrides_are_shared_through_redis() {
        use std::time::Duration;
        use tollgate::overrides::{Overrides, Resolved, Selector};
        use tollgate::store::redis::RedisOverrides;

        let policy = tollgate::Policy::fixed_window("shared", 10, Duration::from_secs(60)).unwrap();
        let policies = [policy.clone()];
        let instance = || async {
            let store = connect(vec![server().url()], "ovsh:", TimeSource::Server).await;
            RedisOverrides::new(store, Overrides::new())
        };
        let (a, b) = (instance().await, instance().await);
        let limit_of = |o: &RedisOverrides, key: &[u8]| match o
            .overrides()
            .resolve(&policy, key, None)
            .unwrap()
        {
            Resolved::Decide { policy, .. } => policy.limit(),
            Resolved::Block { .. } => 0,
            other => panic!("{other:?}"),
        };
        b.sync(&policies).await.unwrap();
        a.set(
            &policy,
            Selector::parse(b"acme").unwrap(),
            super::Override::limits(super::sized(500, &policy)),
        )
        .await
        .unwrap();
        a.set(
            &policy,
            Selector::parse(b"bot*").unwrap(),
            super::Override::block()
                .with_ttl(Duration::from_millis(300))
                .unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(limit_of(&b, b"acme"), 10, "not before b syncs");
        b.sync(&policies).await.unwrap();
        assert_eq!(limit_of(&b, b"acme"), 500);
        assert_eq!(limit_of(&b, b"bot-1"), 0);
        // A restarted instance loads what is stored.
        let c = instance().await;
        c.sync(&policies).await.unwrap();
        assert_eq!(limit_of(&c, b"acme"), 500);
        // The block ends on every instance, and leaves Redis.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while limit_of(&a, b"bot-1") == 0 || limit_of(&b, b"bot-1") == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the block never ended"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let d = instance().await;
        d.sync(&policies).await.unwrap();
        let client = redis::Client::open(server().url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let fields: Vec<String> = redis::cmd("HKEYS")
            .arg("ovsh:{overrides:shared}")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(fields, ["acme"]);
        // Removal reaches the others too.
        assert!(
            a.remove("shared", &Selector::parse(b"acme").unwrap())
                .await
                .unwrap()
        );
        b.sync(&policies).await.unwrap();
        assert_eq!(limit_of(&b, b"acme"), 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redis_cluster_carries_the_count_over() {
        let cluster = RedisCluster::start(3, 0);
        let store = connect(cluster.seed_urls(), "ovk:", TimeSource::Server).await;
        the_count_carries_over(&store, "clu").await;
    }
}
