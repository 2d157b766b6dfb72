//! The middleware in a real axum router: `oneshot`, a real socket, and two
//! routers sharing one limit through Redis.
//!
//! Kept whole on purpose: one concern, the middleware inside a real axum router.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::extract::connect_info::MockConnectInfo;
use axum::routing::get;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::sync::Semaphore;
use tollgate::store::redis::RedisStore;
use tollgate::{MemoryStore, Policy};
use tollgate_testkit::RedisServer;
use tollgate_tower::RateLimitLayer;
use tollgate_tower::extract::{Global, PeerIp};
use tower::ServiceExt;

/// The application: one route, limited by `layer`.
fn app(layer: RateLimitLayer) -> Router {
    Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer)
}

fn per_ip(limit: u64) -> RateLimitLayer {
    // Refills one token an hour: the test sees exactly `limit`.
    let policy = Policy::token_bucket("per-ip", 1, Duration::from_secs(3600), limit).unwrap();
    RateLimitLayer::new(MemoryStore::new(), policy, PeerIp::new())
}

fn from(ip: &str) -> Request<Body> {
    let mut request = Request::get("/").body(Body::empty()).unwrap();
    let addr: SocketAddr = format!("{ip}:40000").parse().unwrap();
    request.extensions_mut().insert(ConnectInfo(addr));
    request
}

fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
    response.headers().get(name).map(|v| v.to_str().unwrap())
}

/// `what`, or a failed test after 10 s instead of a hung one.
async fn within<F: std::future::Future>(what: F) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::time::timeout(Duration::from_secs(10), what).await
}

async fn text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn oneshot_limits_each_client_address_on_its_own() {
    let app = app(per_ip(2));
    for remaining in [1, 0] {
        let response = app.clone().oneshot(from("198.51.100.7")).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some("\"per-ip\";q=2;w=3600")
        );
        let expected = format!("\"per-ip\";r={remaining};t=");
        assert!(
            header(&response, "ratelimit")
                .unwrap()
                .starts_with(&expected)
        );
        assert_eq!(text(response).await, "hello");
    }
    let denied = app.clone().oneshot(from("198.51.100.7")).await.unwrap();
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    // One token an hour, and the bucket was just emptied: an hour, less
    // the few microseconds since, rounded up.
    assert_eq!(header(&denied, "retry-after"), Some("3600"));
    assert_eq!(
        header(&denied, "content-type"),
        Some("application/problem+json")
    );
    let problem: serde_json::Value = serde_json::from_str(&text(denied).await).unwrap();
    assert_eq!(problem["violated-policies"][0], "per-ip");

    // Another address has its own budget; another address in the same
    // IPv6 /64 shares one.
    let other = app.clone().oneshot(from("198.51.100.8")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    for (ip, status) in [
        ("[2001:db8:1:2::1]", StatusCode::OK),
        ("[2001:db8:1:2::ffff]", StatusCode::OK),
        ("[2001:db8:1:2:abcd::5]", StatusCode::TOO_MANY_REQUESTS),
    ] {
        let response = app.clone().oneshot(from(ip)).await.unwrap();
        assert_eq!(response.status(), status, "{ip}");
    }

    // axum's MockConnectInfo works as the address too.
    let mocked = app.layer(MockConnectInfo(SocketAddr::from(([192, 0, 2, 1], 1))));
    let request = Request::get("/").body(Body::empty()).unwrap();
    let response = mocked.oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(header(&response, "ratelimit").unwrap().contains("r=1"));
}

