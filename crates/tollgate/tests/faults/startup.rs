//! Starting while Redis is down: a `DeferredStore` behind the resilient
//! store connects in the background, and decisions flow from the first
//! call, by the failure policy until Redis answers.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::deferred::DeferredStore;
use tollgate::store::redis::RedisStore;
use tollgate::store::resilient::{BreakerState, OnFailure, ResilientStore};
use tollgate::{Error, Policy, Source, Store};
use tollgate_testkit::RedisServer;

use crate::support::{DEADLINE, runtime, wait_for};

#[test]
fn a_store_started_while_redis_is_down_decides_and_connects_when_it_answers() {
    let server = RedisServer::start();
    server.kill9();
    runtime().block_on(async {
        let redis = RedisStore::builder([server.url()]).deadline(DEADLINE);
        let primary = DeferredStore::connect(Duration::from_millis(50), move || {
            let redis = redis.clone();
            Box::pin(async move { Ok(Arc::new(redis.connect().await?) as Arc<dyn Store>) })
        });
        let resilient = |mode| {
            let store = ResilientStore::builder(Arc::new(primary.clone()))
                .deadline(DEADLINE)
                .on_failure(mode)
                .probe_interval(Duration::from_millis(50), Duration::from_millis(200))
                .build()
                .unwrap();
            store.trip();
            store
        };
        let (local, deny) = (resilient(OnFailure::Local), resilient(OnFailure::Deny));
        assert_eq!(local.breaker_state(), BreakerState::Open);
        let bucket = Policy::token_bucket("startup", 1, Duration::from_secs(60), 5).unwrap();
        for i in 0..7 {
            let d = local.check(&bucket, b"k", 1).await.unwrap();
            assert_eq!((d.allowed, d.source), (i < 5, Source::Fallback), "call {i}");
        }
        assert_eq!(
            deny.check(&bucket, b"k", 1).await,
            Err(Error::StoreUnavailable)
        );
        let window = Policy::fixed_window("startup-fw", 5, Duration::from_secs(1)).unwrap();
        let refused = local.reserve(&window, b"k", 1, Duration::ZERO).await;
        assert_eq!(
            refused.unwrap_err().code(),
            "unsupported",
            "bad input is refused"
        );
        // Unconnected, the deferred store itself answers a store error.
        let direct = primary.check(&bucket, b"k", 1).await.unwrap_err();
        assert!(direct.is_transient() && direct.to_string().contains("not connected yet"));

        tokio::task::block_in_place(|| server.restart());
        let back = wait_for(&local, BreakerState::Closed).await;
        wait_for(&deny, BreakerState::Closed).await;
        eprintln!("started with Redis down: back on Redis {back:?} after it came up");
        assert!(primary.is_connected());
        let d = local.check(&bucket, b"k", 1).await.unwrap();
        assert_eq!((d.allowed, d.source), (true, Source::Store));
        assert_eq!(
            deny.check(&bucket, b"k", 1).await.unwrap().source,
            Source::Store
        );
    });
}
