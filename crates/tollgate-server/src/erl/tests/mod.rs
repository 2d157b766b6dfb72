//! ERL mode's tests that span its files: validation as ERL validates
//! (`validate`), calls as ERL answers them (`service`), counting in one
//! Redis with ERL (`redis`), the dynamic metadata (`metadata`), what
//! tollgate adds to ERL when asked (`extensions`), and property tests of
//! RLS messages (`fuzz`).

mod extensions;
mod fuzz;
mod metadata;
mod redis;
pub(crate) mod service;
mod validate;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;

/// An answer's `response_headers_to_add` as (name, value) pairs.
fn header_pairs(r: &RateLimitResponse) -> Vec<(&str, &str)> {
    r.response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect()
}
