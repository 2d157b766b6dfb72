//! The router in-process, as axum's examples test theirs: each request
//! through `oneshot`, no socket. Every route, and every error code with
//! the status it goes with; the store failures on a real Redis server.

use std::sync::Arc;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tollgate::store::resilient::OnFailure;
use tollgate_testkit::RedisServer;
use tower::ServiceExt;

use super::router;
use crate::config::{Config, StoreSettings};
use crate::state::AppState;
use crate::store;

const POLICIES: &str = r#"
[[policy]]
name = "books"
algorithm = "fixed_window"
limit = 3
window = "1h"

[[policy]]
name = "api"
algorithm = "token_bucket"
rate = 1
per = "1h"
burst = 5

[[policy]]
name = "reports"
algorithm = "concurrency"
limit = 1
lease = "30s"

[[policy]]
name = "audit"
algorithm = "fixed_window"
limit = 1
window = "1h"
mode = "shadow"
"#;

/// The state of a service on `settings`, with `token` and, with
/// `metrics`, a Prometheus recorder of its own (not installed globally).
pub(super) async fn state(
    settings: StoreSettings,
    token: Option<&str>,
    metrics: bool,
) -> Arc<AppState> {
    let config = Config::parse("test.toml", POLICIES).unwrap();
    Arc::new(AppState {
        overrides: crate::overrides::SharedOverrides::local(),
        backend: store::build(&settings).await.unwrap(),
        policies: arc_swap::ArcSwap::from_pointee(config.policies),
        tokens: crate::auth::Tokens::new(token, None),
        metrics: metrics.then(|| {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .build_recorder()
                .handle()
        }),
        status: Default::default(),
    })
}

pub(super) async fn memory() -> Arc<AppState> {
    state(StoreSettings::default(), None, false).await
}

/// An answer: its status, its headers and its body (JSON when it parses).
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: http::HeaderMap,
    pub(super) text: String,
}

impl Answer {
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("{e}: {:?}", self.text))
    }

    /// The error's code, asserting the status that goes with it.
    pub(super) fn error(&self, status: StatusCode) -> String {
        assert_eq!(self.status, status, "{self:?}");
        self.json()["error"]["code"].as_str().unwrap().to_string()
    }
}

pub(super) async fn send(state: &Arc<AppState>, request: Request<Body>) -> Answer {
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        text: String::from_utf8(bytes.to_vec()).unwrap(),
    }
}

pub(super) async fn post(state: &Arc<AppState>, path: &str, body: impl Into<Body>) -> Answer {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(body.into())
        .unwrap();
    send(state, request).await
}

pub(super) async fn post_json(state: &Arc<AppState>, path: &str, body: Value) -> Answer {
    post(state, path, body.to_string()).await
}

pub(super) async fn get(state: &Arc<AppState>, path: &str) -> Answer {
    send(state, Request::get(path).body(Body::empty()).unwrap()).await
}

#[tokio::test]
async fn check_admits_up_to_the_limit_then_denies_with_headers() {
    let s = memory().await;
    for remaining in [2, 1, 0] {
        let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "k"})).await;
        assert_eq!(r.status, StatusCode::OK, "{r:?}");
        assert_eq!(r.json()["remaining"], remaining);
        assert_eq!(r.json()["source"], "store");
        assert!(r.headers.contains_key("ratelimit-policy"), "{r:?}");
    }
    let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "k"})).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(!r.json()["allowed"].as_bool().unwrap());
    // The window is aligned to the epoch: it ends within the hour.
    let retry: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=3600).contains(&retry), "{retry}");
    // Another key has its own count; a peek consumes nothing.
    let r = post_json(
        &s,
        "/v1/check",
        json!({"policy": "books", "key": "other", "cost": 0}),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["remaining"].clone()),
        (StatusCode::OK, json!(3))
    );
}

#[tokio::test]
async fn a_batch_is_all_or_nothing_when_atomic() {
    let s = memory().await;
    let batch = |cost: u64| {
        json!({"atomic": true, "checks": [
            {"policy": "books", "key": "a", "cost": 1},
            {"policy": "api", "key": "a", "cost": cost},
        ]})
    };
    let r = post_json(&s, "/v1/check", batch(5)).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json()["decisions"].as_array().unwrap().len(), 2);
    // The bucket is empty now: the whole batch is denied, the window's
    // count untouched.
    let r = post_json(&s, "/v1/check", batch(1)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.json()["decisions"][0]["remaining"], 2);
}

