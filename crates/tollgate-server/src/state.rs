//! What the HTTP and gRPC front ends share: the store, the policies in
//! force (swapped whole on reload), the tokens, the metrics handle and
//! what the status page shows.

use std::sync::Arc;

use arc_swap::ArcSwap;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::PolicySet;
use crate::store::Backend;

/// What every request handler shares.
#[derive(Debug)]
pub(crate) struct AppState {
    pub(crate) backend: Backend,
    /// The policies in force, swapped whole on reload (read on every
    /// request without a lock: no lock to take, none to poison).
    pub(crate) policies: ArcSwap<PolicySet>,
    /// The decision and admin tokens (`auth.rs`).
    pub(crate) tokens: crate::auth::Tokens,
    pub(crate) metrics: Option<PrometheusHandle>,
    /// Uptime, decisions per second by policy, the last reload.
    pub(crate) status: crate::status::Status,
    /// Per-key overrides, shared by every instance on Redis.
    pub(crate) overrides: crate::overrides::SharedOverrides,
}

impl AppState {
    /// The policies in force now: a snapshot a request keeps to its end.
    pub(crate) fn policies(&self) -> Arc<PolicySet> {
        self.policies.load_full()
    }

    pub(crate) fn replace_policies(&self, policies: PolicySet) {
        self.policies.store(Arc::new(policies));
    }
}
