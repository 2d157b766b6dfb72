//! The bodies of the HTTP API as types: requests parsed from JSON by hand
//! (so every problem names its field), answers serialized. Their
//! `ToSchema` derives are what `GET /openapi.json` describes.
//!
//! Kept whole on purpose: the API's bodies side by side, so the document and the parsers are read against each other.

use serde::Serialize;
use serde_json::{Map, Value};
use tollgate::{Decision, Policy};
use tollgate_tower::headers::ceil_millis;
use utoipa::{IntoResponses, ToSchema};

pub(super) use super::json::object;
use super::json::{integer, only, string};
use crate::error::ServiceError;

/// One check: may `cost` units pass for `key` under `policy`?
#[derive(Debug, Clone, Copy, ToSchema)]
pub(super) struct CheckRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key (a user, an address, …); not empty.
    pub(super) key: &'a str,
    /// Units to take; 0 peeks without taking.
    #[schema(required = false, default = 1)]
    pub(super) cost: u64,
    /// Instead of `cost` (a single check only: refused in a batch): grant
    /// as much of this as is left and consume it; the answer says
    /// `granted`.
    #[schema(required = false)]
    pub(super) at_most: Option<u64>,
    /// The policy's tier to decide in (`[policy.tiers.<name>]`); absent:
    /// the policy's own parameters. A key's override wins over it.
    #[schema(required = false)]
    pub(super) tier: Option<&'a str>,
}

impl<'a> CheckRequest<'a> {
    /// A single check.
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "cost", "at_most", "tier"])?;
        Self::fields(obj)
    }

    /// A check in a batch: a batch's checks are decided together (all or
    /// nothing when atomic), each for a fixed cost, so `at_most`, which
    /// grants what is left, has no meaning there and is refused.
    pub(super) fn parse_in_batch(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        if obj.contains_key("at_most") {
            return Err(ServiceError::invalid(
                "`at_most` is for a single check, not in a batch: give `cost`",
            ));
        }
        only(obj, &["policy", "key", "cost", "tier"])?;
        Self::fields(obj)
    }

    fn fields(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        let at_most = if obj.contains_key("at_most") {
            if obj.contains_key("cost") {
                return Err(ServiceError::invalid("give `cost` or `at_most`, not both"));
            }
            Some(integer(obj, "at_most", None)?)
        } else {
            None
        };
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            cost: integer(obj, "cost", Some(1))?,
            at_most,
            tier: tier(obj)?,
        })
    }
}

/// A request's optional `tier` (`[policy.tiers.<name>]`): absent, the
/// policy's own parameters; an unknown one is refused when decided.
fn tier(obj: &Map<String, Value>) -> Result<Option<&str>, ServiceError> {
    match obj.get("tier") {
        None => Ok(None),
        Some(_) => Ok(Some(string(obj, "tier")?)),
    }
}

/// Usage recorded after the fact (`/v1/charge`), or given back
/// (`/v1/refund`).
#[derive(Debug, ToSchema)]
pub(super) struct UsageRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key.
    pub(super) key: &'a str,
    /// Units charged or refunded.
    pub(super) cost: u64,
    /// The policy's tier (as in a check).
    #[schema(required = false)]
    pub(super) tier: Option<&'a str>,
}

impl<'a> UsageRequest<'a> {
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "cost", "tier"])?;
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            cost: integer(obj, "cost", None)?,
            tier: tier(obj)?,
        })
    }
}

/// After a check of `estimate`: charges `actual - estimate`, or refunds the
/// difference.
#[derive(Debug, ToSchema)]
pub(super) struct SettleRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key.
    pub(super) key: &'a str,
    /// The cost the check took.
    pub(super) estimate: u64,
    /// The cost it turned out to be.
    pub(super) actual: u64,
    /// The policy's tier (as in a check).
    #[schema(required = false)]
    pub(super) tier: Option<&'a str>,
}

impl<'a> SettleRequest<'a> {
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "estimate", "actual", "tier"])?;
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            estimate: integer(obj, "estimate", None)?,
            actual: integer(obj, "actual", None)?,
            tier: tier(obj)?,
        })
    }
}

