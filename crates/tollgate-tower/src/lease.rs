//! Leases of concurrency policies, held while a request is in flight.

use std::fmt;
use std::sync::Arc;

use tollgate::LeaseId;

use crate::Key;
use crate::limiter::Limiter;

/// A lease taken for one request; dropping it gives it back.
///
/// Giving back is a store call, so it runs as a task spawned on the tokio
/// runtime of the thread that drops the lease. Where there is no runtime
/// (the lease was dropped after the runtime shut down), the lease expires
/// by itself after the policy's lease time.
pub(crate) struct HeldLease {
    limiter: Arc<Limiter>,
    limit: usize,
    key: Key,
    id: LeaseId,
}

impl HeldLease {
    pub(crate) fn new(limiter: Arc<Limiter>, limit: usize, key: Key, id: LeaseId) -> HeldLease {
        HeldLease {
            limiter,
            limit,
            key,
            id,
        }
    }
}

impl fmt::Debug for HeldLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLease")
            .field("policy", &self.limiter.policy(self.limit).name())
            .field("id", &self.id)
            .finish()
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        let limiter = self.limiter.clone();
        let (limit, key, id) = (self.limit, self.key.clone(), self.id);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { limiter.release(limit, &key, id).await });
            }
            Err(_) => tracing::debug!(
                policy = limiter.policy(limit).name(),
                "no tokio runtime to give a lease back; it expires by itself"
            ),
        }
    }
}

/// The leases of one request.
pub(crate) type Leases = Vec<HeldLease>;
