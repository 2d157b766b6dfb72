//! The HTTP API: the router, its shared state, authentication, request
//! metrics. The handlers are in `api.rs`, errors in `error.rs`.

mod api;
mod error;

use std::sync::{Arc, RwLock};
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use http::StatusCode;
use metrics_exporter_prometheus::PrometheusHandle;
use subtle::ConstantTimeEq;

use crate::config::PolicySet;
use crate::store::ServiceStore;
pub(crate) use error::ApiError;

/// The largest request body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) store: ServiceStore,
    /// The policies in force, swapped whole on reload.
    pub(crate) policies: RwLock<Arc<PolicySet>>,
    pub(crate) token: Option<String>,
    pub(crate) metrics: Option<PrometheusHandle>,
}

impl AppState {
    pub(crate) fn policies(&self) -> Arc<PolicySet> {
        self.policies.read().expect("policies lock").clone()
    }

    pub(crate) fn replace_policies(&self, policies: PolicySet) {
        *self.policies.write().expect("policies lock") = Arc::new(policies);
    }
}

/// The application, as a function of its state (tested with `oneshot` and
/// on a real socket).
pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/check", post(api::check))
        .route("/v1/reserve", post(api::reserve))
        .route("/v1/acquire", post(api::acquire))
        .route("/v1/release", post(api::release))
        .route("/v1/keys/{policy}/{key}", delete(api::reset))
        .route("/v1/policies", get(api::policies))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(api::ready))
        .route("/metrics", get(api::metrics))
        .fallback(|| async {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
        })
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        .layer(middleware::from_fn(measure))
        .with_state(state)
}

/// With a token configured, every endpoint but `/healthz` wants
/// `Authorization: Bearer <token>`, compared in constant time.
async fn authenticate(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(token) = &state.token
        && request.uri().path() != "/healthz"
    {
        let given = request
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if !bool::from(given.as_bytes().ct_eq(token.as_bytes())) {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "a valid bearer token is required",
            )
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
