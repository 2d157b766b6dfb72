//! The HTTP request metrics' handles, resolved once per route and status
//! instead of looked up by name and labels per request:
//! `tollgate_http_requests_total` (labels `route`, `status`) and
//! `tollgate_http_request_duration_seconds` (label `route`). A handle is
//! registered on its first use, so `/metrics` shows the series it showed
//! when each request looked its own up. The route is the pattern
//! (`/v1/keys/{policy}/{key}`), never the path with its key; a request no
//! route matched is `unmatched`.

use std::sync::{LazyLock, OnceLock};
use std::time::Duration;

use axum::extract::MatchedPath;
use http::StatusCode;
use metrics::{Counter, Histogram};

/// The statuses the API answers with, each given a handle of its own;
/// another one is counted by name.
const STATUSES: [u16; 12] = [200, 400, 401, 404, 405, 408, 413, 415, 429, 431, 500, 503];

/// One route's handles.
pub(super) struct RouteMeters {
    route: &'static str,
    requests: [OnceLock<Counter>; STATUSES.len()],
    duration: OnceLock<Histogram>,
}

static ROUTES: LazyLock<Vec<RouteMeters>> = LazyLock::new(|| {
    super::routes()
        .into_iter()
        .map(|(route, _)| route)
        .chain(["unmatched"])
        .map(|route| RouteMeters {
            route,
            requests: Default::default(),
            duration: OnceLock::new(),
        })
        .collect()
});

/// The handles of the route a request matched.
pub(super) fn of(matched: Option<&MatchedPath>) -> &'static RouteMeters {
    let route = matched.map_or("unmatched", MatchedPath::as_str);
    let routes = &*ROUTES;
    routes
        .iter()
        .find(|r| r.route == route)
        // Every route is in `routes()`; `unmatched` is the last entry.
        .unwrap_or(&routes[routes.len() - 1])
}

impl RouteMeters {
    /// Counts one request answered with `status` after `elapsed`.
    pub(super) fn record(&self, status: StatusCode, elapsed: Duration) {
        let code = status.as_u16();
        match STATUSES.iter().position(|s| *s == code) {
            Some(i) => self.requests[i]
                .get_or_init(|| self.counter(code))
                .increment(1),
            None => self.counter(code).increment(1),
        }
        self.duration
            .get_or_init(|| {
                metrics::histogram!("tollgate_http_request_duration_seconds", "route" => self.route)
            })
            .record(elapsed.as_secs_f64());
    }

    fn counter(&self, status: u16) -> Counter {
        metrics::counter!(
            "tollgate_http_requests_total",
            "route" => self.route,
            "status" => status.to_string()
        )
    }
}
