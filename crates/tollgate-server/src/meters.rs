//! What a decision counts, resolved once rather than per decision: each
//! policy's `tollgate_decisions_total` counters (by outcome and source,
//! and those of decisions under an override, `override="yes"`),
//! its `tollgate_shadow_denials_total` counter and its status-page ring.
//! A policy set (`config::PolicySet`, swapped whole on reload) holds one
//! [`PolicyMeters`] per policy; a counter is registered with the recorder
//! on its first use, so `/metrics` shows the same series as when each
//! decision looked its counter up by name and labels.
//!
//! The names and labels are the library's (`tollgate::metrics`), which the
//! Grafana dashboard reads.

use std::fmt;
use std::sync::{Arc, OnceLock};

use metrics::Counter;
use tollgate::metrics::{DECISIONS, SHADOW_DENIALS};
use tollgate::{Decision, Source};

use crate::status::{Ring, Stats};

/// The sources a decision can come from, in [`source_index`]'s order.
const SOURCES: usize = 4;

fn source_index(source: Source) -> Option<usize> {
    match source {
        Source::Store => Some(0),
        Source::Fallback => Some(1),
        Source::Cache => Some(2),
        Source::Lease => Some(3),
        _ => None,
    }
}

/// One policy's counters and ring.
pub(crate) struct PolicyMeters {
    name: String,
    /// `[source][allowed]`.
    decisions: [[OnceLock<Counter>; 2]; SOURCES],
    /// The same, of decisions made under an override (`override="yes"`).
    overridden: [[OnceLock<Counter>; 2]; SOURCES],
    shadow: OnceLock<Counter>,
    ring: Arc<Ring>,
}

impl fmt::Debug for PolicyMeters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyMeters")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PolicyMeters {
    pub(crate) fn new(name: &str, stats: &Stats) -> PolicyMeters {
        PolicyMeters {
            name: name.to_string(),
            decisions: Default::default(),
            overridden: Default::default(),
            shadow: OnceLock::new(),
            ring: stats.ring(name),
        }
    }

    /// Counts `decision`, taken in second `second` of the status page, and
    /// in the metrics as `decide::count` does ([`count_overridden`] when
    /// an override made it).
    pub(crate) fn record(&self, second: u64, decision: &Decision, overridden: bool) {
        self.ring.add(second, decision.allowed && !decision.shadow);
        let Some(source) = source_index(decision.source) else {
            if overridden {
                count_overridden(&self.name, decision);
            } else {
                tollgate::metrics::record_decision(&self.name, decision);
            }
            return;
        };
        let outcome = usize::from(decision.allowed);
        let counters = if overridden {
            &self.overridden
        } else {
            &self.decisions
        };
        counters[source][outcome]
            .get_or_init(|| decision_counter(&self.name, decision, overridden))
            .increment(1);
        if decision.shadow {
            self.shadow
                .get_or_init(|| metrics::counter!(SHADOW_DENIALS, "policy" => self.name.clone()))
                .increment(1);
        }
    }
}

/// `decide::count` for a decision made under an override: the same
/// series with `override="yes"` (never the key or the selector).
pub(crate) fn count_overridden(policy: &str, d: &Decision) {
    decision_counter(policy, d, true).increment(1);
    if d.shadow {
        tollgate::metrics::record_shadow_denial(policy);
    }
}

/// The `tollgate_decisions_total` series of a decision like `d` on
/// `policy`, with `override="yes"` when one made it (labels in the order
/// `tollgate::metrics::record_decision` and [`count_overridden`] use, so
/// that a policy's meters, which resolve it once, count the same series).
fn decision_counter(policy: &str, d: &Decision, overridden: bool) -> metrics::Counter {
    let outcome = if d.allowed { "allowed" } else { "denied" };
    if overridden {
        metrics::counter!(
            DECISIONS,
            "policy" => policy.to_owned(),
            "outcome" => outcome,
            "source" => d.source.as_str(),
            "override" => "yes"
        )
    } else {
        metrics::counter!(
            DECISIONS,
            "policy" => policy.to_owned(),
            "outcome" => outcome,
            "source" => d.source.as_str()
        )
    }
}
