//! The store the service decides on, built from the `[store]` settings.

use std::sync::Arc;
use std::time::Duration;

use tollgate::store::deferred::DeferredStore;
use tollgate::store::leasing::LeasingStore;
use tollgate::store::redis::{RedisStore, RedisStoreBuilder};
use tollgate::store::resilient::{BreakerState, ResilientStore};
use tollgate::{MemoryStore, Store};

use crate::config::StoreSettings;
use crate::regions::Region;

/// The store, and how to tell whether it is serving.
#[derive(Debug, Clone)]
pub(crate) struct Backend {
    pub(crate) store: Arc<dyn Store>,
    /// Present on Redis: its breaker says whether Redis or the failure
    /// policy decides.
    pub(crate) resilient: Option<ResilientStore>,
    pub(crate) settings: StoreSettings,
    /// On Redis: how to connect, for the overrides' own connection.
    pub(crate) redis: Option<RedisStoreBuilder>,
    /// With `[regions]`: this region's store and replicator.
    pub(crate) region: Option<Region>,
}

impl Backend {
    /// `memory`, or `redis (N servers)`, for logs and `/readyz`. URLs are
    /// not echoed: they may carry a password.
    pub(crate) fn describe(&self) -> String {
        if let Some(master) = &self.settings.master_name {
            return format!(
                "redis sentinel (master {master:?}, {} sentinels, first {})",
                self.settings.urls.len(),
                redact(&self.settings.urls[0])
            );
        }
        match self.settings.urls.len() {
            0 => "memory".to_string(),
            1 => format!("redis ({})", redact(&self.settings.urls[0])),
            n => format!(
                "redis cluster ({n} seed nodes, first {})",
                redact(&self.settings.urls[0])
            ),
        }
    }

    pub(crate) fn breaker(&self) -> Option<BreakerState> {
        self.resilient.as_ref().map(ResilientStore::breaker_state)
    }
}

/// A Redis URL without its user and password.
pub(crate) fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://***@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// Connects the store `settings` ask for.
pub(crate) async fn build(settings: &StoreSettings) -> Result<Backend, String> {
    let settings = settings.clone();
    if settings.urls.is_empty() {
        let mut memory = MemoryStore::builder().clock(crate::test_clock::ServiceClock::new());
        if let Some(max) = settings.max_keys {
            memory = memory.max_keys(max);
        }
        return Ok(Backend {
            store: Arc::new(memory.build()),
            resilient: None,
            settings,
            redis: None,
            region: None,
        });
    }
    let mut redis = RedisStore::builder(settings.urls.clone())
        .deadline(settings.deadline)
        .bucket_expiry_form(settings.bucket_expiry_form)
        .pipelining(settings.pipelining);
    if let Some(prefix) = &settings.prefix {
        redis = redis.prefix(prefix.clone());
    }
    if let Some(master) = &settings.master_name {
        redis = redis.sentinel(master.clone());
    }
    if let Some((user, password)) = &settings.master_auth {
        redis = redis.master_auth(user.as_deref(), password);
    }
    let mut region = None;
    // The library's errors never contain the URL, so no password leaks.
    let (primary, connected): (Arc<dyn Store>, bool) = match redis.clone().connect().await {
        Ok(redis) => match &settings.regions {
            Some(regions) => {
                let r = Region::start(redis, regions)?;
                let store = Arc::new(r.store.clone());
                region = Some(r);
                (store, true)
            }
            None => (Arc::new(redis), true),
        },
        Err(e) if settings.regions.is_some() => {
            return Err(format!(
                "cannot connect to {}: {e} ([regions] needs this region's Redis at startup)",
                redact(&settings.urls[0])
            ));
        }
        Err(e) if settings.require_at_startup => {
            return Err(format!(
                "cannot connect to {}: {e}",
                redact(&settings.urls[0])
            ));
        }
        Err(e) => {
            eprintln!(
                "warning: cannot connect to {}: {e}; starting anyway, deciding by on_failure = \"{}\" until Redis answers (--require-redis refuses to start instead)",
                redact(&settings.urls[0]),
                settings.on_failure
            );
            (Arc::new(connect_later(redis.clone())), false)
        }
    };
    let mut builder = ResilientStore::builder(primary)
        .deadline(settings.deadline)
        .on_failure(settings.on_failure)
        .expected_instances(settings.expected_instances);
    if let Some(max) = settings.max_keys {
        builder = builder.max_keys(max);
    }
    for (policy, mode) in &settings.policy_on_failure {
        builder = builder.policy_on_failure(policy, *mode);
    }
    let resilient = builder.build().map_err(|e| e.to_string())?;
    if !connected {
        // Down from the start, as during any outage: the probe closes the
        // breaker once the connection is made and a write succeeds.
        resilient.trip();
    }
    // Policies with `batch = "auto"` are answered from leases, the others
    // pass through; a lease is sized for 20 ms of this instance's traffic.
    let leasing = LeasingStore::with(
        Arc::new(resilient.clone()),
        Duration::from_millis(20),
        u64::from(settings.expected_instances),
    );
    Ok(Backend {
        store: Arc::new(leasing),
        resilient: Some(resilient),
        settings,
        redis: Some(redis),
        region,
    })
}

/// Redis, connected in the background: tried again every 250 ms at first,
/// up to every 2.5 s.
fn connect_later(redis: RedisStoreBuilder) -> DeferredStore {
    DeferredStore::connect(Duration::from_millis(250), move || {
        let redis = redis.clone();
        Box::pin(async move { Ok(Arc::new(redis.connect().await?) as Arc<dyn Store>) })
    })
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_never_show() {
        assert_eq!(
            redact("redis://user:secret@10.0.0.1:6379/0"),
            "redis://***@10.0.0.1:6379/0"
        );
        assert_eq!(
            redact("rediss://:secret@host:6380"),
            "rediss://***@host:6380"
        );
        assert_eq!(redact("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
    }
}
