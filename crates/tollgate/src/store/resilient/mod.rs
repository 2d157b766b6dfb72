//! Decisions that keep flowing when the primary store (Redis) is slow,
//! down, restarted or failing over.
//!
//! [`ResilientStore`] wraps a primary store. Every call to it has a
//! deadline; a transient failure (refused connection, timeout, `BUSY`,
//! `OOM`, cluster reconfiguration) is answered by the failure policy
//! ([`OnFailure`]) instead of an error, and enough consecutive failures
//! open a circuit breaker: then no call goes to the primary store at all,
//! and one background probe runs the real script path until it answers.
//! Denials proven to last are answered from a local cache.
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # mod example {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use tollgate::store::redis::RedisStore;
//! use tollgate::store::resilient::{OnFailure, ResilientStore};
//! use tollgate::{Policy, Store};
//!
//! # async fn run() -> tollgate::Result<()> {
//! let redis = RedisStore::builder(["redis://127.0.0.1:6379"])
//!     .deadline(Duration::from_millis(50))
//!     .connect()
//!     .await?;
//! let store = ResilientStore::builder(Arc::new(redis))
//!     .deadline(Duration::from_millis(50))
//!     .on_failure(OnFailure::Local)
//!     .expected_instances(3)
//!     .policy_on_failure("sms", OnFailure::Deny)
//!     .build()?;
//! let books = Policy::fixed_window("books", 120, Duration::from_secs(60))?;
//! let decision = store.check(&books, b"user-42", 1).await?;
//! println!("{} (from {})", decision.allowed, decision.source.as_str());
//! # Ok(())
//! # }
//! # }
//! ```

mod breaker;
mod deny_cache;
mod fallback;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use self::breaker::Breaker;
pub use self::breaker::BreakerState;
use self::deny_cache::DenyCache;
use self::fallback::Fallback;
use super::{BoxFuture, Lease, Request, Store};
use crate::algorithm::LeaseId;
use crate::metrics;
use crate::{Clock, Decision, Error, MonotonicClock, Policy, Result, Source, StoreErrorKind};

/// What to answer while the primary store is unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum OnFailure {
    /// Decide with a local in-memory limiter of the same algorithm, whose
    /// limit is this instance's share (the limit divided by the expected
    /// number of instances). The default.
    #[default]
    Local,
    /// Admit everything (fail open).
    Allow,
    /// Refuse with [`Error::StoreUnavailable`] (fail closed): a distinct
    /// answer, never a fake "limited".
    Deny,
}

impl OnFailure {
    /// `local`, `allow` or `deny`.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Local => "local",
            OnFailure::Allow => "allow",
            OnFailure::Deny => "deny",
        }
    }
}

impl fmt::Display for OnFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for OnFailure {
    type Err = Error;

    fn from_str(s: &str) -> Result<OnFailure> {
        match s {
            "local" => Ok(OnFailure::Local),
            "allow" => Ok(OnFailure::Allow),
            "deny" => Ok(OnFailure::Deny),
            other => Err(Error::argument(
                "on_failure",
                format!("expected `local`, `allow` or `deny`, got {other:?}"),
            )),
        }
    }
}

/// Configures a [`ResilientStore`].
#[derive(Debug)]
pub struct ResilientStoreBuilder {
    primary: Arc<dyn Store>,
    deadline: Duration,
    on_failure: OnFailure,
    overrides: HashMap<String, OnFailure>,
    expected_instances: u32,
    failure_threshold: u32,
    probe_interval: Duration,
    probe_max_interval: Duration,
    deny_cache_threshold: Option<Duration>,
    max_keys: usize,
}

impl ResilientStoreBuilder {
    /// How long a decision may wait for the primary store (default 50 ms).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The failure policy (default [`OnFailure::Local`]).
    pub fn on_failure(mut self, on_failure: OnFailure) -> Self {
        self.on_failure = on_failure;
        self
    }

    /// A failure policy for the policy named `policy` only.
    pub fn policy_on_failure(mut self, policy: &str, on_failure: OnFailure) -> Self {
        self.overrides.insert(policy.to_owned(), on_failure);
        self
    }

