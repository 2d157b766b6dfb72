//! A `[[policy]]` table: its algorithm and the fields that algorithm
//! takes, each error with the field's span.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use tollgate::algorithm::Period;
use tollgate::{Policy, parse_duration};
use toml::Spanned;

use super::limits::{RawLimits, span_of_error};
use super::span::FieldError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) name: Spanned<String>,
    pub(super) algorithm: Spanned<String>,
    limit: Option<Spanned<i64>>,
    window: Option<Spanned<String>>,
    rate: Option<Spanned<i64>>,
    per: Option<Spanned<String>>,
    burst: Option<Spanned<i64>>,
    capacity: Option<Spanned<i64>>,
    /// A concurrency policy's lease (a duration); on a window or a
    /// bucket, the old name of `batch` (one release, with a warning).
    lease: Option<Spanned<String>>,
    /// A window's or a bucket's hot-key batches: "auto" or "off".
    batch: Option<Spanned<String>>,
    /// A fixed window's calendar: an IANA zone or `UTC`; `window` is then
    /// a period, `1d`, `1w`, `1mo` or `1y`.
    calendar: Option<Spanned<String>>,
    /// The policy's group (`Policy::with_group`): one subject's state in
    /// one Redis Cluster slot.
    group: Option<Spanned<String>>,
    pub(super) on_failure: Option<Spanned<String>>,
    /// `enforce` (the default) or `shadow`.
    mode: Option<Spanned<String>>,
    /// `[policy.tiers.<name>]`: named parameters a request or an override
    /// may pick (by name, so in name order).
    tiers: Option<BTreeMap<String, Spanned<RawLimits>>>,
}

pub(super) fn build(raw: &RawPolicy) -> Result<Policy, FieldError> {
    let name = raw.name.get_ref();
    let algorithm = raw.algorithm.get_ref().as_str();
    let (allowed, policy): (&[&str], _) = match algorithm {
        "fixed_window" => (
            &["limit", "window", "batch", "calendar"],
            match &raw.calendar {
                None => Policy::fixed_window(name, count(raw, "limit")?, duration(raw, "window")?),
                Some(zone) => Policy::fixed_window_calendar(
                    name,
                    count(raw, "limit")?,
                    period(raw)?,
                    zone.get_ref(),
                ),
            }
            .and_then(|p| p.with_lease(batched(raw)?)),
        ),
        "sliding_window" => (
            &["limit", "window", "batch"],
            Policy::sliding_window(name, count(raw, "limit")?, duration(raw, "window")?)
                .and_then(|p| p.with_lease(batched(raw)?)),
        ),
        "sliding_log" => (
            &["limit", "window"],
            Policy::sliding_log(name, count(raw, "limit")?, duration(raw, "window")?),
        ),
        "token_bucket" => (
            &["rate", "per", "burst", "batch"],
            Policy::token_bucket(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "burst")?,
            )
            .and_then(|p| p.with_lease(batched(raw)?)),
        ),
        "gcra" => (
            &["rate", "per", "burst", "batch"],
            Policy::gcra(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "burst")?,
            )
            .and_then(|p| p.with_lease(batched(raw)?)),
        ),
        "leaky_bucket" => (
            &["rate", "per", "capacity"],
            Policy::leaky_bucket(
                name,
                count(raw, "rate")?,
                duration(raw, "per")?,
                count(raw, "capacity")?,
            ),
        ),
        "concurrency" => (
            &["limit", "lease"],
            Policy::concurrency(name, count(raw, "limit")?, duration(raw, "lease")?),
        ),
        other => {
            return Err((
                Some(raw.algorithm.span()),
                format!(
                    "unknown algorithm `{other}` (expected fixed_window, sliding_window, sliding_log, token_bucket, gcra, leaky_bucket or concurrency)"
                ),
            ));
        }
    };
    for (field, span) in raw.present() {
        // `lease` is still read where `batch` applies (`batched`).
        let old_batch = field == "lease" && allowed.contains(&"batch");
        if !allowed.contains(&field) && !old_batch {
            return Err((
                Some(span),
                format!(
                    "field `{field}` does not apply to {algorithm} (it takes {})",
                    allowed.join(", ")
                ),
            ));
        }
    }
    let policy = policy.and_then(|p| match &raw.group {
        Some(group) => p.with_group(group.get_ref()),
        None => Ok(p),
    });
    let shadow = match &raw.mode {
        None => false,
        Some(mode) => match mode.get_ref().as_str() {
            "enforce" => false,
            "shadow" => true,
            other => {
                return Err((
                    Some(mode.span()),
                    format!("`mode` must be \"enforce\" or \"shadow\", got {other:?}"),
                ));
            }
        },
    };
    let policy = policy.map_err(|e| {
        let span = match &e {
            tollgate::Error::InvalidPolicy { field, .. } => raw.span_of(field),
            _ => None,
        };
        (span, e.to_string())
    })?;
    let mut policy = if shadow { policy.shadow() } else { policy };
    for (tier, raw) in raw.tiers.iter().flatten() {
        let at = format!("tier `{tier}`");
        let limits = raw.get_ref().limits(&at).map_err(|(s, m)| (Some(s), m))?;
        policy = policy.with_tier(tier, &limits).map_err(|e| {
            let span = span_of_error(raw.get_ref(), &e).unwrap_or(raw.span());
            (Some(span), format!("{at}: {e}"))
        })?;
    }
    Ok(policy)
}

