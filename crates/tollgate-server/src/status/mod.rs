//! The status page: `GET /` answers `page.html` (built into the binary, no
//! external assets) and the page polls `GET /v1/stats` for the service's
//! state and each policy's decisions per second (`ring.rs`). Neither ever
//! shows a limited key; `/v1/stats` needs the token when one is set.

mod ring;

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::palette;
use crate::state::AppState;

pub(crate) use ring::Stats;

/// The outcome of the last config reload.
#[derive(Debug, Clone)]
struct Reload {
    at: SystemTime,
    ok: bool,
    message: String,
}

/// What the status page reports beyond the policies and the store.
#[derive(Debug)]
pub(crate) struct Status {
    started: Instant,
    pub(crate) stats: Stats,
    reload: Mutex<Option<Reload>>,
}

impl Default for Status {
    fn default() -> Status {
        let started = Instant::now();
        Status {
            started,
            stats: Stats::new(started),
            reload: Mutex::new(None),
        }
    }
}

impl Status {
    /// Notes a config reload: applied (`ok`) or refused, and why.
    pub(crate) fn reloaded(&self, ok: bool, message: String) {
        *self.reload.lock().expect("reload lock") = Some(Reload {
            at: SystemTime::now(),
            ok,
            message,
        });
    }
}

/// The page, with the palette's colours put into its stylesheet.
static PAGE: LazyLock<String> = LazyLock::new(|| {
    include_str!("page.html").replace(
        "/*palette*/",
        &format!(
            "--admitted: {}; --denied: {};",
            palette::ADMITTED.hex(),
            palette::DENIED.hex()
        ),
    )
});

/// `GET /`: the status page.
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
/// [`ring::SECONDS`] seconds, oldest first. Policy names only, never a key.
pub(crate) async fn stats(State(state): State<Arc<AppState>>) -> Response {
    let status = &state.status;
    let now = Instant::now();
    let second = status.stats.second(now);
    let policies: Vec<Value> = state
        .policies()
        .policies
        .iter()
        .map(|p| {
            let (allowed, denied) = status.stats.series(p.name(), second);
            json!({
                "name": p.name(),
                "algorithm": p.algorithm().name(),
                "limit": p.limit(),
                "window_ms": p.time_span().as_millis() as u64,
                "shadow": p.is_shadow(),
                "leased": p.leased(),
                "allowed": allowed,
                "denied": denied,
            })
        })
        .collect();
    let backend = &state.backend;
    let store = json!({
        "description": backend.describe(),
        "breaker": backend.breaker().map(|b| b.as_str()),
        "on_failure": backend.resilient.as_ref().map(|_| backend.settings.on_failure.as_str()),
        "fallback_keys": backend.resilient.as_ref().map(|r| r.fallback_keys()),
        // The library tells neither when the breaker opened nor how many
        // keys its deny cache holds.
        "time_in_fallback_ms": Value::Null,
        "deny_cache_keys": Value::Null,
    });
    let reload = status.reload.lock().expect("reload lock").clone();
    let reload =
        reload.map(|r| json!({"at_unix_ms": unix_ms(r.at), "ok": r.ok, "message": r.message}));
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "uptime_s": now.duration_since(status.started).as_secs(),
        "started_unix_ms": unix_ms(SystemTime::now() - now.duration_since(status.started)),
        "seconds": ring::SECONDS,
        "store": store,
        "reload": reload,
        "policies": policies,
    }))
    .into_response()
}