    /// How many instances share the limits (default 1): the local fallback
    /// admits each policy's limit divided by this.
    pub fn expected_instances(mut self, instances: u32) -> Self {
        self.expected_instances = instances;
        self
    }

    /// Consecutive transient failures that open the breaker (default 3).
    pub fn failure_threshold(mut self, failures: u32) -> Self {
        self.failure_threshold = failures;
        self
    }

    /// How often the probe tries the primary store while the breaker is
    /// open (default 100 ms), doubling after each failed probe up to
    /// `max` (default 1 s), each wait with ±20 % jitter.
    pub fn probe_interval(mut self, interval: Duration, max: Duration) -> Self {
        self.probe_interval = interval;
        self.probe_max_interval = max;
        self
    }

    /// Answers denials whose `retry_after` is at least `threshold` locally
    /// until then (default 10 ms); `None` turns the cache off.
    pub fn deny_cache(mut self, threshold: Option<Duration>) -> Self {
        self.deny_cache_threshold = threshold;
        self
    }

    /// The most keys the local fallback and the deny cache each hold
    /// (default 2^20).
    pub fn max_keys(mut self, max_keys: usize) -> Self {
        self.max_keys = max_keys;
        self
    }

    /// The store. Errors name the setting that is out of range.
    pub fn build(self) -> Result<ResilientStore> {
        if self.expected_instances == 0 {
            return Err(Error::argument(
                "expected_instances",
                "must be at least 1, got 0",
            ));
        }
        if self.failure_threshold == 0 {
            return Err(Error::argument(
                "failure_threshold",
                "must be at least 1, got 0",
            ));
        }
        if self.deadline.is_zero() {
            return Err(Error::argument("deadline", "must be more than 0"));
        }
        if self.probe_interval.is_zero() || self.probe_max_interval < self.probe_interval {
            return Err(Error::argument(
                "probe_interval",
                "must be more than 0 and at most the maximum interval",
            ));
        }
        let deny_cache = self
            .deny_cache_threshold
            .map(|t| DenyCache::new(t.as_micros() as u64, self.max_keys));
        Ok(ResilientStore {
            inner: Arc::new(Inner {
                primary: self.primary,
                deadline: self.deadline,
                on_failure: self.on_failure,
                overrides: self.overrides,
                breaker: Breaker::new(self.failure_threshold),
                fallback: Fallback::new(self.max_keys, self.expected_instances),
                deny_cache,
                clock: MonotonicClock::new(),
                probe_interval: self.probe_interval,
                probe_max_interval: self.probe_max_interval,
                probe: Policy::fixed_window("tollgate-probe", 1, Duration::from_secs(1))
                    .expect("a valid probe policy"),
            }),
        })
    }
}

/// A [`Store`] that survives the failures of its primary store. See the
/// [module documentation](self).
#[derive(Debug, Clone)]
pub struct ResilientStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    primary: Arc<dyn Store>,
    deadline: Duration,
    on_failure: OnFailure,
    overrides: HashMap<String, OnFailure>,
    breaker: Breaker,
    fallback: Fallback,
    deny_cache: Option<DenyCache>,
    clock: MonotonicClock,
    probe_interval: Duration,
    probe_max_interval: Duration,
    probe: Policy,
}

/// The outcome of one call to the primary store.
enum Attempt<T> {
    /// It answered (a value, or an error that is the caller's, such as bad
    /// input).
    Answered(Result<T>),
    /// It failed transiently, or the breaker is open: use the failure policy.
    Unavailable,
}

impl ResilientStore {
    /// A builder around `primary`.
    pub fn builder(primary: Arc<dyn Store>) -> ResilientStoreBuilder {
        ResilientStoreBuilder {
            primary,
            deadline: Duration::from_millis(50),
            on_failure: OnFailure::Local,
            overrides: HashMap::new(),
            expected_instances: 1,
            failure_threshold: 3,
            probe_interval: Duration::from_millis(100),
            probe_max_interval: Duration::from_secs(1),
            deny_cache_threshold: Some(Duration::from_millis(10)),
            max_keys: 1 << 20,
        }
    }

