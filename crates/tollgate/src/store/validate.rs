//! The checks every store makes before it touches state, written once and
//! made once per call.
//!
//! Each validating [`Store`](super::Store) method (`check`, `reserve`, ...)
//! runs the function of the same name here, then hands the [`Valid`] it
//! answers to its `*_unchecked` twin, whichever store answers: memory,
//! Redis, or a store wrapping one (the resilient store validates before
//! its failure policy, so a request that every store refuses is refused
//! while the primary store is down too; it then passes the `Valid` on
//! instead of validating again). The order is the same everywhere: the
//! key, then the operation against the algorithm, then the cost.

use std::time::Duration;

use super::key::KeyRef;
use super::{Request, Stamp};
use crate::algorithm::{Lease, Usage};
use crate::{Error, Policy, Result, validate_key};

/// Proof that a call's input passed the checks of its operation: made
/// only here, when a validating [`Store`](super::Store) method validates,
/// and handed to the store's `*_unchecked` method, which a store wrapping
/// another passes on. So code outside this crate can call a `*_unchecked`
/// method only with a `Valid` it was given.
#[derive(Debug, Clone, Copy)]
pub struct Valid(());

/// The proof, counted in tests (see `tests::a_call_is_validated_once`).
#[inline(always)]
fn valid() -> Valid {
    #[cfg(test)]
    tests::VALIDATED.with(|n| n.set(n.get() + 1));
    Valid(())
}

/// A check (or a peek) of `cost`: not on a concurrency policy, which only
/// takes leases.
#[inline]
pub(crate) fn check(policy: &Policy, key: &[u8], cost: u64) -> Result<Valid> {
    validate_key(key)?;
    policy.require_rate("check")?;
    policy.validate_cost(cost)?;
    Ok(valid())
}

/// A reservation: token buckets and GCRA only, and a `max_wait` kept
/// exact.
#[inline]
pub(crate) fn reserve(policy: &Policy, key: &[u8], cost: u64, max_wait: Duration) -> Result<Valid> {
    validate_key(key)?;
    policy.validate_reservation(cost, max_wait)?;
    Ok(valid())
}

/// Taking or giving back a lease (`operation` names which): concurrency
/// policies only.
#[inline]
pub(crate) fn lease(policy: &Policy, key: &[u8], operation: &'static str) -> Result<Valid> {
    validate_key(key)?;
    policy.require_concurrency(operation)?;
    Ok(valid())
}