#[tokio::test]
async fn reserve_waits_acquire_and_release_lease_and_reset_forgets() {
    let s = memory().await;
    let body = json!({"policy": "api", "key": "r", "cost": 5});
    assert_eq!(
        post_json(&s, "/v1/reserve", body).await.status,
        StatusCode::OK
    );
    let r = post_json(
        &s,
        "/v1/reserve",
        json!({"policy": "api", "key": "r", "max_wait_ms": 3_600_000}),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    // An hour less the time between the two calls (a busy machine's few ms).
    let wait = r.json()["wait_ms"].as_u64().unwrap();
    assert!((3_590_000..=3_600_000).contains(&wait), "{r:?}");

    let r = post_json(&s, "/v1/acquire", json!({"policy": "reports", "key": "u"})).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    assert_eq!(r.json()["expires_in_ms"], 30_000);
    let lease = r.json()["lease"].as_str().unwrap().to_string();
    let again = json!({"policy": "reports", "key": "u"});
    assert_eq!(
        post_json(&s, "/v1/acquire", again.clone()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    let release = json!({"policy": "reports", "key": "u", "lease": lease});
    let r = post_json(&s, "/v1/release", release.clone()).await;
    assert_eq!(r.json(), json!({"released": true}));
    let r = post_json(&s, "/v1/release", release).await;
    assert_eq!(r.json(), json!({"released": false}), "idempotent");
    assert_eq!(
        post_json(&s, "/v1/acquire", again).await.status,
        StatusCode::OK
    );

    for _ in 0..3 {
        post_json(&s, "/v1/check", json!({"policy": "books", "key": "x"})).await;
    }
    let reset = Request::delete("/v1/keys/books/x")
        .body(Body::empty())
        .unwrap();
    let r = send(&s, reset).await;
    assert_eq!(r.json(), json!({"policy": "books", "reset": true}));
    let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "x"})).await;
    assert_eq!(r.json()["remaining"], 2, "fresh after the reset");
}

