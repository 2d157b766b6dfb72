//! `[[override]]` tables: overrides the config file sets, each for one
//! policy's key or prefix (`key`), with the same fields as the HTTP API's
//! body (the policy's parameters, or `action`, or `tier`, and `ttl`).
//! They are the base set: an override set at runtime (the API, Redis)
//! wins over any of them (see `crate::overrides`).

use tollgate::Policy;
use tollgate::overrides::{Action, Override, Overrides, Selector};
use tollgate::parse_duration;
use toml::Spanned;

use super::limits::{RawLimits, span_of_error};
use super::span::SpannedError;

// The parameters are spelled out, as in `RawPolicy`, rather than a
// flattened `RawLimits`: serde's `flatten` defeats `deny_unknown_fields`
// and the fields' spans.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOverride {
    policy: Spanned<String>,
    key: Spanned<String>,
    action: Option<Spanned<String>>,
    tier: Option<Spanned<String>>,
    /// Counted from when the file is loaded (at start, on each reload).
    ttl: Option<Spanned<String>>,
    limit: Option<Spanned<i64>>,
    window: Option<Spanned<String>>,
    rate: Option<Spanned<i64>>,
    per: Option<Spanned<String>>,
    burst: Option<Spanned<i64>>,
    capacity: Option<Spanned<i64>>,
    lease: Option<Spanned<String>>,
}

/// One override of the file, checked against its policy.
#[derive(Debug, Clone)]
pub(crate) struct ConfigOverride {
    pub(crate) policy: String,
    pub(crate) selector: Selector,
    pub(crate) over: Override,
}

/// Checks one `[[override]]` table against the file's `policies` and the
/// overrides before it (a policy's selector given twice is an error).
pub(super) fn build(
    table: Spanned<RawOverride>,
    policies: &[Policy],
    before: &[ConfigOverride],
) -> Result<ConfigOverride, SpannedError> {
    let whole = table.span();
    let raw = table.into_inner();
    let name = raw.policy.get_ref();
    let Some(policy) = policies.iter().find(|p| p.name() == name) else {
        return Err((
            raw.policy.span(),
            format!("[[override]]: no policy named {name:?}"),
        ));
    };
    let selector = Selector::parse(raw.key.get_ref().as_bytes())
        .map_err(|e| (raw.key.span(), format!("[[override]] `key`: {e}")))?;
    let at = format!("[[override]] {name} {:?}", selector.to_string());
    if before
        .iter()
        .any(|o| o.policy == *name && o.selector == selector)
    {
        return Err((raw.key.span(), format!("{at}: given twice")));
    }
    let params = RawLimits {
        limit: raw.limit,
        window: raw.window,
        rate: raw.rate,
        per: raw.per,
        burst: raw.burst,
        capacity: raw.capacity,
        lease: raw.lease,
    };
    let limits = params.limits(&at)?;
    let given = limits.fields();
    let action = match (&raw.action, &raw.tier) {
        (Some(a), Some(_)) => {
            return Err((
                a.span(),
                format!("{at}: `action` and `tier` exclude each other"),
            ));
        }
        (Some(a), None) => match a.get_ref().as_str() {
            "block" => Action::Block,
            "allow" => Action::Allow,
            other => {
                return Err((
                    a.span(),
                    format!("{at}: `action` must be \"block\" or \"allow\", got {other:?}"),
                ));
            }
        },
        (None, Some(t)) => Action::Tier(t.get_ref().as_str().into()),
        (None, None) if given.is_empty() => {
            return Err((
                whole,
                format!(
                    "{at}: an override needs the policy's parameters ({}), `action` or `tier`",
                    tollgate::overrides::takes(policy.algorithm()).join(", ")
                ),
            ));
        }
        (None, None) => Action::Limits(limits),
    };
    if let (Some(field), Some(other)) = (given.first(), raw.action.as_ref().or(raw.tier.as_ref())) {
        let what = if raw.action.is_some() {
            "action"
        } else {
            "tier"
        };
        return Err((
            other.span(),
            format!("{at}: `{field}` cannot be given with `{what}`"),
        ));
    }
    let mut over = Override::new(action);
    if let Some(ttl) = &raw.ttl {
        let error = |e: String| (ttl.span(), format!("{at}: `ttl`: {e}"));
        let d = parse_duration(ttl.get_ref()).map_err(error)?;
        over = over.with_ttl(d).map_err(|e| error(e.to_string()))?;
    }
    // Checked as the API checks it: the parameters must fit the policy,
    // the tier must be one of its.
    Overrides::new()
        .set(policy, selector.clone(), over.clone())
        .map_err(|e| {
            let span = match &e {
                tollgate::Error::InvalidArgument { field: "tier", .. } => {
                    raw.tier.as_ref().map(Spanned::span)
                }
                _ => span_of_error(&params, &e),
            };
            (span.unwrap_or(whole), format!("{at}: {e}"))
        })?;
    Ok(ConfigOverride {
        policy: name.clone(),
        selector,
        over,
    })
}
