//! Envoy's rate limit service (`envoy.service.ratelimit.v3.RateLimitService`),
//! so that Envoy, Istio or Envoy Gateway can ask tollgate.
//!
//! Each descriptor of a request is looked up in the `[[descriptor]]`
//! tables; a match is checked against its policy with the descriptor's
//! values as the key (all of a request's descriptors in one batch, not
//! atomic, through `decide.rs`), and the cost is the descriptor's `hits_addend`, else
//! the request's, else 1 (an unset proto3 field reads 0). A descriptor
//! that matches no table is `OK` with no limit, as in Envoy's own
//! ratelimit service. A table with `tier_from` decides in the tier its
//! named entry's value gives (an unknown one is `INVALID_ARGUMENT` naming
//! `tier`). A descriptor that carries a limit override (Envoy's
//! `limit` field, set from route metadata) is limited, as Envoy's own
//! service does, by a fixed window of `requests_per_unit` per `unit`
//! (a month is 30 days, a year 365) under the descriptor's key, in any
//! domain that has a table (see [`override_policy`]). The overall code is
//! `OVER_LIMIT` when any descriptor is. Bad input, an undecodable message
//! included, is `INVALID_ARGUMENT`; a missing or wrong `--token`,
//! `UNAUTHENTICATED`; a store error, or a store down under
//! `on_failure = "deny"` is `UNAVAILABLE`.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use smallvec::SmallVec;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use http::HeaderMap;
use tollgate::overrides::ResolvedPolicy;
use tollgate::{Decision, Policy};
use tollgate_tower::headers::RateLimitHeaders;
use tonic::Status;
use tonic_health::pb::health_server::{Health, HealthServer};

use crate::config::PolicySet;
use crate::error::{self, ServiceError};
use crate::grpc_token::Bearer;
use crate::grpc_unary::{self, Answer, Message, Rls};
use crate::rls_answer::{DAY, descriptor_status, envoy_headers};
use crate::rls_encode;
use crate::rls_view::{Described, View};
use crate::state::AppState;
use crate::{decide, descriptor};

/// The gRPC service over the shared state.
#[derive(Debug, Clone)]
pub(crate) struct Native {
    state: Arc<AppState>,
    /// `--token`, checked first (see `grpc_token`).
    bearer: Bearer,
}

/// The service as it is served (see `grpc_unary`).
pub(crate) type Served = Rls<Native>;

pub(crate) fn service(state: Arc<AppState>) -> Served {
    let bearer = Bearer::new(state.tokens.clone());
    Rls(Native { state, bearer })
}

/// `grpc.health.v1.Health`, open whatever the token: `SERVING` for the
/// server (`""`) and for the rate limit service by its full name.
pub(crate) async fn health() -> HealthServer<impl Health> {
    let (reporter, service) = tonic_health::server::health_reporter();
    for name in ["", grpc_unary::SERVICE] {
        reporter
            .set_service_status(name, tonic_health::ServingStatus::Serving)
            .await;
    }
    service
}

/// The policy and the key of descriptor `i`'s limit override: a fixed
/// window of `requests_per_unit` per `unit`, as Envoy's own service counts
/// it, on the descriptor's `key` (`descriptor::key`).
///
/// A client chooses the override, so nothing is kept per value: the
/// policy is made for the call and dropped, named after the unit alone
/// (`override-per-minute`: six names, so six metric series and status
/// page rows at most), and `requests_per_unit` goes into the key instead
/// (`limit=<n>;` before the descriptor's key, which always starts with a
/// digit), so that two overrides of one descriptor still count apart.
/// The counts live in the store like any key: bounded by `max_keys` in
/// memory, by their window's expiry on Redis; none is lost but by the
/// store's own eviction.
fn override_policy(
    i: usize,
    limit: &RateLimitOverride,
    key: &[u8],
) -> Result<(Policy, Vec<u8>), Status> {
    let (unit, seconds) = match RateLimitUnit::try_from(limit.unit) {
        Ok(RateLimitUnit::Second) => ("second", 1),
        Ok(RateLimitUnit::Minute) => ("minute", 60),
        Ok(RateLimitUnit::Hour) => ("hour", 3600),
        Ok(RateLimitUnit::Day) => ("day", DAY),
        Ok(RateLimitUnit::Month) => ("month", 30 * DAY),
        Ok(RateLimitUnit::Year) => ("year", 365 * DAY),
        _ => {
            return Err(Status::invalid_argument(format!(
                "descriptor {i}: limit.unit {} is not second, minute, hour, day, month or year",
                limit.unit
            )));
        }
    };
    if limit.requests_per_unit == 0 {
        return Err(Status::invalid_argument(format!(
            "descriptor {i}: limit.requests_per_unit must be at least 1"
        )));
    }
    let window = Duration::from_secs(seconds);
    let policy = Policy::fixed_window(
        &format!("override-per-{unit}"),
        u64::from(limit.requests_per_unit),
        window,
    )
    .map_err(|e| Status::invalid_argument(format!("descriptor {i}: limit: {e}")))?;
    let mut by_value = format!("limit={};", limit.requests_per_unit).into_bytes();
    by_value.extend_from_slice(key);
    Ok((policy, by_value))
}