/// Several checks in one call; with `atomic`, all pass or none is taken.
#[derive(Debug, ToSchema)]
pub(super) struct BatchRequest<'a> {
    /// At least one check.
    #[schema(min_items = 1)]
    pub(super) checks: Vec<CheckRequest<'a>>,
    /// All or nothing.
    #[schema(required = false, default = false)]
    pub(super) atomic: bool,
}

/// The body of `POST /v1/check`: one check, or a batch.
#[derive(Debug, ToSchema)]
#[serde(untagged)]
#[expect(
    dead_code,
    reason = "describes the body for the OpenAPI document; the handler reads its two forms as CheckRequest and BatchRequest"
)]
pub(super) enum CheckBody<'a> {
    /// One check.
    One(CheckRequest<'a>),
    /// A batch.
    Many(BatchRequest<'a>),
}

/// A reservation: `cost` units now or after a wait of at most
/// `max_wait_ms` (token bucket and GCRA policies).
#[derive(Debug, ToSchema)]
pub(super) struct ReserveRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key.
    pub(super) key: &'a str,
    /// Units to reserve.
    #[schema(required = false, default = 1)]
    pub(super) cost: u64,
    /// The longest wait accepted, in milliseconds.
    #[schema(required = false, default = 0)]
    pub(super) max_wait_ms: u64,
    /// The policy's tier (as in a check).
    #[schema(required = false)]
    pub(super) tier: Option<&'a str>,
}

impl<'a> ReserveRequest<'a> {
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "cost", "max_wait_ms", "tier"])?;
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            cost: integer(obj, "cost", Some(1))?,
            max_wait_ms: integer(obj, "max_wait_ms", Some(0))?,
            tier: tier(obj)?,
        })
    }
}

/// A lease on a concurrency policy's key.
#[derive(Debug, ToSchema)]
pub(super) struct AcquireRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key.
    pub(super) key: &'a str,
    /// The policy's tier (as in a check).
    #[schema(required = false)]
    pub(super) tier: Option<&'a str>,
}

impl<'a> AcquireRequest<'a> {
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "tier"])?;
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            tier: tier(obj)?,
        })
    }
}

/// A lease given back.
#[derive(Debug, ToSchema)]
pub(super) struct ReleaseRequest<'a> {
    /// The policy's name.
    pub(super) policy: &'a str,
    /// The limited key.
    pub(super) key: &'a str,
    /// The lease `POST /v1/acquire` answered.
    pub(super) lease: &'a str,
}

impl<'a> ReleaseRequest<'a> {
    pub(super) fn parse(obj: &'a Map<String, Value>) -> Result<Self, ServiceError> {
        only(obj, &["policy", "key", "lease"])?;
        Ok(Self {
            policy: string(obj, "policy")?,
            key: string(obj, "key")?,
            lease: string(obj, "lease")?,
        })
    }
}

/// One decision (200 when admitted, 429 when denied).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct DecisionBody {
    /// Admitted.
    allowed: bool,
    /// The policy's name.
    policy: String,
    /// The policy's limit.
    limit: u64,
    /// Units left.
    remaining: u64,
    /// Until the key is whole again, in milliseconds.
    reset_after_ms: u64,
    /// Until a retry may pass (0 when admitted), in milliseconds.
    retry_after_ms: u64,
    /// The wait a reservation asks for, in milliseconds.
    delay_ms: u64,
    /// Who decided: `store`, `fallback`, `cache` or `lease`.
    #[schema(example = "store")]
    source: &'static str,
    /// Present (true) only on a shadow policy's would-be denial, which is
    /// admitted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    shadow: bool,
    /// What a check with `at_most` granted (only there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) granted: Option<u64>,
    /// The override that decided (its selector), when one did.
    #[serde(rename = "override", skip_serializing_if = "Option::is_none")]
    pub(super) by_override: Option<String>,
}

