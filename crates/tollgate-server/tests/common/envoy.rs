//! Envoy's rate limit messages as the gRPC tests build them.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

/// ERL mode's config of the gRPC tests: 3 a minute per `remote_address`
/// in `edge`, as `grpc.toml`'s `per-ip`.
pub(crate) const ERL_CONFIG: &str = "
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
";

/// A descriptor of `entries` (key, value), nothing else set.
pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

/// A request in `domain` of one descriptor of `entries`, no hits addend.
pub(crate) fn request(domain: &str, entries: &[(&str, &str)]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors: vec![descriptor(entries)],
        hits_addend: 0,
    }
}
