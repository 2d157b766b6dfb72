//! On Redis: keeps this instance's overrides in step with every other's.
//! Started by `serve` once the state exists; the overrides themselves
//! (`crate::overrides`) know nothing of the task.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::redis::RedisStoreBuilder;

use crate::state::AppState;

/// How often an instance asks Redis whether any policy's overrides moved.
const SYNC_EVERY: Duration = Duration::from_millis(250);

/// On Redis: connects the overrides' own connection (before serving when
/// Redis answers, else retrying every second in the background), then
/// loads every policy's overrides every [`SYNC_EVERY`].
pub(super) async fn start(state: Arc<AppState>, builder: RedisStoreBuilder) {
    let first = builder.clone().connect().await.ok();
    tokio::spawn(async move {
        let store = match first {
            Some(store) => store,
            None => loop {
                match builder.clone().connect().await {
                    Ok(store) => break store,
                    Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
                }
            },
        };
        let redis = state.overrides.connect(store);
        let mut tick = tokio::time::interval(SYNC_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tick.tick().await;
            let policies = state.policies().policies.clone();
            match redis.sync(&policies).await {
                Ok(()) => failing = false,
                // Logged once per spell of failures, not every 250 ms.
                Err(e) if !failing => {
                    failing = true;
                    tracing::warn!(error = %e, "cannot load the overrides from Redis");
                }
                Err(_) => {}
            }
        }
    });
}
