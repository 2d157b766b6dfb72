//! One `ShouldRateLimit` call in ERL mode, as ERL's `src/service/
//! ratelimit.go` and `src/limiter/base_limiter.go` answer it.
//!
//! Each numbered step below is a function: 1 and 2 `matched` (in
//! `matched.rs`), 3 [`count`], 4 and 5 [`answer`].
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

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};

use tollgate::{Decision, Request, Store};

use super::config::ErlConfig;
use super::counter::{Counter, Hit};
use super::local_cache::LocalCache;
use super::matched::{Checked, Counted, Matched, matched};
use super::settings::{CallError, Settings};
use super::window::Window;
use super::{headers, policy, stats};

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

/// Answers one call at `now` (Unix seconds): its descriptors matched to
/// their rules ([`matched`]), counted ([`count`]), and the answer written
/// from the counts ([`answer`]).
pub(crate) async fn should_rate_limit<'a>(
    config: &ErlConfig,
    settings: &Settings,
    deciders: impl Into<Deciders<'a>>,
    now: u64,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, CallError> {
    let deciders = deciders.into();
    let matched = matched(config, settings, now, request)?;
    let counts = count(&matched, settings, deciders, now).await?;
    Ok(answer(request, &matched, counts, settings, deciders, now))
}

/// What step 3 counted: the windows' counts after the hits and the
/// policies' decisions, each in the order of the descriptors sent.
struct Counts {
    /// Which descriptors the local cache answered, unsent (empty without
    /// a cache).
    cached: Vec<bool>,
    windows: std::vec::IntoIter<u64>,
    policies: std::vec::IntoIter<Option<Decision>>,
}

impl Counts {
    fn is_cached(&self, i: usize) -> bool {
        self.cached.get(i).copied().unwrap_or(false)
    }
}

/// Step 3: every counted rule's hits in one round trip, the windows on
/// ERL's counters and the policies through the one decision path, at the
/// same time; counters the local cache holds as over are not sent.
async fn count(
    matched: &Matched<'_>,
    settings: &Settings,
    deciders: Deciders<'_>,
    now: u64,
) -> Result<Counts, CallError> {
    // Counters already over in the local cache are answered here, unsent
    // (without a cache, nothing is allocated).
    let cached: Vec<bool> = match deciders.local_cache {
        None => Vec::new(),
        Some(cache) => matched
            .found
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
    for (_, c) in matched
        .found
        .iter()
        .enumerate()
        .filter(|(i, _)| !is_cached(*i))
    {
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
    Ok(Counts {
        windows: counts.map_err(CallError::Store)?.into_iter(),
        policies: decisions?.into_iter(),
        cached,
    })
}

/// Step 4 and 5: each descriptor's status (its stats recorded, a counter
/// newly over put in the local cache), the overall code, the headers and
/// the dynamic metadata.
fn answer(
    request: &RateLimitRequest,
    matched: &Matched<'_>,
    mut counts: Counts,
    settings: &Settings,
    deciders: Deciders<'_>,
    now: u64,
) -> RateLimitResponse {
    let domain = request.domain.as_str();
    let found = &matched.found;
    let mut statuses = Vec::with_capacity(found.len());
    let mut ietf = Vec::new();
    let mut over_limit = 0;
    let (mut quota_total, mut quota_over) = (0, 0);
    let mut lowest: Option<(u32, usize)> = None;
    for (i, slot) in found.iter().enumerate() {
        if matched.unlimited[i] {
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
                let status = status_of(c, i, domain, &mut counts, settings, deciders, now);
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
    RateLimitResponse {
        overall_code: if refused && !settings.global_shadow {
            Code::OverLimit
        } else {
            Code::Ok
        } as i32,
        statuses,
        response_headers_to_add,
        dynamic_metadata,
        ..Default::default()
    }
}

/// Descriptor `i`'s status from its count (its next in `counts`, unless
/// the local cache answered it), its stats recorded.
fn status_of(
    c: &Checked<'_>,
    i: usize,
    domain: &str,
    counts: &mut Counts,
    settings: &Settings,
    deciders: Deciders<'_>,
    now: u64,
) -> DescriptorStatus {
    let labels = stats::Labels {
        domain,
        path: c.path,
        descriptor: c.descriptor.as_deref(),
    };
    match &c.counted {
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
            if counts.is_cached(i) {
                stats::over_in_local_cache(labels, c.hits, c.shadow);
                return window.status(now, None, c.shadow);
            }
            let after = counts.windows.next().unwrap_or(0);
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
        Counted::Policy { policy, .. } => {
            let decision = counts.policies.next().flatten();
            stats::decided(
                labels,
                c.hits,
                decision.as_ref().is_none_or(|d| !d.allowed),
                c.shadow,
            );
            policy::status(policy, decision.as_ref(), c.shadow)
        }
    }
}

fn jitter(max: u64) -> u64 {
    if max == 0 { 0 } else { fastrand::u64(0..max) }
}
