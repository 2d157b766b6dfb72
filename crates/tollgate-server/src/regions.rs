//! Multi-region mode in the service (`[regions]`, docs/regions.md): the
//! local Redis store wrapped as one region's [`RegionalStore`], and its
//! [`Replicator`] running for as long as the service does; and the one
//! report of its links that `GET /v1/regions` and the status page show.

use std::sync::Arc;

use serde::Serialize;
use tollgate::Policy;
use tollgate::store::redis::RedisStore;
use tollgate::store::redis::regions::{RegionalStore, Replicator};
use utoipa::ToSchema;

use crate::config::RegionSettings;

/// This instance's region: its store and the running replicator (stopped
/// when the last clone drops).
#[derive(Debug, Clone)]
pub(crate) struct Region {
    pub(crate) store: RegionalStore,
    _replicator: Arc<Running>,
}

#[derive(Debug)]
struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Region {
    /// Wraps `local` and starts replicating (inside a Tokio runtime).
    pub(crate) fn start(local: RedisStore, settings: &RegionSettings) -> Result<Region, String> {
        let store = RegionalStore::new(
            local,
            settings.regions.clone(),
            settings.global.iter().cloned(),
        );
        let remotes = settings
            .remote_urls
            .iter()
            .map(|urls| RedisStore::builder(urls.clone()))
            .collect();
        let replicator = Replicator::new(store.clone(), remotes).map_err(|e| e.to_string())?;
        let task = tokio::spawn(async move { replicator.run().await });
        Ok(Region {
            store,
            _replicator: Arc::new(Running(task)),
        })
    }

    /// This region and its links, now; `policies` are those in force, of
    /// which the report names the global ones.
    pub(crate) fn report(&self, policies: &[Policy]) -> RegionsReport {
        let store = &self.store;
        let links = store
            .links()
            .into_iter()
            .map(|l| LinkReport {
                region: l.region,
                partitioned: l.partitioned,
                lag_ms: l.lag.map(|d| d.as_millis() as u64),
                sent: l.sent,
                received: l.received,
                max_staleness_ms: l.max_staleness.as_millis() as u64,
                rounds: l.rounds,
                failed_rounds: l.failed_rounds,
                last_error: l.last_error,
            })
            .collect();
        RegionsReport {
            region: store.regions().name().to_owned(),
            partitioned: store.is_partitioned(),
            pending_keys: store.pending(),
            global: policies
                .iter()
                .filter(|p| store.is_global(p))
                .map(|p| p.name().to_owned())
                .collect(),
            links,
        }
    }
}

/// This region and its links.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct RegionsReport {
    /// This region's name.
    region: String,
    /// Whether this region decides as partitioned (capped at its share).
    partitioned: bool,
    /// Keys this instance has yet to replicate.
    pending_keys: usize,
    /// The policies decided across regions.
    global: Vec<String>,
    links: Vec<LinkReport>,
}

/// One remote region.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct LinkReport {
    region: String,
    partitioned: bool,
    /// How old its newest components here are, ms (absent before it was
    /// heard from).
    lag_ms: Option<u64>,
    /// Components our rounds merged there that grew.
    sent: u64,
    /// Components its rounds merged here that grew.
    received: u64,
    /// The longest its view of us was stale, ms (the bound's Δ).
    max_staleness_ms: u64,
    rounds: u64,
    failed_rounds: u64,
    last_error: Option<String>,
}
