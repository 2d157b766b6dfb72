//! The one decision path both front ends take: the policy looked up in
//! the snapshot, the store called, the decisions counted (for the status
//! page, and in the metrics unless a resilient store counts them itself), and any failure classified
//! (`error.rs`). HTTP (`http/api.rs`) and gRPC (`grpc.rs`) only parse
//! requests and write answers around it.

use std::time::Duration;

use tollgate::algorithm::LeaseId;
use tollgate::{Decision, Lease, Policy, Request, Usage};

use crate::config::PolicySet;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// The policy named `name` in `set`.
pub(crate) fn policy<'a>(set: &'a PolicySet, name: &str) -> Result<&'a Policy, ServiceError> {
    set.get(name)
        .ok_or_else(|| ServiceError::new(Code::UnknownPolicy, format!("no policy named {name:?}")))
}

impl AppState {
    /// Counts decisions for the status page, and in the metrics when no
    /// resilient store counts them already.
    fn record<'p>(&self, decided: impl IntoIterator<Item = (&'p Policy, &'p Decision)>) {
        let metrics = self.backend.resilient.is_none();
        for (p, d) in decided {
            self.status.stats.record(p.name(), d.allowed && !d.shadow);
            if metrics {
                tollgate::metrics::record_decision(p.name(), d);
            }
        }
    }

    /// Decides `cost` on `key` (0 peeks).
    pub(crate) async fn check(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
    ) -> Result<Decision, ServiceError> {
        let d = self.backend.store.check(policy, key, cost).await?;
        self.record([(policy, &d)]);
        Ok(d)
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
