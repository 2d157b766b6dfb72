//! ERL mode's gRPC service: `envoy.service.ratelimit.v3.RateLimitService`
//! answered by ERL's rules. A call ERL would fail (empty domain, empty
//! descriptor list, Redis down) fails with gRPC `UNKNOWN` and ERL's
//! message, as ERL's Go error does.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

use super::state::ErlState;

/// The service over ERL mode's state.
#[derive(Debug, Clone)]
pub(crate) struct ErlRls {
    state: Arc<ErlState>,
}

pub(crate) fn service(state: Arc<ErlState>) -> RateLimitServiceServer<ErlRls> {
    RateLimitServiceServer::new(ErlRls { state })
}

#[tonic::async_trait]
impl RateLimitService for ErlRls {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        match self.state.call(request.get_ref()).await {
            Ok(response) => Ok(Response::new(response)),
            Err(e) => {
                tracing::warn!("ShouldRateLimit: {e}");
                Err(Status::unknown(e.to_string()))
            }
        }
    }
}
