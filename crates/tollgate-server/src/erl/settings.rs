//! What every call in ERL mode shares: the settings the environment (and
//! tollgate's own options) give, and why a call can have no answer.

/// What the environment sets for every call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Settings {
    /// `CACHE_KEY_PREFIX`.
    pub(crate) prefix: String,
    /// `SHADOW_MODE`: a refused call answers `OK`.
    pub(crate) global_shadow: bool,
    /// `QUOTA_MODE`: every limited descriptor is a quota descriptor.
    pub(crate) global_quota: bool,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` and the three header names.
    pub(crate) headers: Option<HeaderNames>,
    /// The IETF `RateLimit-Policy` and `RateLimit` fields in place of
    /// ERL's three headers (`--erl-headers ietf`).
    pub(crate) ietf_headers: bool,
    /// `EXPIRATION_JITTER_MAX_SECONDS`.
    pub(crate) jitter_max_seconds: u64,
    /// `NEAR_LIMIT_RATIO` (stats only).
    pub(crate) near_limit_ratio: f32,
    /// `RESPONSE_DYNAMIC_METADATA`: the response carries the request's
    /// descriptors and the passed rules' `metadata` (see `metadata`).
    pub(crate) dynamic_metadata: bool,
}

/// The names of the three headers ERL adds when asked to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderNames {
    pub(crate) limit: String,
    pub(crate) remaining: String,
    pub(crate) reset: String,
}

impl Default for HeaderNames {
    fn default() -> Self {
        HeaderNames {
            limit: "RateLimit-Limit".to_string(),
            remaining: "RateLimit-Remaining".to_string(),
            reset: "RateLimit-Reset".to_string(),
        }
    }
}

/// Why a call has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The request is wrong (ERL's "service error": gRPC `UNKNOWN`, `/json` 400).
    Request(String),
    /// The counters could not be reached.
    Store(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Request(m) => f.write_str(m),
            CallError::Store(m) => write!(f, "redis error: {m}"),
        }
    }
}
