//! The usage endpoints: `POST /v1/charge`, `/v1/refund` and `/v1/settle`.
//! Always 200 once recorded (a charge past the limit is recorded, and says
//! so with `"allowed": false`; a 429 would read as "not recorded"), with
//! the headers of the state it left.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::response::{IntoResponse, Response};
use tollgate::{Decision, Policy, Usage};
use tollgate_tower::headers::RateLimitHeaders;

use super::body::*;
use crate::decide;
use crate::error::ServiceError;
use crate::state::AppState;

/// Usage that already happened, recorded even past the limit (the key goes
/// into debt).
#[utoipa::path(post, path = "/v1/charge", tag = "usage",
    request_body = UsageRequest,
    responses(
        (status = 200, description = "Recorded: the decision it left (`allowed` false when it did not fit)", body = DecisionBody),
        (status = 400, description = "A bad body or field, or `unsupported`: a concurrency policy", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn charge(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ServiceError> {
    usage(&state, body, Usage::Charge).await
}

/// Units given back.
#[utoipa::path(post, path = "/v1/refund", tag = "usage",
    request_body = UsageRequest,
    responses(
        (status = 200, description = "Recorded: the decision it left", body = DecisionBody),
        (status = 400, description = "A bad body or field, or `unsupported`: a concurrency policy", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn refund(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ServiceError> {
    usage(&state, body, Usage::Refund).await
}

async fn usage(
    state: &AppState,
    body: Result<Bytes, BytesRejection>,
    op: Usage,
) -> Result<Response, ServiceError> {
    let obj = object(body)?;
    let set = state.policies();
    let req = UsageRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    let (d, decider) = state
        .usage(policy, req.key.as_bytes(), op, req.cost, req.tier)
        .await?;
    Ok(recorded(policy, &decider, &d))
}

/// After a check of `estimate`: charges `actual - estimate` or refunds the
/// difference; answered as a charge.
#[utoipa::path(post, path = "/v1/settle", tag = "usage",
    request_body = SettleRequest,
    responses(
        (status = 200, description = "Recorded: the decision it left", body = DecisionBody),
        (status = 400, description = "A bad body or field, or `unsupported`: a concurrency policy", body = ErrorBody),
        DecisionErrors,
    ))]
pub(super) async fn settle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ServiceError> {
    let obj = object(body)?;
    let set = state.policies();
    let req = SettleRequest::parse(&obj)?;
    let policy = decide::policy(&set, req.policy)?;
    let (d, decider) = state
        .settle(
            policy,
            req.key.as_bytes(),
            req.estimate,
            req.actual,
            req.tier,
        )
        .await?;
    Ok(recorded(policy, &decider, &d))
}

/// 200 with the decision a usage record left and its headers (with the
/// numbers of `decider`, the policy, its tier or the key's override).
fn recorded(policy: &Policy, decider: &Policy, d: &Decision) -> Response {
    let mut response = Json(DecisionBody::new(policy, d)).into_response();
    if let Some(h) = RateLimitHeaders::new([(decider, d)].into_iter()) {
        h.append_to(response.headers_mut());
    }
    response
}
