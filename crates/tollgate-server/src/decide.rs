//! The one decision path every front end takes: the policy looked up in
//! the snapshot, the store called, the decisions counted (for the status
//! page, and in `tollgate_decisions_total`: here and only here, whatever
//! the store stack, see [`count`]), and any failure classified
//! (`error.rs`). HTTP (`http/api.rs`), gRPC (`grpc.rs`) and ERL mode's
//! `tollgate_policy` rules (`erl/policy.rs`, through [`check_many_on`])
//! only parse requests and write answers around it.
//!
//! Over 400 lines on purpose: the one decision path, every endpoint's entry
//! beside the one store step and the one count.

use std::borrow::Cow;
use std::time::Duration;

use tollgate::algorithm::LeaseId;
use tollgate::overrides::{Resolved, ResolvedPolicy, Selector};
use tollgate::{Decision, Lease, Policy, Request, Store, Usage};

use crate::config::PolicySet;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// A decision, the policy that decided it (the override's or the tier's
/// numbers), and the override, if one did.
pub(crate) type Overridden<'p> = (Decision, ResolvedPolicy<'p>, Option<Selector>);

/// What a request is decided by, once its key's overrides are looked up
/// (a step of its own, before the store is called).
enum Resolution<'p> {
    /// By the store, under this policy (the policy itself, its tier, or
    /// an override's parameters), and the override that applies.
    Decide(ResolvedPolicy<'p>, Option<Selector>),
    /// Already: blocked or allowed by this override.
    Decided(Decision, Selector),
}

/// Looks up `key`'s override under `policy` (and `tier`): a blocked key is
/// denied with nothing left until the policy's time span passes (when an
/// operator may have lifted it), an allowed one admitted with everything
/// left, both without the store.
fn overridden<'p>(
    state: &AppState,
    policy: &'p Policy,
    key: &[u8],
    tier: Option<&str>,
) -> Result<Resolution<'p>, ServiceError> {
    tollgate::validate_key(key)?;
    Ok(match state.overrides.resolve(policy, key, tier)? {
        // Owned already (`resolve` shares them): held across the store's
        // `.await`.
        Resolved::Decide { policy, by } => Resolution::Decide(policy, by.map(Cow::into_owned)),
        Resolved::Block { by } => {
            let by = by.into_owned();
            let wait = policy.time_span().as_micros() as u64;
            let limit = policy.limit();
            Resolution::Decided(Decision::from_micros(false, limit, 0, wait, wait, 0), by)
        }
        Resolved::Allow { by } => {
            let by = by.into_owned();
            let limit = policy.limit();
            Resolution::Decided(Decision::from_micros(true, limit, limit, 0, 0, 0), by)
        }
        _ => return Err(ServiceError::new(Code::Internal, "an unknown override")),
    })
}

/// What a single check refuses before the store (the key is checked with
/// the override): a concurrency policy, and a cost above the limit.
fn as_one_check(policy: &Policy, cost: u64) -> Result<(), tollgate::Error> {
    if let tollgate::algorithm::Algorithm::Concurrency(_) = policy.algorithm() {
        return Err(tollgate::Error::Unsupported {
            operation: "check",
            algorithm: "concurrency",
        });
    }
    policy.validate_cost(cost)
}

/// The policy named `name` in `set`.
pub(crate) fn policy<'a>(set: &'a PolicySet, name: &str) -> Result<&'a Policy, ServiceError> {
    set.get(name)
        .ok_or_else(|| ServiceError::new(Code::UnknownPolicy, format!("no policy named {name:?}")))
}

/// Counts one decision the service answers in `tollgate_decisions_total`,
/// by its policy, outcome and `source` (`lease`, `cache`, `store`,
/// `fallback`). The one place decisions are counted: no store counts
/// them, so a decision answered by a lease, the deny cache, Redis or the
/// failure policy, on any stack, is counted once. ERL mode's
/// `tollgate_policy` rules are counted here too ([`check_many_on`]).
fn count(policy: &Policy, decision: &Decision) {
    tollgate::metrics::record_decision(policy.name(), decision);
}

