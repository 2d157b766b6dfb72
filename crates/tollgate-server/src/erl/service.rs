//! One `ShouldRateLimit` call in ERL mode, as ERL's `src/service/
//! ratelimit.go` and `src/limiter/base_limiter.go` answer it.
//!
//! 1. Each descriptor finds its rule (or, in a domain that has a config,
//!    the limit override it carries, whatever the rules say).
//! 2. `replaces`: a rule named by any matched rule's `replaces` is dropped
//!    (no limit, not counted). An `unlimited` rule is not counted and
//!    answers `OK` with 4294967295 remaining.
//! 3. Every remaining fixed-window rule is counted, all in one round trip:
//!    its hits (the descriptor's `hits_addend` when present, 0 meaning
//!    "look without counting"; else the request's, 0 meaning 1) are added
//!    whether or not the call, or this descriptor, is refused.
//! 4. A rule is over when its window's count passes `requests_per_unit`;
//!    `shadow_mode` rules answer `OK` anyway. The call is refused when a
//!    non-quota descriptor is over, or when it has quota descriptors and
//!    all of them are over. Global shadow mode then turns a refusal into
//!    `OK`, the statuses unchanged.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, Struct};

use super::config::{ErlConfig, Limit};
use super::counter::{Counter, Hit};
use super::key::cache_key;
use super::stats;
use super::window::Unit;

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

/// A descriptor's limit after matching.
struct Checked<'c> {
    requests_per_unit: u32,
    unit: Unit,
    name: &'c str,
    shadow: bool,
    quota: bool,
    /// The counter's key.
    key: String,
    /// The rule's path, and ERL's stats key when it holds request values.
    path: &'c str,
    descriptor: Option<String>,
    metadata: Option<&'c Struct>,
    hits: u64,
}

