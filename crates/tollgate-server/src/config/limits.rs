//! The parameters a `[policy.tiers.<name>]` table or an `[[override]]`
//! table gives, by the policy's own names, each with its span: read into
//! `tollgate::overrides::Limits`.

use std::ops::Range;

use serde::Deserialize;
use tollgate::overrides::Limits;
use tollgate::parse_duration;
use toml::Spanned;

use super::span::SpannedError;

/// A tier's table (and an override's parameters).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLimits {
    pub(super) limit: Option<Spanned<i64>>,
    pub(super) window: Option<Spanned<String>>,
    pub(super) rate: Option<Spanned<i64>>,
    pub(super) per: Option<Spanned<String>>,
    pub(super) burst: Option<Spanned<i64>>,
    pub(super) capacity: Option<Spanned<i64>>,
    pub(super) lease: Option<Spanned<String>>,
}

impl RawLimits {
    /// The parameters, each checked alone (a positive count, a duration
    /// that parses); `at` names the table in messages.
    pub(super) fn limits(&self, at: &str) -> Result<Limits, SpannedError> {
        let count = |v: &Option<Spanned<i64>>, field: &str| {
            v.as_ref()
                .map(|v| {
                    u64::try_from(*v.get_ref())
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| {
                            (
                                v.span(),
                                format!(
                                    "{at}: `{field}` must be a positive integer, got {}",
                                    v.get_ref()
                                ),
                            )
                        })
                })
                .transpose()
        };
        let duration = |v: &Option<Spanned<String>>, field: &str| {
            v.as_ref()
                .map(|v| {
                    parse_duration(v.get_ref())
                        .map_err(|e| (v.span(), format!("{at}: `{field}`: {e}")))
                })
                .transpose()
        };
        Ok(Limits {
            limit: count(&self.limit, "limit")?,
            window: duration(&self.window, "window")?,
            rate: count(&self.rate, "rate")?,
            per: duration(&self.per, "per")?,
            burst: count(&self.burst, "burst")?,
            capacity: count(&self.capacity, "capacity")?,
            lease: duration(&self.lease, "lease")?,
        })
    }

    /// The span of `field`, if it is given.
    pub(super) fn span_of(&self, field: &str) -> Option<Range<usize>> {
        match field {
            "limit" => self.limit.as_ref().map(Spanned::span),
            "window" => self.window.as_ref().map(Spanned::span),
            "rate" => self.rate.as_ref().map(Spanned::span),
            "per" => self.per.as_ref().map(Spanned::span),
            "burst" => self.burst.as_ref().map(Spanned::span),
            "capacity" => self.capacity.as_ref().map(Spanned::span),
            "lease" => self.lease.as_ref().map(Spanned::span),
            _ => None,
        }
    }
}

/// The span of the field a library error names, if `raw` gives it.
pub(super) fn span_of_error(raw: &RawLimits, e: &tollgate::Error) -> Option<Range<usize>> {
    match e {
        tollgate::Error::InvalidPolicy { field, .. }
        | tollgate::Error::InvalidArgument { field, .. } => raw.span_of(field),
        _ => None,
    }
}
