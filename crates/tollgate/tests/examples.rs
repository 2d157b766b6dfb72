//! The examples in `examples/`, run as they are: each file is compiled
//! into this test as a module, and its code runs here against a
//! `redis-server` the test starts (the examples' `main` only parses the
//! URL and prints).

use std::time::Duration;

#[allow(dead_code)] // its `main`
#[path = "../examples/direct.rs"]
mod direct;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_spaces_the_calls_beyond_the_burst() {
    let took = direct::run().await.unwrap();
    // 20 calls at 20 a second with a burst of 5: the last 15 wait their
    // turn, so the last goes no sooner than 15 × 50 ms after the first.
    // (A slow machine only makes it later.)
    assert!(took >= Duration::from_millis(750), "{took:?}");
}

#[cfg(feature = "redis")]
#[allow(dead_code)] // its `main`
#[path = "../examples/redis.rs"]
mod redis;

#[cfg(feature = "redis")]
#[allow(dead_code)] // its `main`
#[path = "../examples/resilient.rs"]
mod resilient;

#[cfg(feature = "redis")]
mod on_redis {
    use super::*;
    use super::{redis, resilient};
    use std::time::Instant;
    use tollgate::Source;
    use tollgate_testkit::RedisServer;

    #[tokio::test]
    async fn redis_holds_the_limit_across_two_instances() {
        let server = RedisServer::start();
        assert_eq!(redis::run(&server.url()).await.unwrap(), 3);
        // It resets the key first, so a second run sends 3 again.
        assert_eq!(redis::run(&server.url()).await.unwrap(), 3);
    }

    /// Checks until a decision comes from `source`, for at most `within`.
    async fn until_source(
        store: &tollgate::store::resilient::ResilientStore,
        policy: &tollgate::Policy,
        source: Source,
        within: Duration,
    ) -> tollgate::Decision {
        let start = Instant::now();
        loop {
            let decision = resilient::check(store, policy).await.unwrap();
            if decision.source == source {
                return decision;
            }
            assert!(
                start.elapsed() < within,
                "no decision from {source:?} within {within:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test]
    async fn resilient_decides_locally_while_redis_is_down_and_returns_to_it() {
        let server = RedisServer::start();
        let store = resilient::connect(&server.url()).await.unwrap();
        let policy = resilient::policy().unwrap();

        let first = resilient::check(&store, &policy).await.unwrap();
        assert_eq!((first.source, first.limit), (Source::Store, 300));

        server.kill9();
        let local = until_source(&store, &policy, Source::Fallback, Duration::from_secs(10)).await;
        assert!(local.allowed);
        assert_eq!(local.limit, 100, "a third of the limit");

        server.restart();
        // The probe retries at most every second once it has backed off.
        let back = until_source(&store, &policy, Source::Store, Duration::from_secs(30)).await;
        assert_eq!(back.limit, 300);
    }
}
