//! What ERL mode's endpoints share: the config in force (swapped whole on
//! reload), the environment's settings, the counters, the policies' store
//! (extensions on) and the local over-limit cache.

use std::sync::{Arc, RwLock};

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use metrics_exporter_prometheus::PrometheusHandle;
use tollgate::Store;

use super::config::ErlConfig;
use super::counter::Counter;
use super::local_cache::LocalCache;
use super::service::{Deciders, should_rate_limit};
use super::settings::{CallError, Settings};

/// ERL mode's shared state.
#[derive(Debug)]
pub(crate) struct ErlState {
    config: RwLock<Arc<ErlConfig>>,
    pub(crate) settings: Settings,
    counter: Arc<dyn Counter>,
    /// The store of the policies `tollgate_policy` names (extensions on).
    store: Option<Arc<dyn Store>>,
    /// `LOCAL_CACHE_SIZE_IN_BYTES`: counters known over, until their window ends.
    local_cache: Option<LocalCache>,
    pub(crate) metrics: Option<PrometheusHandle>,
}

impl ErlState {
    pub(crate) fn new(
        config: ErlConfig,
        settings: Settings,
        counter: Arc<dyn Counter>,
        metrics: Option<PrometheusHandle>,
    ) -> ErlState {
        ErlState {
            config: RwLock::new(Arc::new(config)),
            settings,
            counter,
            store: None,
            local_cache: None,
            metrics,
        }
    }

    /// Decides the rules naming a tollgate policy on `store`.
    pub(crate) fn with_store(mut self, store: Arc<dyn Store>) -> ErlState {
        self.store = Some(store);
        self
    }

    /// Answers counters already over from `cache`.
    pub(crate) fn with_local_cache(mut self, cache: Option<LocalCache>) -> ErlState {
        self.local_cache = cache;
        self
    }

    /// The config in force.
    pub(crate) fn config(&self) -> Arc<ErlConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Puts a new config in force.
    pub(crate) fn replace(&self, config: ErlConfig) {
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
    }

    /// Answers one call now.
    pub(crate) async fn call(
        &self,
        request: &RateLimitRequest,
    ) -> Result<RateLimitResponse, CallError> {
        let now = crate::test_clock::unix_secs();
        let config = self.config();
        let deciders = Deciders {
            counter: self.counter.as_ref(),
            store: self.store.as_deref(),
            local_cache: self.local_cache.as_ref(),
        };
        should_rate_limit(&config, &self.settings, deciders, now, request).await
    }
}
