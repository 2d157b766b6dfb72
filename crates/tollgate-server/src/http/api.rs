//! The endpoints.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde_json::{Map, Value, json};
use tollgate::algorithm::LeaseId;
use tollgate::store::resilient::{BreakerState, OnFailure};
use tollgate::{Decision, Policy, Request, Usage};
use tollgate_tower::headers::{RateLimitHeaders, ceil_millis, ceil_secs};

use super::MAX_BODY;
use crate::config::PolicySet;
use crate::decide;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

type ApiResult = Result<Response, ServiceError>;

/// The body as a JSON object; every problem named.
fn object(body: Result<Bytes, BytesRejection>) -> Result<Map<String, Value>, ServiceError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ServiceError::new(
                Code::PayloadTooLarge,
                format!("the body exceeds {MAX_BODY} bytes"),
            )
        } else {
            ServiceError::invalid(e.body_text())
        }
    })?;
    match serde_json::from_slice::<Value>(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ServiceError::invalid("the body must be a JSON object")),
        Err(e) => Err(ServiceError::invalid(format!("malformed JSON: {e}"))),
    }
}

fn string<'a>(obj: &'a Map<String, Value>, field: &str) -> Result<&'a str, ServiceError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ServiceError::invalid(format!(
            "field `{field}` must be a string, got {other}"
        ))),
        None => Err(ServiceError::invalid(format!("missing field `{field}`"))),
    }
}

fn integer(
    obj: &Map<String, Value>,
    field: &str,
    default: Option<u64>,
) -> Result<u64, ServiceError> {
    match (obj.get(field), default) {
        (Some(v), _) => v.as_u64().ok_or_else(|| {
            ServiceError::invalid(format!(
                "field `{field}` must be a non-negative integer, got {v}"
            ))
        }),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(ServiceError::invalid(format!("missing field `{field}`"))),
    }
}

fn policy<'a>(set: &'a PolicySet, obj: &Map<String, Value>) -> Result<&'a Policy, ServiceError> {
    decide::policy(set, string(obj, "policy")?)
}

fn decision_json(policy: &Policy, d: &Decision) -> Value {
    let mut value = json!({
        "allowed": d.allowed,
        "policy": policy.name(),
        "limit": d.limit,
        "remaining": d.remaining,
        "reset_after_ms": ceil_millis(d.reset_after),
        "retry_after_ms": ceil_millis(d.retry_after),
        "delay_ms": ceil_millis(d.delay),
        "source": d.source.as_str(),
    });
    // Only a shadow policy's would-be denial says so; other answers keep
    // their shape.
    if d.shadow {
        value["shadow"] = Value::Bool(true);
    }
    value
}

/// 200 or 429 with `body` and the rate-limit headers of `decided`.
fn answer(decided: &[(&Policy, Decision)], body: Value) -> Response {
    let allowed = decided.iter().all(|(_, d)| d.allowed);
    let status = if allowed {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut response = (status, Json(body)).into_response();
    if let Some(h) = RateLimitHeaders::new(decided.iter().map(|(p, d)| (*p, d))) {
        h.append_to(response.headers_mut());
    }
    if !allowed {
        let wait = decided
            .iter()
            .map(|(_, d)| d.retry_after)
            .max()
            .unwrap_or_default();
        response.headers_mut().insert(
            http::header::RETRY_AFTER,
            HeaderValue::from(ceil_secs(wait)),
        );
    }
    response
}

/// `POST /v1/check`: one check, or `{"checks": […], "atomic": bool}`.
pub(super) async fn check(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    if let Some(checks) = obj.get("checks") {
        return check_many(&state, &set, &obj, checks).await;
    }
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    if obj.contains_key("at_most") {
        if obj.contains_key("cost") {
            return Err(ServiceError::invalid("give `cost` or `at_most`, not both"));
        }
        let at_most = integer(&obj, "at_most", None)?;
        let d = state
            .usage(policy, key.as_bytes(), Usage::AtMost, at_most)
            .await?;
        let mut body = decision_json(policy, &d);
        body["granted"] = json!(d.granted);
        return Ok(answer(&[(policy, d)], body));
    }
    let cost = integer(&obj, "cost", Some(1))?;
    let d = state.check(policy, key.as_bytes(), cost).await?;
    let decided = [(policy, d)];
    Ok(answer(&decided, decision_json(policy, &d)))
}

/// `POST /v1/charge` and `POST /v1/refund`: usage recorded after the fact,
/// or given back. Always 200 once recorded (a charge past the limit is
/// recorded, and says so with `"allowed": false`), with the headers of the
/// state it left.
pub(super) async fn charge(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    usage(&state, body, Usage::Charge).await
}

/// See [`charge`].
pub(super) async fn refund(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    usage(&state, body, Usage::Refund).await
}

async fn usage(state: &AppState, body: Result<Bytes, BytesRejection>, op: Usage) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    let cost = integer(&obj, "cost", None)?;
    let d = state.usage(policy, key.as_bytes(), op, cost).await?;
    Ok(recorded(policy, &d))
}

/// `POST /v1/settle`: `{"policy", "key", "estimate", "actual"}` after a
/// check of `estimate`; answered as a charge.
pub(super) async fn settle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    let estimate = integer(&obj, "estimate", None)?;
    let actual = integer(&obj, "actual", None)?;
    let d = state
        .settle(policy, key.as_bytes(), estimate, actual)
        .await?;
    Ok(recorded(policy, &d))
}

