//! Steps 1 and 2 of an ERL call (see `service.rs`): each descriptor
//! matched to its rule, or to the limit override it carries, and the
//! rules other matched rules `replaces` dropped.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::Struct;
use tollgate::Policy;

use super::config::{ErlConfig, Limit};
use super::key::cache_key;
use super::policy;
use super::settings::{CallError, Settings};
use super::window::Unit;

/// How a matched descriptor is decided.
pub(super) enum Counted<'c> {
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
pub(super) struct Checked<'c> {
    pub(super) counted: Counted<'c>,
    pub(super) name: &'c str,
    pub(super) shadow: bool,
    pub(super) quota: bool,
    /// The rule's path, and ERL's stats key when it holds request values.
    pub(super) path: &'c str,
    pub(super) descriptor: Option<String>,
    pub(super) metadata: Option<&'c Struct>,
    pub(super) hits: u64,
}

/// A call's descriptors after matching, in order.
pub(super) struct Matched<'c> {
    /// Each descriptor's limit; `None`: no rule, a replaced rule, or an
    /// `unlimited` one.
    pub(super) found: Vec<Option<Checked<'c>>>,
    /// Which descriptors an `unlimited` rule matched.
    pub(super) unlimited: Vec<bool>,
}

/// Step 1 and 2: each descriptor's rule (or limit override), `replaces`
/// applied; the call refused when its domain or descriptors are missing.
pub(super) fn matched<'c>(
    config: &'c ErlConfig,
    settings: &Settings,
    now: u64,
    request: &'c RateLimitRequest,
) -> Result<Matched<'c>, CallError> {
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
    Ok(Matched { found, unlimited })
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
