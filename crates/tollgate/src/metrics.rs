//! What tollgate measures, through the [`metrics`](https://docs.rs/metrics)
//! facade: the library records, the application installs whatever
//! recorder (exporter) it likes, or none, which costs nearly nothing.
//!
//! No label ever holds a user key: label values are policy names, outcomes,
//! sources, error kinds and states, a small fixed set.
//!
//! Decisions are counted by whoever answers the caller, not by the
//! stores: a stack of stores (a leasing store over a resilient one over
//! Redis) answers each check in one of them, and counting in each would
//! miss or repeat some. Call [`record_decision`] once per decision you
//! return (`tollgate serve` does, in its one decision path); the
//! decision's [`Source`](crate::Source) says which layer answered.
//!
//! | name | kind | labels |
//! |---|---|---|
//! | `tollgate_decisions_total` | counter | `policy`, `outcome` (`allowed`, `denied`), `source` (`store`, `fallback`, `cache`, `lease`) |
//! | `tollgate_store_errors_total` | counter | `kind` (`io`, `timeout`, `busy`, `oom`, `cluster`, …) |
//! | `tollgate_breaker_state` | gauge | 0 closed, 1 open |
//! | `tollgate_breaker_transitions_total` | counter | `to` (`closed`, `open`) |
//! | `tollgate_store_latency_seconds` | histogram | |
//! | `tollgate_script_loads_total` | counter | |
//! | `tollgate_pipelines_total` | counter | |
//! | `tollgate_pipelined_calls_total` | counter | |
//! | `tollgate_master_switches_total` | counter | |
//! | `tollgate_batch_refunds_total` | counter | |
//! | `tollgate_usage_units_total` | counter | `policy`, `operation` (`charged`, `refunded`, `granted`) |
//! | `tollgate_settle_failures_total` | counter | `policy` |
//! | `tollgate_region_lag_seconds` | gauge | `region` (a remote region) |
//! | `tollgate_region_components_sent_total` | counter | `region` |
//! | `tollgate_region_components_received_total` | counter | `region` |
//! | `tollgate_region_partitioned` | gauge | `region`: 0 linked, 1 partitioned |
//! | `tollgate_region_pending_keys` | gauge | |

use std::time::Duration;

use crate::{Decision, StoreErrorKind};

/// Counter: units of usage recorded, by policy and operation: `charged`
/// (a charge, or a settle's actual cost above its estimate), `refunded`
/// (a refund, or a settle's below), `granted` (by `check_at_most`).
pub const USAGE_UNITS: &str = "tollgate_usage_units_total";

/// Counter: settles that could not be made (label `policy`): the
/// tollgate-tower layer's settle after a response failed in the store, or
/// found no runtime to run on, so the key keeps what its check took.
pub const SETTLE_FAILURES: &str = "tollgate_settle_failures_total";

/// Decisions, by policy, outcome and source.
pub const DECISIONS: &str = "tollgate_decisions_total";
/// Counter: denials a shadow-mode policy answered as admissions
/// (label `policy`).
pub const SHADOW_DENIALS: &str = "tollgate_shadow_denials_total";
/// Failed calls to the primary store, by kind.
pub const STORE_ERRORS: &str = "tollgate_store_errors_total";
/// The circuit breaker: 0 closed (the store is used), 1 open (fallback).
pub const BREAKER_STATE: &str = "tollgate_breaker_state";
/// Breaker switches, by the state switched to.
pub const BREAKER_TRANSITIONS: &str = "tollgate_breaker_transitions_total";
/// How long calls to the primary store took, failed ones included.
pub const STORE_LATENCY: &str = "tollgate_store_latency_seconds";
/// Scripts loaded into Redis (at connect, and after NOSCRIPT).
pub const SCRIPT_LOADS: &str = "tollgate_script_loads_total";
/// Pipelines the Redis store sent on a standalone server when many callers
/// were busy (see `RedisStoreBuilder::pipelining`, with the `redis`
/// feature).
pub const PIPELINES: &str = "tollgate_pipelines_total";
/// The script calls those pipelines carried: divided by
/// [`PIPELINES`], the mean size of a pipeline.
pub const PIPELINED_CALLS: &str = "tollgate_pipelined_calls_total";