/// The gRPC status of a failed request (see `crate::error` for the codes).
fn status(e: ServiceError) -> Status {
    let message = e.message().to_string();
    match e.code() {
        error::Code::StoreError | error::Code::StoreUnavailable => Status::unavailable(message),
        error::Code::Internal => Status::internal(message),
        error::Code::Unauthorized => Status::unauthenticated(message),
        error::Code::Forbidden => Status::permission_denied(message),
        _ => Status::invalid_argument(message),
    }
}

impl Answer for Native {
    fn admit(&self, headers: &HeaderMap) -> Result<(), Status> {
        self.bearer.check(headers)
    }

    async fn answer(&self, request: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        let set = self.state.policies();
        measured(self.decide(&set, &View::of(&request), response)).await
    }

    /// The common message answered from its bytes into its frame
    /// (`rls_view`, `rls_encode`), through the same decision as
    /// [`answer`](Answer::answer); any other by prost's message.
    async fn answer_framed(&self, message: Message) -> Result<Bytes, Status> {
        let Message::Raw(bytes) = &message else {
            return grpc_unary::framed_answer(self, message).await;
        };
        let Some(view) = View::parse(bytes) else {
            return grpc_unary::framed_answer(self, message).await;
        };
        let set = self.state.policies();
        measured(self.decide(&set, &view, rls_encode::framed)).await
    }
}

/// `answered`, counted in the gRPC request metrics.
async fn measured<T>(answered: impl Future<Output = Result<T, Status>>) -> Result<T, Status> {
    let started = std::time::Instant::now();
    let result = answered.await;
    // The handles of the common case are resolved once (on first use,
    // so `/metrics` shows the same series as when each request looked
    // them up); an error's code by name.
    static OK: OnceLock<metrics::Counter> = OnceLock::new();
    static DURATION: OnceLock<metrics::Histogram> = OnceLock::new();
    let by_code;
    let requests = match &result {
        Ok(_) => OK.get_or_init(|| {
            metrics::counter!("tollgate_grpc_requests_total", "method" => "ShouldRateLimit", "code" => "ok")
        }),
        Err(status) => {
            by_code = metrics::counter!(
                "tollgate_grpc_requests_total",
                "method" => "ShouldRateLimit",
                "code" => format!("{:?}", status.code()).to_lowercase()
            );
            &by_code
        }
    };
    requests.increment(1);
    DURATION
        .get_or_init(|| {
            metrics::histogram!("tollgate_grpc_request_duration_seconds", "method" => "ShouldRateLimit")
        })
        .record(started.elapsed().as_secs_f64());
    result
}

/// Each descriptor's policy and decision, in order (`None`: no table
/// matched it).
pub(crate) type Slots<'a> = [Option<(&'a Policy, &'a Decision)>];

/// The response message of `slots`: each status, the overall code, the
/// IETF fields (`rls_encode` writes the same bytes without it).
pub(crate) fn response(slots: &Slots<'_>) -> RateLimitResponse {
    let statuses = slots
        .iter()
        .map(|slot| match slot {
            Some((p, d)) => descriptor_status(p, d),
            None => DescriptorStatus {
                code: Code::Ok as i32,
                ..Default::default()
            },
        })
        .collect();
    let over = slots.iter().flatten().any(|(_, d)| !d.allowed);
    let response_headers_to_add =
        envoy_headers(RateLimitHeaders::new(slots.iter().flatten().copied()));
    RateLimitResponse {
        overall_code: if over { Code::OverLimit } else { Code::Ok } as i32,
        statuses,
        response_headers_to_add,
        ..Default::default()
    }
}