#[tokio::test]
async fn the_read_only_routes_answer() {
    let s = state(StoreSettings::default(), None, true).await;
    let r = get(&s, "/v1/policies").await;
    let body = r.json();
    let names: Vec<&str> = body["policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["books", "api", "reports", "audit"]);
    let r = get(&s, "/healthz").await;
    assert_eq!((r.status, r.text.as_str()), (StatusCode::OK, "ok\n"));
    let r = get(&s, "/readyz").await;
    assert_eq!(r.json(), json!({"ready": true, "store": "memory"}));
    let r = get(&s, "/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
}

#[tokio::test]
async fn every_bad_request_has_its_code_and_status() {
    let s = memory().await;
    let bad = StatusCode::BAD_REQUEST;
    let cases = [
        ("{", bad, "invalid_request", "malformed JSON"),
        ("[1]", bad, "invalid_request", "JSON object"),
        (r#"{"policy": "books"}"#, bad, "invalid_request", "`key`"),
        (
            r#"{"policy": "books", "key": "k", "cost": -1}"#,
            bad,
            "invalid_request",
            "`cost`",
        ),
        (
            r#"{"checks": [{"policy": "books"}]}"#,
            bad,
            "invalid_request",
            "checks[0]",
        ),
        (
            r#"{"policy": "books", "key": ""}"#,
            bad,
            "invalid_key",
            "key",
        ),
        (
            r#"{"policy": "books", "key": "k", "cost": 4}"#,
            bad,
            "cost_exceeds_limit",
            "4",
        ),
        (
            r#"{"atomic": true, "checks": [{"policy": "books", "key": "k"}, {"policy": "books", "key": "k"}]}"#,
            bad,
            "invalid_argument",
            "twice",
        ),
        (
            r#"{"policy": "nope", "key": "k"}"#,
            StatusCode::NOT_FOUND,
            "unknown_policy",
            "nope",
        ),
    ];
    for (body, status, code, needle) in cases {
        let r = post(&s, "/v1/check", body).await;
        assert_eq!(r.error(status), code, "{body}");
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(needle), "{body}: {message:?}");
    }
    // An operation the algorithm does not have.
    let r = post_json(&s, "/v1/reserve", json!({"policy": "books", "key": "k"})).await;
    assert_eq!(r.error(bad), "unsupported");
    let r = post_json(&s, "/v1/acquire", json!({"policy": "books", "key": "k"})).await;
    assert_eq!(r.error(bad), "unsupported");
    let r = post_json(
        &s,
        "/v1/release",
        json!({"policy": "reports", "key": "k", "lease": "zz"}),
    )
    .await;
    assert_eq!(r.error(bad), "invalid_request");
    let r = post(&s, "/v1/check", "k".repeat(70_000)).await;
    assert_eq!(r.error(StatusCode::PAYLOAD_TOO_LARGE), "payload_too_large");
    let r = get(&s, "/v1/nothing").await;
    assert_eq!(r.error(StatusCode::NOT_FOUND), "not_found");
    let r = get(&s, "/metrics").await;
    assert_eq!(
        r.error(StatusCode::NOT_FOUND),
        "not_found",
        "metrics are off"
    );
}

/// The probes' endpoints answer without it: Kubernetes cannot put a
/// secret in a probe's headers.
#[tokio::test]
async fn a_token_guards_everything_but_the_probes() {
    let s = state(StoreSettings::default(), Some("s3cret"), false).await;
    let r = get(&s, "/v1/policies").await;
    assert_eq!(r.error(StatusCode::UNAUTHORIZED), "unauthorized");
    let wrong = Request::get("/v1/policies")
        .header("authorization", "Bearer s3cres")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&s, wrong).await.status, StatusCode::UNAUTHORIZED);
    let right = Request::get("/v1/policies")
        .header("authorization", "Bearer s3cret")
        .body(Body::empty())
        .unwrap();
    assert_eq!(send(&s, right).await.status, StatusCode::OK);
    assert_eq!(get(&s, "/healthz").await.status, StatusCode::OK);
    let ready = get(&s, "/readyz").await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["ready"], true);
    assert_eq!(get(&s, "/metrics").await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(get(&s, "/v1/stats").await.status, StatusCode::UNAUTHORIZED);
}

/// Under `on_failure = "deny"`, a store that fails is `store_unavailable`
/// (503, `Retry-After`), an error Redis answers (the failure policy answers
/// every store error) as much as a server gone; `/readyz` says so.
#[tokio::test]
async fn store_failures_have_their_codes() {
    let redis = RedisServer::start();
    let settings = StoreSettings {
        urls: vec![redis.url()],
        on_failure: OnFailure::Deny,
        ..StoreSettings::default()
    };
    let s = state(settings, None, false).await;
    let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "k"})).await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    // The key's state made a string: the script meets an error no retry
    // mends.
    let redis_key = redis_key_of(&s, "books", "k").await;
    redis.cli(&["SET", &redis_key, "not a window"]);
    let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "k"})).await;
    assert_eq!(
        r.error(StatusCode::SERVICE_UNAVAILABLE),
        "store_unavailable"
    );

    redis.kill9();
    // The breaker opens after a few failures; each answer is 503 all along.
    for _ in 0..10 {
        let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "j"})).await;
        assert_eq!(
            r.error(StatusCode::SERVICE_UNAVAILABLE),
            "store_unavailable"
        );
        assert_eq!(r.headers["retry-after"], "1");
    }
    let r = get(&s, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{r:?}");
    assert_eq!(r.json()["breaker"], "open");
}

/// The Redis key of `key` under the policy named `name`, as the store
/// names it.
async fn redis_key_of(s: &AppState, name: &str, key: &str) -> String {
    let policies = s.policies();
    let policy = policies.get(name).unwrap();
    let url = s.backend.settings.urls[0].clone();
    let store = tollgate::store::redis::RedisStore::connect(&url)
        .await
        .unwrap();
    String::from_utf8(store.key_of(policy, key.as_bytes())).unwrap()
}