/// Answers one call at `now` (Unix seconds).
pub(crate) async fn should_rate_limit(
    config: &ErlConfig,
    settings: &Settings,
    counter: &dyn Counter,
    now: u64,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, CallError> {
    if request.domain.is_empty() {
        return Err(CallError::Request(
            "rate limit domain must not be empty".into(),
        ));
    }
    if request.descriptors.is_empty() {
        return Err(CallError::Request(
            "rate limit descriptor list must not be empty".into(),
        ));
    }
    let domain = request.domain.as_str();
    let n = request.descriptors.len();
    let mut unlimited = vec![false; n];
    let mut found = Vec::with_capacity(n);
    let mut replaced: Vec<&str> = Vec::new();
    for (i, d) in request.descriptors.iter().enumerate() {
        let entries: Vec<(&str, &str)> = d
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.value.as_str()))
            .collect();
        let hits = hits_of(request, d);
        if let Some(o) = d.limit.as_ref().filter(|_| config.knows(domain)) {
            let unit = Unit::from_proto(o.unit).ok_or_else(|| {
                CallError::Request(format!(
                    "descriptor {i}: limit override unit {} is no unit",
                    o.unit
                ))
            })?;
            let key = cache_key(
                &settings.prefix,
                domain,
                &entries,
                &[],
                unit.window_start(now),
            );
            found.push(Some(Checked {
                requests_per_unit: o.requests_per_unit,
                unit,
                name: "",
                shadow: false,
                quota: false,
                key,
                path: domain,
                descriptor: None,
                metadata: None,
                hits,
            }));
            continue;
        }
        let Some(m) = config.find(domain, &entries) else {
            found.push(None);
            continue;
        };
        replaced.extend(m.rule.replaces.iter().map(String::as_str));
        let (requests_per_unit, unit) = match &m.rule.limit {
            Limit::Fixed {
                requests_per_unit,
                unit,
            } => (*requests_per_unit, *unit),
            Limit::Unlimited => {
                unlimited[i] = true;
                found.push(None);
                continue;
            }
            Limit::Policy(name) => {
                return Err(CallError::Request(format!(
                    "descriptor {i}: tollgate_policy '{name}' needs extensions, which this service has off"
                )));
            }
        };
        let key = cache_key(
            &settings.prefix,
            domain,
            &entries,
            &m.shared,
            unit.window_start(now),
        );
        found.push(Some(Checked {
            requests_per_unit,
            unit,
            name: &m.rule.name,
            shadow: m.rule.shadow_mode,
            quota: m.rule.quota_mode,
            key,
            path: &m.rule.path,
            descriptor: config.metric_path(domain, &entries, &m),
            metadata: m.rule.metadata.as_ref(),
            hits,
        }));
    }
    for slot in &mut found {
        if slot
            .as_ref()
            .is_some_and(|c| !c.name.is_empty() && replaced.contains(&c.name))
        {
            *slot = None;
        }
    }
    let hits: Vec<Hit<'_>> = found
        .iter()
        .flatten()
        .map(|c| Hit {
            key: &c.key,
            hits: c.hits,
            expire_seconds: c.unit.seconds() + jitter(settings.jitter_max_seconds),
        })
        .collect();
    let counts = counter.count(&hits).await.map_err(CallError::Store)?;
    let mut counts = counts.into_iter();

    let mut statuses = Vec::with_capacity(n);
    let mut over_limit = 0;
    let (mut quota_total, mut quota_over) = (0, 0);
    let mut lowest: Option<(u32, usize)> = None;
    for (i, slot) in found.iter().enumerate() {
        if unlimited[i] {
            statuses.push(DescriptorStatus {
                code: Code::Ok as i32,
                limit_remaining: u32::MAX,
                ..Default::default()
            });
            continue;
        }
        let status = match slot {
            None => DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            },
            Some(c) => {
                let after = counts.next().unwrap_or(0);
                stats::record(
                    stats::Labels {
                        domain,
                        path: c.path,
                        descriptor: c.descriptor.as_deref(),
                    },
                    c.requests_per_unit,
                    after,
                    c.hits,
                    c.shadow,
                    settings.near_limit_ratio,
                );
                let over = after > u64::from(c.requests_per_unit);
                let remaining = if over {
                    0
                } else {
                    u64::from(c.requests_per_unit) - after
                };
                DescriptorStatus {
                    code: if over && !c.shadow {
                        Code::OverLimit
                    } else {
                        Code::Ok
                    } as i32,
                    current_limit: Some(RateLimit {
                        name: c.name.to_string(),
                        requests_per_unit: c.requests_per_unit,
                        unit: c.unit as i32,
                    }),
                    limit_remaining: remaining as u32,
                    duration_until_reset: Some(ProtoDuration {
                        seconds: c.unit.until_reset(now) as i64,
                        nanos: 0,
                    }),
                    quota: None,
                }
            }
        };
        if status.current_limit.is_some() && lowest.is_none_or(|(r, _)| status.limit_remaining < r)
        {
            lowest = Some((status.limit_remaining, i));
        }
        let quota = settings.global_quota || slot.as_ref().is_some_and(|c| c.quota);
        if status.code == Code::OverLimit as i32 {
            if quota {
                quota_over += 1;
            } else {
                over_limit += 1;
                lowest = Some((0, i));
            }
        }
        if quota {
            quota_total += 1;
        }
        statuses.push(status);
    }
    let refused = over_limit > 0 || (quota_total > 0 && quota_total == quota_over);
    if refused && settings.global_shadow {
        stats::global_shadow();
    }
    let response_headers_to_add = match (&settings.headers, lowest) {
        (Some(names), Some((_, i))) => headers(names, &statuses[i], now),
        _ => Vec::new(),
    };
    let dynamic_metadata = settings.dynamic_metadata.then(|| {
        let passed = found
            .iter()
            .zip(&statuses)
            .filter(|(_, s)| s.code != Code::OverLimit as i32)
            .filter_map(|(c, _)| c.as_ref()?.metadata);
        super::metadata::dynamic_metadata(request, passed)
    });
    Ok(RateLimitResponse {
        overall_code: if refused && !settings.global_shadow {
            Code::OverLimit
        } else {
            Code::Ok
        } as i32,
        statuses,
        response_headers_to_add,
        dynamic_metadata,
        ..Default::default()
    })
}

/// A descriptor's hits: its own `hits_addend` when present (0 allowed),
/// else the request's, 0 meaning 1.
fn hits_of(request: &RateLimitRequest, d: &RateLimitDescriptor) -> u64 {
    d.hits_addend
        .as_ref()
        .map_or(u64::from(request.hits_addend.max(1)), |h| h.value)
}

fn jitter(max: u64) -> u64 {
    if max == 0 { 0 } else { fastrand::u64(0..max) }
}

/// ERL's three headers from the status closest to its limit.
fn headers(names: &HeaderNames, status: &DescriptorStatus, now: u64) -> Vec<HeaderValue> {
    let Some(limit) = &status.current_limit else {
        return Vec::new();
    };
    let reset = Unit::from_proto(limit.unit).map_or(0, |u| u.until_reset(now));
    [
        (&names.limit, limit.requests_per_unit.to_string()),
        (&names.remaining, status.limit_remaining.to_string()),
        (&names.reset, reset.to_string()),
    ]
    .into_iter()
    .map(|(key, value)| HeaderValue {
        key: key.clone(),
        value,
        ..Default::default()
    })
    .collect()
}
