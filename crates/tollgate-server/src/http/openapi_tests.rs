//! `GET /openapi.json` against the router: every route and method of the
//! router is described, and real answers match the schema the document
//! gives for their route and status (validated as JSON Schema, the
//! document's `$ref`s resolved into its components).

use std::collections::BTreeSet;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use tollgate::store::resilient::OnFailure;
use tollgate_testkit::RedisServer;

use super::routes;
use super::tests::{Answer, get, memory, post, post_json, send, state};
use crate::config::StoreSettings;

const METHODS: [Method; 5] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::PATCH,
    Method::DELETE,
];

/// The document, as the service serves it.
async fn document() -> Value {
    let r = get(&memory().await, "/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK, "{r:?}");
    r.json()
}

/// Every (method, path) the router answers (anything but 405 on a path
/// of its route list), against every operation the document describes.
#[tokio::test]
async fn every_route_of_the_router_is_described() {
    let s = state(StoreSettings::default(), None, true).await;
    let mut served = BTreeSet::new();
    for (path, _) in routes() {
        let concrete = path.replace(['{', '}'], "");
        for method in METHODS {
            let request = Request::builder()
                .method(method.clone())
                .uri(&concrete)
                .body(Body::empty())
                .unwrap();
            if send(&s, request).await.status != StatusCode::METHOD_NOT_ALLOWED {
                served.insert((method.as_str().to_lowercase(), path.to_string()));
            }
        }
    }
    let doc = document().await;
    let described: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .filter(|k| METHODS.iter().any(|m| m.as_str().eq_ignore_ascii_case(k)))
                .map(move |m| (m.clone(), path.clone()))
        })
        .collect();
    assert_eq!(served, described);
    assert_eq!(served.len(), routes().len(), "one method per route");
}

/// `answer` is valid against the schema the document gives for `method
/// path` and its status.
fn assert_described(doc: &Value, method: &str, path: &str, answer: &Answer) {
    let status = answer.status.as_u16().to_string();
    let response = &doc["paths"][path][method]["responses"][&status];
    assert!(
        response.is_object(),
        "{method} {path} answered {status}, which the document does not list: {answer:?}"
    );
    let body = answer.json();
    let errors = violations(doc, method, path, &status, &body);
    assert!(
        errors.is_empty(),
        "{method} {path} {status}: {body} does not match its schema: {errors:?}"
    );
}

/// What the schema for `method path` answering `status` finds wrong in
/// `body`.
fn violations(doc: &Value, method: &str, path: &str, status: &str, body: &Value) -> Vec<String> {
    let response = &doc["paths"][path][method]["responses"][status];
    let schema = &response["content"]["application/json"]["schema"];
    assert!(
        schema.is_object(),
        "{method} {path} {status} has no JSON schema"
    );
    let mut root = schema.as_object().unwrap().clone();
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    root.insert("components".into(), doc["components"].clone());
    let validator = jsonschema::validator_for(&Value::Object(root)).unwrap();
    validator.iter_errors(body).map(|e| e.to_string()).collect()
}