impl RawPolicy {
    fn present(&self) -> Vec<(&'static str, Range<usize>)> {
        let mut out = Vec::new();
        for (name, span) in [
            ("limit", self.limit.as_ref().map(|v| v.span())),
            ("rate", self.rate.as_ref().map(|v| v.span())),
            ("burst", self.burst.as_ref().map(|v| v.span())),
            ("capacity", self.capacity.as_ref().map(|v| v.span())),
            ("window", self.window.as_ref().map(|v| v.span())),
            ("per", self.per.as_ref().map(|v| v.span())),
            ("lease", self.lease.as_ref().map(|v| v.span())),
            ("batch", self.batch.as_ref().map(|v| v.span())),
            ("calendar", self.calendar.as_ref().map(|v| v.span())),
        ] {
            if let Some(span) = span {
                out.push((name, span));
            }
        }
        out
    }

    fn span_of(&self, field: &str) -> Option<Range<usize>> {
        match field {
            "name" => Some(self.name.span()),
            "group" => self.group.as_ref().map(|g| g.span()),
            _ => self
                .present()
                .into_iter()
                .find(|(f, _)| *f == field)
                .map(|(_, s)| s),
        }
    }
}

fn count(raw: &RawPolicy, field: &'static str) -> Result<u64, FieldError> {
    let value = match field {
        "limit" => &raw.limit,
        "rate" => &raw.rate,
        "burst" => &raw.burst,
        _ => &raw.capacity,
    };
    let value = value
        .as_ref()
        .ok_or_else(|| (None, format!("missing field `{field}`")))?;
    u64::try_from(*value.get_ref())
        .ok()
        .filter(|&v| v > 0)
        .ok_or_else(|| {
            (
                Some(value.span()),
                format!(
                    "`{field}` must be a positive integer, got {}",
                    value.get_ref()
                ),
            )
        })
}

/// A window's or a bucket's `batch`: "auto" answers it from batches taken
/// from the store (see `tollgate::store::leasing`), "off" or no field does
/// not. `lease` is its old name, read for one release (`deprecation`
/// warns); both at once is an error.
fn batched(raw: &RawPolicy) -> Result<bool, tollgate::Error> {
    let (field, value) = match (&raw.batch, &raw.lease) {
        (Some(_), Some(_)) => {
            return Err(tollgate::Error::InvalidPolicy {
                field: "lease",
                reason: "and `batch` are both set: `lease` is the old name of `batch` here, keep `batch` only".to_string(),
            });
        }
        (Some(batch), None) => ("batch", batch),
        (None, Some(lease)) => ("lease", lease),
        (None, None) => return Ok(false),
    };
    match value.get_ref().as_str() {
        "off" => Ok(false),
        "auto" => Ok(true),
        other => Err(tollgate::Error::InvalidPolicy {
            field,
            reason: format!("is \"auto\" or \"off\", got {other:?}"),
        }),
    }
}

/// The warning a policy's table earns, with its span: `lease` on a policy
/// that takes `batch` (its old name, still read for one release).
pub(super) fn deprecation(raw: &RawPolicy) -> Option<(Range<usize>, String)> {
    let lease = raw.lease.as_ref()?;
    let batches = matches!(
        raw.algorithm.get_ref().as_str(),
        "fixed_window" | "sliding_window" | "token_bucket" | "gcra"
    );
    batches.then(|| {
        let value = lease.get_ref();
        (
            lease.span(),
            format!(
                "`lease = {value:?}` is deprecated: hot-key batches are `batch = {value:?}` (`lease` is read until the next release)"
            ),
        )
    })
}

/// A calendar window's period, from `window`.
fn period(raw: &RawPolicy) -> Result<Period, FieldError> {
    let value = raw
        .window
        .as_ref()
        .ok_or_else(|| (None, "missing field `window`".to_string()))?;
    Period::parse(value.get_ref()).ok_or_else(|| {
        (
            Some(value.span()),
            format!(
                "with `calendar`, `window` must be \"1d\", \"1w\", \"1mo\" or \"1y\", got {:?}",
                value.get_ref()
            ),
        )
    })
}

fn duration(raw: &RawPolicy, field: &'static str) -> Result<std::time::Duration, FieldError> {
    let value = match field {
        "window" => &raw.window,
        "per" => &raw.per,
        _ => &raw.lease,
    };
    let value = value
        .as_ref()
        .ok_or_else(|| (None, format!("missing field `{field}`")))?;
    parse_duration(value.get_ref()).map_err(|e| (Some(value.span()), format!("`{field}`: {e}")))
}
