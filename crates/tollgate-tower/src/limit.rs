//! One limit of a layer: a policy, how requests are keyed, what each costs.

use std::fmt;
use std::sync::Arc;

use tollgate::{Algorithm, Policy};

use crate::KeyExtractor;

/// A policy applied to requests keyed by an extractor, each costing `cost`,
/// or, for a usage limit, the request's estimate, settled after the
/// response.
pub(crate) struct Limit {
    /// Shared with the leases taken under it, which give themselves back.
    pub(crate) policy: Arc<Policy>,
    pub(crate) extractor: Box<dyn KeyExtractor>,
    /// A usage limit's cost is 1, and unused.
    pub(crate) cost: u64,
    /// Whether requests are checked with their estimate and settled with
    /// what they used.
    pub(crate) usage: bool,
}

impl Limit {
    /// What a request with `estimate` costs under this limit, decided by
    /// `policy` (the limit's own, or an override's or a tier's). A usage
    /// limit checks the estimate, at least 1 (a request needs something
    /// left) and at most the policy's limit (more could never pass: such a
    /// request waits for a fresh key, and its settle charges the rest).
    #[inline]
    pub(crate) fn cost(&self, policy: &Policy, estimate: u64) -> u64 {
        if self.usage {
            estimate.min(policy.limit()).max(1)
        } else {
            self.cost
        }
    }

    /// Whether requests take a lease (concurrency) rather than quota.
    pub(crate) fn is_lease(&self) -> bool {
        matches!(self.policy.algorithm(), Algorithm::Concurrency(_))
    }
}

impl fmt::Debug for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limit")
            .field("policy", &self.policy)
            .field("cost", &self.cost)
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}
