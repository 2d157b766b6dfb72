//! Settling a request's usage limits once its response is done.
//!
//! A leaf, as `lease.rs` is: what a settle takes (the store, the policies,
//! the keys, what each check took) is owned here, so a response body keeps
//! nothing else of the layer alive.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Waker};

use http::{HeaderMap, Response};
use tollgate::store::BoxFuture;
use tollgate::{Policy, Store};

use crate::Key;
use crate::usage::UsageSource;

/// What one usage limit's check took from its key for a request.
#[derive(Debug)]
pub(crate) struct Charged {
    pub(crate) policy: Arc<Policy>,
    pub(crate) key: Key,
    /// The units the check consumed: the request's estimate as that limit
    /// checked it, or 0 when the check consumed nothing (the store failed
    /// and the request passed without the limit, or a shadow policy would
    /// have denied).
    pub(crate) units: u64,
}

/// An admitted request's usage limits, until its response says what it
/// used. Dropped before then (the inner service failed, the caller went
/// away), it settles nothing: the estimate stands.
#[derive(Debug)]
pub(crate) struct Unsettled {
    store: Arc<dyn Store>,
    source: UsageSource,
    estimate: u64,
    charged: Vec<Charged>,
}

impl Unsettled {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        source: UsageSource,
        estimate: u64,
        charged: Vec<Charged>,
    ) -> Unsettled {
        Unsettled {
            store,
            source,
            estimate,
            charged,
        }
    }

    /// What is left to settle once `response`'s head has said what the
    /// request used (or, saying nothing, that its estimate stands): nothing
    /// when every limit already holds that and no trailer can say otherwise
    /// (no usage header is configured).
    pub(crate) fn settlement<B>(self, response: &Response<B>) -> Option<Settlement> {
        let actual = self.source.read(response).unwrap_or(self.estimate);
        let settled = self.charged.iter().all(|c| c.units == actual);
        (!settled || self.source.has_header()).then(|| Settlement {
            store: self.store,
            source: self.source,
            actual,
            charged: self.charged,
        })
    }
}

/// A request's usage, to be settled on every limit that does not hold it
/// yet. Dropping it settles: the response body drops it when it ends,
/// fails, or is itself dropped, so each request settles once.
///
/// Settling is a store call: it is polled once where the settlement is
/// dropped, which is all a store answering without waiting (the memory
/// store) needs, and otherwise goes on as a task spawned on the tokio
/// runtime of that thread. A settle that cannot be made (the store fails,
/// there is no runtime, or the runtime drops the task as it shuts down)
/// is logged at `warn` and counted in
/// `tollgate_settle_failures_total`; the key then keeps what its check
/// took.
pub(crate) struct Settlement {
    store: Arc<dyn Store>,
    /// For the usage header in trailers.
    source: UsageSource,
    actual: u64,
    charged: Vec<Charged>,
}

impl Settlement {
    /// Takes the usage from the body's trailers, when they carry the usage
    /// header: a streamed answer knows its usage only at its end.
    pub(crate) fn trailers(&mut self, trailers: &HeaderMap) {
        if let Some(units) = self.source.read_header(trailers) {
            self.actual = units;
        }
    }
}

impl fmt::Debug for Settlement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settlement")
            .field("actual", &self.actual)
            .field("limits", &self.charged.len())
            .finish()
    }
}

impl Drop for Settlement {
    fn drop(&mut self) {
        let actual = self.actual;
        let mut charged = std::mem::take(&mut self.charged);
        charged.retain(|c| c.units != actual);
        if charged.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            for c in &charged {
                failed(c, actual, &"no tokio runtime to run the settle on");
            }
            return;
        };
        let store = self.store.clone();
        let unsettled = Unsent {
            charged,
            next: 0,
            actual,
        };
        let mut settling: BoxFuture<'static, ()> = Box::pin(settle(store, unsettled));
        // A store that answers without waiting (the memory store) settles
        // here and now; one that waits (Redis) goes on in a task, which
        // polls the future again with its own waker. Polling a future with
        // one waker and then another is what the `Future` contract allows.
        let mut cx = Context::from_waker(Waker::noop());
        if settling.as_mut().poll(&mut cx).is_pending() {
            runtime.spawn(settling);
        }
    }
}

/// The limits a settle has still to settle. Dropped before the last (the
/// runtime shut down and dropped the task), it reports every one left as
/// failed, so that no settle is lost without a word.
struct Unsent {
    charged: Vec<Charged>,
    next: usize,
    actual: u64,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        for c in self.charged.get(self.next..).unwrap_or_default() {
            failed(
                c,
                self.actual,
                &"the settle was dropped before it ran (the runtime shut down)",
            );
        }
    }
}

/// Settles every limit in turn (each settle is one atomic step of its own;
/// a settle never denies, so there is nothing to keep all-or-nothing).
async fn settle(store: Arc<dyn Store>, mut unsent: Unsent) {
    while let Some(c) = unsent.charged.get(unsent.next) {
        let settled = store
            .settle(&c.policy, c.key.as_bytes(), c.units, unsent.actual)
            .await;
        if let Err(e) = settled {
            failed(c, unsent.actual, &e);
        }
        unsent.next += 1;
    }
}

fn failed(c: &Charged, actual: u64, error: &dyn fmt::Display) {
    tracing::warn!(
        policy = c.policy.name(),
        held = c.units,
        actual,
        %error,
        "could not settle a request's usage: the key keeps what its check took"
    );
    tollgate::metrics::record_settle_failure(c.policy.name());
}
