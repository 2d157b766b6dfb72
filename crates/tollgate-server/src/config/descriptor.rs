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
    if !policies.iter().any(|p| p.name() == name) {
        return Err((
            raw.policy.span(),
            format!("descriptor: no policy named {name:?}"),
        ));
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
