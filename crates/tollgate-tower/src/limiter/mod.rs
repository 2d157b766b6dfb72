//! The decision for one request: keys from its head, then the store.
//!
//! Over 400 lines on purpose: one request's decision for every mode (keys,
//! overrides and tiers, the store call, leases and settlement) read as one
//! flow.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http::header::CONTENT_TYPE;
use http::request::Parts;
use tollgate::{Decision, Error, Policy, Request, Store, validate_key};

mod failure;
mod resolve;

use self::failure::{Failure, bad_key_reason};
pub(crate) use self::resolve::Resolver;
use self::resolve::Under;
use crate::Key;
use crate::estimate::Estimate;
use crate::headers::RateLimitHeaders;
use crate::lease::{HeldLease, Leases};
use crate::limit::Limit;
use crate::mode::{CheckMode, ResponseFormat};
use crate::rejection::Rejection;
use crate::settle::{Charged, Unsettled};
use crate::usage::UsageSource;

/// The longest `Retry-After` a concurrency denial gives: its `retry_after`
/// is when the oldest lease *expires*, a bound for crashed holders, while a
/// slot usually frees as soon as any request in flight ends.
const CONCURRENCY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Everything a layer knows: the store, the limits, and how to answer.
#[derive(Debug)]
pub(crate) struct Limiter {
    store: Arc<dyn Store>,
    limits: Vec<Limit>,
    mode: CheckMode,
    format: ResponseFormat,
    /// What usage limits check before the response.
    estimate: Estimate,
    /// Where usage limits read what a response used.
    usage: UsageSource,
    /// Whether any limit is a usage limit.
    settles: bool,
    /// Set when the store refused an atomic batch (a Redis Cluster cannot
    /// run one across slots): from then on the policies are checked in
    /// sequence.
    atomic_refused: AtomicBool,
    /// Whether the last store call failed, so that a failure is logged when
    /// it starts and when it ends, not once per request.
    store_failing: AtomicBool,
    /// Whether a setup mistake was logged at `error` already.
    misconfig_logged: AtomicBool,
    /// The overrides and the tier that decide a key in place of its
    /// limit's policy.
    resolver: Resolver,
}

/// The keys of one request, before the store is asked.
#[derive(Debug)]
pub(crate) struct Plan {
    /// `(limit index, key)` for every limit that applies, in layer order.
    keys: Vec<(usize, Key)>,
    grpc: bool,
    /// The request's estimated usage (0 when no limit is a usage limit).
    estimate: u64,
    /// By limit index, the policy an override or a tier puts in place of
    /// the limit's (empty when the layer has neither).
    under: Vec<Option<Arc<Policy>>>,
}

impl Plan {
    /// Whether no limit applies to the request.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// What the store decided, as the middleware acts on it.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Pass the request on after `delay`, holding `leases` until the
    /// response ends, settling `unsettled` with what it used, and add
    /// `headers` to it.
    Admit {
        delay: Duration,
        headers: Option<RateLimitHeaders>,
        leases: Leases,
        unsettled: Option<Unsettled>,
    },
    /// Answer without calling the inner service.
    Reject(Rejection),
}