/// Times the Redis store followed the master Redis Sentinel names to a
/// new node (with the `redis` feature).
pub const MASTER_SWITCHES: &str = "tollgate_master_switches_total";

/// Units given back by atomic batches across Redis Cluster slots that a
/// later slot denied (with the `redis` feature).
pub const BATCH_REFUNDS: &str = "tollgate_batch_refunds_total";

/// Gauge: how old the newest components of a remote region (label
/// `region`) are in this region's Redis, by its heartbeat: the staleness
/// of our view of it (with the `redis` feature, multi-region mode).
pub const REGION_LAG: &str = "tollgate_region_lag_seconds";
/// Counter: components this region's replicator merged into a remote
/// region (label `region`) that grew there.
pub const REGION_SENT: &str = "tollgate_region_components_sent_total";
/// Counter: components a remote region (label `region`) merged here that
/// grew here, as its heartbeats count them.
pub const REGION_RECEIVED: &str = "tollgate_region_components_received_total";
/// Gauge: 1 while this region decides as partitioned from a remote region
/// (label `region`), capped at its share; 0 otherwise.
pub const REGION_PARTITIONED: &str = "tollgate_region_partitioned";
/// Gauge: keys waiting for this instance's replicator.
pub const REGION_PENDING: &str = "tollgate_region_pending_keys";

/// Counts one decision of `policy`, with its outcome and source, and a
/// shadow denial when it is one. No store calls it: the caller that
/// answers the decision does, once (see the module).
pub fn record_decision(policy: &str, decision: &Decision) {
    let outcome = if decision.allowed {
        "allowed"
    } else {
        "denied"
    };
    metrics::counter!(
        DECISIONS,
        "policy" => policy.to_owned(),
        "outcome" => outcome,
        "source" => decision.source.as_str()
    )
    .increment(1);
    if decision.shadow {
        record_shadow_denial(policy);
    }
}

/// Counts `units` of usage on `policy`: `operation` is `charged`,
/// `refunded` or `granted` (see [`USAGE_UNITS`]).
pub fn record_usage(policy: &str, operation: &'static str, units: u64) {
    if units > 0 {
        metrics::counter!(USAGE_UNITS, "policy" => policy.to_owned(), "operation" => operation)
            .increment(units);
    }
}

/// Counts one denial that a shadow-mode policy answered as an admission
/// ([`record_decision`] does it for every decision marked `shadow`).
pub fn record_shadow_denial(policy: &str) {
    metrics::counter!(SHADOW_DENIALS, "policy" => policy.to_owned()).increment(1);
}

/// Counts one settle of `policy` that could not be made (see
/// [`SETTLE_FAILURES`]).
pub fn record_settle_failure(policy: &str) {
    metrics::counter!(SETTLE_FAILURES, "policy" => policy.to_owned()).increment(1);
}

pub(crate) fn record_store_error(kind: StoreErrorKind) {
    metrics::counter!(STORE_ERRORS, "kind" => kind.as_str()).increment(1);
}

pub(crate) fn record_breaker(open: bool) {
    metrics::gauge!(BREAKER_STATE).set(if open { 1.0 } else { 0.0 });
    let to = if open { "open" } else { "closed" };
    metrics::counter!(BREAKER_TRANSITIONS, "to" => to).increment(1);
}

pub(crate) fn record_latency(elapsed: Duration) {
    metrics::histogram!(STORE_LATENCY).record(elapsed.as_secs_f64());
}

#[cfg(feature = "redis")]
pub(crate) fn record_batch_refund() {
    metrics::counter!(BATCH_REFUNDS).increment(1);
}

#[cfg(feature = "redis")]
pub(crate) fn record_master_switch() {
    metrics::counter!(MASTER_SWITCHES).increment(1);
}

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn record_script_load() {
    metrics::counter!(SCRIPT_LOADS).increment(1);
}

#[cfg_attr(not(feature = "redis"), allow(dead_code))]
pub(crate) fn record_pipeline(calls: usize) {
    metrics::counter!(PIPELINES).increment(1);
    metrics::counter!(PIPELINED_CALLS).increment(calls as u64);
}
