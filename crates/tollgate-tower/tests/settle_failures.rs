//! Settles that cannot be made are never lost without a word: each is
//! logged and counted in `tollgate_settle_failures_total`, whether the
//! store fails it or the runtime shuts down before it runs. Real
//! `redis-server`s, killed or frozen.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use tollgate::store::redis::RedisStore;
use tollgate::{Policy, Store};
use tollgate_testkit::{RedisServer, counter_total, record_metrics};
use tollgate_tower::extract::Global;
use tollgate_tower::{RateLimitLayer, ResponseBody, Usage};
use tower::{Layer, ServiceExt, service_fn};

/// `tollgate_settle_failures_total` of `policy` since the binary started.
fn settle_failures(policy: &str) -> u64 {
    counter_total(tollgate::metrics::SETTLE_FAILURES, ("policy", policy))
}

/// 1,000 units refilled one an hour, named `name`.
fn tokens(name: &str) -> Policy {
    Policy::token_bucket(name, 1, Duration::from_secs(3600), 1000).unwrap()
}

/// One request estimated at 100 whose response reports 40: the response,
/// its body not yet read (so not yet settled).
async fn admitted(store: Arc<dyn Store>, policy: Policy) -> Response<ResponseBody<Full<Bytes>>> {
    let layer = RateLimitLayer::builder_shared(store)
        .usage_limit(policy, Global)
        .estimate(100)
        .build()
        .unwrap();
    let service = layer.layer(service_fn(|_: Request<()>| async {
        let mut response = Response::new(Full::new(Bytes::from_static(b"answer")));
        response.extensions_mut().insert(Usage(40));
        Ok::<_, Infallible>(response)
    }));
    service.oneshot(Request::new(())).await.unwrap()
}

async fn remaining(store: &dyn Store, policy: &Policy) -> u64 {
    store.check(policy, b"global", 0).await.unwrap().remaining
}

/// The server is killed between the check and the settle: the settle
/// fails in the store.
#[tokio::test]
async fn a_settle_the_store_fails_is_counted() {
    record_metrics();
    let server = RedisServer::start();
    let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
    let policy = tokens("settle-fails");
    let response = admitted(store.clone(), policy.clone()).await;
    assert_eq!(remaining(&*store, &policy).await, 900);
    server.kill9();
    response.into_body().collect().await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while settle_failures("settle-fails") == 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(settle_failures("settle-fails"), 1);
}

/// The server is frozen, so the settle waits in a spawned task; the
/// runtime then shuts down and drops the task before it ran.
#[test]
fn a_settle_dropped_with_its_runtime_is_counted() {
    record_metrics();
    let server = RedisServer::start();
    let policy = tokens("settle-dropped");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store: Arc<dyn Store> = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
        let response = admitted(store.clone(), policy.clone()).await;
        assert_eq!(remaining(&*store, &policy).await, 900);
        server.stop();
        response.into_body().collect().await.unwrap();
    });
    assert_eq!(settle_failures("settle-dropped"), 0, "not yet: it waits");
    drop(runtime);
    assert_eq!(settle_failures("settle-dropped"), 1);
    server.cont();
}
