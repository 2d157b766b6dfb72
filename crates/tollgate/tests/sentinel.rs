//! Redis Sentinel against real processes: a master, a replica and three
//! `redis-sentinel`s from the testkit. The store finds the master through
//! the sentinels, by URL or by builder, with the master's password.
//! Failovers under load are in `tests/failover.rs`.
#![cfg(feature = "redis")]

use std::time::Duration;

use tollgate::store::redis::RedisStore;
use tollgate::{Error, Policy, Store, StoreErrorKind};
use tollgate_testkit::RedisSentinel;

#[tokio::test]
async fn finds_the_master_by_url_and_by_builder_with_a_password() {
    let topology = RedisSentinel::builder().password("s3cret").start();
    let policy = Policy::fixed_window("pw", 3, Duration::from_secs(60)).unwrap();
    let by_url = RedisStore::connect(&topology.url()).await.unwrap();
    let by_builder = RedisStore::builder(topology.sentinel_urls())
        .sentinel(topology.master_name())
        .master_auth(None, "s3cret")
        .connect()
        .await
        .unwrap();
    // Both reach the one master: three admissions between them.
    let mut allowed = 0;
    for store in [&by_url, &by_builder, &by_url, &by_builder] {
        allowed += u32::from(store.check(&policy, b"k", 1).await.unwrap().allowed);
    }
    assert_eq!(allowed, 3);
    assert_eq!(
        topology.master().cli(&[
            "EXISTS",
            std::str::from_utf8(&by_url.key_of(&policy, b"k")).unwrap()
        ]),
        "1"
    );

    let wrong = RedisStore::builder(topology.sentinel_urls())
        .sentinel(topology.master_name())
        .master_auth(None, "wrong")
        .connect()
        .await
        .unwrap_err();
    assert!(
        matches!(
            wrong,
            Error::Store {
                kind: StoreErrorKind::Auth,
                ..
            }
        ),
        "{wrong:?}"
    );
    assert!(
        !wrong.to_string().contains("wrong"),
        "no password echoed: {wrong}"
    );
    let unknown = RedisStore::builder(topology.sentinel_urls())
        .sentinel("nobody")
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(unknown, Error::Store { .. }), "{unknown:?}");
}
