//! The settings of a resilient store, each checked when it is built.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use super::breaker::Breaker;
use super::deny_cache::DenyCache;
use super::fallback::Fallback;
use super::probe::Probe;
use super::{Inner, OnFailure, ResilientStore};
use crate::store::Store;
use crate::{Clock, Error, MonotonicClock, Result};

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
    probe_successes: u32,
    deny_cache_threshold: Option<Duration>,
    max_keys: usize,
    clock: Arc<dyn Clock>,
}

impl ResilientStoreBuilder {
    pub(super) fn new(primary: Arc<dyn Store>) -> ResilientStoreBuilder {
        ResilientStoreBuilder {
            primary,
            deadline: Duration::from_millis(50),
            on_failure: OnFailure::Local,
            overrides: HashMap::new(),
            expected_instances: 1,
            failure_threshold: 3,
            probe_interval: Duration::from_millis(100),
            probe_max_interval: Duration::from_secs(1),
            probe_successes: 2,
            deny_cache_threshold: Some(Duration::from_millis(10)),
            max_keys: 1 << 20,
            clock: Arc::new(MonotonicClock::new()),
        }
    }

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
    /// A failure that waiting does not mend (a permission refused) opens it
    /// at once.
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

    /// Consecutive successful probes, one probe interval apart, that close
    /// the breaker (default 2): a store that answers one call in two is not
    /// back.
    pub fn probe_successes(mut self, successes: u32) -> Self {
        self.probe_successes = successes;
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

    /// The clock the local fallback and the deny cache read (default a
    /// [`MonotonicClock`]); tests drive a [`ManualClock`](crate::ManualClock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The store. Errors name the setting that is out of range.
    pub fn build(self) -> Result<ResilientStore> {
        let at_least_one = |field, value: u32| {
            if value == 0 {
                Err(Error::argument(field, "must be at least 1, got 0"))
            } else {
                Ok(())
            }
        };
        at_least_one("expected_instances", self.expected_instances)?;
        at_least_one("failure_threshold", self.failure_threshold)?;
        at_least_one("probe_successes", self.probe_successes)?;
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
            .map(|t| DenyCache::new(t, self.max_keys));
        Ok(ResilientStore {
            inner: Arc::new(Inner {
                primary: self.primary,
                deadline: self.deadline,
                on_failure: self.on_failure,
                overrides: self.overrides,
                breaker: Breaker::new(self.failure_threshold),
                fallback: Fallback::new(self.max_keys, self.expected_instances, self.clock.clone()),
                deny_cache,
                clock: self.clock,
                probe: Probe::new(
                    self.probe_interval,
                    self.probe_max_interval,
                    self.probe_successes,
                ),
            }),
        })
    }
}
