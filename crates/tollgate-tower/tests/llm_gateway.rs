//! `examples/llm_gateway.rs`, run as it is: the file is compiled into this
//! test as a module, and its gateway and stand-in model serve real
//! requests here, on the memory store and on a `redis-server` the test
//! starts, both on a clock held mid-month. Each step reads what the keys
//! hold from the store.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tollgate::store::redis::{RedisStore, TimeSource};
use tollgate::{ManualClock, MemoryStore, Policy, Store};
use tollgate_testkit::RedisServer;
use tower::ServiceExt;

#[allow(dead_code)] // its `main` and `Args`
#[path = "../examples/llm_gateway.rs"]
mod llm_gateway;

/// 2026-03-14T12:00:30Z, in µs.
const MID_MONTH: u64 = 1_773_489_630_000_000;

/// How the caller names its key.
#[derive(Clone, Copy)]
enum Auth {
    Bearer(&'static str),
    ApiKey(&'static str),
    None,
}

/// A chat request whose answer the stand-in model counts as
/// `prompt_chars / 4 + max_tokens` tokens.
fn chat(prompt_chars: usize, max_tokens: u64) -> Value {
    json!({
        "model": "stand-in",
        "max_tokens": max_tokens,
        "messages": [{ "role": "user", "content": "x".repeat(prompt_chars) }]
    })
}

/// Sends `body` through the gateway, with its `Content-Length` as a client
/// sends it: the status, and the answer's `usage.total_tokens`.
async fn ask(app: &Router, auth: Auth, body: &Value) -> (StatusCode, Option<u64>) {
    let body = body.to_string();
    let mut request = Request::post(llm_gateway::COMPLETIONS)
        .header("content-type", "application/json")
        .header("content-length", body.len());
    request = match auth {
        Auth::Bearer(key) => request.header("authorization", format!("Bearer {key}")),
        Auth::ApiKey(key) => request.header("x-api-key", key),
        Auth::None => request,
    };
    let response = app
        .clone()
        .oneshot(request.body(Body::from(body)).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let answer: Value = serde_json::from_slice(&bytes).unwrap();
    (status, answer["usage"]["total_tokens"].as_u64())
}

/// What `key` has left under both policies, once the spawned settles have
/// run: polled until it is `expected` (for at most 10 s; then the last
/// value fails the test).
async fn left(store: &dyn Store, key: &str, expected: (u64, u64)) -> (u64, u64) {
    let [minute, month] = llm_gateway::policies().unwrap();
    let peek = |policy: Policy| async move {
        store
            .check(&policy, key.as_bytes(), 0)
            .await
            .unwrap()
            .remaining
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = (peek(minute.clone()).await, peek(month.clone()).await);
        if now == expected || tokio::time::Instant::now() > deadline {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn drive(store: Arc<dyn Store>, clock: ManualClock) {
    let model = llm_gateway::start_model().await.unwrap();
    let app = llm_gateway::gateway(store.clone(), model).unwrap();

    // 100 prompt tokens and 900 answer tokens: an estimate of about 370
    // was checked, and 1,000 are settled on both policies.
    let (status, used) = ask(&app, Auth::Bearer("key-1"), &chat(400, 900)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(1_000)));
    assert_eq!(
        left(&*store, "key-1", (9_000, 999_000)).await,
        (9_000, 999_000)
    );

    // The same key by `x-api-key`: 9,000 more, the minute's last tokens,
    // admitted on its estimate.
    let (status, used) = ask(&app, Auth::ApiKey("key-1"), &chat(400, 8_900)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(9_000)));
    assert_eq!(left(&*store, "key-1", (0, 990_000)).await, (0, 990_000));

    // Denied by the minute; the month, checked in the same atomic batch,
    // gives nothing either.
    let (status, _) = ask(&app, Auth::Bearer("key-1"), &chat(40, 10)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(left(&*store, "key-1", (0, 990_000)).await, (0, 990_000));

    // Another key has its own budget.
    let (status, used) = ask(&app, Auth::Bearer("key-2"), &chat(40, 10)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(20)));
    assert_eq!(
        left(&*store, "key-2", (9_980, 999_980)).await,
        (9_980, 999_980)
    );

    // A new minute, the same month.
    clock.advance(Duration::from_secs(60));
    let (status, used) = ask(&app, Auth::Bearer("key-1"), &chat(4_000, 1_500)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(2_500)));
    assert_eq!(
        left(&*store, "key-1", (7_500, 987_500)).await,
        (7_500, 987_500)
    );

    // An answer far above its estimate puts the minute in debt: the
    // request after it is refused until the minute ends.
    let (status, used) = ask(&app, Auth::Bearer("key-1"), &chat(4, 9_999)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(10_000)));
    assert_eq!(left(&*store, "key-1", (0, 977_500)).await, (0, 977_500));
    let (status, _) = ask(&app, Auth::Bearer("key-1"), &chat(4, 1)).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    clock.advance(Duration::from_secs(60));
    let (status, used) = ask(&app, Auth::Bearer("key-1"), &chat(4, 1)).await;
    assert_eq!((status, used), (StatusCode::OK, Some(2)));
    assert_eq!(
        left(&*store, "key-1", (9_998, 977_498)).await,
        (9_998, 977_498)
    );

    // Without a key the gateway refuses, and nothing is counted (key-2's
    // minute has ended since its request; its month holds it still).
    let (status, _) = ask(&app, Auth::None, &chat(4, 1)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        left(&*store, "key-2", (10_000, 999_980)).await,
        (10_000, 999_980)
    );
}

#[tokio::test]
async fn the_gateway_counts_each_keys_tokens_on_the_memory_store() {
    let clock = ManualClock::new(MID_MONTH);
    let store = MemoryStore::with_clock(clock.clone());
    drive(Arc::new(store), clock).await;
}

#[tokio::test]
async fn the_gateway_counts_each_keys_tokens_on_redis() {
    let server = RedisServer::start();
    let clock = ManualClock::new(MID_MONTH);
    let store = RedisStore::builder([server.url()])
        .time_source(TimeSource::Client(Arc::new(clock.clone())))
        .connect()
        .await
        .unwrap();
    drive(Arc::new(store), clock).await;
}

#[test]
fn the_estimate_is_the_body_over_four_plus_the_answers_allowance() {
    let request = |length: Option<&str>| {
        let mut r = Request::post("/");
        if let Some(l) = length {
            r = r.header("content-length", l);
        }
        r.body(()).unwrap().into_parts().0
    };
    let allowance = llm_gateway::ANSWER_ALLOWANCE;
    assert_eq!(
        llm_gateway::estimate(&request(Some("400"))),
        100 + allowance
    );
    assert_eq!(
        llm_gateway::estimate(&request(Some("401"))),
        101 + allowance
    );
    assert_eq!(llm_gateway::estimate(&request(None)), allowance);
    assert_eq!(llm_gateway::estimate(&request(Some("lots"))), allowance);
}
