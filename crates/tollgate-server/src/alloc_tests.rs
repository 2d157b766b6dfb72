//! How many times one check allocates, end to end in-process: the HTTP
//! router through `oneshot` and the gRPC service, on the memory store.
//! The unit-test binary's allocator (allocation-counter's) counts the
//! allocations of the thread that asks it to; each test runs its check on
//! a current-thread runtime, so the whole check runs on that thread, and
//! every other thread and test is left alone. Each bound is what the path
//! takes today: an allocation added to it fails here.

use std::future::Future;

/// The unit-test binary's allocator counts per thread (allocation-counter).
use allocation_counter::measure;

/// Runs `f` to its end on `rt`: the allocations it made (and its output).
fn allocations<T>(rt: &tokio::runtime::Runtime, f: impl Future<Output = T>) -> (u64, T) {
    let mut out = None;
    let info = measure(|| out = Some(rt.block_on(f)));
    (info.count_total, out.expect("ran"))
}

/// Runs `call(i)` for 13 requests on `rt` (each made when `call` is
/// called, before its future is measured): the first 3 unmeasured (they
/// resolve the metrics handles and the ring, and make the keys), then each
/// of the next 10 checked by `ok` and its allocations held to `bound`.
fn hold_to<T, F: Future<Output = T>>(
    rt: &tokio::runtime::Runtime,
    what: &str,
    bound: u64,
    call: impl Fn(u32) -> F,
    ok: impl Fn(T),
) {
    for i in 0..3 {
        ok(rt.block_on(call(i)));
    }
    let mut counts = Vec::new();
    for i in 3..13 {
        let (n, out) = allocations(rt, call(i));
        ok(out);
        counts.push(n);
    }
    let most = counts.iter().max().copied().unwrap_or_default();
    assert!(
        most <= bound,
        "{what} allocated {most} times (bound {bound}): {counts:?}"
    );
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The policy every test checks: a limit no test reaches.
const API: &str = r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 1000000000
window = "1h"
"#;

/// A service on the memory store with [`API`], and the descriptor gRPC
/// maps to it.
async fn state() -> std::sync::Arc<crate::state::AppState> {
    state_of(&format!(
        r#"{API}
[[descriptor]]
domain = "edge"
entries = [{{ key = "remote_address" }}]
policy = "api"
"#
    ))
    .await
}

/// A service on the memory store of the config file `text`.
pub(crate) async fn state_of(text: &str) -> std::sync::Arc<crate::state::AppState> {
    let config = crate::config::Config::parse("test.toml", text).unwrap();
    std::sync::Arc::new(crate::state::AppState {
        backend: crate::store::build(&Default::default()).await.unwrap(),
        policies: arc_swap::ArcSwap::from_pointee(config.policies),
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

    /// One `POST /v1/check`, admitted, on the memory store, measured at 23.
    /// All but two are the framework's: axum's routing (the
    /// request's extensions: its matched path, its URL parameters, its
    /// body limit; the route's boxed service cloned and its future boxed
    /// at each of its two levels; the middleware's `Next` and future; the
    /// handler's future), the body collected to `Bytes`, the response's
    /// header map and boxed body. Ours: the answer's text (body,
    /// `RateLimit` and `Content-Length` in one allocation, the policy's
    /// `RateLimit-Policy` made once per set) and the memory store's boxed
    /// future (the `Store` trait is object-safe, so its futures are boxed).
    const MAX_PER_CHECK: u64 = 23;

    #[test]
    fn a_check_allocates_at_most_its_bound() {
        let rt = super::runtime();
        let state = rt.block_on(super::state());
        checks_held_to(&rt, state, "a check", MAX_PER_CHECK);
    }

    /// A check of a key under an override (a prefix): one more than
    /// [`MAX_PER_CHECK`], the override's `RateLimit-Policy` value, made
    /// per request (a policy's own is made once per set). It was 32 while
    /// these took the general path's serializer (6 more) and counted their
    /// decisions by name (2 more).
    const MAX_PER_OVERRIDDEN_CHECK: u64 = MAX_PER_CHECK + 1;

    #[test]
    fn a_check_under_an_override_allocates_at_most_its_bound() {
        let rt = super::runtime();
        let state = rt.block_on(super::state_of(&format!(
            r#"{}
[[override]]
policy = "api"
key = "user-*"
limit = 2000000000
"#,
            super::API
        )));
        state.overrides.set_base(&state.policies());
        checks_held_to(
            &rt,
            state,
            "a check under an override",
            MAX_PER_OVERRIDDEN_CHECK,
        );
    }

    /// `POST /v1/check` of `api` over three keys (`user-0` to `user-2`),
    /// each admitted, its allocations held to `bound`.
    fn checks_held_to(
        rt: &tokio::runtime::Runtime,
        state: std::sync::Arc<crate::state::AppState>,
        what: &str,
        bound: u64,
    ) {
        let router = crate::http::router(state);
        let request = |i: u32| {
            Request::post("/v1/check")
                .header("content-type", "application/json")
                .body(Body::from(format!(
                    r#"{{"policy":"api","key":"user-{}"}}"#,
                    i % 3
                )))
                .unwrap()
        };
        let call = |i| {
            let (router, req) = (router.clone(), request(i));
            async move {
                let response = router.oneshot(req).await.unwrap();
                let status = response.status();
                let _ = response.into_body().collect().await.unwrap();
                status
            }
        };
        super::hold_to(rt, what, bound, call, |status| {
            assert_eq!(status, StatusCode::OK)
        });
    }
}

mod grpc {
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use tower::ServiceExt;

    /// One native `ShouldRateLimit` of one descriptor, admitted, on the
    /// memory store, through the service as the gRPC server calls it
    /// (`grpc_unary.rs`), measured at 16 (35 when prost decoded the
    /// message and encoded an owned `RateLimitResponse`, 46 through
    /// tonic's generated server and codec). The message is read borrowed
    /// (`rls_view.rs`) and the response written into its frame
    /// (`rls_encode.rs`), so neither prost's strings and vectors nor the
    /// response's (the policy's name, the two header fields' names and
    /// values) are made any more. What is left: the descriptor's store
    /// key, the decision path's batch (`decide.rs`: the resolved
    /// requests, the store's requests and decisions, the outcomes) and
    /// the memory store's boxed future; the frame's buffer, the
    /// response's headers and trailers; the boxed future of the tower
    /// service; and the test's own collecting of the body.
    const MAX_PER_CHECK: u64 = 16;

    /// `RateLimitRequest{domain: "edge", descriptors: [{entries:
    /// [{remote_address, <value>}]}]}`, framed.
    fn body(value: &str) -> Bytes {
        fn field(n: u8, b: &[u8]) -> Vec<u8> {
            let mut out = vec![n << 3 | 2, b.len() as u8];
            out.extend_from_slice(b);
            out
        }
        let entry = [field(1, b"remote_address"), field(2, value.as_bytes())].concat();
        let message = [field(1, b"edge"), field(2, &field(1, &entry))].concat();
        Bytes::from(crate::rls_fuzz::frame(&message))
    }

    #[test]
    fn a_descriptor_allocates_at_most_its_bound() {
        let rt = super::runtime();
        let service = crate::grpc::service(rt.block_on(super::state()));
        let request = |i: u32| {
            http::Request::post(
                "http://t/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
            )
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(body(&format!("10.0.0.{}", i % 3))))
            .unwrap()
        };
        let call = |i| {
            let (service, req) = (service.clone(), request(i));
            async move {
                let response = service.oneshot(req).await.unwrap();
                let collected = response.into_body().collect().await.unwrap();
                // Read in place: a copy would count.
                let status = collected.trailers().and_then(|t| t.get("grpc-status"));
                status.is_some_and(|s| s == "0")
            }
        };
        super::hold_to(&rt, "a descriptor", MAX_PER_CHECK, call, |ok| {
            assert!(ok, "grpc-status 0")
        });
    }
}
