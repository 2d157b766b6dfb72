//! How many times one check allocates, end to end in-process: the HTTP
//! router through `oneshot` and the gRPC service, on the memory store.
//! The unit-test binary's allocator (allocation-counter's) counts the
//! allocations of the thread that asks it to; each test runs its check on
//! a current-thread runtime, so the whole check runs on that thread, and
//! every other thread and test is left alone. Each bound is what the path takes today: an allocation
//! added to it fails here.

use std::future::Future;

/// The unit-test binary's allocator counts per thread (allocation-counter).
use allocation_counter::measure;

/// Runs `f` to its end on `rt`: the allocations it made (and its output).
fn allocations<T>(rt: &tokio::runtime::Runtime, f: impl Future<Output = T>) -> (u64, T) {
    let mut out = None;
    let info = measure(|| out = Some(rt.block_on(f)));
    (info.count_total, out.expect("ran"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A service on the memory store with a limit no test reaches, and the
/// descriptor gRPC maps to it.
async fn state() -> std::sync::Arc<crate::state::AppState> {
    let config = crate::config::Config::parse(
        "alloc.toml",
        r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 1000000000
window = "1h"

[[descriptor]]
domain = "edge"
entries = [{ key = "remote_address" }]
policy = "api"
"#,
    )
    .unwrap();
    std::sync::Arc::new(crate::state::AppState {
        backend: crate::store::build(&Default::default()).await.unwrap(),
        policies: std::sync::RwLock::new(std::sync::Arc::new(config.policies)),
        tokens: crate::auth::Tokens::new(None, None),
        metrics: None,
        status: Default::default(),
        overrides: crate::overrides::SharedOverrides::local(),
    })
}

mod http {
    use axum::body::Body;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    use super::allocations;

    /// One `POST /v1/check`, admitted, on the memory store, measured at 48:
    /// axum's and hyper's share (the request's extensions, the boxed
    /// futures of the router and its layers, the body collected to
    /// `Bytes`, the response's head), the decision's, and the answer's
    /// (its body copied once from the stack, the two `RateLimit` header
    /// values). Zero is not reached: the framework allocates per request.
    const MAX_PER_CHECK: u64 = 48;

    #[test]
    fn a_check_allocates_at_most_its_bound() {
        let rt = super::runtime();
        let router = crate::http::router(rt.block_on(super::state()));
        let request = |i: u32| {
            Request::post("/v1/check")
                .header("content-type", "application/json")
                .body(Body::from(format!(
                    r#"{{"policy":"api","key":"user-{}"}}"#,
                    i % 3
                )))
                .unwrap()
        };
        // The first decisions resolve the metrics handles and the ring,
        // and make the keys.
        for i in 0..3 {
            let _ = rt.block_on(router.clone().oneshot(request(i))).unwrap();
        }
        let mut counts = Vec::new();
        for i in 3..13 {
            let req = request(i);
            let router = router.clone();
            let (n, status) = allocations(&rt, async move {
                let response = router.oneshot(req).await.unwrap();
                let status = response.status();
                let _ = response.into_body().collect().await.unwrap();
                status
            });
            assert_eq!(status, StatusCode::OK);
            counts.push(n);
        }
        let most = counts.iter().max().copied().unwrap_or_default();
        assert!(
            most <= MAX_PER_CHECK,
            "a check allocated {most} times (bound {MAX_PER_CHECK}): {counts:?}"
        );
    }
}
