//! The HTTP API: the router, authentication, request metrics. The
//! handlers are in `api.rs`, errors as JSON in `error.rs`; the state is
//! `crate::state::AppState`, shared with gRPC. `tests.rs` drives the router
//! in-process with `oneshot`; `tests/serve.rs` the binary on a socket.

mod api;
mod error;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use subtle::ConstantTimeEq;

use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// The largest request body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// The application, as a function of its state (tested with `oneshot` in
/// `tests.rs`, and on a real socket in `tests/serve.rs`).
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/check", post(api::check))
        .route("/v1/charge", post(api::charge))
        .route("/v1/refund", post(api::refund))
        .route("/v1/settle", post(api::settle))
        .route("/v1/reserve", post(api::reserve))
        .route("/v1/acquire", post(api::acquire))
        .route("/v1/release", post(api::release))
        .route("/v1/keys/{policy}/{key}", delete(api::reset))
        .route("/v1/policies", get(api::policies))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(api::ready))
        .route("/metrics", get(api::metrics))
        .route("/", get(crate::status::page))
        .route("/v1/stats", get(crate::status::stats))
        .fallback(|| async { ServiceError::new(Code::NotFound, "no such endpoint") })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(measure))
        .with_state(state)
}

/// With a token configured, every endpoint but `/healthz` and the status
/// page itself (`/`, which holds no data: it asks for the token and sends
/// it to `/v1/stats`) wants `Authorization: Bearer <token>`, compared in
/// constant time.
async fn authenticate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.token
        && !matches!(request.uri().path(), "/healthz" | "/")
    {
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            return ServiceError::new(Code::Unauthorized, "a valid bearer token is required")
                .into_response();
        }
    }
    next.run(request).await
}

/// Counts requests and their latency by route (the route's pattern, never
/// the path with its key) and status.
async fn measure(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |p| p.as_str().to_string());
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    metrics::counter!("tollgate_http_requests_total", "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("tollgate_http_request_duration_seconds", "route" => route)
        .record(started.elapsed().as_secs_f64());
    response
}
