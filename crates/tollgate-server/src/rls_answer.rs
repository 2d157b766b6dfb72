//! Envoy's rate limit answer written from tollgate's decisions: a
//! descriptor's status, a policy as Envoy's current limit, and the IETF
//! fields as `response_headers_to_add`. A leaf both gRPC modes use: the
//! native service (`grpc.rs`) and ERL mode's `tollgate_policy` rules and
//! headers (`erl/policy.rs`, `erl/headers.rs`).

use std::time::Duration;

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use tollgate::{Decision, Policy};
use tollgate_tower::headers::{RATELIMIT, RATELIMIT_POLICY, RateLimitHeaders};

/// A day in seconds: Envoy's units are whole seconds.
pub(crate) const DAY: u64 = 86_400;

/// The policy's limit as Envoy's `requests_per_unit` and `unit`, where its
/// window (or `per`) is a whole second, minute, hour, day, week, month (30
/// days) or year (365 days).
pub(crate) fn current_limit(policy: &Policy) -> RateLimit {
    RateLimit {
        name: policy.name().to_string(),
        requests_per_unit: requests_per_unit(policy),
        unit: unit(policy) as i32,
    }
}

/// The policy's limit as Envoy's `requests_per_unit`.
pub(crate) fn requests_per_unit(policy: &Policy) -> u32 {
    u32::try_from(policy.limit()).unwrap_or(u32::MAX)
}

/// The policy's window (or `per`) as Envoy's unit.
pub(crate) fn unit(policy: &Policy) -> Unit {
    match policy.time_span().as_secs() {
        _ if policy.time_span().subsec_nanos() != 0 => Unit::Unknown,
        1 => Unit::Second,
        60 => Unit::Minute,
        3600 => Unit::Hour,
        DAY => Unit::Day,
        604_800 => Unit::Week,
        2_592_000 => Unit::Month,
        31_536_000 => Unit::Year,
        _ => Unit::Unknown,
    }
}

/// A descriptor's status from its policy's decision: `OK` or
/// `OVER_LIMIT`, the policy as the current limit, the remaining quota, and
/// until the quota resets (when admitted) or the retry (when denied).
pub(crate) fn descriptor_status(policy: &Policy, decision: &Decision) -> DescriptorStatus {
    DescriptorStatus {
        code: code(decision) as i32,
        current_limit: Some(current_limit(policy)),
        limit_remaining: limit_remaining(decision),
        duration_until_reset: Some(proto_duration(until(decision))),
        quota: None,
    }
}

/// A decision's code: `OK` or `OVER_LIMIT`.
pub(crate) fn code(decision: &Decision) -> Code {
    if decision.allowed {
        Code::Ok
    } else {
        Code::OverLimit
    }
}

/// A decision's remaining quota, as Envoy's `limit_remaining`.
pub(crate) fn limit_remaining(decision: &Decision) -> u32 {
    u32::try_from(decision.remaining).unwrap_or(u32::MAX)
}

/// Until the quota resets (admitted) or the retry (denied).
pub(crate) fn until(decision: &Decision) -> Duration {
    if decision.allowed {
        decision.reset_after
    } else {
        decision.retry_after
    }
}

/// The IETF `RateLimit-Policy` and `RateLimit` fields as Envoy's
/// `response_headers_to_add`; none for `None`.
pub(crate) fn envoy_headers(headers: Option<RateLimitHeaders>) -> Vec<HeaderValue> {
    let Some(h) = headers else {
        return Vec::new();
    };
    [(RATELIMIT_POLICY, h.policy()), (RATELIMIT, h.limit())]
        .into_iter()
        .filter_map(|(name, value)| {
            Some(HeaderValue {
                key: name.as_str().to_string(),
                value: value.to_str().ok()?.to_string(),
                ..Default::default()
            })
        })
        .collect()
}

fn proto_duration(d: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}
