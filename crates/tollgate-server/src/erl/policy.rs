//! tollgate's extension in ERL mode: a rule written
//! `rate_limit: {tollgate_policy: NAME}` is decided by the policy `NAME`
//! of the TOML config (`--config`, with `--erl-extensions`), with its
//! algorithm, on its store (tollgate's Redis keys and scripts, or memory),
//! instead of ERL's fixed window. The rest of the call stays ERL's:
//! matching, `replaces`, `shadow_mode`, `quota_mode`, the hits.
//!
//! The policy decides with its own semantics: the descriptor's hits are
//! its cost, and a cost it refuses consumes nothing (as in tollgate's
//! `[[descriptor]]` tables), where an ERL window counts refused hits too.
//! It is checked whatever the call's other descriptors answer, as ERL
//! counts every descriptor. Hits above the policy's limit can never be
//! admitted: they are answered `OVER_LIMIT` without a store call.
//!
//! The key is the one tollgate's own descriptor tables use (the domain and
//! each entry, length-prefixed), with a `share_threshold` pattern in place
//! of the values it matched; a descriptor moved between the two modes
//! keeps its state.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as RlsCode, DescriptorStatus,
};
use tollgate::{Decision, Policy, Request, Store};

use super::settings::CallError;
use crate::error::Code;
use crate::rls_answer::{current_limit, descriptor_status};

/// The store key of a descriptor's `entries` in `domain`; `shared` lists
/// the entries (by index) whose value is a wildcard pattern's.
pub(crate) fn key(domain: &str, entries: &[(&str, &str)], shared: &[(usize, &str)]) -> Vec<u8> {
    if shared.is_empty() {
        return crate::descriptor::key(domain, entries);
    }
    let entries: Vec<(&str, &str)> = entries
        .iter()
        .enumerate()
        .map(|(i, &(k, v))| {
            let value = shared
                .iter()
                .find(|(at, _)| *at == i)
                .map_or(v, |(_, p)| *p);
            (k, value)
        })
        .collect();
    crate::descriptor::key(domain, &entries)
}

/// Each request's decision, in order, all in one store call through the
/// one decision path (`crate::decide`, which counts them in
/// `tollgate_decisions_total`); `None` for a cost above its policy's
/// limit (never admitted, not sent, not a decision of the policy: not
/// counted).
pub(crate) async fn decide(
    store: Option<&dyn Store>,
    requests: &[Request<'_>],
) -> Result<Vec<Option<Decision>>, CallError> {
    if requests.is_empty() {
        return Ok(Vec::new());
    }
    let Some(store) = store else {
        return Err(CallError::Request(
            "tollgate_policy needs extensions, which this service has off".into(),
        ));
    };
    let fits = |r: &Request<'_>| r.policy.validate_cost(r.cost).is_ok();
    let sent: Vec<Request<'_>> = requests.iter().filter(|r| fits(r)).copied().collect();
    let mut decided = if sent.is_empty() {
        Vec::new()
    } else {
        crate::decide::check_many_on(store, &sent)
            .await
            .map_err(|e| match e.code() {
                Code::StoreError | Code::StoreUnavailable => {
                    CallError::Store(e.message().to_string())
                }
                _ => CallError::Request(e.message().to_string()),
            })?
    }
    .into_iter();
    Ok(requests
        .iter()
        .map(|r| fits(r).then(|| decided.next()).flatten())
        .collect())
}

/// The status of a policy's descriptor: from its decision (`None`: a cost
/// it can never admit); a `shadow_mode` rule answers `OK` when denied.
pub(crate) fn status(
    policy: &Policy,
    decision: Option<&Decision>,
    shadow: bool,
) -> DescriptorStatus {
    let mut status = match decision {
        Some(d) => descriptor_status(policy, d),
        None => DescriptorStatus {
            code: RlsCode::OverLimit as i32,
            current_limit: Some(current_limit(policy)),
            ..Default::default()
        },
    };
    if shadow {
        status.code = RlsCode::Ok as i32;
    }
    status
}
