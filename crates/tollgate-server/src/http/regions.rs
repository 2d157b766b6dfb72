//! The multi-region endpoints (docs/regions.md): this region's links, and
//! one key's global window as this region's Redis holds it. Read-only
//! views for operators, never on the decision path.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::decide;
use crate::error::{Code, ServiceError};
use crate::regions::{Region, RegionsReport};
use crate::state::AppState;

/// One key's current global window.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RegionViewBody {
    pub(super) policy: String,
    pub(super) key: String,
    pub(super) limit: u64,
    /// When the window started, ms since the Unix epoch.
    pub(super) window_start_ms: u64,
    pub(super) window_ms: u64,
    /// Every region's component as this region holds it.
    pub(super) regions: BTreeMap<String, u64>,
    pub(super) total: u64,
}

fn region(state: &AppState) -> Result<&Region, ServiceError> {
    state.backend.region.as_ref().ok_or_else(|| {
        ServiceError::new(
            Code::NotFound,
            "multi-region mode is off (no [regions] in the config)",
        )
    })
}

/// This region's links to the others.
#[utoipa::path(get, path = "/v1/regions", tag = "operations",
    responses(
        (status = 200, description = "This region and its links", body = RegionsReport),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = crate::http::ErrorBody),
        (status = 404, description = "`not_found`: no `[regions]`", body = crate::http::ErrorBody),
    ))]
pub(super) async fn links(State(state): State<Arc<AppState>>) -> Result<Response, ServiceError> {
    let set = state.policies();
    Ok(Json(region(&state)?.report(&set.policies)).into_response())
}

/// One key's global window, every region's component as this region's
/// Redis holds it.
#[utoipa::path(get, path = "/v1/regions/{policy}/{key}", tag = "operations",
    params(("policy" = String, Path, description = "A global policy's name"),
           ("key" = String, Path, description = "The limited key")),
    responses(
        (status = 200, description = "The key's current window", body = RegionViewBody),
        (status = 400, description = "`invalid_key`, or `unsupported`: the policy is not global", body = crate::http::ErrorBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = crate::http::ErrorBody),
        (status = 404, description = "`unknown_policy`, or `not_found`: no `[regions]`", body = crate::http::ErrorBody),
        (status = 503, description = "This region's Redis did not answer", body = crate::http::ErrorBody),
    ))]
pub(super) async fn view(
    State(state): State<Arc<AppState>>,
    Path((name, key)): Path<(String, String)>,
) -> Result<Response, ServiceError> {
    let store = &region(&state)?.store;
    let set = state.policies();
    let policy = decide::policy(&set, &name)?;
    if !store.is_global(policy) {
        return Err(ServiceError::new(
            Code::Unsupported,
            format!("policy `{name}` is not global ([regions] `global`)"),
        ));
    }
    let view = store.view(policy, key.as_bytes()).await?;
    Ok(Json(RegionViewBody {
        policy: name,
        key,
        limit: view.limit,
        window_start_ms: view.window_start.as_millis() as u64,
        window_ms: view.window.as_millis() as u64,
        regions: view.components.into_iter().collect(),
        total: view.total,
    })
    .into_response())
}