    /// Whether decisions currently go to the primary store.
    pub fn breaker_state(&self) -> BreakerState {
        self.inner.breaker.state()
    }

    /// The failure policy that applies to `policy`.
    pub fn on_failure_for(&self, policy: &Policy) -> OnFailure {
        self.inner
            .overrides
            .get(policy.name())
            .copied()
            .unwrap_or(self.inner.on_failure)
    }

    /// Calls the primary store, within the deadline, unless the breaker is
    /// open.
    async fn attempt<'a, T>(
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
            Ok(Err(e)) if e.is_transient() => {
                let kind = match &e {
                    Error::Store { kind, .. } => *kind,
                    _ => StoreErrorKind::Other,
                };
                self.failed(kind, &e.to_string());
                Attempt::Unavailable
            }
            Ok(Err(e)) => Attempt::Answered(Err(e)),
            Err(_) => {
                self.failed(StoreErrorKind::Timeout, "no answer within the deadline");
                Attempt::Unavailable
            }
        }
    }

    fn failed(&self, kind: StoreErrorKind, message: &str) {
        metrics::record_store_error(kind);
        if self.inner.breaker.failure() {
            tracing::warn!(
                kind = kind.as_str(),
                error = message,
                "store unavailable: deciding by the failure policy until a probe succeeds"
            );
            metrics::record_breaker(true);
            tokio::spawn(probe(Arc::downgrade(&self.inner)));
        }
    }

    /// The answer of the failure policy when the store cannot decide.
    fn fallback_check(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: Option<Duration>,
    ) -> Result<Decision> {
        match self.on_failure_for(policy) {
            OnFailure::Deny => Err(Error::StoreUnavailable),
            OnFailure::Allow => {
                // The input is still checked, as any store would.
                crate::validate_key(key)?;
                policy.validate_cost(cost)?;
                let limit = policy.limit();
                Ok(Decision::from_micros(true, limit, limit - cost, 0, 0, 0)
                    .with_source(Source::Fallback))
            }
            OnFailure::Local => {
                let share = self.inner.fallback.share(policy);
                let store = &self.inner.fallback.store;
                let d = match max_wait {
                    Some(w) => store.reserve_sync(&share, key, cost, w),
                    None => store.check_sync(&share, key, cost),
                }?;
                Ok(d.with_source(Source::Fallback))
            }
        }
    }

    fn record(policy: &Policy, result: Result<Decision>) -> Result<Decision> {
        if let Ok(d) = &result {
            metrics::record_decision(policy.name(), d);
        }
        result
    }
}

/// Probes the primary store while the breaker is open, with exponential
/// backoff and jitter, through the real script path: a peek (cost 0, which
/// writes nothing) with the probe policy. A server can answer PING while
/// every script fails; this probe cannot be fooled that way.
async fn probe(inner: Weak<Inner>) {
    let Some(first) = inner.upgrade().map(|i| i.probe_interval) else {
        return;
    };
    let mut interval = first;
    loop {
        let jitter = 0.8 + 0.4 * fastrand::f64();
        tokio::time::sleep(interval.mul_f64(jitter)).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let call = inner.primary.check(&inner.probe, b"probe", 0);
        if let Ok(Ok(_)) = tokio::time::timeout(inner.deadline, call).await {
            // Local state is discarded, not pushed into the store: the
            // store's own state is the truth again.
            inner.fallback.store.clear();
            inner.breaker.close();
            metrics::record_breaker(false);
            tracing::info!("store available again: decisions go to it");
            return;
        }
        interval = (interval * 2).min(inner.probe_max_interval);
    }
}

