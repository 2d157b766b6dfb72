//! [`RateLimit`]: the middleware service.

use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower_service::Service;

use crate::body::ResponseBody;
use crate::future::ResponseFuture;
use crate::limiter::Limiter;

/// Applies a [`RateLimitLayer`](crate::RateLimitLayer)'s limits to the
/// requests of an inner service.
///
/// Readiness is the inner service's: the limiter applies no backpressure
/// (axum expects services that do not), and decides in `call`. The request
/// then waits for the store in the [`ResponseFuture`], holding the inner
/// service that `poll_ready` made ready (a fresh clone stays behind for the
/// next request), so a clone that was not made ready is never called.
#[derive(Debug, Clone)]
pub struct RateLimit<S> {
    inner: S,
    limiter: Arc<Limiter>,
}

impl<S> RateLimit<S> {
    pub(crate) fn from_limiter(inner: S, limiter: Arc<Limiter>) -> RateLimit<S> {
        RateLimit { inner, limiter }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, ReqBody>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let (head, body) = request.into_parts();
        let plan = self.limiter.plan(&head);
        let request = Request::from_parts(head, body);
        match plan {
            Err(rejection) => ResponseFuture::rejected(rejection),
            // No limit applies: no store call, no clone.
            Ok(plan) if plan.is_empty() => ResponseFuture::calling(self.inner.call(request)),
            Ok(plan) => {
                // `self.inner` was made ready by `poll_ready`; the request
                // takes it, and the clone waits for the next `poll_ready`.
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                let decision = Box::pin(self.limiter.clone().decide(plan));
                ResponseFuture::deciding(decision, ready, request)
            }
        }
    }
}
