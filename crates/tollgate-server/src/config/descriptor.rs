//! A `[[descriptor]]` table, checked against the policies (see
//! `crate::descriptor` for what the tables mean).

use std::ops::Range;

use serde::Deserialize;
use tollgate::Policy;
use toml::Spanned;

use crate::descriptor::Descriptor;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDescriptor {
    domain: Spanned<String>,
    entries: Spanned<Vec<RawEntry>>,
    policy: Spanned<String>,
    /// The entry whose value names the request's tier.
    tier_from: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    key: String,
    value: Option<String>,
}

/// Checks one table against the policies: an error with the span it names.
pub(super) fn build(
    raw: RawDescriptor,
    policies: &[Policy],
    earlier: &[Descriptor],
) -> Result<Descriptor, (Range<usize>, String)> {
    if raw.domain.get_ref().is_empty() {
        return Err((
            raw.domain.span(),
            "descriptor: `domain` must not be empty".into(),
        ));
    }
    if raw.entries.get_ref().is_empty() {
        return Err((
            raw.entries.span(),
            "descriptor: `entries` must hold at least one entry".into(),
        ));
    }
    if raw.entries.get_ref().iter().any(|e| e.key.is_empty()) {
        return Err((
            raw.entries.span(),
            "descriptor: every entry needs a non-empty `key`".into(),
        ));
    }
    let name = raw.policy.get_ref();
    let Some(policy) = policies.iter().find(|p| p.name() == name) else {
        return Err((
            raw.policy.span(),
            format!("descriptor: no policy named {name:?}"),
        ));
    };
    if let Some(from) = &raw.tier_from {
        tier_from(from, raw.entries.get_ref(), policy)?;
    }
    let descriptor = Descriptor {
        domain: raw.domain.get_ref().clone(),
        entries: raw
            .entries
            .get_ref()
            .iter()
            .map(|e| (e.key.clone(), e.value.clone()))
            .collect(),
        policy: name.clone(),
        tier_from: raw.tier_from.as_ref().map(|t| t.get_ref().clone()),
    };
    if earlier
        .iter()
        .any(|d| d.domain == descriptor.domain && d.entries == descriptor.entries)
    {
        return Err((
            raw.entries.span(),
            "descriptor: the same domain and entries appear twice".into(),
        ));
    }
    Ok(descriptor)
}

/// Checks `tier_from`: it names one of the table's entries, one without a
/// fixed `value` (a fixed one would name the same tier every time), and
/// the policy has tiers to name.
fn tier_from(
    from: &Spanned<String>,
    entries: &[RawEntry],
    policy: &Policy,
) -> Result<(), (Range<usize>, String)> {
    let err = |message: String| Err((from.span(), format!("descriptor: `tier_from`: {message}")));
    let name = from.get_ref();
    match entries.iter().find(|e| e.key == *name) {
        None => err(format!("{name:?} is not the key of one of `entries`")),
        Some(RawEntry { value: Some(_), .. }) => err(format!(
            "the entry {name:?} has a fixed `value`; name the tier in a request instead"
        )),
        Some(_) if policy.tier_names().is_empty() => err(format!(
            "policy `{}` has no tiers (add `[policy.tiers.<name>]`)",
            policy.name()
        )),
        Some(_) => Ok(()),
    }
}
