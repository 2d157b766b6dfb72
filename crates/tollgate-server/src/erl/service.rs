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
//!    whether or not the call, or this descriptor, is refused; hits above
//!    2^32 count as 2^32 (over any limit either way, and the counter
//!    cannot overflow). A counter
//!    the local cache holds as over (`LOCAL_CACHE_SIZE_IN_BYTES`) is not
//!    sent: it is over until its window ends. A rule naming a tollgate
//!    policy (`tollgate_policy`, see `policy`) is checked on the policy's
//!    store at the same time, with the same hits as its cost.
//! 4. A rule is over when its window's count passes `requests_per_unit`
//!    (a policy's rule, when its policy denies); `shadow_mode` rules answer
//!    `OK` anyway. The call is refused when a non-quota descriptor is
//!    over, or when it has quota descriptors and all of them are over.
//!    Global shadow mode then turns a refusal into `OK`, the statuses
//!    unchanged.
//! 5. The headers, when asked for: ERL's three from the status closest to
//!    its limit, or the IETF fields with an item per limited descriptor
//!    (`headers`).

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Struct;

use tollgate::{Policy, Request, Store};

use super::config::{ErlConfig, Limit};
use super::counter::{Counter, Hit};
use super::key::cache_key;
use super::local_cache::LocalCache;
use super::settings::{CallError, Settings};
use super::window::{Unit, Window};
use super::{headers, policy, stats};

/// How a matched descriptor is decided.
enum Counted<'c> {
    /// ERL's fixed window, on the counter `key`.
    Window {
        requests_per_unit: u32,
        unit: Unit,
        key: String,
    },
    /// tollgate's extension: the policy decides on its store, under `key`.
    Policy { policy: &'c Policy, key: Vec<u8> },
}

/// A descriptor's limit after matching.
struct Checked<'c> {
    counted: Counted<'c>,
    name: &'c str,
    shadow: bool,
    quota: bool,
    /// The rule's path, and ERL's stats key when it holds request values.
    path: &'c str,
    descriptor: Option<String>,
    metadata: Option<&'c Struct>,
    hits: u64,
}

/// Where a call's descriptors are decided: ERL's counters, and, with
/// extensions, the store of the policies `tollgate_policy` names; the
/// local over-limit cache (`LOCAL_CACHE_SIZE_IN_BYTES`) when set.
#[derive(Clone, Copy)]
pub(crate) struct Deciders<'a> {
    pub(crate) counter: &'a dyn Counter,
    pub(crate) store: Option<&'a dyn Store>,
    pub(crate) local_cache: Option<&'a LocalCache>,
}

impl<'a, C: Counter> From<&'a C> for Deciders<'a> {
    fn from(counter: &'a C) -> Deciders<'a> {
        Deciders {
            counter,
            store: None,
            local_cache: None,
        }
    }
}

