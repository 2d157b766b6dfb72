//! A store that is not there yet: connected in the background, failing
//! every call as unavailable until then.
//!
//! A service that starts while Redis is unreachable (a pod restarted in
//! the middle of a failover) should not take its fleet's limiting down
//! with it. Behind a [`ResilientStore`](super::resilient::ResilientStore),
//! a [`DeferredStore`] lets it start at once: until the connection is made,
//! every valid call fails as a store error (`io`), which the failure policy
//! answers, and the resilient store's probe sees the store answer as soon
//! as the connection is made.
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> tollgate::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tollgate::store::deferred::DeferredStore;
//! use tollgate::store::redis::RedisStore;
//! use tollgate::store::resilient::ResilientStore;
//! use tollgate::Store;
//!
//! let redis = RedisStore::builder(["redis://127.0.0.1:6379"]);
//! let primary = DeferredStore::connect(Duration::from_millis(250), move || {
//!     let redis = redis.clone();
//!     Box::pin(async move { Ok(Arc::new(redis.connect().await?) as Arc<dyn Store>) })
//! });
//! let store = ResilientStore::builder(Arc::new(primary)).build()?;
//! store.trip(); // known to be down until the probe says otherwise
//! # Ok(())
//! # }
//! ```

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use super::forward::{Forward, forward};
use super::{BoxFuture, Store};
use crate::{Error, Result, StoreErrorKind};

/// A store connected in the background; see the [module docs](self).
#[derive(Debug, Clone)]
pub struct DeferredStore {
    inner: Arc<Inner>,
}

struct Inner {
    store: OnceLock<Arc<dyn Store>>,
    /// Why the last attempt failed.
    last_error: Mutex<String>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeferredStore")
            .field("connected", &self.store.get().is_some())
            .finish_non_exhaustive()
    }
}

impl DeferredStore {
    /// Starts connecting in the background with `connect`, trying again
    /// after a failure every `retry` at first, doubling up to 10 × `retry`.
    /// Must be called inside a Tokio runtime; the attempts stop when the
    /// store is dropped.
    pub fn connect<F>(retry: Duration, connect: F) -> DeferredStore
    where
        F: Fn() -> BoxFuture<'static, Result<Arc<dyn Store>>> + Send + Sync + 'static,
    {
        let inner = Arc::new(Inner {
            store: OnceLock::new(),
            last_error: Mutex::new("not tried yet".to_owned()),
        });
        tokio::spawn(keep_connecting(Arc::downgrade(&inner), retry, connect));
        DeferredStore { inner }
    }

    /// Whether the store is connected.
    pub fn is_connected(&self) -> bool {
        self.inner.store.get().is_some()
    }

    /// The connected store, or the error every call answers until then.
    fn store(&self) -> Result<&Arc<dyn Store>> {
        self.inner.store.get().ok_or_else(|| Error::Store {
            kind: StoreErrorKind::Io,
            message: format!("not connected yet: {}", self.inner.last_error.lock()),
        })
    }
}

async fn keep_connecting<F>(inner: Weak<Inner>, retry: Duration, connect: F)
where
    F: Fn() -> BoxFuture<'static, Result<Arc<dyn Store>>>,
{
    let mut wait = retry;
    loop {
        let attempt = connect().await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        match attempt {
            Ok(store) => {
                let _ = inner.store.set(store);
                tracing::info!("store connected");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?wait, "store not reachable yet");
                *inner.last_error.lock() = e.to_string();
            }
        }
        drop(inner);
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(retry * 10);
    }
}

impl Forward for DeferredStore {
    fn target(&self) -> Result<&dyn Store> {
        self.store().map(|s| &**s)
    }
}

/// Every call goes to the connected store, once its input is valid.
impl Store for DeferredStore {
    forward!(
        check_unchecked,
        reserve_unchecked,
        check_many_unchecked,
        acquire_lease_unchecked,
        release_lease_unchecked,
        reset_unchecked,
        usage_unchecked,
        take_held_unchecked,
        refund_held_unchecked,
    );
}
