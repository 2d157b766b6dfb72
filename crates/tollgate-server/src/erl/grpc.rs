//! ERL mode's gRPC service: `envoy.service.ratelimit.v3.RateLimitService`
//! answered by ERL's rules. A call ERL would fail for what it asks (empty
//! domain, empty descriptor list) fails with gRPC `UNKNOWN` and ERL's
//! message, as ERL's Go error does; counters that cannot be reached (Redis
//! down) are `UNAVAILABLE`, so that Envoy and its operators tell an outage
//! from a bad request; an undecodable message is `INVALID_ARGUMENT`
//! (`crate::grpc_unary`). ERL has no token, and neither has this mode
//! (`--token` is refused at start).

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::Status;

use super::settings::CallError;
use super::state::ErlState;
use crate::grpc_unary::{Answer, Rls};

/// The service over ERL mode's state.
#[derive(Debug, Clone)]
pub(crate) struct ErlRls {
    state: Arc<ErlState>,
}

/// The service as it is served (see `grpc_unary`).
pub(crate) type Served = Rls<ErlRls>;

pub(crate) fn service(state: Arc<ErlState>) -> Served {
    Rls(ErlRls { state })
}

/// The gRPC status of a call that has no answer.
fn status(e: &CallError) -> Status {
    match e {
        CallError::Request(_) => Status::unknown(e.to_string()),
        CallError::Store(_) => Status::unavailable(e.to_string()),
    }
}

impl Answer for ErlRls {
    async fn answer(&self, request: RateLimitRequest) -> Result<RateLimitResponse, Status> {
        self.state.call(&request).await.map_err(|e| {
            tracing::warn!("ShouldRateLimit: {e}");
            status(&e)
        })
    }
}
