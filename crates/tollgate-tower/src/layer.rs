//! [`RateLimitLayer`] and its builder.

use std::collections::HashSet;
use std::sync::Arc;

use http::HeaderName;
use http::request::Parts;
use tollgate::overrides::Overrides;
use tollgate::{Error, Policy, Store};
use tower_layer::Layer;

use crate::estimate::Estimate;
use crate::limit::Limit;
use crate::limiter::{Limiter, Resolver};
use crate::mode::{CheckMode, ResponseFormat};
use crate::usage::UsageSource;
use crate::{KeyExtractor, RateLimit};

/// Applies rate limits to a service: wraps it in a [`RateLimit`].
///
/// Cloning a layer is cheap, and every service it wraps shares its limits
/// (and the store's state).
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    limiter: Arc<Limiter>,
}

impl RateLimitLayer {
    /// A layer applying `policy` to requests keyed by `extractor`, each
    /// costing 1: the one-line integration.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tollgate::{MemoryStore, Policy};
    /// use tollgate_tower::{RateLimitLayer, extract::PeerIp};
    ///
    /// let per_ip = Policy::gcra("per-ip", 10, Duration::from_secs(1), 20)?;
    /// let layer = RateLimitLayer::new(MemoryStore::new(), per_ip, PeerIp::new());
    /// # Ok::<(), tollgate::Error>(())
    /// ```
    pub fn new<S: Store + 'static>(
        store: S,
        policy: Policy,
        extractor: impl KeyExtractor,
    ) -> RateLimitLayer {
        let limit = Limit {
            policy: Arc::new(policy),
            extractor: Box::new(extractor),
            cost: 1,
            usage: false,
        };
        RateLimitLayer {
            limiter: Arc::new(Limiter::new(
                Arc::new(store),
                vec![limit],
                CheckMode::default(),
                ResponseFormat::default(),
                Estimate::default(),
                UsageSource::default(),
                Resolver::default(),
            )),
        }
    }

    /// A builder for several limits on `store`.
    pub fn builder<S: Store + 'static>(store: S) -> RateLimitLayerBuilder {
        RateLimitLayer::builder_shared(Arc::new(store))
    }

    /// A builder for several limits on a store shared with other code.
    pub fn builder_shared(store: Arc<dyn Store>) -> RateLimitLayerBuilder {
        RateLimitLayerBuilder {
            store,
            limits: Vec::new(),
            mode: CheckMode::default(),
            format: ResponseFormat::default(),
            shadow: false,
            estimate: None,
            usage_header: None,
            resolver: Resolver::default(),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit::from_limiter(inner, self.limiter.clone())
    }
}

/// Builds a [`RateLimitLayer`] with several limits.
///
/// A request passes only if every limit that applies to it allows it.
///
/// ```
/// use std::time::Duration;
/// use http::HeaderName;
/// use tollgate::{MemoryStore, Policy};
/// use tollgate_tower::RateLimitLayer;
/// use tollgate_tower::extract::{Header, PeerIp};
///
/// let layer = RateLimitLayer::builder(MemoryStore::new())
///     .limit(Policy::gcra("per-ip", 10, Duration::from_secs(1), 20)?, PeerIp::new())
///     .limit_with_cost(
///         Policy::fixed_window("per-key", 1000, Duration::from_secs(3600))?,
///         Header::new(HeaderName::from_static("x-api-key")),
///         5,
///     )
///     .limit(Policy::concurrency("in-flight", 4, Duration::from_secs(30))?, PeerIp::new())
///     .build()?;
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug)]
pub struct RateLimitLayerBuilder {
    store: Arc<dyn Store>,
    limits: Vec<Limit>,
    mode: CheckMode,
    format: ResponseFormat,
    shadow: bool,
    estimate: Option<Estimate>,
    usage_header: Option<HeaderName>,
    resolver: Resolver,
}

impl RateLimitLayerBuilder {
    /// Applies `policy` to requests keyed by `extractor`, each costing 1.
    ///
    /// A concurrency policy takes a lease per request, held until the
    /// response body ends or is dropped; a leaky bucket delays requests by
    /// its backlog instead of denying them while its queue has room.
    pub fn limit(self, policy: Policy, extractor: impl KeyExtractor) -> Self {
        self.limit_with_cost(policy, extractor, 1)
    }

