//! [`ResponseFuture`]: deciding, delaying, calling the inner service.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use pin_project_lite::pin_project;
use tokio::time::Sleep;
use tollgate::store::BoxFuture;
use tower_service::Service;

use crate::body::ResponseBody;
use crate::headers::RateLimitHeaders;
use crate::lease::Leases;
use crate::limiter::Outcome;
use crate::rejection::Rejection;
use crate::settle::Unsettled;

pin_project! {
    /// The response future of [`RateLimit`](crate::RateLimit).
    ///
    /// A state machine: it waits for the store's decision, sleeps the delay
    /// a leaky bucket asks for, calls the inner service, and passes the
    /// request's leases to the response body, with its usage limits'
    /// settlement once the response says what it used. The decision is the
    /// one allocation (the store's futures are boxed, and it owns the keys
    /// they borrow; usage limits add the list of what they took); delaying
    /// and calling allocate nothing. Dropping the future at any point gives
    /// back the leases it holds, and leaves the estimate of usage limits
    /// standing.
    pub struct ResponseFuture<S, ReqBody>
    where
        S: Service<Request<ReqBody>>,
    {
        #[pin]
        state: State<S, Request<ReqBody>, S::Future>,
        leases: Leases,
        headers: Option<RateLimitHeaders>,
        unsettled: Option<Unsettled>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, R, F> {
        Deciding {
            decision: BoxFuture<'static, Outcome>,
            service: Option<S>,
            request: Option<R>,
        },
        Delaying {
            #[pin]
            sleep: Sleep,
            service: Option<S>,
            request: Option<R>,
        },
        Calling {
            #[pin]
            future: F,
        },
        Rejected {
            rejection: Option<Rejection>,
        },
    }
}

impl<S, ReqBody> ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    pub(crate) fn deciding(
        decision: BoxFuture<'static, Outcome>,
        service: S,
        request: Request<ReqBody>,
    ) -> Self {
        Self::with_state(State::Deciding {
            decision,
            service: Some(service),
            request: Some(request),
        })
    }

    pub(crate) fn calling(future: S::Future) -> Self {
        Self::with_state(State::Calling { future })
    }

    pub(crate) fn rejected(rejection: Rejection) -> Self {
        Self::with_state(State::Rejected {
            rejection: Some(rejection),
        })
    }

    fn with_state(state: State<S, Request<ReqBody>, S::Future>) -> Self {
        ResponseFuture {
            state,
            leases: Leases::new(),
            headers: None,
            unsettled: None,
        }
    }
}

const POLLED_AFTER_COMPLETION: &str = "ResponseFuture polled after completion";

impl<S, ReqBody, ResBody> Future for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
{
    type Output = Result<Response<ResponseBody<ResBody>>, S::Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        loop {
            let mut this = self.as_mut().project();
            let next = match this.state.as_mut().project() {
                StateProj::Deciding {
                    decision,
                    service,
                    request,
                } => match ready!(decision.as_mut().poll(cx)) {
                    Outcome::Reject(rejection) => {
                        return Poll::Ready(Ok(rejection.into_response()));
                    }
                    Outcome::Admit {
                        delay,
                        headers,
                        leases,
                        unsettled,
                    } => {
                        *this.leases = leases;
                        *this.headers = headers;
                        *this.unsettled = unsettled;
                        let mut service = service.take().expect(POLLED_AFTER_COMPLETION);
                        let request = request.take().expect(POLLED_AFTER_COMPLETION);
                        if delay.is_zero() {
                            State::Calling {
                                future: service.call(request),
                            }
                        } else {
                            State::Delaying {
                                sleep: tokio::time::sleep(delay),
                                service: Some(service),
                                request: Some(request),
                            }
                        }
                    }
                },
                StateProj::Delaying {
                    sleep,
                    service,
                    request,
                } => {
                    ready!(sleep.poll(cx));
                    let mut service = service.take().expect(POLLED_AFTER_COMPLETION);
                    let request = request.take().expect(POLLED_AFTER_COMPLETION);
                    State::Calling {
                        future: service.call(request),
                    }
                }
                StateProj::Calling { future } => {
                    let result = ready!(future.poll(cx));
                    let leases = std::mem::take(this.leases);
                    let headers = this.headers.take();
                    let unsettled = this.unsettled.take();
                    return Poll::Ready(result.map(|response| {
                        let settlement = unsettled.and_then(|u| u.settlement(&response));
                        let mut response =
                            response.map(|body| ResponseBody::inner(body, leases, settlement));
                        if let Some(headers) = headers {
                            headers.append_to(response.headers_mut());
                        }
                        response
                    }));
                }
                StateProj::Rejected { rejection } => {
                    let rejection = rejection.take().expect(POLLED_AFTER_COMPLETION);
                    return Poll::Ready(Ok(rejection.into_response()));
                }
            };
            this.state.set(next);
        }
    }
}

impl<S, ReqBody> fmt::Debug for ResponseFuture<S, ReqBody>
where
    S: Service<Request<ReqBody>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Deciding { .. } => "deciding",
            State::Delaying { .. } => "delaying",
            State::Calling { .. } => "calling",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("leases", &self.leases.len())
            .field("settles", &self.unsettled.is_some())
            .finish()
    }
}