impl Native {
    #[cfg(test)]
    pub(crate) fn state(&self) -> &AppState {
        &self.state
    }

    /// Decides `request`'s descriptors in one batch under `set`, and
    /// answers what `answer` makes of the decisions.
    pub(crate) async fn decide<T>(
        &self,
        set: &PolicySet,
        request: &View<'_>,
        answer: impl FnOnce(&Slots<'_>) -> T,
    ) -> Result<T, Status> {
        if request.domain.is_empty() {
            return Err(Status::invalid_argument("`domain` must not be empty"));
        }
        let default_cost = if request.hits_addend == 0 {
            1
        } else {
            u64::from(request.hits_addend)
        };
        // Each descriptor's policy, key and cost, in order (`None`: no
        // table matches it); then all of them decided in one batch.
        let mut found: SmallVec<[Option<_>; 2]> = SmallVec::new();
        for (i, d) in request.descriptors.iter().enumerate() {
            let Some((policy, key, tier)) = lookup(set, request.domain, i, d)? else {
                found.push(None);
                continue;
            };
            let cost = d.hits_addend.unwrap_or(default_cost);
            found.push(Some((policy, key, cost, tier)));
        }
        let requests: SmallVec<[tollgate::Request<'_>; 2]> = found
            .iter()
            .flatten()
            .map(|(policy, key, cost, _)| tollgate::Request {
                policy,
                key,
                cost: *cost,
            })
            .collect();
        let tiers: SmallVec<[Option<&str>; 2]> = found.iter().flatten().map(|f| f.3).collect();
        let place = |n: usize| {
            let i = (0..found.len()).filter(|&i| found[i].is_some()).nth(n);
            format!("descriptor {}", i.unwrap_or(n))
        };
        let outcomes = self
            .state
            .check_each(&requests, &tiers, place)
            .await
            .map_err(status)?;
        let mut outcomes = outcomes.into_iter();
        let mut decided: SmallVec<[Option<(ResolvedPolicy<'_>, Decision)>; 2]> = SmallVec::new();
        for slot in &found {
            if slot.is_none() {
                decided.push(None);
                continue;
            }
            let (decision, decider, _) = outcomes
                .next()
                .ok_or_else(|| Status::internal("a decision missing"))?;
            decided.push(Some((decider, decision)));
        }
        let slots: SmallVec<[Option<(&Policy, &Decision)>; 2]> = decided
            .iter()
            .map(|slot| slot.as_ref().map(|(p, d)| (&**p, d)))
            .collect();
        Ok(answer(&slots))
    }
}

/// A descriptor's policy (a table's, or made for its limit override),
/// store key and, with `tier_from`, the tier its entry names.
type Limited<'s, 'e> = (ResolvedPolicy<'s>, Vec<u8>, Option<&'e str>);

/// Descriptor `i`'s policy and key: its limit override's, in a domain that
/// has tables, else its table's; `None` when neither applies.
fn lookup<'s, 'e>(
    set: &'s PolicySet,
    domain: &str,
    i: usize,
    d: &Described<'e>,
) -> Result<Option<Limited<'s, 'e>>, Status> {
    let entries = &d.entries;
    Ok(match &d.limit {
        Some(limit) if descriptor::knows(&set.descriptors, domain) => {
            let key = descriptor::key(domain, entries);
            let (policy, key) = override_policy(i, limit, &key)?;
            Some((ResolvedPolicy::Owned(policy), key, None))
        }
        Some(_) => None,
        // The tables were checked against the policies with which they
        // were loaded: a policy missing here is a bug.
        None => descriptor::find(&set.descriptors, domain, entries)
            .map(|f| match decide::policy(set, f.policy) {
                Ok(p) => Ok((ResolvedPolicy::Borrowed(p), f.key, f.tier)),
                Err(e) => Err(Status::internal(format!("descriptor {i}: {}", e.message()))),
            })
            .transpose()?,
    })
}
