//! ERL's stats as Prometheus counters, per domain and rule path (label
//! `key`: the config's `domain.key_value.key2`, so the label set is
//! bounded by the config): total hits, over limit, near limit (past
//! `NEAR_LIMIT_RATIO` of the limit), within limit and shadow mode, counted
//! in hits as ERL counts them (`src/limiter/base_limiter.go`). Only a rule
//! whose config asks for request values (`detailed_metric`,
//! `value_to_metric`) adds the label `descriptor`: ERL's stats key with
//! them, `domain.key_alice.key2_value2` (see `metric`).

/// Which counters a descriptor's stats go to.
pub(crate) struct Labels<'a> {
    pub(crate) domain: &'a str,
    /// The rule's path.
    pub(crate) path: &'a str,
    /// ERL's stats key with request values, when the config asks for it.
    pub(crate) descriptor: Option<&'a str>,
}

impl Labels<'_> {
    /// The labels as the `metrics` macros take them.
    fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut labels = vec![
            ("domain", self.domain.to_string()),
            ("key", self.path.to_string()),
        ];
        if let Some(descriptor) = self.descriptor {
            labels.push(("descriptor", descriptor.to_string()));
        }
        labels
    }
}

/// Records one counted descriptor whose window now holds `after`.
pub(crate) fn record(
    labels: Labels<'_>,
    limit: u32,
    after: u64,
    hits: u64,
    shadow: bool,
    near_ratio: f32,
) {
    let labels = labels.pairs();
    let limit = u64::from(limit);
    let before = after.saturating_sub(hits);
    let near = (f64::from(limit as f32 * near_ratio)).floor() as u64;
    metrics::counter!("tollgate_erl_total_hits", &labels).increment(hits);
    if after > limit {
        let over = if before >= limit { hits } else { after - limit };
        metrics::counter!("tollgate_erl_over_limit", &labels).increment(over);
        if before < limit {
            metrics::counter!("tollgate_erl_near_limit", &labels)
                .increment(limit - near.max(before));
        }
        if shadow {
            metrics::counter!("tollgate_erl_shadow_mode", &labels).increment(over);
        }
    } else {
        metrics::counter!("tollgate_erl_within_limit", &labels).increment(hits);
        if after > near {
            let n = if before >= near { hits } else { after - near };
            metrics::counter!("tollgate_erl_near_limit", &labels).increment(n);
        }
    }
}

/// A refused call answered `OK` by `SHADOW_MODE`.
pub(crate) fn global_shadow() {
    metrics::counter!("tollgate_erl_global_shadow_mode").increment(1);
}

/// A counter the local cache holds as over (`LOCAL_CACHE_SIZE_IN_BYTES`):
/// all its hits are over, as ERL counts them, and also counted in
/// `tollgate_erl_over_limit_with_local_cache`.
pub(crate) fn over_in_local_cache(labels: Labels<'_>, hits: u64, shadow: bool) {
    let labels = labels.pairs();
    metrics::counter!("tollgate_erl_total_hits", &labels).increment(hits);
    metrics::counter!("tollgate_erl_over_limit", &labels).increment(hits);
    metrics::counter!("tollgate_erl_over_limit_with_local_cache", &labels).increment(hits);
    if shadow {
        metrics::counter!("tollgate_erl_shadow_mode", &labels).increment(hits);
    }
}

/// A descriptor decided by a tollgate policy: its hits are within or over
/// as the policy decided (near limit is the windows' notion, not counted).
pub(crate) fn decided(labels: Labels<'_>, hits: u64, over: bool, shadow: bool) {
    let labels = labels.pairs();
    metrics::counter!("tollgate_erl_total_hits", &labels).increment(hits);
    if over {
        metrics::counter!("tollgate_erl_over_limit", &labels).increment(hits);
        if shadow {
            metrics::counter!("tollgate_erl_shadow_mode", &labels).increment(hits);
        }
    } else {
        metrics::counter!("tollgate_erl_within_limit", &labels).increment(hits);
    }
}
