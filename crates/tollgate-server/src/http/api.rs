//! The endpoints, each with its OpenAPI description (`#[utoipa::path]`;
//! the bodies are the types of `body.rs`).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode};
use serde::Serialize;
use serde_json::{Map, Value};
use tollgate::algorithm::LeaseId;
use tollgate::store::resilient::{BreakerState, OnFailure};
use tollgate::{Decision, Policy, Request, Usage};
use tollgate_tower::headers::{RateLimitHeaders, ceil_millis, ceil_secs};

use super::body::*;
use super::fast;
use super::json::{only, shown, string};
use crate::config::PolicySet;
use crate::decide;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

type ApiResult = Result<Response, ServiceError>;

/// 200 or 429 with `body` and the rate-limit headers of `decided`.
pub(super) fn answer(decided: &[(&Policy, Decision)], body: impl Serialize) -> Response {
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

/// One check, or `{"checks": […], "atomic": bool}`.
#[utoipa::path(post, path = "/v1/check", tag = "decisions",
    request_body = CheckBody,
    responses(
        (status = 200, description = "Admitted (a batch: every check admitted)", body = CheckAnswer,
            headers(("RateLimit-Policy" = String), ("RateLimit" = String))),
        (status = 429, description = "Denied (a batch: some check denied)", body = CheckAnswer,
            headers(("Retry-After" = u64, description = "Seconds"))),
        (status = 400, description = "A bad body or field, a cost over the limit, a key twice in an atomic batch", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn check(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    if let Ok(bytes) = &body
        && let Some(one) = fast::Single::parse(bytes)
    {
        let set = state.policies();
        if let Some(policy) = set.get(one.policy) {
            return single(&state, policy, one.key, one.cost, None, Some(&set)).await;
        }
    }
    let obj = object(body)?;
    let set = state.policies();
    if let Some(checks) = obj.get("checks") {
        only(&obj, &["checks", "atomic"])?;
        return check_many(&state, &set, &obj, checks).await;
    }
    let req = CheckRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    if let Some(at_most) = req.at_most {
        let (d, decider) = state
            .usage(policy, req.key.as_bytes(), Usage::AtMost, at_most, req.tier)
            .await?;
        let mut body = DecisionBody::new(policy, &d);
        body.granted = Some(d.granted);
        return Ok(answer(&[(&*decider, d)], CheckAnswer::One(body)));
    }
    single(&state, policy, req.key, req.cost, req.tier, None).await
}

/// One check's answer; formatted on the stack (`fast.rs`) with `fast`
/// (the set `policy` is from) when no override decided.
async fn single(
    state: &AppState,
    policy: &Policy,
    key: &str,
    cost: u64,
    tier: Option<&str>,
    fast: Option<&PolicySet>,
) -> ApiResult {
    let (d, decider, by) = state
        .check_overridden(policy, key.as_bytes(), cost, tier)
        .await?;
    if let Some(set) = fast
        && let Some(response) = fast::answer(
            policy,
            &decider,
            &d,
            by.as_ref(),
            set.policy_field(&decider),
        )
    {
        return Ok(response);
    }
    let mut body = DecisionBody::new(policy, &d);
    body.by_override = by.map(|s| s.to_string());
    let decided = [(&*decider, d)];
    Ok(answer(&decided, CheckAnswer::One(body)))
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
                "field `atomic` must be true or false, got {}",
                shown(other)
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
        let p = match string(check, "policy").and_then(|name| decide::policy(set, name)) {
            Err(e) if e.code() == Code::UnknownPolicy => return Err(e),
            other => other.map_err(at)?,
        };
        let req = CheckRequest::parse_in_batch(check).map_err(at)?;
        parsed.push((p, req));
    }
    let batch = BatchRequest {
        checks: parsed.iter().map(|(_, r)| *r).collect(),
        atomic,
    };
    let requests: Vec<Request<'_>> = parsed
        .iter()
        .zip(&batch.checks)
        .map(|((policy, _), req)| Request {
            policy,
            key: req.key.as_bytes(),
            cost: req.cost,
        })
        .collect();
    let tiers: Vec<Option<&str>> = batch.checks.iter().map(|r| r.tier).collect();
    let outcomes = state.check_many(&requests, &tiers, batch.atomic).await?;
    let decided: Vec<(&Policy, Decision)> = outcomes.iter().map(|(d, p, _)| (&**p, *d)).collect();
    let body = CheckAnswer::Many(BatchBody {
        allowed: decided.iter().all(|(_, d)| d.allowed),
        decisions: parsed
            .iter()
            .zip(&outcomes)
            .map(|((p, _), (d, _, by))| {
                let mut body = DecisionBody::new(p, d);
                body.by_override = by.as_ref().map(ToString::to_string);
                body
            })
            .collect(),
    });
    Ok(answer(&decided, body))
}

/// A reservation on a token bucket or GCRA policy.
#[utoipa::path(post, path = "/v1/reserve", tag = "decisions",
    request_body = ReserveRequest,
    responses(
        (status = 200, description = "Reserved: go ahead after `wait_ms`", body = ReservationBody),
        (status = 429, description = "The wait would exceed `max_wait_ms`; nothing reserved", body = ReservationBody,
            headers(("Retry-After" = u64, description = "Seconds"))),
        (status = 400, description = "A bad body or field, or `unsupported`: the policy's algorithm does not reserve", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn reserve(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let req = ReserveRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    let max_wait = Duration::from_millis(req.max_wait_ms);
    let (d, decider) = state
        .reserve(policy, req.key.as_bytes(), req.cost, max_wait, req.tier)
        .await?;
    let decided = [(&*decider, d)];
    let body = ReservationBody {
        decision: DecisionBody::new(policy, &d),
        wait_ms: ceil_millis(d.delay),
    };
    Ok(answer(&decided, body))
}

/// A lease on a concurrency policy.
#[utoipa::path(post, path = "/v1/acquire", tag = "decisions",
    request_body = AcquireRequest,
    responses(
        (status = 200, description = "Admitted, with a lease", body = AcquireBody),
        (status = 429, description = "Every lease is held", body = AcquireBody,
            headers(("Retry-After" = u64, description = "Seconds"))),
        (status = 400, description = "A bad body or field, or `unsupported`: not a concurrency policy", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn acquire(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let req = AcquireRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    let (decision, id, decider) = state.acquire(policy, req.key.as_bytes(), req.tier).await?;
    let decided = [(&*decider, decision)];
    let body = AcquireBody {
        decision: DecisionBody::new(policy, &decision),
        lease: id.map(|id| id.to_string()),
        expires_in_ms: id.map(|_| decider.time_span().as_millis() as u64),
    };
    Ok(answer(&decided, body))
}

/// Gives a lease back (idempotent).
#[utoipa::path(post, path = "/v1/release", tag = "decisions",
    request_body = ReleaseRequest,
    responses(
        (status = 200, description = "Given back, or already", body = ReleaseBody),
        (status = 400, description = "A bad body or field (a malformed lease), or `unsupported`", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn release(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let obj = object(body)?;
    let set = state.policies();
    let req = ReleaseRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    let lease: LeaseId = req
        .lease
        .parse()
        .map_err(|e: tollgate::Error| ServiceError::invalid(e.to_string()))?;
    let released = state.release(policy, req.key.as_bytes(), lease).await?;
    Ok(Json(ReleaseBody { released }).into_response())
}

/// Forgets one key.
#[utoipa::path(delete, path = "/v1/keys/{policy}/{key}", tag = "admin",
    params(("policy" = String, Path, description = "The policy's name"),
           ("key" = String, Path, description = "The limited key")),
    responses(
        (status = 200, description = "Forgotten", body = ResetBody),
        (status = 400, description = "`invalid_key`", body = ErrorBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 403, description = "The decision token, where an admin token is configured", body = ErrorBody),
        (status = 404, description = "`unknown_policy`", body = ErrorBody),
        (status = 503, description = "The store failed under `on_failure = \"deny\"`", body = ErrorBody),
    ))]
pub(super) async fn reset(
    State(state): State<Arc<AppState>>,
    Path((name, key)): Path<(String, String)>,
) -> ApiResult {
    let set = state.policies();
    let policy = decide::policy(&set, &name)?;
    state.reset(policy, key.as_bytes()).await?;
    Ok(Json(ResetBody {
        policy: name,
        reset: true,
    })
    .into_response())
}

/// The policies in force.
#[utoipa::path(get, path = "/v1/policies", tag = "admin",
    responses(
        (status = 200, description = "The policies", body = PoliciesBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
    ))]
pub(super) async fn policies(State(state): State<Arc<AppState>>) -> Response {
    let set = state.policies();
    let policies = set
        .policies
        .iter()
        .map(|p| PolicyBody {
            name: p.name().to_string(),
            algorithm: p.algorithm().name(),
            limit: p.limit(),
            window_ms: p.time_span().as_millis() as u64,
        })
        .collect();
    Json(PoliciesBody { policies }).into_response()
}

/// Liveness: answers while the process runs (no token asked).
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "`ok`", body = String, content_type = "text/plain")))]
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// Readiness: 200 while decisions are served (by the store, or by a
/// fallback that answers), 503 when they would fail. No token needed, as
/// for `/healthz`: Kubernetes' probes cannot send one.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Serving", body = ReadyBody),
        (status = 503, description = "The breaker is open under `on_failure = \"deny\"`", body = ReadyBody),
    ))]
