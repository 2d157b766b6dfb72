//! `GET /openapi.json`: the HTTP API described (OpenAPI 3.1), derived
//! from the handlers' `#[utoipa::path]` attributes and the body types'
//! `ToSchema` derives. `tests.rs` checks that it lists every route of the
//! router and that real answers match its schemas.

use axum::Json;
use utoipa::OpenApi;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};

use super::body::*;
use super::overrides::{OverrideBody, OverridesBody, RemovedBody};
use super::{api, overrides, regions, usage};

/// The document's source.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "tollgate",
        description = "The HTTP API of `tollgate serve`, a distributed rate limiter. With a \
                       token configured, every endpoint but `/healthz` and `/` wants \
                       `Authorization: Bearer <token>`. Errors are \
                       `{\"error\": {\"code\", \"message\"}}`."
    ),
    paths(
        api::check,
        usage::charge,
        usage::refund,
        usage::settle,
        api::reserve,
        api::acquire,
        api::release,
        api::reset,
        overrides::put,
        overrides::get,
        overrides::delete,
        overrides::list,
        api::policies,
        api::healthz,
        api::ready,
        api::metrics,
        openapi_json,
        super::status::page,
        super::status::stats,
        regions::links,
        regions::view,
    ),
    components(schemas(CheckRequest, BatchRequest, DecisionBody, BatchBody, ErrorDetail, OverrideBody, OverridesBody, RemovedBody)),
    modifiers(&BearerToken),
    security((), ("bearer" = [])),
)]
pub(crate) struct ApiDoc;

/// Adds the optional bearer token as a security scheme.
struct BearerToken;

impl utoipa::Modify for BearerToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses(
        (status = 200, description = "The OpenAPI 3.1 document", content_type = "application/json"),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
    ))]
pub(super) async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
