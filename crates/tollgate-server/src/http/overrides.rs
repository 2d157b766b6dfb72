//! `/v1/overrides/{policy}[/{selector}]`: per-key overrides set, read,
//! listed and removed at runtime (`crate::overrides`). A body names the
//! policy's own parameters (`{"limit": 5000}`) or an action
//! (`{"action": "block"}`) or a tier (`{"tier": "pro"}`), with an
//! optional `"ttl"`; every field is checked before anything changes.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use tollgate::overrides::{Action, Limits, Override, Selector};
use tollgate::{Policy, format_duration, parse_duration};
use utoipa::ToSchema;

use super::body::{ErrorBody, object};
use crate::decide;
use crate::error::{Code, ServiceError};
use crate::state::AppState;

type ApiResult = Result<Response, ServiceError>;

/// An override as stored.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct OverrideBody {
    policy: String,
    /// The key, or a prefix ending in `*`.
    selector: String,
    /// `limits`, `block`, `allow` or `tier`.
    action: &'static str,
    /// The replaced parameters (for `limits`), by the policy's names;
    /// durations as `"60s"`.
    #[serde(skip_serializing_if = "Map::is_empty")]
    #[schema(value_type = Object)]
    parameters: Map<String, Value>,
    /// The tier (for `tier`).
    #[serde(skip_serializing_if = "Option::is_none")]
    tier: Option<String>,
    /// Until it ends, in milliseconds (absent: for ever).
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_ms: Option<u64>,
    /// `api` (set at runtime) or `config` (an `[[override]]` table, which
    /// one set at runtime replaces).
    source: &'static str,
}

/// A policy's overrides.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct OverridesBody {
    policy: String,
    overrides: Vec<OverrideBody>,
}

/// The removal's answer.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RemovedBody {
    policy: String,
    selector: String,
    removed: bool,
}

