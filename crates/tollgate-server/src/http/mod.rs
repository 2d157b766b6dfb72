//! The HTTP API: the router, authentication, request metrics (their
//! handles resolved once per route and status in `route_meters.rs`). The
//! handlers are in `api.rs` and `usage.rs`, `overrides.rs`
//! (`/v1/overrides/...`), `regions.rs` (`/v1/regions`) and `status.rs`
//! (the status page, `status.html`, and `/v1/stats`), a flat single
//! check answered without the general path's allocations in `fast.rs`;
//! their bodies in `body.rs` (read as strict JSON by `json.rs`), errors as
//! JSON in `error.rs` (the framework's own too, and the head's limits:
//! `framework.rs`), the deadline on a request's body in `deadline.rs`, the
//! OpenAPI document in `openapi.rs`; the state is `crate::state::AppState`,
//! shared with gRPC. `tests.rs` drives the router in-process with
//! `oneshot`, `strict_tests.rs` with hostile requests, `fuzz_tests.rs`
//! with property tests, `openapi_tests.rs` against the document;
//! `tests/serve.rs` the binary on a socket.

mod api;
mod body;
pub(crate) use body::ErrorBody;
mod deadline;
pub(crate) use deadline::TimedBody;
mod error;
mod fast;
mod framework;
pub(crate) use framework::MAX_HEAD;
#[cfg(test)]
mod fuzz_tests;
mod json;
mod openapi;
#[cfg(test)]
mod openapi_tests;
mod overrides;
mod regions;
mod route_meters;
mod status;
#[cfg(test)]
mod strict_tests;
#[cfg(test)]
mod tests;
mod usage;

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, delete, get, post, put};

use crate::auth::Access;

use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// The largest request body accepted.
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// Every route: its path and its handlers. The router is built from this
/// list, and `tests.rs` checks each of its routes and methods against
/// `GET /openapi.json`, so a route cannot be added without its description.
fn routes() -> Vec<(&'static str, MethodRouter<Arc<AppState>>)> {
    vec![
        ("/v1/check", post(api::check)),
        ("/v1/charge", post(usage::charge)),
        ("/v1/refund", post(usage::refund)),
        ("/v1/settle", post(usage::settle)),
        ("/v1/reserve", post(api::reserve)),
        ("/v1/acquire", post(api::acquire)),
        ("/v1/release", post(api::release)),
        ("/v1/keys/{policy}/{key}", delete(api::reset)),
        ("/v1/overrides/{policy}", get(overrides::list)),
        ("/v1/overrides/{policy}/{selector}", put(overrides::put)),
        ("/v1/overrides/{policy}/{selector}", get(overrides::get)),
        (
            "/v1/overrides/{policy}/{selector}",
            delete(overrides::delete),
        ),
        ("/v1/policies", get(api::policies)),
        ("/healthz", get(api::healthz)),
        ("/readyz", get(api::ready)),
        ("/metrics", get(api::metrics)),
        ("/openapi.json", get(openapi::openapi_json)),
        ("/", get(status::page)),
        ("/v1/stats", get(status::stats)),
        ("/v1/regions", get(regions::links)),
        ("/v1/regions/{policy}/{key}", get(regions::view)),
    ]
}

/// The application, as a function of its state (tested with `oneshot` in
/// `tests.rs`, and on a real socket in `tests/serve.rs`).
pub(crate) fn router(state: Arc<AppState>) -> Router {
    routes()
        .into_iter()
        .fold(Router::new(), |router, (path, handlers)| {
            router.route(path, handlers)
        })
        .fallback(|| async { ServiceError::new(Code::NotFound, "no such endpoint") })
        // One `layer` call for both (outermost first): each call wraps
        // every route in a boxed service that a request clones, with
        // everything under it, so two calls cost a request more
        // allocations.
        .layer(
            tower::ServiceBuilder::new()
                .layer(middleware::from_fn_with_state(state.clone(), gate))
                .layer(DefaultBodyLimit::max(MAX_BODY)),
        )
        .with_state(state)
}

/// Whether a request's route is an admin one (see `auth.rs`): the
/// overrides, and forgetting a key.
fn access(request: &Request) -> Access {
    let path = request.uri().path();
    let admin = path.starts_with("/v1/overrides/")
        || (request.method() == http::Method::DELETE && path.starts_with("/v1/keys/"));
    if admin {
        Access::Admin
    } else {
        Access::Decision
    }
}

/// One layer for what every request goes through: the head's limits
/// (`framework.rs`), authentication, the request's count and latency
/// around it, and the framework's own errors in the JSON form
/// (`framework.rs`).
///
/// With a token configured, every endpoint but `/healthz`, `/readyz` (the
/// probes of an orchestrator, which cannot read the token from a secret:
/// they learn the store's address without its credentials, and whether it
/// answers) and the status page itself (`/`, which holds no data: it asks
/// for the token and sends it to `/v1/stats`) wants `Authorization: Bearer
/// <token>`, the admin token on admin routes (`auth.rs`), compared in
/// constant time.
///
/// Requests are counted, and their latency measured, by route (the
/// route's pattern, never the path with its key) and status; the handles
/// are resolved once per route and status (`route_meters.rs`).
async fn gate(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    if let Some(refused) = framework::head_refusal(&request) {
        return refused;
    }
    let route = route_meters::of(request.extensions().get::<MatchedPath>());
    let started = Instant::now();
    let response = match authenticate(&state, &request) {
        Ok(()) => next.run(request).await,
        Err(refused) => refused.into_response(),
    };
    route.record(response.status(), started.elapsed());
    framework::as_json(response).await
}

/// The refusal of a request without the token its route wants.
fn authenticate(state: &AppState, request: &Request) -> Result<(), ServiceError> {
    if matches!(request.uri().path(), "/healthz" | "/readyz" | "/") {
        return Ok(());
    }
    let given = request
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    state.tokens.check(access(request), given)
}