#[tokio::test]
async fn the_schemas_accept_real_answers() {
    let doc = document().await;
    let s = memory().await;
    let check = |b: Value| {
        let s = s.clone();
        async move { post_json(&s, "/v1/check", b).await }
    };
    let one = json!({"policy": "books", "key": "k"});
    let mut answers = vec![];
    for _ in 0..4 {
        answers.push(("post", "/v1/check", check(one.clone()).await));
    }
    let batch = json!({"atomic": true, "checks": [
        {"policy": "books", "key": "b"}, {"policy": "api", "key": "b", "cost": 5}]});
    answers.push(("post", "/v1/check", check(batch.clone()).await));
    answers.push(("post", "/v1/check", check(batch).await));
    answers.push((
        "post",
        "/v1/check",
        check(json!({"policy": "nope", "key": "k"})).await,
    ));
    answers.push(("post", "/v1/check", post(&s, "/v1/check", "{").await));
    answers.push((
        "post",
        "/v1/check",
        post(&s, "/v1/check", "k".repeat(70_000)).await,
    ));
    let reserve = |b: Value| {
        let s = s.clone();
        async move { post_json(&s, "/v1/reserve", b).await }
    };
    answers.push((
        "post",
        "/v1/reserve",
        reserve(json!({"policy": "api", "key": "r", "cost": 5})).await,
    ));
    answers.push((
        "post",
        "/v1/reserve",
        reserve(json!({"policy": "api", "key": "r"})).await,
    ));
    answers.push((
        "post",
        "/v1/reserve",
        reserve(json!({"policy": "books", "key": "r"})).await,
    ));
    let acquired = post_json(&s, "/v1/acquire", json!({"policy": "reports", "key": "u"})).await;
    let lease = acquired.json()["lease"].as_str().unwrap().to_string();
    answers.push(("post", "/v1/acquire", acquired));
    answers.push((
        "post",
        "/v1/acquire",
        post_json(&s, "/v1/acquire", json!({"policy": "reports", "key": "u"})).await,
    ));
    let release = json!({"policy": "reports", "key": "u", "lease": lease});
    answers.push((
        "post",
        "/v1/release",
        post_json(&s, "/v1/release", release).await,
    ));
    let bad_lease = json!({"policy": "reports", "key": "u", "lease": "zz"});
    answers.push((
        "post",
        "/v1/release",
        post_json(&s, "/v1/release", bad_lease).await,
    ));
    for path in ["/v1/keys/books/k", "/v1/keys/nope/k"] {
        let r = send(&s, Request::delete(path).body(Body::empty()).unwrap()).await;
        answers.push(("delete", "/v1/keys/{policy}/{key}", r));
    }
    let usage = |path: &'static str, b: Value| {
        let s = s.clone();
        async move { ("post", path, post_json(&s, path, b).await) }
    };
    answers.push(
        usage(
            "/v1/check",
            json!({"policy": "api", "key": "m", "at_most": 3}),
        )
        .await,
    );
    answers.push(
        usage(
            "/v1/check",
            json!({"policy": "api", "key": "m", "at_most": 3}),
        )
        .await,
    );
    answers.push(
        usage(
            "/v1/charge",
            json!({"policy": "books", "key": "c", "cost": 5}),
        )
        .await,
    );
    answers.push(usage("/v1/charge", json!({"policy": "books", "key": "c"})).await);
    answers.push(
        usage(
            "/v1/refund",
            json!({"policy": "books", "key": "c", "cost": 2}),
        )
        .await,
    );
    answers.push(
        usage(
            "/v1/refund",
            json!({"policy": "nope", "key": "c", "cost": 2}),
        )
        .await,
    );
    let settle = json!({"policy": "books", "key": "c", "estimate": 1, "actual": 2});
    answers.push(usage("/v1/settle", settle).await);
    answers.push(
        usage(
            "/v1/settle",
            json!({"policy": "reports", "key": "c", "estimate": 1, "actual": 2}),
        )
        .await,
    );
    answers.push(("get", "/v1/policies", get(&s, "/v1/policies").await));
    answers.push(("get", "/readyz", get(&s, "/readyz").await));
    answers.push(("get", "/v1/stats", get(&s, "/v1/stats").await));
    answers.push(("get", "/metrics", get(&s, "/metrics").await));
    let guarded = state(StoreSettings::default(), Some("s3cret"), false).await;
    answers.push(("get", "/v1/policies", get(&guarded, "/v1/policies").await));

    let statuses: BTreeSet<u16> = answers.iter().map(|(.., a)| a.status.as_u16()).collect();
    assert_eq!(
        statuses,
        BTreeSet::from([200, 400, 401, 404, 413, 429]),
        "the answers cover these statuses"
    );
    for (method, path, answer) in &answers {
        assert_described(&doc, method, path, answer);
    }
    // The schemas are strict enough to refuse: a decision without its
    // `remaining`, an error without its code.
    let mut decision = answers[0].2.json();
    decision.as_object_mut().unwrap().remove("remaining");
    assert!(!violations(&doc, "post", "/v1/check", "200", &decision).is_empty());
    let error = json!({"error": {"message": "why"}});
    assert!(!violations(&doc, "post", "/v1/check", "400", &error).is_empty());
}

/// The store's failures: 503 from the decision routes and `/readyz`,
/// and `/readyz` with the breaker open.
#[tokio::test]
async fn the_schemas_accept_store_failures() {
    let doc = document().await;
    let redis = RedisServer::start();
    let settings = StoreSettings {
        urls: vec![redis.url()],
        on_failure: OnFailure::Deny,
        ..StoreSettings::default()
    };
    let s = state(settings, None, false).await;
    let r = get(&s, "/readyz").await;
    assert_eq!(r.json()["breaker"], "closed", "{r:?}");
    assert_described(&doc, "get", "/readyz", &r);
    redis.kill9();
    for _ in 0..10 {
        let r = post_json(&s, "/v1/check", json!({"policy": "books", "key": "j"})).await;
        assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{r:?}");
        assert_described(&doc, "post", "/v1/check", &r);
    }
    let r = get(&s, "/readyz").await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{r:?}");
    assert_described(&doc, "get", "/readyz", &r);
}
