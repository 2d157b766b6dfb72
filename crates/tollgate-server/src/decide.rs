//! The one decision path both front ends take: the policy looked up in
//! the snapshot, the store called, the decisions counted (for the status
//! page, and in `tollgate_decisions_total`: here and only here, whatever
//! the store stack, see [`count`]), and any failure classified
//! (`error.rs`). HTTP (`http/api.rs`) and gRPC (`grpc.rs`) only parse
//! requests and write answers around it.

use std::borrow::Cow;
use std::time::Duration;

use tollgate::algorithm::LeaseId;
use tollgate::overrides::{Resolved, Selector};
use tollgate::{Decision, Lease, Policy, Request, Usage};

use crate::config::PolicySet;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// What a request is decided by, once its key's overrides are looked up
/// (a step of its own, before the store is called).
enum Overridden<'p> {
    /// By the store, under this policy (the policy itself, its tier, or
    /// an override's parameters), and the override that applies.
    Decide(Cow<'p, Policy>, Option<Selector>),
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
) -> Result<Overridden<'p>, ServiceError> {
    tollgate::validate_key(key)?;
    Ok(match state.overrides.resolve(policy, key, tier)? {
        Resolved::Decide { policy, by } => Overridden::Decide(policy, by),
        Resolved::Block { by } => {
            let wait = policy.time_span().as_micros() as u64;
            let limit = policy.limit();
            Overridden::Decided(Decision::from_micros(false, limit, 0, wait, wait, 0), by)
        }
        Resolved::Allow { by } => {
            let limit = policy.limit();
            Overridden::Decided(Decision::from_micros(true, limit, limit, 0, 0, 0), by)
        }
        _ => return Err(ServiceError::new(Code::Internal, "an unknown override")),
    })
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
/// `tollgate_policy` rules call it too.
pub(crate) fn count(policy: &Policy, decision: &Decision) {
    tollgate::metrics::record_decision(policy.name(), decision);
}

impl AppState {
    /// Counts decisions for the status page and in the metrics.
    fn record<'p>(&self, decided: impl IntoIterator<Item = (&'p Policy, &'p Decision)>) {
        for (p, d) in decided {
            self.status.stats.record(p.name(), d.allowed && !d.shadow);
            count(p, d);
        }
    }

    /// Decides `cost` on `key` (0 peeks), under the key's override if it
    /// has one.
    pub(crate) async fn check(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
    ) -> Result<Decision, ServiceError> {
        Ok(self.check_overridden(policy, key, cost, None).await?.0)
    }

    /// [`check`](Self::check) in `tier`, also answering the policy that
    /// decided (the override's or tier's numbers, for the answer's
    /// headers) and the override, if one did.
    pub(crate) async fn check_overridden<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        cost: u64,
        tier: Option<&str>,
    ) -> Result<(Decision, Cow<'p, Policy>, Option<Selector>), ServiceError> {
        let (policy, by) = match overridden(self, policy, key, tier)? {
            Overridden::Decide(p, by) => (p, by),
            Overridden::Decided(d, by) => {
                self.record([(policy, &d)]);
                return Ok((d, Cow::Borrowed(policy), Some(by)));
            }
        };
        let d = self.backend.store.check(&policy, key, cost).await?;
        self.record([(&*policy, &d)]);
        Ok((d, policy, by))
    }

    /// Decides several requests, in order; with `atomic`, all or nothing.
    pub(crate) async fn check_many(
        &self,
        requests: &[Request<'_>],
        atomic: bool,
    ) -> Result<Vec<Decision>, ServiceError> {
        let decisions = self.backend.store.check_many(requests, atomic).await?;
        self.record(requests.iter().map(|r| r.policy).zip(&decisions));
        Ok(decisions)
    }

    /// Reserves `cost`, waiting at most `max_wait`.
    pub(crate) async fn reserve(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, ServiceError> {
        let d = self
            .backend
            .store
            .reserve(policy, key, cost, max_wait)
            .await?;
        self.record([(policy, &d)]);
        Ok(d)
    }

    /// Takes a lease on a concurrency policy, if one is free.
    pub(crate) async fn acquire(&self, policy: &Policy, key: &[u8]) -> Result<Lease, ServiceError> {
        let lease = self.backend.store.acquire_lease(policy, key).await?;
        self.record([(policy, &lease.decision)]);
        Ok(lease)
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
    /// record is answered (or its failure is), never dropped.
    pub(crate) async fn usage(
        &self,
        policy: &Policy,
        key: &[u8],
        op: Usage,
        cost: u64,
    ) -> Result<Decision, ServiceError> {
        let d = self.backend.store.usage(policy, key, op, cost).await?;
        let (operation, units) = match op {
            Usage::Charge => ("charged", cost),
            Usage::Refund => ("refunded", cost),
            _ => ("granted", d.granted),
        };
        tollgate::metrics::record_usage(policy.name(), operation, units);
        Ok(d)
    }

    /// Settles a request admitted at `estimate` that cost `actual`.
    pub(crate) async fn settle(
        &self,
        policy: &Policy,
        key: &[u8],
        estimate: u64,
        actual: u64,
    ) -> Result<Decision, ServiceError> {
        let d = self
            .backend
            .store
            .settle(policy, key, estimate, actual)
            .await?;
        let name = policy.name();
        tollgate::metrics::record_usage(name, "charged", actual.saturating_sub(estimate));
        tollgate::metrics::record_usage(name, "refunded", estimate.saturating_sub(actual));
        Ok(d)
    }
}
