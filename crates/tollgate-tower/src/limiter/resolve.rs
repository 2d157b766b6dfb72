//! A request's overrides and tier: what decides each limit's key once its
//! key is known (see `tollgate::overrides`). A key's override (exact, then
//! the longest prefix) wins over the request's tier, which wins over the
//! policy. `block` refuses the request at once, `allow` lifts that limit
//! for it, and the parameters of an override or a tier decide in place of
//! the policy's (the key's state is the same, so its count carries over).

use std::sync::Arc;

use http::request::Parts;
use tollgate::Policy;
use tollgate::overrides::{Overrides, Resolved, ResolvedPolicy};

use super::Limiter;
use crate::rejection::Rejection;
use crate::{Key, KeyExtractor};

/// Where a layer's overrides and tiers come from.
#[derive(Default)]
pub(crate) struct Resolver {
    /// The overrides (empty when the layer was given none).
    pub(crate) overrides: Overrides,
    /// Whether the layer was given overrides.
    pub(crate) given: bool,
    pub(crate) tier: Option<Box<dyn KeyExtractor>>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("overrides", &self.given.then_some(&self.overrides))
            .field("tier", &self.tier.is_some())
            .finish()
    }
}

/// What decides one limit's key.
pub(crate) enum Under {
    /// The limit's own policy.
    Policy,
    /// An override's or a tier's parameters.
    Derived(Arc<Policy>),
    /// Lifted for this request (`allow`).
    Allowed,
}

impl Resolver {
    /// Whether anything is to be resolved (otherwise every key is decided
    /// by its limit's policy, and nothing is looked up).
    pub(crate) fn is_active(&self) -> bool {
        self.given || self.tier.is_some()
    }

    /// The request's tier, if the layer reads one and the request has one.
    pub(crate) fn tier(&self, request: &Parts, grpc: bool) -> Result<Option<Key>, Rejection> {
        let Some(extractor) = &self.tier else {
            return Ok(None);
        };
        match extractor.extract(request) {
            Ok(tier) => Ok(tier),
            Err(e) => Err(Rejection::bad_tier(grpc, &e.to_string())),
        }
    }
}

impl Limiter {
    /// What decides `key` under limit `i` in `tier` (which applies only to
    /// a policy with tiers: a layer's other limits ignore it): a block is
    /// the request's `429` at once, an unknown tier its `400`.
    pub(super) fn resolve(
        &self,
        i: usize,
        key: &Key,
        tier: Option<&Key>,
        grpc: bool,
    ) -> Result<Under, Rejection> {
        let policy = &self.limits[i].policy;
        let tier = match tier {
            Some(t) if !policy.tier_names().is_empty() => Some(
                std::str::from_utf8(t.as_bytes())
                    .map_err(|_| Rejection::bad_tier(grpc, "the tier is not UTF-8"))?,
            ),
            _ => None,
        };
        match self
            .resolver
            .overrides
            .resolve(policy, key.as_bytes(), tier)
        {
            Ok(Resolved::Decide {
                policy: ResolvedPolicy::Shared(p),
                ..
            }) => Ok(Under::Derived(p)),
            Ok(Resolved::Decide {
                policy: ResolvedPolicy::Owned(p),
                ..
            }) => Ok(Under::Derived(Arc::new(p))),
            Ok(Resolved::Decide { .. }) => Ok(Under::Policy),
            Ok(Resolved::Allow { .. }) => Ok(Under::Allowed),
            Ok(Resolved::Block { .. }) if policy.is_shadow() => {
                tollgate::metrics::record_shadow_denial(policy.name());
                Ok(Under::Policy)
            }
            Ok(_) => Err(Rejection::quota_exceeded(
                grpc,
                policy.time_span(),
                &[policy.name()],
                None,
            )),
            Err(e) => Err(Rejection::bad_tier(grpc, &e.to_string())),
        }
    }
}
