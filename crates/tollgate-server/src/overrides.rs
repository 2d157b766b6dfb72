//! The service's overrides: one [`Overrides`] set that decisions read
//! (`decide.rs`), changed through `PUT/DELETE /v1/overrides/...`
//! (`http/overrides.rs`). On the memory store it lives in the process; on
//! Redis every change is written there first and every instance loads
//! the policies whose version moved every 250 ms ([`RedisOverrides`]), so
//! a change reaches them all within about that and survives restarts,
//! and no decision asks Redis about overrides.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tollgate::Policy;
use tollgate::overrides::{Override, Overrides, Selector};
use tollgate::store::redis::{RedisOverrides, RedisStoreBuilder};

use crate::error::{Code, ServiceError};
use crate::state::AppState;

/// How often an instance asks Redis whether any policy's overrides moved.
pub(crate) const SYNC_EVERY: Duration = Duration::from_millis(250);

/// The overrides in force, and where they are shared.
#[derive(Debug, Default)]
pub(crate) struct SharedOverrides {
    pub(crate) local: Overrides,
    /// On Redis: set once its own connection is made.
    redis: OnceLock<RedisOverrides>,
    /// Whether the store is Redis (so a change needs it).
    shared: bool,
}

impl SharedOverrides {
    /// In-process overrides (the memory store).
    pub(crate) fn local() -> SharedOverrides {
        SharedOverrides::default()
    }

    /// Overrides shared through the Redis `builder` connects to.
    pub(crate) fn shared() -> SharedOverrides {
        SharedOverrides {
            shared: true,
            ..SharedOverrides::default()
        }
    }

    fn redis(&self) -> Result<Option<&RedisOverrides>, ServiceError> {
        match (self.shared, self.redis.get()) {
            (false, _) => Ok(None),
            (true, Some(r)) => Ok(Some(r)),
            (true, None) => Err(ServiceError::new(
                Code::StoreUnavailable,
                "overrides are kept in Redis, which is not connected yet",
            )),
        }
    }

    /// Sets an override on every instance.
    pub(crate) async fn set(
        &self,
        policy: &Policy,
        selector: Selector,
        over: Override,
    ) -> Result<(), ServiceError> {
        match self.redis()? {
            Some(r) => r.set(policy, selector, over).await?,
            None => self.local.set(policy, selector, over)?,
        }
        Ok(())
    }

    /// Removes an override on every instance: whether there was one.
    pub(crate) async fn remove(
        &self,
        policy: &str,
        selector: &Selector,
    ) -> Result<bool, ServiceError> {
        Ok(match self.redis()? {
            Some(r) => r.remove(policy, selector).await?,
            None => self.local.remove(policy, selector),
        })
    }
}

/// On Redis: connects the overrides' own connection (before serving when
/// Redis answers, else retrying every second in the background), then
/// loads every policy's overrides every [`SYNC_EVERY`].
pub(crate) async fn start_sync(state: Arc<AppState>, builder: RedisStoreBuilder) {
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
        let redis = RedisOverrides::new(store, state.overrides.local.clone());
        let _ = state.overrides.redis.set(redis.clone());
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