/// Decides `requests` on `store` in one call, in order, not atomically,
/// and counts each decision: ERL mode's `tollgate_policy` rules, which
/// have a store but no [`AppState`] (no overrides, tiers or status page:
/// ERL mode serves none).
pub(crate) async fn check_many_on(
    store: &dyn Store,
    requests: &[Request<'_>],
) -> Result<Vec<Decision>, ServiceError> {
    let decisions = store.check_many(requests, false).await?;
    for (r, d) in requests.iter().zip(&decisions) {
        count(r.policy, d);
    }
    Ok(decisions)
}

impl AppState {
    /// Counts decisions for the status page and in the metrics, each with
    /// whether an override made it. A policy of the set in force counts
    /// through its meters, resolved once per set (`meters.rs`), and so
    /// does a decision under an override of one (the override's policy
    /// has its name); any other (a gRPC limit override, a tier, a policy
    /// of a set just replaced) by name.
    fn record<'p>(&self, decided: impl IntoIterator<Item = (&'p Policy, &'p Decision, bool)>) {
        let set = self.policies();
        let stats = &self.status.stats;
        let second = stats.now();
        for (p, d, overridden) in decided {
            // Under an override, the policy is the override's own (or,
            // blocked or allowed, the set's): its name finds the set's.
            let meters = if overridden {
                set.meters_named(stats, p.name())
            } else {
                set.meters(stats, p)
            };
            match meters {
                Some(meters) => meters.record(second, d, overridden),
                None => {
                    stats.record_at(p.name(), second, d.allowed && !d.shadow);
                    if overridden {
                        crate::meters::count_overridden(p.name(), d);
                    } else {
                        count(p, d);
                    }
                }
            }
        }
    }

    /// Decides `cost` on `key` (0 peeks) in `tier`, under the key's
    /// override if it has one, also answering the policy that
    /// decided (the override's or tier's numbers, for the answer's
    /// headers) and the override, if one did.
    pub(crate) async fn check_overridden<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        cost: u64,
        tier: Option<&str>,
    ) -> Result<Overridden<'p>, ServiceError> {
        let (policy, by) = match overridden(self, policy, key, tier)? {
            Resolution::Decide(p, by) => (p, by),
            Resolution::Decided(d, by) => {
                self.record([(policy, &d, true)]);
                return Ok((d, ResolvedPolicy::Borrowed(policy), Some(by)));
            }
        };
        let d = self.backend.store.check(&policy, key, cost).await?;
        self.record([(&*policy, &d, by.is_some())]);
        Ok((d, policy, by))
    }

    /// Decides several requests, in order, each under its key's override
    /// (and answering, as [`check_overridden`](Self::check_overridden)
    /// does, the policy that decided and the override). With `atomic`,
    /// all or nothing: a blocked key denies the whole batch (the others are
    /// then only peeked, so nothing consumes), and a batch the store
    /// denies denies the allowed keys too.
    /// `tiers[i]` is request `i`'s tier (absent past the slice's end).
    pub(crate) async fn check_many<'p>(
        &self,
        requests: &[Request<'p>],
        tiers: &[Option<&str>],
        atomic: bool,
    ) -> Result<Vec<Overridden<'p>>, ServiceError> {
        let mut resolved = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let tier = tiers.get(i).copied().flatten();
            resolved.push(overridden(self, r.policy, r.key, tier)?);
        }
        self.decide_resolved(requests, resolved, Batch::Many { atomic })
            .await
    }

    /// Decides several requests, in order, not atomically, all in one
    /// store call, each validated as a check of its own would be (a bad
    /// one's error is put at `place(i)`, and nothing is decided): a gRPC
    /// request's descriptors. `tiers[i]` is request `i`'s tier.
    pub(crate) async fn check_each<'p>(
        &self,
        requests: &[Request<'p>],
        tiers: &[Option<&str>],
        place: impl Fn(usize) -> String,
    ) -> Result<Vec<Overridden<'p>>, ServiceError> {
        let at = |i: usize, e: ServiceError| {
            if e.code().is_bad_input() {
                e.at(&place(i))
            } else {
                e
            }
        };
        let mut resolved = Vec::with_capacity(requests.len());
        for (i, r) in requests.iter().enumerate() {
            let tier = tiers.get(i).copied().flatten();
            let o = overridden(self, r.policy, r.key, tier).map_err(|e| at(i, e))?;
            if let Resolution::Decide(p, _) = &o {
                as_one_check(p, r.cost).map_err(|e| at(i, e.into()))?;
            }
            resolved.push(o);
        }
        self.decide_resolved(requests, resolved, Batch::Each).await
    }

    /// The store call and the counts of a batch whose overrides are
    /// resolved (see [`check_many`](Self::check_many)).
    async fn decide_resolved<'p>(
        &self,
        requests: &[Request<'p>],
        resolved: Vec<Resolution<'p>>,
        batch: Batch,
    ) -> Result<Vec<Overridden<'p>>, ServiceError> {
        let atomic = matches!(batch, Batch::Many { atomic: true });
        let blocked = atomic
            && resolved
                .iter()
                .any(|o| matches!(o, Resolution::Decided(d, _) if !d.allowed));
        let to_store: Vec<Request<'_>> = requests
            .iter()
            .zip(&resolved)
            .filter_map(|(r, o)| match o {
                Resolution::Decide(p, _) => Some(Request {
                    policy: p,
                    key: r.key,
                    cost: if blocked { 0 } else { r.cost },
                }),
                Resolution::Decided(..) => None,
            })
            .collect();
        let store = &self.backend.store;
        let decisions = match to_store.as_slice() {
            [] => Vec::new(),
            // Not atomic: each request is the single check it would be
            // alone (leases and the deny cache answer it as they would),
            // all of them at once: concurrent script calls leave as one
            // pipeline.
            [r] if !atomic => vec![store.check(r.policy, r.key, r.cost).await?],
            _ if !atomic => {
                futures_util::future::try_join_all(
                    to_store
                        .iter()
                        .map(|r| store.check(r.policy, r.key, r.cost)),
                )
                .await?
            }
            _ => store.check_many(&to_store, !blocked).await?,
        };
        drop(to_store);
        let mut decisions = decisions.into_iter();
        let mut out = Vec::with_capacity(requests.len());
        for (r, o) in requests.iter().zip(resolved) {
            out.push(match o {
                Resolution::Decide(p, by) => {
                    let d = decisions
                        .next()
                        .ok_or_else(|| ServiceError::new(Code::Internal, "a decision missing"))?;
                    (d, p, by)
                }
                Resolution::Decided(d, by) => (d, ResolvedPolicy::Borrowed(r.policy), Some(by)),
            });
        }
        if atomic && out.iter().any(|(d, _, _)| !d.allowed) {
            for (d, _, _) in &mut out {
                if d.allowed {
                    d.allowed = false;
                    d.retry_after = Duration::ZERO;
                    d.delay = Duration::ZERO;
                }
            }
        }
        self.record(out.iter().map(|(d, p, by)| (&**p, d, by.is_some())));
        Ok(out)
    }

    /// The policy an operation other than a check runs under in `tier`
    /// (the key's override's parameters or tier, the request's tier, or
    /// the policy's own), or the answer a block or an allow gives at
    /// once, without the store; and whether an override applies.
    fn under<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        tier: Option<&str>,
    ) -> Result<(Result<ResolvedPolicy<'p>, Decision>, bool), ServiceError> {
        Ok(match overridden(self, policy, key, tier)? {
            Resolution::Decide(p, by) => (Ok(p), by.is_some()),
            Resolution::Decided(d, _) => (Err(d), true),
        })
    }

    /// Reserves `cost`, waiting at most `max_wait`, under the key's
    /// override (or `tier`); also answers the policy that decided (its
    /// numbers, for the headers).
    pub(crate) async fn reserve<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        cost: u64,
        max_wait: Duration,
        tier: Option<&str>,
    ) -> Result<(Decision, ResolvedPolicy<'p>), ServiceError> {
        let (under, by) = self.under(policy, key, tier)?;
        let (d, p) = match under {
            Ok(p) => (
                self.backend.store.reserve(&p, key, cost, max_wait).await?,
                p,
            ),
            Err(d) => (d, ResolvedPolicy::Borrowed(policy)),
        };
        self.record([(&*p, &d, by)]);
        Ok((d, p))
    }

    /// Takes a lease on a concurrency policy, if one is free, under the
    /// key's override (or `tier`): a blocked key is refused, an allowed
    /// one admitted without a lease (it holds none, so has none to give
    /// back). Also answers the policy that decided.
    pub(crate) async fn acquire<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        tier: Option<&str>,
    ) -> Result<(Decision, Option<LeaseId>, ResolvedPolicy<'p>), ServiceError> {
        let (under, by) = self.under(policy, key, tier)?;
        let (d, id, p) = match under {
            Ok(p) => {
                let lease: Lease = self.backend.store.acquire_lease(&p, key).await?;
                (lease.decision, lease.id, p)
            }
            Err(d) => (d, None, ResolvedPolicy::Borrowed(policy)),
        };
        self.record([(&*p, &d, by)]);
        Ok((d, id, p))
    }

    /// Gives a lease back: whether it was still held.
    pub(crate) async fn release(
        &self,
        policy: &Policy,
        key: &[u8],
        lease: LeaseId,
    ) -> Result<bool, ServiceError> {
        Ok(self.backend.store.release_lease(policy, key, lease).await?)
    }

    /// Forgets `key` under `policy`.
    pub(crate) async fn reset(&self, policy: &Policy, key: &[u8]) -> Result<(), ServiceError> {
        Ok(self.backend.store.reset(policy, key).await?)
    }

    /// A charge, a refund or a `check_at_most`, its units counted: a usage
    /// record is answered (or its failure is), never dropped. Under the
    /// key's override (or `tier`): a blocked or allowed key records
    /// nothing (an allowed one is granted all it asks). Also answers the
    /// policy that decided.
    pub(crate) async fn usage<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        op: Usage,
        cost: u64,
        tier: Option<&str>,
    ) -> Result<(Decision, ResolvedPolicy<'p>), ServiceError> {
        let p = match self.under(policy, key, tier)?.0 {
            Ok(p) => p,
            Err(d) if d.allowed && op == Usage::AtMost => {
                return Ok((d.with_granted(cost), ResolvedPolicy::Borrowed(policy)));
            }
            Err(d) => return Ok((d, ResolvedPolicy::Borrowed(policy))),
        };
        let d = self.backend.store.usage(&p, key, op, cost).await?;
        let (operation, units) = match op {
            Usage::Charge => ("charged", cost),
            Usage::Refund => ("refunded", cost),
            _ => ("granted", d.granted),
        };
        tollgate::metrics::record_usage(policy.name(), operation, units);
        Ok((d, p))
    }

    /// Settles a request admitted at `estimate` that cost `actual`, under
    /// the key's override (or `tier`); also answers the policy that
    /// decided.
    pub(crate) async fn settle<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        estimate: u64,
        actual: u64,
        tier: Option<&str>,
    ) -> Result<(Decision, ResolvedPolicy<'p>), ServiceError> {
        let p = match self.under(policy, key, tier)?.0 {
            Ok(p) => p,
            Err(d) => return Ok((d, ResolvedPolicy::Borrowed(policy))),
        };
        let d = self.backend.store.settle(&p, key, estimate, actual).await?;
        let name = policy.name();
        tollgate::metrics::record_usage(name, "charged", actual.saturating_sub(estimate));
        tollgate::metrics::record_usage(name, "refunded", estimate.saturating_sub(actual));
        Ok((d, p))
    }
}

/// How [`AppState::decide_resolved`] calls the store: one batch call
/// (`/v1/check`'s `checks`, all or nothing with `atomic`), or each request
/// as a check of its own (a gRPC request's descriptors).
#[derive(Clone, Copy)]
enum Batch {
    Many { atomic: bool },
    Each,
}