/// 200 with the decision a usage record left and its headers.
fn recorded(policy: &Policy, d: &Decision) -> Response {
    let mut response = Json(decision_json(policy, d)).into_response();
    if let Some(h) = RateLimitHeaders::new([(policy, d)].into_iter()) {
        h.append_to(response.headers_mut());
    }
    response
}

async fn check_many(
    state: &AppState,
    set: &PolicySet,
    obj: &Map<String, Value>,
    checks: &Value,
) -> ApiResult {
    let atomic = match obj.get("atomic") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(ServiceError::invalid(format!(
                "field `atomic` must be true or false, got {other}"
            )));
        }
    };
    let Value::Array(items) = checks else {
        return Err(ServiceError::invalid("field `checks` must be an array"));
    };
    if items.is_empty() {
        return Err(ServiceError::invalid(
            "field `checks` must hold at least one check",
        ));
    }
    let mut parsed = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let Value::Object(check) = item else {
            return Err(ServiceError::invalid(format!(
                "checks[{i}] must be an object"
            )));
        };
        let at = |e: ServiceError| e.at(&format!("checks[{i}]"));
        let p = match policy(set, check) {
            Err(e) if e.code() == Code::UnknownPolicy => return Err(e),
            other => other.map_err(at)?,
        };
        parsed.push((
            p,
            string(check, "key").map_err(at)?,
            integer(check, "cost", Some(1)).map_err(at)?,
        ));
    }
    let requests: Vec<Request<'_>> = parsed
        .iter()
        .map(|(policy, key, cost)| Request {
            policy,
            key: key.as_bytes(),
            cost: *cost,
        })
        .collect();
    let decisions = state.check_many(&requests, atomic).await?;
    let decided: Vec<(&Policy, Decision)> =
        parsed.iter().map(|(p, ..)| *p).zip(decisions).collect();
    let body = json!({
        "allowed": decided.iter().all(|(_, d)| d.allowed),
        "decisions": decided.iter().map(|(p, d)| decision_json(p, d)).collect::<Vec<_>>(),
    });
    Ok(answer(&decided, body))
}

/// `POST /v1/reserve`: a reservation on a token bucket or GCRA policy.
pub(super) async fn reserve(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    let cost = integer(&obj, "cost", Some(1))?;
    let max_wait = Duration::from_millis(integer(&obj, "max_wait_ms", Some(0))?);
    let d = state
        .reserve(policy, key.as_bytes(), cost, max_wait)
        .await?;
    let decided = [(policy, d)];
    let mut body = decision_json(policy, &d);
    body["wait_ms"] = json!(ceil_millis(d.delay));
    Ok(answer(&decided, body))
}

/// `POST /v1/acquire`: a lease on a concurrency policy.
pub(super) async fn acquire(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    let lease = state.acquire(policy, key.as_bytes()).await?;
    let decided = [(policy, lease.decision)];
    let mut body = decision_json(policy, &lease.decision);
    if let Some(id) = lease.id {
        body["lease"] = json!(id.to_string());
        body["expires_in_ms"] = json!(policy.time_span().as_millis() as u64);
    }
    Ok(answer(&decided, body))
}

/// `POST /v1/release`: gives a lease back (idempotent).
pub(super) async fn release(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let policy = policy(&set, &obj)?;
    let key = string(&obj, "key")?;
    let lease: LeaseId = string(&obj, "lease")?
        .parse()
        .map_err(|e: tollgate::Error| ServiceError::invalid(e.to_string()))?;
    let released = state.release(policy, key.as_bytes(), lease).await?;
    Ok(Json(json!({"released": released})).into_response())
}

/// `DELETE /v1/keys/{policy}/{key}`: forgets one key.
pub(super) async fn reset(
    State(state): State<Arc<AppState>>,
    Path((name, key)): Path<(String, String)>,
) -> ApiResult {
    let set = state.policies();
    let policy = decide::policy(&set, &name)?;
    state.reset(policy, key.as_bytes()).await?;
    Ok(Json(json!({"policy": name, "reset": true})).into_response())
}

/// `GET /v1/policies`: the policies in force.
pub(super) async fn policies(State(state): State<Arc<AppState>>) -> Response {
    let set = state.policies();
    let list: Vec<Value> = set
        .policies
        .iter()
        .map(|p| {
            json!({
                "name": p.name(),
                "algorithm": p.algorithm().name(),
                "limit": p.limit(),
                "window_ms": p.time_span().as_millis() as u64,
            })
        })
        .collect();
    Json(json!({"policies": list})).into_response()
}

/// `GET /readyz`: 200 while decisions are served (by the store, or by a
/// fallback that answers), 503 when they would fail.
pub(super) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let store = state.backend.describe();
    match state.backend.breaker() {
        None => Json(json!({"ready": true, "store": store})).into_response(),
        Some(BreakerState::Closed) => {
            Json(json!({"ready": true, "store": store, "breaker": "closed"})).into_response()
        }
        Some(_) => {
            let serving = state.backend.settings.on_failure != OnFailure::Deny;
            let body = json!({
                "ready": serving,
                "store": store,
                "breaker": "open",
                "on_failure": state.backend.settings.on_failure.as_str(),
            });
            let status = if serving {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(body)).into_response()
        }
    }
}

/// `GET /metrics`: Prometheus text.
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    match &state.metrics {
        Some(handle) => (
            [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => ServiceError::new(Code::NotFound, "metrics are off").into_response(),
    }
}