/// Answers one call at `now` (Unix seconds).
pub(crate) async fn should_rate_limit<'a>(
    config: &ErlConfig,
    settings: &Settings,
    deciders: impl Into<Deciders<'a>>,
    now: u64,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, CallError> {
    let deciders = deciders.into();
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
                counted: Counted::Window {
                    requests_per_unit: o.requests_per_unit,
                    unit,
                    key,
                },
                name: "",
                shadow: false,
                quota: false,
                path: domain,
                descriptor: None,
                metadata: None,
                hits: window_hits(hits),
            }));
            continue;
        }
        let Some(m) = config.find(domain, &entries) else {
            found.push(None);
            continue;
        };
        replaced.extend(m.rule.replaces.iter().map(String::as_str));
        let mut hits = hits;
        let counted = match &m.rule.limit {
            Limit::Fixed {
                requests_per_unit,
                unit,
            } => Counted::Window {
                requests_per_unit: *requests_per_unit,
                unit: *unit,
                key: cache_key(
                    &settings.prefix,
                    domain,
                    &entries,
                    &m.shared,
                    unit.window_start(now),
                ),
            },
            Limit::Unlimited => {
                unlimited[i] = true;
                found.push(None);
                continue;
            }
            Limit::Policy(policy) => Counted::Policy {
                policy,
                key: policy::key(domain, &entries, &m.shared),
            },
        };
        if let Counted::Window { .. } = &counted {
            hits = window_hits(hits);
        }
        found.push(Some(Checked {
            counted,
            name: &m.rule.name,
            shadow: m.rule.shadow_mode,
            quota: m.rule.quota_mode,
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
    // Counters already over in the local cache are answered here, unsent
    // (without a cache, nothing is allocated).
    let cached: Vec<bool> = match deciders.local_cache {
        None => Vec::new(),
        Some(cache) => found
            .iter()
            .map(|slot| match slot {
                Some(Checked {
                    counted: Counted::Window { key, .. },
                    ..
                }) => cache.is_over(key, now),
                _ => false,
            })
            .collect(),
    };
    let is_cached = |i: usize| cached.get(i).copied().unwrap_or(false);
    let mut hits = Vec::new();
    let mut requests = Vec::new();
    for (_, c) in found.iter().enumerate().filter(|(i, _)| !is_cached(*i)) {
        match c.as_ref().map(|c| (c, &c.counted)) {
            Some((c, Counted::Window { unit, key, .. })) => hits.push(Hit {
                key,
                hits: c.hits,
                expire_seconds: unit.seconds() + jitter(settings.jitter_max_seconds),
            }),
            Some((c, Counted::Policy { policy, key })) => {
                requests.push(Request {
                    policy,
                    key,
                    cost: c.hits,
                });
            }
            None => {}
        }
    }
    let (counts, decisions) = futures_util::future::join(
        deciders.counter.count(&hits),
        policy::decide(deciders.store, &requests),
    )
    .await;
    let mut counts = counts.map_err(CallError::Store)?.into_iter();
    let mut decisions = decisions?.into_iter();

    let mut statuses = Vec::with_capacity(n);
    let mut ietf = Vec::new();
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
                let labels = stats::Labels {
                    domain,
                    path: c.path,
                    descriptor: c.descriptor.as_deref(),
                };
                let status = match &c.counted {
                    Counted::Window {
                        requests_per_unit,
                        unit,
                        key,
                    } => {
                        let window = Window {
                            requests_per_unit: *requests_per_unit,
                            unit: *unit,
                            name: c.name,
                        };
                        if is_cached(i) {
                            stats::over_in_local_cache(labels, c.hits, c.shadow);
                            window.status(now, None, c.shadow)
                        } else {
                            let after = counts.next().unwrap_or(0);
                            stats::record(
                                labels,
                                *requests_per_unit,
                                after,
                                c.hits,
                                c.shadow,
                                settings.near_limit_ratio,
                            );
                            if let Some(cache) = deciders.local_cache
                                && after > u64::from(*requests_per_unit)
                            {
                                cache.over(key, now, unit.until_reset(now));
                            }
                            window.status(now, Some(after), c.shadow)
                        }
                    }
                    Counted::Policy { policy, .. } => {
                        let decision = decisions.next().flatten();
                        stats::decided(
                            labels,
                            c.hits,
                            decision.as_ref().is_none_or(|d| !d.allowed),
                            c.shadow,
                        );
                        policy::status(policy, decision.as_ref(), c.shadow)
                    }
                };
                if settings.ietf_headers {
                    ietf.push((i, c.name, c.path, &c.counted));
                }
                status
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
    let response_headers_to_add = if settings.ietf_headers {
        headers::ietf(ietf.into_iter().map(|(i, name, path, counted)| {
            let (label, quota, window) = match counted {
                Counted::Window {
                    requests_per_unit,
                    unit,
                    ..
                } => (
                    if name.is_empty() { path } else { name },
                    u64::from(*requests_per_unit),
                    unit.seconds(),
                ),
                Counted::Policy { policy, .. } => (
                    policy.name(),
                    policy.limit(),
                    tollgate_tower::headers::ceil_secs(policy.time_span()).max(1),
                ),
            };
            (label, quota, window, &statuses[i])
        }))
    } else {
        match (&settings.headers, lowest) {
            (Some(names), Some((_, i))) => headers::erl(names, &statuses[i]),
            _ => Vec::new(),
        }
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

/// The hits a window counts: at most 2^32, above any `requests_per_unit`
/// (a uint32), so that the answer is the one the hits asked for
/// (`OVER_LIMIT`) and counts below it stay exact, as ERL's. More could
/// overflow the counter: Redis's `INCRBY` refuses to pass 2^63 − 1 and
/// would then fail every call on the key until it expires (ERL's own
/// counters do).
fn window_hits(hits: u64) -> u64 {
    hits.min(1 << 32)
}

fn jitter(max: u64) -> u64 {
    if max == 0 { 0 } else { fastrand::u64(0..max) }
}
