//! One call to the primary store: within the deadline, unless the breaker
//! is open, and its failures counted by kind.

use std::sync::Arc;
use std::time::Instant;

use super::{ResilientStore, probe};
use crate::store::BoxFuture;
use crate::{Error, Result, StoreErrorKind, metrics};

/// The outcome of one call to the primary store.
pub(crate) enum Attempt<T> {
    /// It answered: a value, or an error that is the caller's (bad input).
    Answered(Result<T>),
    /// The store failed to decide (any store error, or no answer within the
    /// deadline), or the breaker is open: the failure policy answers.
    Unavailable,
}

impl ResilientStore {
    /// Calls the primary store, within the deadline, unless the breaker is
    /// open.
    pub(crate) async fn attempt<'a, T>(
        &'a self,
        call: impl FnOnce() -> BoxFuture<'a, Result<T>>,
    ) -> Attempt<T> {
        if self.inner.breaker.is_open() {
            return Attempt::Unavailable;
        }
        let started = Instant::now();
        let result = tokio::time::timeout(self.inner.deadline, call()).await;
        metrics::record_latency(started.elapsed());
        match result {
            Ok(Ok(value)) => {
                self.inner.breaker.success();
                Attempt::Answered(Ok(value))
            }
            Ok(Err(e)) if e.is_store_failure() => {
                let kind = match &e {
                    Error::Store { kind, .. } => *kind,
                    _ => StoreErrorKind::Other,
                };
                self.failed(kind, e.is_transient(), &e.to_string());
                Attempt::Unavailable
            }
            Ok(Err(e)) => Attempt::Answered(Err(e)),
            Err(_) => {
                self.failed(
                    StoreErrorKind::Timeout,
                    true,
                    "no answer within the deadline",
                );
                Attempt::Unavailable
            }
        }
    }

    /// Counts a failure; the call that opens the breaker logs the switch
    /// and starts the probe.
    fn failed(&self, kind: StoreErrorKind, transient: bool, message: &str) {
        metrics::record_store_error(kind);
        if self.inner.breaker.failure(transient) {
            self.opened(kind.as_str(), message);
        }
    }

    /// Opens the breaker now, as enough failures would, and starts the
    /// probe: for a primary store known to be unavailable, such as one
    /// still connecting at startup (see
    /// [`DeferredStore`](crate::store::deferred::DeferredStore)). Does
    /// nothing if it is open already. Must be called inside a Tokio
    /// runtime.
    pub fn trip(&self) {
        if self.inner.breaker.open() {
            self.opened("tripped", "the primary store is known to be unavailable");
        }
    }

    fn opened(&self, kind: &str, message: &str) {
        tracing::warn!(
            kind,
            error = message,
            "store unavailable: deciding by the failure policy until the probe succeeds"
        );
        metrics::record_breaker(true);
        tokio::spawn(probe::run(Arc::downgrade(&self.inner)));
    }
}