impl Store for ResilientStore {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let sent = self.inner.clock.now_micros();
            if let Some(cache) = &self.inner.deny_cache
                && let Some(d) = cache.lookup(policy, key, cost, sent)
            {
                return Self::record(policy, Ok(d));
            }
            let result = match self
                .attempt(|| self.inner.primary.check(policy, key, cost))
                .await
            {
                Attempt::Answered(result) => {
                    if let (Ok(d), Some(cache)) = (&result, &self.inner.deny_cache) {
                        cache.remember(policy, key, cost, d, sent);
                    }
                    result
                }
                Attempt::Unavailable => self.fallback_check(policy, key, cost, None),
            };
            Self::record(policy, result)
        })
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let result = match self
                .attempt(|| self.inner.primary.reserve(policy, key, cost, max_wait))
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => self.fallback_check(policy, key, cost, Some(max_wait)),
            };
            Self::record(policy, result)
        })
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
            let result = match self
                .attempt(|| self.inner.primary.check_many(requests, atomic))
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => self.fallback_many(requests, atomic),
            };
            if let Ok(decisions) = &result {
                for (r, d) in requests.iter().zip(decisions) {
                    metrics::record_decision(r.policy.name(), d);
                }
            }
            result
        })
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            let lease = match self
                .attempt(|| self.inner.primary.acquire_lease(policy, key))
                .await
            {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => match self.on_failure_for(policy) {
                    OnFailure::Deny => Err(Error::StoreUnavailable),
                    OnFailure::Allow => {
                        crate::validate_key(key)?;
                        let limit = policy.limit();
                        Ok(Lease {
                            decision: Decision::from_micros(true, limit, limit, 0, 0, 0)
                                .with_source(Source::Fallback),
                            id: Some(LeaseId::random()),
                        })
                    }
                    OnFailure::Local => {
                        let share = self.inner.fallback.share(policy);
                        self.inner
                            .fallback
                            .store
                            .acquire_lease_sync(&share, key)
                            .map(|l| Lease {
                                decision: l.decision.with_source(Source::Fallback),
                                id: l.id,
                            })
                    }
                },
            };
            if let Ok(l) = &lease {
                metrics::record_decision(policy.name(), &l.decision);
            }
            lease
        })
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            match self
                .attempt(|| self.inner.primary.release_lease(policy, key, lease))
                .await
            {
                Attempt::Answered(result) => result,
                // A lease taken from the fallback is released there; one
                // held in the store expires there by itself.
                Attempt::Unavailable => match self.on_failure_for(policy) {
                    OnFailure::Local => {
                        let share = self.inner.fallback.share(policy);
                        self.inner
                            .fallback
                            .store
                            .release_lease_sync(&share, key, lease)
                    }
                    _ => {
                        crate::validate_key(key)?;
                        Ok(false)
                    }
                },
            }
        })
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if let Some(cache) = &self.inner.deny_cache {
                cache.forget(policy, key);
            }
            let share = self.inner.fallback.share(policy);
            self.inner.fallback.store.reset_sync(&share, key)?;
            match self.attempt(|| self.inner.primary.reset(policy, key)).await {
                Attempt::Answered(result) => result,
                Attempt::Unavailable => Err(Error::StoreUnavailable),
            }
        })
    }
}

impl ResilientStore {
    fn fallback_many(&self, requests: &[Request<'_>], atomic: bool) -> Result<Vec<Decision>> {
        let modes: Vec<OnFailure> = requests
            .iter()
            .map(|r| self.on_failure_for(r.policy))
            .collect();
        if modes.contains(&OnFailure::Deny) {
            return Err(Error::StoreUnavailable);
        }
        // The local ones are decided together (atomically if asked); the
        // others are admitted.
        let shares: Vec<Policy> = requests
            .iter()
            .map(|r| self.inner.fallback.share(r.policy))
            .collect();
        let local: Vec<Request<'_>> = requests
            .iter()
            .zip(&shares)
            .zip(&modes)
            .filter(|(_, m)| **m == OnFailure::Local)
            .map(|((r, share), _)| Request {
                policy: share,
                key: r.key,
                cost: r.cost,
            })
            .collect();
        let mut decided = self
            .inner
            .fallback
            .store
            .check_many_sync(&local, atomic)?
            .into_iter();
        requests
            .iter()
            .zip(&modes)
            .map(|(r, mode)| match mode {
                OnFailure::Local => Ok(decided.next().expect("one decision per local request")),
                _ => self.fallback_check(r.policy, r.key, r.cost, None),
            })
            .map(|d| d.map(|d| d.with_source(Source::Fallback)))
            .collect()
    }
}
