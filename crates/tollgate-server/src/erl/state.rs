//! What ERL mode's endpoints share: the config in force (swapped whole on
//! reload), the environment's settings, the counters.

use std::sync::{Arc, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use metrics_exporter_prometheus::PrometheusHandle;

use super::config::ErlConfig;
use super::counter::Counter;
use super::service::{CallError, Settings, should_rate_limit};

/// ERL mode's shared state.
#[derive(Debug)]
pub(crate) struct ErlState {
    config: RwLock<Arc<ErlConfig>>,
    pub(crate) settings: Settings,
    counter: Arc<dyn Counter>,
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
            metrics,
        }
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
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let config = self.config();
        should_rate_limit(&config, &self.settings, self.counter.as_ref(), now, request).await
    }
}
