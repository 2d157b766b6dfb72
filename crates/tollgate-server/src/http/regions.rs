//! The multi-region endpoints (docs/regions.md): this region's links, and
//! one key's global window as this region's Redis holds it. Read-only
//! views for operators, never on the decision path.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tollgate::store::redis::regions::RegionalStore;
use utoipa::ToSchema;

use crate::decide;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// This region and its links.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RegionsBody {
    /// This region's name.
    pub(super) region: String,
    /// Whether this region decides as partitioned (capped at its share).
    pub(super) partitioned: bool,
    /// Keys this instance has yet to replicate.
    pub(super) pending_keys: usize,
    /// The policies decided across regions.
    pub(super) global: Vec<String>,
    pub(super) links: Vec<LinkBody>,
}

/// One remote region.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct LinkBody {
    pub(super) region: String,
    pub(super) partitioned: bool,
    /// How old its newest components here are, ms (absent before it was
    /// heard from).
    pub(super) lag_ms: Option<u64>,
    /// Components our rounds merged there that grew.
    pub(super) sent: u64,
    /// Components its rounds merged here that grew.
    pub(super) received: u64,
    /// The longest its view of us was stale, ms (the bound's Δ).
    pub(super) max_staleness_ms: u64,
    pub(super) rounds: u64,
    pub(super) failed_rounds: u64,
    pub(super) last_error: Option<String>,
}

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

fn region(state: &AppState) -> Result<&RegionalStore, ServiceError> {
    state
        .backend
        .region
        .as_ref()
        .map(|r| &r.store)
        .ok_or_else(|| {
            ServiceError::new(
                Code::NotFound,
                "multi-region mode is off (no [regions] in the config)",
            )
        })
}

/// This region's links to the others.
#[utoipa::path(get, path = "/v1/regions", tag = "operations",
    responses(
        (status = 200, description = "This region and its links", body = RegionsBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = crate::http::ErrorBody),
        (status = 404, description = "`not_found`: no `[regions]`", body = crate::http::ErrorBody),
    ))]
pub(super) async fn links(State(state): State<Arc<AppState>>) -> Result<Response, ServiceError> {
    let store = region(&state)?;
    let set = state.policies();
    let links = store
        .links()
        .into_iter()
        .map(|l| LinkBody {
            region: l.region,
            partitioned: l.partitioned,
            lag_ms: l.lag.map(|d| d.as_millis() as u64),
            sent: l.sent,
            received: l.received,
            max_staleness_ms: l.max_staleness.as_millis() as u64,
            rounds: l.rounds,
            failed_rounds: l.failed_rounds,
            last_error: l.last_error,
        })
        .collect();
    Ok(Json(RegionsBody {
        region: store.regions().name().to_owned(),
        partitioned: store.is_partitioned(),
        pending_keys: store.pending(),
        global: set
            .policies
            .iter()
            .filter(|p| store.is_global(p))
            .map(|p| p.name().to_owned())
            .collect(),
        links,
    })
    .into_response())
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
    let store = region(&state)?;
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
