//! One limit of a layer: a policy, how requests are keyed, what each costs.

use std::fmt;
use std::sync::Arc;

use tollgate::{Algorithm, Policy};

use crate::KeyExtractor;

/// A policy applied to requests keyed by an extractor, each costing `cost`.
pub(crate) struct Limit {
    /// Shared with the leases taken under it, which give themselves back.
    pub(crate) policy: Arc<Policy>,
    pub(crate) extractor: Box<dyn KeyExtractor>,
    pub(crate) cost: u64,
}

impl Limit {
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
            .finish_non_exhaustive()
    }
}