pub(super) async fn ready(State(state): State<Arc<AppState>>) -> Response {
    let store = state.backend.describe();
    match state.backend.breaker() {
        None => Json(ReadyBody {
            ready: true,
            store,
            breaker: None,
            on_failure: None,
        })
        .into_response(),
        Some(BreakerState::Closed) => Json(ReadyBody {
            ready: true,
            store,
            breaker: Some(BreakerState::Closed.as_str()),
            on_failure: None,
        })
        .into_response(),
        Some(open) => {
            let on_failure = state.backend.settings.on_failure;
            let serving = on_failure != OnFailure::Deny;
            let body = ReadyBody {
                ready: serving,
                store,
                breaker: Some(open.as_str()),
                on_failure: Some(on_failure.as_str()),
            };
            let status = if serving {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            (status, Json(body)).into_response()
        }
    }
}

/// Prometheus metrics.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String, content_type = "text/plain"),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 404, description = "Metrics are off", body = ErrorBody),
    ))]
pub(super) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    match &state.metrics {
        Some(handle) => {
            // Set when scraped: counting them costs nothing in between.
            for p in &state.policies().policies {
                for (kind, n) in state.overrides.counts(p.name()) {
                    metrics::gauge!("tollgate_overrides", "policy" => p.name().to_string(), "kind" => kind)
                        .set(n as f64);
                }
            }
            (
                [(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                handle.render(),
            )
                .into_response()
        }
        None => ServiceError::new(Code::NotFound, "metrics are off").into_response(),
    }
}