/// A batch: every request as a check; in an atomic batch, no (policy, key)
/// pair twice.
pub(crate) fn check_many(requests: &[Request<'_>], atomic: bool) -> Result<Valid> {
    for r in requests {
        validate_key(r.key)?;
        r.policy.require_rate("check_many")?;
        r.policy.validate_cost(r.cost)?;
    }
    if atomic {
        let keys: Vec<KeyRef<'_>> = requests
            .iter()
            .map(|r| KeyRef::new(r.policy, r.key))
            .collect();
        if let Some(i) = (1..keys.len()).find(|&i| keys[..i].contains(&keys[i])) {
            return Err(Error::argument(
                "checks",
                format!(
                    "policy `{}` and the same key appear twice in one atomic batch",
                    requests[i].policy.name()
                ),
            ));
        }
    }
    Ok(valid())
}

/// A charge, a refund or a `check_at_most`: not on a concurrency policy,
/// a cost of at most 2^52.
#[inline]
pub(crate) fn usage(policy: &Policy, key: &[u8], op: Usage, cost: u64) -> Result<Valid> {
    validate_key(key)?;
    policy.validate_usage(op, cost)?;
    Ok(valid())
}

/// A held take's refund: a token bucket or GCRA (`unsupported`
/// otherwise, as a reservation), and 1 to the units the take granted.
#[inline]
pub(crate) fn refund_held(policy: &Policy, key: &[u8], stamp: &Stamp, units: u64) -> Result<Valid> {
    validate_key(key)?;
    if !matches!(policy.algorithm().lease(), Lease::Held { .. }) {
        return Err(Error::Unsupported {
            operation: "refund_held",
            algorithm: policy.algorithm().name(),
        });
    }
    if units == 0 || units > stamp.granted() {
        return Err(Error::argument(
            "units",
            format!(
                "must be 1 to the {} units the held take granted, got {units}",
                stamp.granted()
            ),
        ));
    }
    Ok(valid())
}

/// A reset: any policy, a valid key.
#[inline]
pub(crate) fn reset(key: &[u8]) -> Result<Valid> {
    validate_key(key)?;
    Ok(valid())
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    thread_local! {
        /// How many [`Valid`](super::Valid)s this thread has made: one per
        /// validation that passed.
        pub(super) static VALIDATED: Cell<u64> = const { Cell::new(0) };
    }

    /// A call through the whole stack the service runs on Redis (leasing
    /// over resilient over deferred over Redis, each passing the call on)
    /// validates once: each validating method's call, valid or not, makes
    /// one `Valid` at most, and bad input is refused by that one check.
    /// The counter is this thread's and the runtime runs on this thread,
    /// so nothing else counts.
    #[cfg(feature = "redis")]
    #[tokio::test(flavor = "current_thread")]
    async fn a_call_is_validated_once() {
        use std::future::Future;
        use std::sync::Arc;
        use std::time::Duration;

        use crate::store::deferred::DeferredStore;
        use crate::store::leasing::LeasingStore;
        use crate::store::redis::RedisStore;
        use crate::store::resilient::ResilientStore;
        use crate::{Policy, Request, Store};

        /// Makes one call and runs it; answers what it answered and how
        /// many validations passed meanwhile (a validating method
        /// validates when called, before its future runs).
        async fn counted<T, F: Future<Output = T>>(call: impl FnOnce() -> F) -> (T, u64) {
            let before = VALIDATED.with(Cell::get);
            let answer = call().await;
            (answer, VALIDATED.with(Cell::get) - before)
        }

        let redis = tollgate_testkit::RedisServer::start();
        let url = redis.url();
        let deferred = DeferredStore::connect(Duration::from_millis(10), move || {
            let url = url.clone();
            Box::pin(
                async move { Ok(Arc::new(RedisStore::connect(&url).await?) as Arc<dyn Store>) },
            )
        });
        let waited = tokio::time::timeout(Duration::from_secs(30), async {
            while !deferred.is_connected() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        waited.await.expect("the deferred store connects");
        let resilient = ResilientStore::builder(Arc::new(deferred)).build().unwrap();
        let store = LeasingStore::new(Arc::new(resilient));

        let window = Policy::fixed_window("w", 10, Duration::from_secs(60)).unwrap();
        let bucket = Policy::token_bucket("b", 10, Duration::from_secs(1), 10).unwrap();
        let leases = Policy::concurrency("c", 2, Duration::from_secs(60)).unwrap();

        // Valid calls: answered by Redis, each validated once.
        let (d, n) = counted(|| store.check(&window, b"k", 1)).await;
        assert!(d.unwrap().allowed);
        assert_eq!(n, 1, "check");
        let (d, n) = counted(|| store.reserve(&bucket, b"k", 1, Duration::from_secs(1))).await;
        assert!(d.unwrap().allowed);
        assert_eq!(n, 1, "reserve");
        let batch = [
            Request {
                policy: &window,
                key: b"a",
                cost: 1,
            },
            Request {
                policy: &bucket,
                key: b"a",
                cost: 1,
            },
        ];
        for atomic in [false, true] {
            let (d, n) = counted(|| store.check_many(&batch, atomic)).await;
            assert_eq!(d.unwrap().len(), 2);
            assert_eq!(n, 1, "check_many, atomic: {atomic}");
        }
        let (d, n) = counted(|| store.charge(&window, b"k", 2)).await;
        assert_eq!(d.unwrap().remaining, 7);
        assert_eq!(n, 1, "charge");
        let (d, n) = counted(|| store.settle(&window, b"k", 3, 1)).await;
        assert_eq!(d.unwrap().remaining, 9);
        assert_eq!(n, 1, "settle");
        let (held, n) = counted(|| store.take_held(&bucket, b"h", 4, Duration::ZERO)).await;
        let held = held.unwrap();
        assert_eq!(held.decision.granted, 4);
        assert_eq!(n, 1, "take_held");
        let stamp = held.stamp.expect("Redis stamps a held take");
        let (d, n) = counted(|| store.refund_held(&bucket, b"h", stamp, 4)).await;
        assert!(d.unwrap().is_some());
        assert_eq!(n, 1, "refund_held");
        let (lease, n) = counted(|| store.acquire_lease(&leases, b"k")).await;
        let id = lease.unwrap().id.expect("a lease is free");
        assert_eq!(n, 1, "acquire_lease");
        let (held, n) = counted(|| store.release_lease(&leases, b"k", id)).await;
        assert!(held.unwrap());
        assert_eq!(n, 1, "release_lease");
        let (done, n) = counted(|| store.reset(&window, b"k")).await;
        done.unwrap();
        assert_eq!(n, 1, "reset");

        // Bad input: refused by the first check, which passes nothing on.
        let (e, n) = counted(|| store.check(&window, b"", 1)).await;
        assert_eq!(e.unwrap_err().code(), "invalid_key");
        assert_eq!(n, 0);
        let (e, n) = counted(|| store.check(&window, b"k", 11)).await;
        assert_eq!(e.unwrap_err().code(), "cost_exceeds_limit");
        assert_eq!(n, 0);
        let (e, n) = counted(|| store.reserve(&window, b"k", 1, Duration::ZERO)).await;
        assert_eq!(e.unwrap_err().code(), "unsupported");
        assert_eq!(n, 0);
        let twice = [batch[0], batch[0]];
        let (e, n) = counted(|| store.check_many(&twice, true)).await;
        assert_eq!(e.unwrap_err().code(), "invalid_argument");
        assert_eq!(n, 0);
        let (e, n) = counted(|| store.acquire_lease(&window, b"k")).await;
        assert_eq!(e.unwrap_err().code(), "unsupported");
        assert_eq!(n, 0);
        // And the window's count is where the valid calls left it.
        let (d, _) = counted(|| store.check(&window, b"k", 0)).await;
        assert_eq!(d.unwrap().remaining, 10);
    }
}
