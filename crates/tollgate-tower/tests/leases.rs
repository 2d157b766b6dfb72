//! The middleware over a `LeasingStore` over real Redis: two instances of
//! a service share one fixed window; leased decisions admit, denials are
//! 429s, and no window admits more than its limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use http::{Request, StatusCode};
use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::RedisStore;
use tollgate::{Clock, Policy, SystemClock};
use tollgate_testkit::RedisServer;
use tollgate_tower::RateLimitLayer;
use tollgate_tower::extract::Global;
use tower::ServiceExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_decisions_admit_denials_are_429_and_no_window_passes_its_limit() {
    let server = RedisServer::start();
    let (limit, window) = (500, Duration::from_millis(500));
    let policy = Policy::fixed_window("leased", limit, window)
        .unwrap()
        .with_lease(true)
        .unwrap();
    // Two instances: each its own Redis connection and its own leases.
    let mut instances = Vec::new();
    for _ in 0..2 {
        let redis = RedisStore::connect(&server.url()).await.unwrap();
        let store = LeasingStore::with(Arc::new(redis), Duration::from_millis(10), 2);
        let app = Router::new()
            .route("/", get(|| async { "hello" }))
            .layer(RateLimitLayer::new(store, policy.clone(), Global));
        instances.push(app);
    }
    let denied = Arc::new(AtomicU64::new(0));
    let calls_before = server.command_calls("evalsha");
    let end = SystemClock.now_micros() + 2_200_000;
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let app = instances[i % 2].clone();
            let denied = denied.clone();
            tokio::spawn(async move {
                // (before, after) of each admitted request, in µs.
                let mut admitted = Vec::new();
                while SystemClock.now_micros() < end {
                    let before = SystemClock.now_micros();
                    let request = Request::get("/").body(Body::empty()).unwrap();
                    let response = app.clone().oneshot(request).await.unwrap();
                    let after = SystemClock.now_micros();
                    match response.status() {
                        StatusCode::OK => {
                            assert!(response.headers().contains_key("ratelimit"));
                            admitted.push((before, after));
                        }
                        StatusCode::TOO_MANY_REQUESTS => {
                            assert!(response.headers().contains_key("retry-after"));
                            denied.fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(1)).await;
                        }
                        other => panic!("unexpected {other}"),
                    }
                }
                admitted
            })
        })
        .collect();
    let mut admitted = Vec::new();
    for t in tasks {
        admitted.extend(t.await.unwrap());
    }
    // Each admission whose request lay wholly inside one window counts
    // there (Redis's windows start at multiples of the window, as ours).
    let w = window.as_micros() as u64;
    let mut per_window = std::collections::BTreeMap::<u64, u64>::new();
    for (before, after) in &admitted {
        if before / w == after / w {
            *per_window.entry(before / w).or_default() += 1;
        }
    }
    let denied = denied.load(Ordering::Relaxed);
    let calls = server.command_calls("evalsha") - calls_before;
    // Every denial is a store's answer (a batch of nothing); the requests
    // Redis never saw were admitted from leases.
    let from_leases = (admitted.len() as u64 + denied).saturating_sub(calls);
    eprintln!(
        "{} admitted ({from_leases} without a Redis call), {denied} denied, {calls} script calls; per window {:?}",
        admitted.len(),
        per_window.values().collect::<Vec<_>>()
    );
    for (k, n) in &per_window {
        assert!(*n <= limit, "window {k} admitted {n} of {limit}");
    }
    assert!(denied > 0, "the load passed the limit");
    // Leases answered, and admitted through the layer.
    assert!(
        from_leases * 2 > admitted.len() as u64,
        "{from_leases} of {} admissions without a Redis call",
        admitted.len()
    );
}