#[tokio::test]
async fn a_real_socket_sees_the_peer_address_and_the_headers() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = app(per_ip(3)).into_make_service_with_connect_info::<SocketAddr>();
    let server = tokio::spawn(async move { axum::serve(listener, service).await });

    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    let connection = tokio::spawn(connection);
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let request = Request::get("/")
            .header("host", "localhost")
            .body(Empty::<Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        statuses.push(response.status().as_u16());
        let ratelimit = response.headers()["ratelimit"].to_str().unwrap().to_owned();
        let retry_after = response.headers().get("retry-after").cloned();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        if statuses.len() <= 3 {
            assert_eq!(body, "hello");
            assert!(retry_after.is_none());
        } else {
            assert!(ratelimit.starts_with("\"per-ip\";r=0;t="), "{ratelimit}");
            assert!(retry_after.is_some());
            assert!(body.starts_with(b"{\"type\":"));
        }
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
    drop(sender);
    let _ = connection.await;
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_routers_with_their_own_redis_stores_share_one_limit() {
    let server = RedisServer::start();
    let policy = Policy::token_bucket("shared", 1, Duration::from_secs(3600), 5).unwrap();
    // Two instances of a service: separate stores, separate connections.
    let instance = |store| app(RateLimitLayer::new(store, policy.clone(), Global));
    let a = instance(RedisStore::connect(&server.url()).await.unwrap());
    let b = instance(RedisStore::connect(&server.url()).await.unwrap());

    let mut allowed = 0;
    for i in 0..12 {
        let router = if i % 2 == 0 { &a } else { &b };
        let request = Request::get("/").body(Body::empty()).unwrap();
        let response = router.clone().oneshot(request).await.unwrap();
        match response.status() {
            StatusCode::OK => {
                allowed += 1;
                // The count is shared: each instance sees the other's.
                let expected = format!("\"shared\";r={};t=", 5 - allowed);
                assert!(
                    header(&response, "ratelimit")
                        .unwrap()
                        .starts_with(&expected),
                    "request {i}: {:?}",
                    header(&response, "ratelimit")
                );
            }
            StatusCode::TOO_MANY_REQUESTS => assert!(i >= 5, "request {i} denied"),
            other => panic!("request {i}: {other}"),
        }
    }
    assert_eq!(allowed, 5);

    // A bare RedisStore has no failure policy of its own: with the server
    // gone, requests pass (without headers) instead of failing.
    server.kill9();
    let start = Instant::now();
    let request = Request::get("/").body(Body::empty()).unwrap();
    let response = a.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(header(&response, "ratelimit").is_none());
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_lease_on_redis_spans_both_routers_until_the_body_ends() {
    let server = RedisServer::start();
    let policy = Policy::concurrency("reports", 1, Duration::from_secs(30)).unwrap();
    // The handler says when it starts, and waits for a permit to end, so
    // the test decides how long the request is in flight.
    let started = Arc::new(Semaphore::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let instance = |store| {
        let (started, gate) = (started.clone(), gate.clone());
        let handler = move || async move {
            started.add_permits(1);
            gate.acquire().await.unwrap().forget();
            "report"
        };
        Router::new()
            .route("/", get(handler))
            .layer(RateLimitLayer::new(store, policy.clone(), Global))
    };
    let a = instance(RedisStore::connect(&server.url()).await.unwrap());
    let b = instance(RedisStore::connect(&server.url()).await.unwrap());
    let get_root = || Request::get("/").body(Body::empty()).unwrap();

    let in_flight = tokio::spawn(a.clone().oneshot(get_root()));
    within(started.acquire()).await.unwrap().unwrap().forget();
    // The lease taken through `a` is seen through `b`.
    let busy = within(b.clone().oneshot(get_root()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(busy.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&busy, "ratelimit"), Some("\"reports\";r=0"));
    assert_eq!(header(&busy, "retry-after"), Some("1"));

    gate.add_permits(1);
    let response = within(in_flight).await.unwrap().unwrap().unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // Headers are out, the body is not: still in flight.
    let still_busy = within(b.clone().oneshot(get_root()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(still_busy.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(text(response).await, "report");
    // The release is a spawned Redis call: wait for it, within bounds.
    gate.add_permits(1);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let response = within(b.clone().oneshot(get_root()))
            .await
            .unwrap()
            .unwrap();
        if response.status() == StatusCode::OK {
            assert_eq!(text(response).await, "report");
            break;
        }
        assert!(Instant::now() < deadline, "the lease was never given back");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redis_cluster_several_policies_stay_atomic_across_slots() {
    // Different policies hash to different slots; the store still decides
    // them all or nothing, so a request denied by one consumes nothing
    // from the other.
    let cluster = tollgate_testkit::RedisCluster::start(3, 0);
    let store = RedisStore::builder(cluster.seed_urls())
        .connect()
        .await
        .unwrap();
    let hour = Duration::from_secs(3600);
    let layer = RateLimitLayer::builder(store)
        .limit(
            Policy::token_bucket("everyone", 1, hour, 100).unwrap(),
            Global,
        )
        .limit(
            Policy::token_bucket("per-ip", 1, hour, 2).unwrap(),
            PeerIp::new(),
        )
        .build()
        .unwrap();
    let app = app(layer);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = app.clone().oneshot(from("198.51.100.7")).await.unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            // Atomic: the denial took nothing from `everyone`.
            let fields = header(&response, "ratelimit").unwrap();
            assert!(fields.starts_with("\"everyone\";r=98;"), "{fields}");
            assert!(fields.ends_with("\"per-ip\";r=0;t=3600"), "{fields}");
        }
    }
    assert_eq!(statuses, [200, 200, 429]);
    let other = app.oneshot(from("198.51.100.8")).await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert!(
        header(&other, "ratelimit")
            .unwrap()
            .starts_with("\"everyone\";r=97;")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_resilient_store_a_dead_redis_follows_the_failure_policy() {
    use tollgate::store::resilient::{OnFailure, ResilientStore};
    let server = RedisServer::start();
    let redis = Arc::new(RedisStore::connect(&server.url()).await.unwrap());
    let policy = Policy::fixed_window("api", 3, Duration::from_secs(3600)).unwrap();
    let router = |on_failure| {
        let store = ResilientStore::builder(redis.clone())
            .on_failure(on_failure)
            .build()
            .unwrap();
        app(RateLimitLayer::new(store, policy.clone(), Global))
    };
    let (deny, local) = (router(OnFailure::Deny), router(OnFailure::Local));
    let get_root = || Request::get("/").body(Body::empty()).unwrap();
    assert_eq!(
        deny.clone().oneshot(get_root()).await.unwrap().status(),
        StatusCode::OK
    );
    server.kill9();

    // Fail closed: 503 with a problem, never a 500 nor a fake 429.
    let response = within(deny.clone().oneshot(get_root()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        header(&response, "content-type"),
        Some("application/problem+json")
    );

    // The local fallback keeps limiting: 3 pass, the 4th is limited.
    for i in 0..3 {
        let response = within(local.clone().oneshot(get_root()))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "request {i}");
        assert!(header(&response, "ratelimit").is_some());
    }
    let response = within(local.clone().oneshot(get_root()))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
}

#[tokio::test]
async fn shadow_limits_count_but_never_refuse() {
    let store = Arc::new(MemoryStore::new());
    let shadow = Policy::fixed_window("new-limit", 2, Duration::from_secs(3600))
        .unwrap()
        .shadow();
    let enforced = Policy::fixed_window("old-limit", 4, Duration::from_secs(3600)).unwrap();
    let in_flight = Policy::concurrency("in-flight", 1, Duration::from_secs(60))
        .unwrap()
        .shadow();
    let layer = RateLimitLayer::builder_shared(store.clone())
        .limit(shadow.clone(), Global)
        .limit(enforced.clone(), Global)
        .limit(in_flight, Global)
        .build()
        .unwrap();
    let app = app(layer);
    // the shadow limit is passed from the third request on; the enforced
    // one still refuses the fifth
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(
            app.clone()
                .oneshot(from("10.0.0.1"))
                .await
                .unwrap()
                .status(),
        );
    }
    assert_eq!(statuses[..4], [StatusCode::OK; 4]);
    assert_eq!(statuses[4], StatusCode::TOO_MANY_REQUESTS);
    // the shadow limit counted the four admitted requests, not the refused one
    let peek = tollgate::Store::check(store.as_ref(), &shadow, b"global", 0)
        .await
        .unwrap();
    assert_eq!(peek.remaining, 0);
    let peek = tollgate::Store::check(store.as_ref(), &enforced, b"global", 0)
        .await
        .unwrap();
    assert_eq!(peek.remaining, 0, "the enforced limit counted four");

    // the whole layer in shadow mode: nothing is refused
    let layer = RateLimitLayer::builder(MemoryStore::new())
        .limit(enforced, Global)
        .shadow()
        .build()
        .unwrap();
    let app = self::app(layer);
    for _ in 0..6 {
        assert_eq!(
            app.clone()
                .oneshot(from("10.0.0.1"))
                .await
                .unwrap()
                .status(),
            StatusCode::OK
        );
    }
}