    /// Applies `policy` with each request costing `cost` (1 to the policy's
    /// limit; concurrency policies only take 1).
    pub fn limit_with_cost(
        mut self,
        policy: Policy,
        extractor: impl KeyExtractor,
        cost: u64,
    ) -> Self {
        self.limits.push(Limit {
            policy: Arc::new(policy),
            extractor: Box::new(extractor),
            cost,
            usage: false,
        });
        self
    }

    /// Applies `policy` to the *usage* of requests keyed by `extractor`:
    /// each request is checked with its estimate ([`estimate`](Self::estimate)
    /// or [`estimate_with`](Self::estimate_with); 1 when neither is set),
    /// and once its response body has ended, or been dropped, the key is
    /// settled with what the response reported: [`Usage`](crate::Usage) in
    /// its extensions, or the [`usage_header`](Self::usage_header). A
    /// response that reports nothing leaves the estimate standing.
    ///
    /// The estimate is checked as at least 1 (a request needs something
    /// left) and at most the policy's limit (a larger one could never pass:
    /// it waits for a fresh key, and its settle charges the rest into
    /// debt). Settles are [`Store::settle`] calls, made where the body
    /// ends when the store answers without waiting (the memory store), or
    /// else in a task spawned on the tokio runtime; one that fails is
    /// logged at `warn` and counted in
    /// `tollgate_settle_failures_total`, and the key keeps what its check
    /// took. Any rate algorithm can be a usage limit; a concurrency policy
    /// cannot.
    pub fn usage_limit(mut self, policy: Policy, extractor: impl KeyExtractor) -> Self {
        self.limits.push(Limit {
            policy: Arc::new(policy),
            extractor: Box::new(extractor),
            cost: 1,
            usage: true,
        });
        self
    }

    /// The estimated usage of every request, for the
    /// [`usage_limit`](Self::usage_limit)s.
    pub fn estimate(mut self, units: u64) -> Self {
        self.estimate = Some(Estimate::Fixed(units));
        self
    }

    /// Estimates each request's usage from its head (a header, the
    /// `Content-Length`, the route), for the
    /// [`usage_limit`](Self::usage_limit)s. It runs in `call`, before the
    /// store is asked, and must be cheap.
    pub fn estimate_with<F>(mut self, f: F) -> Self
    where
        F: Fn(&Parts) -> u64 + Send + Sync + 'static,
    {
        self.estimate = Some(Estimate::PerRequest(Box::new(f)));
        self
    }

    /// Also reads a response's usage from this header (a whole number of
    /// units, digits only), when the response carries no
    /// [`Usage`](crate::Usage) extension: for an inner service that cannot
    /// reach the extensions (a proxied upstream). The header is read in the
    /// response's head and in its body's trailers, where a streamed answer
    /// can report its usage at its end; a trailer overrides what the head
    /// said. A value that is not a whole number is logged at `warn`, and
    /// what was known before (the estimate, if nothing else) stands. The
    /// header is left on the response.
    pub fn usage_header(mut self, name: HeaderName) -> Self {
        self.usage_header = Some(name);
        self
    }

    /// Decides each key under its override in `overrides`, if it has one
    /// (see [`tollgate::overrides`]): an exact key's, else the longest
    /// matching prefix's. Its parameters decide in place of the policy's
    /// (the count carries over, and the headers show its numbers), `block`
    /// refuses the request with a `429`, and `allow` lifts that limit for
    /// the key. `overrides` is shared with the caller, who may change it
    /// at any time (every clone is the same set): set in code, or kept in
    /// step with Redis by `tollgate::store::redis::RedisOverrides`.
    pub fn with_overrides(mut self, overrides: Overrides) -> Self {
        self.resolver.overrides = overrides;
        self.resolver.given = true;
        self
    }

    /// Reads each request's tier with `extractor` (a header such as
    /// `x-plan`, the authenticated principal's plan): a policy with tiers
    /// ([`Policy::with_tier`]) decides the request in that tier's
    /// parameters, a key's override winning over it. A request without one
    /// is decided by the policy's own parameters; one naming a tier its
    /// policy lacks is refused with a `400` (gRPC `INVALID_ARGUMENT`).
    /// Limits whose policies have no tiers ignore it.
    pub fn with_tier(mut self, extractor: impl KeyExtractor) -> Self {
        self.resolver.tier = Some(Box::new(extractor));
        self
    }

