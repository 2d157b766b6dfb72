//! ERL mode's HTTP port: `/json` (any method: a protojson
//! `RateLimitRequest` in, a protojson `RateLimitResponse` out; 200 when
//! allowed, 429 when refused, 400 with `Bad Request` for a body that is
//! not one or a call ERL fails, 503 with `Service Unavailable` when the
//! counters cannot be reached), `/healthcheck` (200 `OK`) and tollgate's
//! `/metrics`.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use http::{StatusCode, header};

use super::json;
use super::settings::CallError;
use super::state::ErlState;
use crate::http::MAX_BODY;

/// The router of ERL mode's HTTP port.
pub(crate) fn router(state: Arc<ErlState>) -> Router {
    Router::new()
        .route("/json", any(json_call))
        .route("/healthcheck", get(|| async { "OK" }))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(state)
}

/// ERL's plain-text error answer: the status and its reason phrase.
fn plain(status: StatusCode) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        status.canonical_reason().unwrap_or_default(),
    )
        .into_response()
}

async fn json_call(State(state): State<Arc<ErlState>>, body: Bytes) -> Response {
    let request = match json::request(&body) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("/json: {e}");
            return plain(StatusCode::BAD_REQUEST);
        }
    };
    let response = match state.call(&request).await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("/json: {e}");
            return plain(match e {
                CallError::Request(_) => StatusCode::BAD_REQUEST,
                CallError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            });
        }
    };
    let status = match Code::try_from(response.overall_code) {
        Ok(Code::Ok) => StatusCode::OK,
        Ok(Code::OverLimit) => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, axum::Json(json::response(&response))).into_response()
}

async fn metrics(State(state): State<Arc<ErlState>>) -> Response {
    match &state.metrics {
        Some(handle) => handle.render().into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are off").into_response(),
    }
}
