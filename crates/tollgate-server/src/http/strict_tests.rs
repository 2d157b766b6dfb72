//! Hostile requests through the router (`oneshot`, as `tests.rs`): fields
//! the API does not take, keys given twice, `at_most` in a batch, and the
//! answers the framework would make on its own, each in the JSON error
//! form. The connection limits are on real sockets, in
//! `tests/connections.rs`.

use axum::body::Body;
use bytes::Bytes;
use http::{Request, StatusCode};
use serde_json::json;

use super::tests::{get, memory, post, post_json, send};

/// The message of an error answer with `status` and `code`.
fn message_of(r: &super::tests::Answer, status: StatusCode, code: &str) -> String {
    assert_eq!(r.error(status), code, "{r:?}");
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "{r:?}"
    );
    r.json()["error"]["message"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn an_unknown_field_is_refused_by_name_on_every_endpoint() {
    let s = memory().await;
    let bad = StatusCode::BAD_REQUEST;
    let cases = [
        (
            "/v1/check",
            json!({"policy": "books", "key": "k", "cots": 5}),
        ),
        (
            "/v1/check",
            json!({"checks": [{"policy": "books", "key": "k"}], "cots": 5}),
        ),
        (
            "/v1/check",
            json!({"checks": [{"policy": "books", "key": "k", "cots": 5}]}),
        ),
        (
            "/v1/charge",
            json!({"policy": "api", "key": "k", "cost": 1, "cots": 5}),
        ),
        (
            "/v1/refund",
            json!({"policy": "api", "key": "k", "cost": 1, "cots": 5}),
        ),
        (
            "/v1/settle",
            json!({"policy": "api", "key": "k", "estimate": 1, "actual": 1, "cots": 5}),
        ),
        (
            "/v1/reserve",
            json!({"policy": "api", "key": "k", "cots": 5}),
        ),
        (
            "/v1/acquire",
            json!({"policy": "reports", "key": "k", "cots": 5}),
        ),
        (
            "/v1/release",
            json!({"policy": "reports", "key": "k", "lease": "1", "cots": 5}),
        ),
    ];
    for (path, body) in cases {
        let r = post_json(&s, path, body.clone()).await;
        let message = message_of(&r, bad, "invalid_request");
        assert!(
            message.contains("unknown field `cots`"),
            "{path} {body}: {message}"
        );
    }
    // Nothing was taken: the window is whole.
    let r = post_json(
        &s,
        "/v1/check",
        json!({"policy": "books", "key": "k", "cost": 0}),
    )
    .await;
    assert_eq!(r.json()["remaining"], 3, "{r:?}");
}

#[tokio::test]
async fn a_key_given_twice_is_refused_not_the_last_one_taken() {
    let s = memory().await;
    let bodies = [
        r#"{"policy": "books", "key": "k", "cost": 1, "cost": 3}"#,
        r#"{"policy": "nope", "policy": "books", "key": "k"}"#,
        r#"{"checks": [{"policy": "books", "key": "a", "key": "b"}]}"#,
        r#"{"checks": [{"policy": "books", "key": "a"}], "atomic": false, "atomic": true}"#,
    ];
    for body in bodies {
        let r = post(&s, "/v1/check", body).await;
        let message = message_of(&r, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(message.contains("duplicate key"), "{body}: {message}");
    }
    let r = post_json(
        &s,
        "/v1/check",
        json!({"policy": "books", "key": "k", "cost": 0}),
    )
    .await;
    assert_eq!(r.json()["remaining"], 3, "{r:?}");
}

/// `at_most` grants what is left of one key; a batch's checks are decided
/// together for fixed costs, so it is refused there rather than ignored
/// (which took a cost of 1).
#[tokio::test]
async fn at_most_in_a_batch_is_refused_and_nothing_taken() {
    let s = memory().await;
    for atomic in [false, true] {
        let body = json!({"atomic": atomic, "checks": [
            {"policy": "books", "key": "a", "at_most": 2},
        ]});
        let r = post_json(&s, "/v1/check", body).await;
        let message = message_of(&r, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            message.contains("checks[0]") && message.contains("`at_most`"),
            "{message}"
        );
    }
    let r = post_json(
        &s,
        "/v1/check",
        json!({"policy": "books", "key": "a", "cost": 0}),
    )
    .await;
    assert_eq!(r.json()["remaining"], 3, "{r:?}");
    // On a single check it is honoured.
    let r = post_json(
        &s,
        "/v1/check",
        json!({"policy": "books", "key": "a", "at_most": 5}),
    )
    .await;
    assert_eq!(
        (r.status, r.json()["granted"].clone()),
        (StatusCode::OK, json!(3))
    );
}

#[tokio::test]
async fn a_large_bad_value_is_not_echoed() {
    let s = memory().await;
    let huge = "9".repeat(30_000);
    for body in [
        format!(r#"{{"policy": "books", "key": "k", "cost": "{huge}"}}"#),
        format!(r#"{{"policy": "books", "key": "k", "{huge}": 1}}"#),
        format!(r#"{{"policy": "books", "key": "k", "{huge}": 1, "{huge}": 2}}"#),
        format!(r#"{{"policy": ["{huge}"], "key": "k"}}"#),
    ] {
        let r = post(&s, "/v1/check", body).await;
        let message = message_of(&r, StatusCode::BAD_REQUEST, "invalid_request");
        assert!(
            message.len() < 300,
            "{} bytes: {message:.300}",
            message.len()
        );
    }
}

#[tokio::test]
async fn the_frameworks_own_answers_are_json_errors() {
    let s = memory().await;
    // A method the route does not have: 405, its `Allow` kept.
    let r = send(&s, Request::put("/v1/check").body(Body::empty()).unwrap()).await;
    message_of(&r, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    assert_eq!(r.headers["allow"], "POST");
    // A path that does not decode to UTF-8.
    let r = send(
        &s,
        Request::delete("/v1/keys/books/%FF")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    let message = message_of(&r, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(message.contains("UTF-8"), "{message}");
    // No such route; a body over the limit.
    message_of(
        &get(&s, "/v2/check").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    let r = post(&s, "/v1/charge", "k".repeat(70_000)).await;
    message_of(&r, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    // A body that breaks off (a bad chunk, a reset): what reading it said.
    let broken = futures_util::stream::iter([
        Ok(Bytes::from_static(b"{\"policy\"")),
        Err(std::io::Error::other("invalid chunk size line")),
    ]);
    let request = Request::post("/v1/check")
        .body(Body::from_stream(broken))
        .unwrap();
    let r = send(&s, request).await;
    let message = message_of(&r, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        message.contains("Failed to buffer the request body"),
        "{message}"
    );
}

#[tokio::test]
async fn a_head_over_its_limits_is_a_json_414_or_431() {
    let s = memory().await;
    let long = format!("/v1/keys/books/{}", "k".repeat(super::MAX_HEAD.uri));
    let r = send(
        &s,
        Request::delete(long.as_str()).body(Body::empty()).unwrap(),
    )
    .await;
    let message = message_of(&r, StatusCode::URI_TOO_LONG, "uri_too_long");
    assert!(message.contains("8192"), "{message}");

    let mut many = Request::get("/healthz");
    for i in 0..=super::MAX_HEAD.fields {
        many = many.header(format!("x-{i}"), "v");
    }
    let r = send(&s, many.body(Body::empty()).unwrap()).await;
    message_of(
        &r,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
    );

    let big = Request::get("/healthz").header("x-big", "v".repeat(super::MAX_HEAD.bytes));
    let r = send(&s, big.body(Body::empty()).unwrap()).await;
    message_of(
        &r,
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        "headers_too_large",
    );
    // Within them, the same request is answered.
    let r = send(
        &s,
        Request::get("/healthz")
            .header("x-big", "v".repeat(1000))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
}
