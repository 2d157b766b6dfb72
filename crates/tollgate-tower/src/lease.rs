//! Leases of concurrency policies, held while a request is in flight.
//!
//! A leaf: a held lease owns what giving it back takes (the store, the
//! policy, the key and the lease's id), as tower's `OwnedSemaphorePermit`
//! owns its semaphore, so it keeps nothing else of the layer alive.

use std::fmt;
use std::sync::Arc;

use tollgate::{LeaseId, Policy, Store};

use crate::Key;

/// A lease taken for one request; dropping it gives it back.
///
/// Giving back is a store call, so it runs as a task spawned on the tokio
/// runtime of the thread that drops the lease. Where there is no runtime
/// (the lease was dropped after the runtime shut down), the lease expires
/// by itself after the policy's lease time.
pub(crate) struct HeldLease {
    store: Arc<dyn Store>,
    policy: Arc<Policy>,
    key: Key,
    id: LeaseId,
}

impl HeldLease {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        policy: Arc<Policy>,
        key: Key,
        id: LeaseId,
    ) -> HeldLease {
        HeldLease {
            store,
            policy,
            key,
            id,
        }
    }
}

impl fmt::Debug for HeldLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLease")
            .field("policy", &self.policy.name())
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        let (store, policy) = (self.store.clone(), self.policy.clone());
        let (key, id) = (self.key.clone(), self.id);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { release(&*store, &policy, &key, id).await });
            }
            Err(_) => tracing::debug!(
                policy = policy.name(),
                "no tokio runtime to give a lease back; it expires by itself"
            ),
        }
    }
}

/// Gives a lease back (from a spawned task; a failure only means the lease
/// expires by itself).
async fn release(store: &dyn Store, policy: &Policy, key: &Key, id: LeaseId) {
    if let Err(e) = store.release_lease(policy, key.as_bytes(), id).await {
        tracing::debug!(
            policy = policy.name(),
            error = %e,
            "could not give a lease back; it expires by itself"
        );
    }
}

/// The leases of one request.
pub(crate) type Leases = Vec<HeldLease>;
