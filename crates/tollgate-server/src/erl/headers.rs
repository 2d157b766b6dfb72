//! The headers ERL mode adds to an answer (`response_headers_to_add`),
//! when asked to: ERL's three (`LIMIT_RESPONSE_HEADERS_ENABLED`, from the
//! status closest to its limit, as ERL's `src/service/ratelimit.go`), or
//! in their place the IETF `RateLimit-Policy` and `RateLimit` fields
//! (`--erl-headers ietf`), written by the same code as tollgate's own
//! answers (`tollgate_tower::headers`), one item per limited descriptor.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::DescriptorStatus;
use tollgate_tower::headers::{QuotaItem, RateLimitHeaders};

use super::settings::HeaderNames;

/// Whole seconds until `status`'s reset, rounded up; 0 without one.
fn reset_secs(status: &DescriptorStatus) -> Option<u64> {
    status
        .duration_until_reset
        .as_ref()
        .map(|d| d.seconds.max(0) as u64 + u64::from(d.nanos > 0))
}

/// ERL's three headers from `status`.
pub(crate) fn erl(names: &HeaderNames, status: &DescriptorStatus) -> Vec<HeaderValue> {
    let Some(limit) = &status.current_limit else {
        return Vec::new();
    };
    [
        (&names.limit, limit.requests_per_unit.to_string()),
        (&names.remaining, status.limit_remaining.to_string()),
        (&names.reset, reset_secs(status).unwrap_or(0).to_string()),
    ]
    .into_iter()
    .map(|(key, value)| HeaderValue {
        key: key.clone(),
        value,
        ..Default::default()
    })
    .collect()
}

/// The IETF fields, an item per `(name, quota, window in seconds, status)`.
pub(crate) fn ietf<'a>(
    items: impl Iterator<Item = (&'a str, u64, u64, &'a DescriptorStatus)>,
) -> Vec<HeaderValue> {
    crate::rls_answer::envoy_headers(RateLimitHeaders::from_items(items.map(
        |(name, quota, window, status)| QuotaItem {
            name,
            quota,
            window: Some(window),
            remaining: u64::from(status.limit_remaining),
            reset: reset_secs(status),
        },
    )))
}