impl OverrideBody {
    fn new(policy: &str, selector: &Selector, over: &Override, config: bool) -> OverrideBody {
        let mut parameters = Map::new();
        let mut tier = None;
        match over.action() {
            Action::Limits(l) => {
                let d = |d: Option<Duration>| d.map(|d| Value::from(format_duration(d)));
                for (name, value) in [
                    ("limit", l.limit.map(Value::from)),
                    ("window", d(l.window)),
                    ("rate", l.rate.map(Value::from)),
                    ("per", d(l.per)),
                    ("burst", l.burst.map(Value::from)),
                    ("capacity", l.capacity.map(Value::from)),
                    ("lease", d(l.lease)),
                ] {
                    if let Some(v) = value {
                        parameters.insert(name.to_string(), v);
                    }
                }
            }
            Action::Tier(t) => tier = Some(t.to_string()),
            _ => {}
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        OverrideBody {
            policy: policy.to_string(),
            selector: selector.to_string(),
            action: over.action().kind(),
            parameters,
            tier,
            ttl_ms: over.ttl_at(now).map(|d| d.as_millis() as u64),
            source: if config { "config" } else { "api" },
        }
    }
}

fn selector(text: &str) -> Result<Selector, ServiceError> {
    Ok(Selector::parse(text.as_bytes())?)
}

/// Reads an override's body against `policy`: every field known, the
/// parameters the policy's algorithm takes, values in range.
fn parse(obj: &Map<String, Value>, policy: &Policy) -> Result<Override, ServiceError> {
    const FIELDS: [&str; 10] = [
        "limit", "window", "rate", "per", "burst", "capacity", "lease", "action", "tier", "ttl",
    ];
    let unknown: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|k| !FIELDS.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(ServiceError::invalid(format!(
            "unknown field{} {} (an override takes the policy's parameters, `action`, `tier` and `ttl`)",
            if unknown.len() > 1 { "s" } else { "" },
            unknown
                .iter()
                .map(|k| format!("`{}`", truncate(k)))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let count = |field: &str| -> Result<Option<u64>, ServiceError> {
        match obj.get(field) {
            None => Ok(None),
            Some(v) => v.as_u64().filter(|&n| n > 0).map(Some).ok_or_else(|| {
                ServiceError::new(
                    Code::InvalidPolicy,
                    format!(
                        "field `{field}` must be a positive integer, got {}",
                        short(v)
                    ),
                )
            }),
        }
    };
    let duration = |field: &str| -> Result<Option<Duration>, ServiceError> {
        match obj.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => parse_duration(s)
                .map(Some)
                .map_err(|e| ServiceError::invalid(format!("field `{field}`: {e}"))),
            Some(v) => Err(ServiceError::invalid(format!(
                "field `{field}` must be a duration such as \"60s\", got {}",
                short(v)
            ))),
        }
    };
    let limits = Limits {
        limit: count("limit")?,
        window: duration("window")?,
        rate: count("rate")?,
        per: duration("per")?,
        burst: count("burst")?,
        capacity: count("capacity")?,
        lease: duration("lease")?,
    };
    let action = match (obj.get("action"), obj.get("tier")) {
        (Some(_), Some(_)) => {
            return Err(ServiceError::invalid(
                "fields `action` and `tier` cannot be given together",
            ));
        }
        (None, Some(Value::String(t))) => Some(Action::Tier(t.as_str().into())),
        (None, Some(v)) => {
            return Err(ServiceError::invalid(format!(
                "field `tier` must be a string, got {}",
                short(v)
            )));
        }
        (Some(Value::String(a)), None) => match a.as_str() {
            "block" => Some(Action::Block),
            "allow" => Some(Action::Allow),
            other => {
                return Err(ServiceError::invalid(format!(
                    "field `action` must be \"block\" or \"allow\", got {:?}",
                    truncate(other)
                )));
            }
        },
        (Some(v), None) => {
            return Err(ServiceError::invalid(format!(
                "field `action` must be \"block\" or \"allow\", got {}",
                short(v)
            )));
        }
        (None, None) => None,
    };
    let action = match action {
        Some(a) if !limits.fields().is_empty() => {
            return Err(ServiceError::invalid(format!(
                "field `{}` cannot be given with `{}`",
                limits.fields()[0],
                if matches!(a, Action::Tier(_)) {
                    "tier"
                } else {
                    "action"
                }
            )));
        }
        Some(a) => a,
        None if limits.fields().is_empty() => {
            return Err(ServiceError::invalid(format!(
                "an override needs the policy's parameters ({}), `action` or `tier`",
                tollgate::overrides::takes(policy.algorithm()).join(", ")
            )));
        }
        None => Action::Limits(limits),
    };
    let over = Override::new(action);
    match obj.get("ttl") {
        None => Ok(over),
        Some(Value::String(s)) => {
            let ttl = parse_duration(s)
                .map_err(|e| ServiceError::invalid(format!("field `ttl`: {e}")))?;
            Ok(over.with_ttl(ttl)?)
        }
        Some(v) => Err(ServiceError::invalid(format!(
            "field `ttl` must be a duration such as \"24h\", got {}",
            short(v)
        ))),
    }
}

/// A value as an error shows it, at most 64 characters.
fn short(v: &Value) -> String {
    truncate(&v.to_string()).to_string()
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(64) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// Sets one override, on every instance.
#[utoipa::path(put, path = "/v1/overrides/{policy}/{selector}", tag = "admin",
    params(("policy" = String, Path, description = "The policy's name"),
           ("selector" = String, Path, description = "A key, or a prefix ending in `*`, percent-encoded")),
    request_body(content = Object, description = "The policy's parameters (`{\"limit\": 5000}`), `{\"action\": \"block\"|\"allow\"}` or `{\"tier\": \"pro\"}`, with an optional `\"ttl\": \"24h\"`"),
    responses(
        (status = 200, description = "The override as stored", body = OverrideBody),
        (status = 400, description = "A bad selector, field, value or ttl, named", body = ErrorBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 403, description = "The decision token, where an admin token is configured", body = ErrorBody),
        (status = 404, description = "`unknown_policy`", body = ErrorBody),
        (status = 503, description = "Redis keeps the overrides and is not connected", body = ErrorBody),
    ))]
pub(super) async fn put(
    State(state): State<Arc<AppState>>,
    Path((name, text)): Path<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult {
    let set = state.policies();
    let policy = decide::policy(&set, &name)?;
    let selector = selector(&text)?;
    let obj = object(body)?;
    let over = parse(&obj, policy)?;
    state
        .overrides
        .set(policy, selector.clone(), over.clone())
        .await?;
    Ok(Json(OverrideBody::new(&name, &selector, &over, false)).into_response())
}

/// One override.
#[utoipa::path(get, path = "/v1/overrides/{policy}/{selector}", tag = "admin",
    params(("policy" = String, Path, description = "The policy's name"),
           ("selector" = String, Path, description = "A key, or a prefix ending in `*`, percent-encoded")),
    responses(
        (status = 200, description = "The override", body = OverrideBody),
        (status = 400, description = "A bad selector", body = ErrorBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 403, description = "The decision token, where an admin token is configured", body = ErrorBody),
        (status = 404, description = "`unknown_policy`, or `not_found`: no such override", body = ErrorBody),
    ))]
pub(super) async fn get(
    State(state): State<Arc<AppState>>,
    Path((name, text)): Path<(String, String)>,
) -> ApiResult {
    let set = state.policies();
    decide::policy(&set, &name)?;
    let selector = selector(&text)?;
    let (over, config) = state.overrides.get(&name, &selector).ok_or_else(|| {
        ServiceError::new(
            Code::NotFound,
            format!(
                "policy `{name}` has no override for {:?}",
                selector.to_string()
            ),
        )
    })?;
    Ok(Json(OverrideBody::new(&name, &selector, &over, config)).into_response())
}

/// Removes one override, on every instance.
#[utoipa::path(delete, path = "/v1/overrides/{policy}/{selector}", tag = "admin",
    params(("policy" = String, Path, description = "The policy's name"),
           ("selector" = String, Path, description = "A key, or a prefix ending in `*`, percent-encoded")),
    responses(
        (status = 200, description = "Removed", body = RemovedBody),
        (status = 400, description = "A bad selector", body = ErrorBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 403, description = "The decision token, where an admin token is configured", body = ErrorBody),
        (status = 404, description = "`unknown_policy`, or `not_found`: no such override", body = ErrorBody),
        (status = 503, description = "Redis keeps the overrides and is not connected", body = ErrorBody),
    ))]