impl DecisionBody {
    pub(super) fn new(policy: &Policy, d: &Decision) -> Self {
        Self {
            allowed: d.allowed,
            policy: policy.name().to_string(),
            limit: d.limit,
            remaining: d.remaining,
            reset_after_ms: ceil_millis(d.reset_after),
            retry_after_ms: ceil_millis(d.retry_after),
            delay_ms: ceil_millis(d.delay),
            source: d.source.as_str(),
            shadow: d.shadow,
            granted: None,
            by_override: None,
        }
    }
}

/// A batch's decisions, in the order of its checks.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct BatchBody {
    /// Every check admitted.
    pub(super) allowed: bool,
    /// One per check.
    pub(super) decisions: Vec<DecisionBody>,
}

/// The answer to `POST /v1/check`: a decision, or a batch's.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub(super) enum CheckAnswer {
    /// One check's.
    One(DecisionBody),
    /// A batch's.
    Many(BatchBody),
}

/// A reservation's decision.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReservationBody {
    #[serde(flatten)]
    pub(super) decision: DecisionBody,
    /// Wait this long before going ahead, in milliseconds.
    pub(super) wait_ms: u64,
}

/// An acquisition's decision, with the lease when admitted.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct AcquireBody {
    #[serde(flatten)]
    pub(super) decision: DecisionBody,
    /// The lease to give back with `POST /v1/release` (when admitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lease: Option<String>,
    /// When the lease lapses if not given back, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) expires_in_ms: Option<u64>,
}

/// Whether the lease was held (false when given back before: release is
/// idempotent).
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReleaseBody {
    pub(super) released: bool,
}

/// A key forgotten.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ResetBody {
    pub(super) policy: String,
    pub(super) reset: bool,
}

/// The policies in force.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PoliciesBody {
    pub(super) policies: Vec<PolicyBody>,
}

/// One policy.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct PolicyBody {
    pub(super) name: String,
    /// `fixed_window`, `sliding_window`, `sliding_log`, `token_bucket`,
    /// `gcra`, `leaky_bucket` or `concurrency`.
    pub(super) algorithm: &'static str,
    pub(super) limit: u64,
    /// The window, period or lease time, in milliseconds.
    pub(super) window_ms: u64,
}

/// Whether decisions are served.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ReadyBody {
    pub(super) ready: bool,
    /// The store, described.
    pub(super) store: String,
    /// `closed` or `open`, for a store behind a circuit breaker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) breaker: Option<&'static str>,
    /// With the breaker open: `local`, `allow` or `deny`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) on_failure: Option<&'static str>,
}

/// An error.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorBody {
    pub(super) error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Serialize, ToSchema)]
pub(crate) struct ErrorDetail {
    /// One of `invalid_request`, `invalid_policy`, `invalid_argument`,
    /// `invalid_key`, `cost_exceeds_limit`, `unsupported` (400),
    /// `unauthorized` (401), `forbidden` (403), `unknown_policy`, `not_found` (404),
    /// `method_not_allowed` (405), `request_timeout` (408),
    /// `payload_too_large` (413), `uri_too_long` (414),
    /// `headers_too_large` (431), `internal` (500), `store_error` (502),
    /// `store_unavailable` (503).
    #[schema(example = "invalid_request")]
    pub(super) code: &'static str,
    /// For people: names the field or value.
    pub(super) message: String,
}

/// The errors every decision and usage endpoint may answer besides its
/// 400s (the statuses of `error::status`), for their `#[utoipa::path]`.
#[derive(IntoResponses)]
#[expect(
    dead_code,
    reason = "describes responses for the OpenAPI document; the handlers answer ServiceError"
)]
pub(super) enum DecisionErrors {
    /// A token is configured and the bearer token is missing or wrong.
    #[response(status = 401)]
    Unauthorized(ErrorBody),
    /// `unknown_policy`.
    #[response(status = 404)]
    UnknownPolicy(ErrorBody),
    /// The body did not arrive within `body_timeout`.
    #[response(status = 408)]
    RequestTimeout(ErrorBody),
    /// The body exceeds 64 KiB.
    #[response(status = 413)]
    PayloadTooLarge(ErrorBody),
    /// The store failed under `on_failure = "deny"`: nothing decided or
    /// recorded.
    #[response(status = 503)]
    StoreUnavailable(ErrorBody),
}