impl Limiter {
    /// A limiter; its usage limits, if any, check `estimate` and settle
    /// with what `usage` reads from the response.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        limits: Vec<Limit>,
        mode: CheckMode,
        format: ResponseFormat,
        estimate: Estimate,
        usage: UsageSource,
        resolver: Resolver,
    ) -> Limiter {
        let settles = limits.iter().any(|l| l.usage);
        Limiter {
            store,
            limits,
            mode,
            format,
            estimate,
            usage,
            settles,
            atomic_refused: AtomicBool::new(false),
            store_failing: AtomicBool::new(false),
            misconfig_logged: AtomicBool::new(false),
            resolver,
        }
    }

    pub(crate) fn policy(&self, limit: usize) -> &Policy {
        &self.limits[limit].policy
    }

    /// The policy that decides limit `i`'s key: an override's or a tier's
    /// (`under`, from the plan), else the limit's own.
    fn decider<'a>(&'a self, under: &'a [Option<Arc<Policy>>], i: usize) -> &'a Arc<Policy> {
        match under.get(i) {
            Some(Some(p)) => p,
            _ => &self.limits[i].policy,
        }
    }

    /// Keys the request for every limit; extraction is synchronous, so it
    /// happens in `call`, before the request moves on.
    pub(crate) fn plan(&self, request: &Parts) -> Result<Plan, Rejection> {
        let grpc = match self.format {
            ResponseFormat::Http => false,
            ResponseFormat::Grpc => true,
            ResponseFormat::Auto => request
                .headers
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc")),
        };
        let mut keys = Vec::with_capacity(self.limits.len());
        let active = self.resolver.is_active();
        let tier = self.resolver.tier(request, grpc)?;
        let mut under = Vec::new();
        for (i, limit) in self.limits.iter().enumerate() {
            match limit.extractor.extract(request) {
                Ok(Some(key)) => {
                    if let Err(e) = validate_key(key.as_bytes()) {
                        return Err(Rejection::bad_key(grpc, &bad_key_reason(&e)));
                    }
                    if active {
                        under.resize(self.limits.len(), None);
                        match self.resolve(i, &key, tier.as_ref(), grpc)? {
                            Under::Policy => {}
                            Under::Derived(p) => under[i] = Some(p),
                            Under::Allowed => continue,
                        }
                    }
                    keys.push((i, key));
                }
                Ok(None) => {}
                Err(e) => {
                    self.log_misconfig(limit.policy.name(), &e);
                    return Err(Rejection::misconfigured(grpc));
                }
            }
        }
        let estimate = if self.settles {
            self.estimate.of(request)
        } else {
            0
        };
        Ok(Plan {
            keys,
            grpc,
            estimate,
            under,
        })
    }

    /// Asks the store about every limit that applies: leases first, then
    /// quotas, so that a request denied by a quota only held a lease for a
    /// moment, while one denied by a lease consumed no quota.
    pub(crate) async fn decide(self: Arc<Self>, plan: Plan) -> Outcome {
        let grpc = plan.grpc;
        let under = &plan.under;
        let mut decided: Vec<(usize, Decision)> = Vec::with_capacity(plan.keys.len());
        let mut leases = Leases::new();
        for (i, key) in plan.keys.iter().filter(|(i, _)| self.limits[*i].is_lease()) {
            let policy = self.decider(under, *i);
            match self.store.acquire_lease(policy, key.as_bytes()).await {
                Ok(lease) => {
                    self.store_answered();
                    decided.push((*i, lease.decision));
                    match lease.id {
                        Some(id) => leases.push(HeldLease::new(
                            self.store.clone(),
                            policy.clone(),
                            key.clone(),
                            id,
                        )),
                        // A shadow policy's refusal lets the request pass
                        // without a lease.
                        None if self.policy(*i).is_shadow() => {
                            if let Some((_, d)) = decided.last_mut() {
                                *d = d.shadowed(self.policy(*i));
                                tollgate::metrics::record_shadow_denial(self.policy(*i).name());
                            }
                        }
                        // Dropping `leases` gives back those already taken.
                        None => return self.deny(decided, under, grpc),
                    }
                }
                Err(e) => match self.on_error(*i, e, grpc) {
                    Failure::PassThrough => {}
                    Failure::Reject(r) => return Outcome::Reject(r),
                },
            }
        }
        // Shadow policies never refuse, so they stay out of an atomic
        // batch (where a refusal would stop the others) and are checked
        // after the enforced ones, only when those admit.
        let quota = |(i, _): &&(usize, Key)| !self.limits[*i].is_lease();
        let shadow = |(i, _): &&(usize, Key)| self.policy(*i).is_shadow();
        let quotas: Vec<&(usize, Key)> = plan
            .keys
            .iter()
            .filter(quota)
            .filter(|k| !shadow(k))
            .collect();
        let shadows: Vec<&(usize, Key)> = plan.keys.iter().filter(quota).filter(shadow).collect();
        let atomic = self.mode == CheckMode::Atomic && !self.atomic_refused.load(Ordering::Relaxed);
        let estimate = plan.estimate;
        let outcome = if quotas.len() > 1 && atomic {
            self.check_atomic(&quotas, under, &mut decided, grpc, estimate)
                .await
        } else {
            self.check_in_sequence(&quotas, under, &mut decided, grpc, estimate)
                .await
        };
        if let Some(rejection) = outcome {
            return Outcome::Reject(rejection);
        }
        if decided.iter().all(|(_, d)| d.allowed)
            && let Some(rejection) = self
                .check_in_sequence(&shadows, under, &mut decided, grpc, estimate)
                .await
        {
            return Outcome::Reject(rejection);
        }
        if decided.iter().any(|(_, d)| !d.allowed) {
            return self.deny(decided, under, grpc);
        }
        decided.sort_by_key(|(i, _)| *i);
        let unsettled = self.settles.then(|| self.unsettled(&plan, &decided));
        Outcome::Admit {
            delay: decided
                .iter()
                .map(|(_, d)| d.delay)
                .max()
                .unwrap_or_default(),
            headers: self.headers(&decided, under),
            leases,
            unsettled,
        }
    }

    /// What the admitted request's usage limits took: the estimate as each
    /// checked it, or 0 where the check consumed nothing (the store failed
    /// and the request passed without it, or a shadow policy would have
    /// denied), so that the settle leaves each key holding what the request
    /// used. `decided` is in limit order.
    fn unsettled(&self, plan: &Plan, decided: &[(usize, Decision)]) -> Unsettled {
        let charged = plan
            .keys
            .iter()
            .filter(|(i, _)| self.limits[*i].usage)
            .map(|(i, key)| {
                let limit = &self.limits[*i];
                let consumed = decided
                    .binary_search_by_key(i, |(j, _)| *j)
                    .is_ok_and(|at| !decided[at].1.shadow);
                Charged {
                    policy: self.decider(&plan.under, *i).clone(),
                    key: key.clone(),
                    units: if consumed {
                        limit.cost(self.decider(&plan.under, *i), plan.estimate)
                    } else {
                        0
                    },
                }
            })
            .collect();
        Unsettled::new(
            self.store.clone(),
            self.usage.clone(),
            plan.estimate,
            charged,
        )
    }

    /// One check per policy, in layer order, stopping at the first denial
    /// (the policies after it consume nothing).
    async fn check_in_sequence(
        &self,
        quotas: &[&(usize, Key)],
        under: &[Option<Arc<Policy>>],
        decided: &mut Vec<(usize, Decision)>,
        grpc: bool,
        estimate: u64,
    ) -> Option<Rejection> {
        for (i, key) in quotas {
            let limit = &self.limits[*i];
            let policy = self.decider(under, *i);
            match self
                .store
                .check(policy, key.as_bytes(), limit.cost(policy, estimate))
                .await
            {
                Ok(decision) => {
                    self.store_answered();
                    decided.push((*i, decision));
                    if !decision.allowed {
                        return None;
                    }
                }
                Err(e) => match self.on_error(*i, e, grpc) {
                    Failure::PassThrough => {}
                    Failure::Reject(r) => return Some(r),
                },
            }
        }
        None
    }

    /// One atomic batch: every policy consumes, or none does.
    async fn check_atomic(
        &self,
        quotas: &[&(usize, Key)],
        under: &[Option<Arc<Policy>>],
        decided: &mut Vec<(usize, Decision)>,
        grpc: bool,
        estimate: u64,
    ) -> Option<Rejection> {
        let requests: Vec<Request<'_>> = quotas
            .iter()
            .map(|(i, key)| Request {
                policy: self.decider(under, *i),
                key: key.as_bytes(),
                cost: self.limits[*i].cost(self.decider(under, *i), estimate),
            })
            .collect();
        match self.store.check_many(&requests, true).await {
            Ok(decisions) => {
                self.store_answered();
                decided.extend(quotas.iter().map(|(i, _)| *i).zip(decisions));
                None
            }
            Err(Error::NotAtomic { reason }) => {
                // Nothing was consumed; fall back for good, and say so once.
                if !self.atomic_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        reason,
                        "the store cannot check these policies atomically; checking them in sequence from now on"
                    );
                }
                self.check_in_sequence(quotas, under, decided, grpc, estimate)
                    .await
            }
            Err(e) => match self.on_error(quotas[0].0, e, grpc) {
                Failure::PassThrough => None,
                Failure::Reject(r) => Some(r),
            },
        }
    }

    /// The `429`: which policies were exceeded and when to come back.
    fn deny(
        &self,
        mut decided: Vec<(usize, Decision)>,
        under: &[Option<Arc<Policy>>],
        grpc: bool,
    ) -> Outcome {
        decided.sort_by_key(|(i, _)| *i);
        let denied = || decided.iter().filter(|(_, d)| !d.allowed);
        // In an atomic denial every decision says "denied"; the policies
        // that were really exceeded are those with a time to wait.
        let exceeded: Vec<&(usize, Decision)> = if denied().any(|(_, d)| !d.retry_after.is_zero()) {
            denied().filter(|(_, d)| !d.retry_after.is_zero()).collect()
        } else {
            denied().collect()
        };
        let retry_after = exceeded
            .iter()
            .map(|(i, d)| {
                if self.limits[*i].is_lease() {
                    d.retry_after.min(CONCURRENCY_RETRY_AFTER)
                } else {
                    d.retry_after
                }
            })
            .max()
            .unwrap_or_default();
        let violated: Vec<&str> = exceeded
            .iter()
            .map(|(i, _)| self.policy(*i).name())
            .collect();
        Outcome::Reject(Rejection::quota_exceeded(
            grpc,
            retry_after,
            &violated,
            self.headers(&decided, under),
        ))
    }

    /// The headers of `decided`, each with the numbers of the policy that
    /// decided it (an override's or a tier's, else the limit's).
    fn headers(
        &self,
        decided: &[(usize, Decision)],
        under: &[Option<Arc<Policy>>],
    ) -> Option<RateLimitHeaders> {
        RateLimitHeaders::new(decided.iter().map(|(i, d)| (&**self.decider(under, *i), d)))
    }
}
