//! Multi-region mode in the service (`[regions]`, docs/regions.md): the
//! local Redis store wrapped as one region's [`RegionalStore`], and its
//! [`Replicator`] running for as long as the service does.

use std::sync::Arc;

use tollgate::store::redis::RedisStore;
use tollgate::store::redis::regions::{RegionalStore, Replicator};

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
}