    /// How several quota policies are checked (default
    /// [`CheckMode::Atomic`]).
    pub fn check_mode(mut self, mode: CheckMode) -> Self {
        self.mode = mode;
        self
    }

    /// Puts every limit of the layer in shadow mode (see
    /// [`Policy::shadow`]): requests are decided and counted as usual but
    /// never refused; a request a limit would have refused passes, and
    /// `tollgate_shadow_denials_total` counts it. A single policy can be
    /// put in shadow mode by itself with [`Policy::shadow`].
    pub fn shadow(mut self) -> Self {
        self.shadow = true;
        self
    }

    /// How the layer's own answers are written (default
    /// [`ResponseFormat::Auto`]).
    pub fn response_format(mut self, format: ResponseFormat) -> Self {
        self.format = format;
        self
    }

    /// The layer, once the limits are checked: at least one, names unique,
    /// every cost between 1 and its policy's limit (1 for concurrency), no
    /// usage limit on a concurrency policy, and an estimate or usage header
    /// only with a usage limit to use them.
    ///
    /// These are the mistakes the store would otherwise report on every
    /// request; they are errors here, naming the policy, so that none of
    /// them reaches a client.
    pub fn build(mut self) -> Result<RateLimitLayer, Error> {
        if self.shadow {
            for limit in &mut self.limits {
                limit.policy = std::sync::Arc::new(limit.policy.as_ref().clone().shadow());
            }
        }
        if self.limits.is_empty() {
            return Err(Error::InvalidArgument {
                field: "limits",
                reason: "a rate-limit layer needs at least one limit".into(),
            });
        }
        let settles = self.limits.iter().any(|l| l.usage);
        if !settles && (self.estimate.is_some() || self.usage_header.is_some()) {
            let option = if self.estimate.is_some() {
                "an estimate"
            } else {
                "a usage header"
            };
            return Err(Error::InvalidArgument {
                field: "usage_limit",
                reason: format!(
                    "{option} is set, but no limit is a usage limit to check or settle with it"
                ),
            });
        }
        if self.resolver.tier.is_some()
            && self.limits.iter().all(|l| l.policy.tier_names().is_empty())
        {
            return Err(Error::InvalidArgument {
                field: "tier",
                reason: "a tier extractor is set, but no policy of the layer has tiers".into(),
            });
        }
        let mut names = HashSet::new();
        for limit in &self.limits {
            let name = limit.policy.name();
            if limit.usage && limit.is_lease() {
                return Err(Error::InvalidArgument {
                    field: "usage_limit",
                    reason: format!(
                        "policy `{name}` is a concurrency policy, which takes leases: it has no usage to settle"
                    ),
                });
            }
            if !names.insert(name) {
                return Err(Error::InvalidArgument {
                    field: "limits",
                    reason: format!(
                        "policy `{name}` is added twice; policy names must be unique in a layer"
                    ),
                });
            }
            if limit.is_lease() && limit.cost != 1 {
                return Err(Error::InvalidArgument {
                    field: "cost",
                    reason: format!(
                        "policy `{name}` is a concurrency policy, which takes one lease per request: the cost must be 1, got {}",
                        limit.cost
                    ),
                });
            }
            if limit.cost == 0 {
                return Err(Error::InvalidArgument {
                    field: "cost",
                    reason: format!("must be at least 1 for policy `{name}`, got 0"),
                });
            }
            if let Err(e) = limit.policy.validate_cost(limit.cost) {
                let reason = match e {
                    Error::CostExceedsLimit { cost, limit, what } => format!(
                        "{cost} exceeds the {what} of policy `{name}` ({limit}): no request could ever pass"
                    ),
                    other => format!("{other} (policy `{name}`)"),
                };
                return Err(Error::InvalidArgument {
                    field: "cost",
                    reason,
                });
            }
        }
        Ok(RateLimitLayer {
            limiter: Arc::new(Limiter::new(
                self.store,
                self.limits,
                self.mode,
                self.format,
                self.estimate.unwrap_or_default(),
                UsageSource::with_header(self.usage_header),
                self.resolver,
            )),
        })
    }
}
