//! The status page: `GET /` answers `status.html` (built into the binary,
//! no external assets) and the page polls `GET /v1/stats` for the service's
//! state, each policy's decisions per second (`crate::status`, the core's
//! counts) and, in multi-region mode, this region's links. Neither ever shows a limited key; `/v1/stats` needs the
//! token when one is set.

use std::sync::{Arc, LazyLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use super::body::ErrorBody;
use crate::palette;
use crate::regions::RegionsReport;
use crate::state::AppState;
use crate::status::SECONDS;

/// The page, with the palette's colours put into its stylesheet.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    include_str!("status.html").replace(
        "/*palette*/",
        &format!(
            "--admitted: {}; --denied: {};",
            palette::ADMITTED.hex(),
            palette::DENIED.hex()
        ),
    )
});

/// `GET /`: the status page.
#[utoipa::path(get, path = "/", tag = "operations",
    responses(
        (status = 200, description = "The status page (HTML, no external assets; no token needed: it holds no data, asks for the token and sends it to `/v1/stats`)", body = String, content_type = "text/html"),
    ))]
pub(crate) async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE.as_str(),
    )
        .into_response()
}

fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `GET /v1/stats`: version, uptime, store, last reload, and each policy in
/// force with its allowed and denied decisions per second over the last
/// [`SECONDS`] seconds, oldest first. Policy names only, never a key.
#[utoipa::path(get, path = "/v1/stats", tag = "operations",
    responses(
        (status = 200, description = "The service's state and each policy's decisions per second", body = StatsBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
    ))]
pub(crate) async fn stats(State(state): State<Arc<AppState>>) -> Response {
    let status = &state.status;
    let now = Instant::now();
    let second = status.stats.second(now);
    let set = state.policies();
    let policies = set
        .policies
        .iter()
        .map(|p| {
            let (allowed, denied) = status.stats.series(p.name(), second);
            PolicyStats {
                name: p.name().to_string(),
                algorithm: p.algorithm().name(),
                limit: p.limit(),
                window_ms: p.time_span().as_millis() as u64,
                shadow: p.is_shadow(),
                leased: p.leased(),
                allowed,
                denied,
                overrides: state.overrides.counts(p.name()).into_iter().collect(),
            }
        })
        .collect();
    let backend = &state.backend;
    let store = StoreStatus {
        description: backend.describe(),
        breaker: backend.breaker().map(|b| b.as_str()),
        on_failure: backend
            .resilient
            .as_ref()
            .map(|_| backend.settings.on_failure.as_str()),
        fallback_keys: backend.resilient.as_ref().map(|r| r.fallback_keys()),
        // 0 while the breaker is closed; none on the memory store.
        time_in_fallback_ms: backend
            .resilient
            .as_ref()
            .map(|r| r.open_for().map_or(0, |d| d.as_millis() as u64)),
        // None on the memory store, and when the deny cache is off.
        deny_cache_keys: backend.resilient.as_ref().and_then(|r| r.deny_cache_keys()),
    };
    let reload = status.last_reload();
    let reload = reload.map(|r| ReloadStatus {
        at_unix_ms: unix_ms(r.at),
        ok: r.ok,
        message: r.message,
        refused: r.refused,
    });
    Json(StatsBody {
        version: env!("CARGO_PKG_VERSION"),
        uptime_s: now.duration_since(status.started).as_secs(),
        started_unix_ms: unix_ms(SystemTime::now() - now.duration_since(status.started)),
        seconds: SECONDS as u64,
        store,
        reload,
        regions: backend.region.as_ref().map(|r| r.report(&set.policies)),
        policies,
    })
    .into_response()
}

/// The answer of `GET /v1/stats`.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StatsBody {
    version: &'static str,
    uptime_s: u64,
    started_unix_ms: u64,
    /// How many seconds each policy's series covers.
    seconds: u64,
    store: StoreStatus,
    /// The last config reload, if any.
    reload: Option<ReloadStatus>,
    /// With `[regions]`: this region and its links, as `GET /v1/regions`
    /// answers them.
    regions: Option<RegionsReport>,
    policies: Vec<PolicyStats>,
}

/// The store and its failure handling.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct StoreStatus {
    description: String,
    /// `closed` or `open`, behind a circuit breaker.
    breaker: Option<&'static str>,
    on_failure: Option<&'static str>,
    /// Keys the local fallback holds.
    fallback_keys: Option<usize>,
    /// How long the breaker has been open, in ms: 0 while it is closed,
    /// null on the memory store.
    time_in_fallback_ms: Option<u64>,
    /// How many keys the deny cache holds a denial for: null on the memory
    /// store and when the deny cache is off.
    deny_cache_keys: Option<usize>,
}

/// A config reload: applied or refused, and why.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ReloadStatus {
    at_unix_ms: u64,
    ok: bool,
    message: String,
    /// How many reloads were refused since the service started.
    refused: u64,
}

/// A policy in force with its decisions per second, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct PolicyStats {
    name: String,
    algorithm: &'static str,
    limit: u64,
    window_ms: u64,
    shadow: bool,
    leased: bool,
    allowed: Vec<u64>,
    denied: Vec<u64>,
    /// Its overrides in force, by kind (`limits`, `block`, `allow`,
    /// `tier`); never a key or a selector.
    overrides: std::collections::BTreeMap<&'static str, usize>,
}