pub(super) async fn delete(
    State(state): State<Arc<AppState>>,
    Path((name, text)): Path<(String, String)>,
) -> ApiResult {
    let set = state.policies();
    decide::policy(&set, &name)?;
    let selector = selector(&text)?;
    if !state.overrides.remove(&name, &selector).await? {
        let config = matches!(state.overrides.get(&name, &selector), Some((_, true)));
        return Err(ServiceError::new(
            Code::NotFound,
            format!(
                "policy `{name}` has no override for {:?} set at runtime{}",
                selector.to_string(),
                if config {
                    " (the config file's [[override]] sets one: remove it there)"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(Json(RemovedBody {
        policy: name,
        selector: selector.to_string(),
        removed: true,
    })
    .into_response())
}

/// A policy's overrides.
#[utoipa::path(get, path = "/v1/overrides/{policy}", tag = "admin",
    params(("policy" = String, Path, description = "The policy's name")),
    responses(
        (status = 200, description = "Its overrides, by selector", body = OverridesBody),
        (status = 401, description = "A token is configured and the bearer token is missing or wrong", body = ErrorBody),
        (status = 403, description = "The decision token, where an admin token is configured", body = ErrorBody),
        (status = 404, description = "`unknown_policy`", body = ErrorBody),
    ))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    Path(name): Path<String>,
) -> ApiResult {
    let set = state.policies();
    decide::policy(&set, &name)?;
    let overrides = state
        .overrides
        .list(&name)
        .iter()
        .map(|(s, o, config)| OverrideBody::new(&name, s, o, *config))
        .collect();
    Ok(Json(OverridesBody {
        policy: name,
        overrides,
    })
    .into_response())
}
