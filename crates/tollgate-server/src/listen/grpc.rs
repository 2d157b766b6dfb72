//! The gRPC server of both modes on a [`Listener`]. Without TLS it is
//! hyper's HTTP/2 server (as the HTTP API's, `serving.rs`; each call
//! answered in the connection's task when it can be, `inline.rs`), and
//! `ShouldRateLimit` is answered straight from it (`grpc_unary::respond`);
//! every other path goes to tonic's `Routes` (the health service, the
//! rate limit service's other paths, `UNIMPLEMENTED` for the rest). With
//! TLS it is tonic's transport server over the same routes, which does
//! the handshake.
//!
//! What tonic's transport set is kept: HTTP/2 only, the `[server]`
//! keepalive, and a deadline on every call, the shorter of its
//! `grpc-timeout` and `body_timeout`, past which it is `CANCELLED`
//! ("Timeout expired"). TCP_NODELAY is set by the listener. hyper's own
//! limits on reset streams stay on (tonic turned them off).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use http::{HeaderMap, Request, Response};
use http_body_util::Either;
use hyper::body::Incoming;
use hyper_util::rt::TokioTimer;
use hyper_util::server::conn::auto;
use tonic::Status;
use tonic::service::Routes;
use tonic_health::pb::health_server::{Health, HealthServer};
use tower::Service;

use super::inline::AnswerInline;
use super::listener::Listener;
use super::serving::accept;
use crate::config::ConnectionLimits;
use crate::grpc_unary::{Answer, Rls, SHOULD_RATE_LIMIT, UnaryBody, respond};

/// What the gRPC listener serves: the rate limit service, the health
/// service, and with TLS tonic's server that holds it.
pub(crate) struct Grpc<A, H> {
    pub(crate) rls: Rls<A>,
    pub(crate) health: HealthServer<H>,
    /// Present: TLS, served by tonic's transport.
    pub(crate) tls: Option<tonic::transport::Server>,
    pub(crate) limits: ConnectionLimits,
}

impl<A: Answer, H: Health> Grpc<A, H> {
    /// Serves on `listener` until `stop` completes, then stops accepting
    /// and waits for the calls in flight.
    pub(crate) async fn serve(
        self,
        listener: Listener,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), String> {
        let routes = Routes::new(self.health)
            .add_service(self.rls.clone())
            .prepare();
        match self.tls {
            Some(server) => tonic_limits(server, &self.limits)
                .add_routes(routes)
                .serve_with_incoming_shutdown(listener, stop)
                .await
                .map_err(|e| e.to_string()),
            None => {
                serve_plain(listener, self.rls.0, routes, &self.limits, stop).await;
                Ok(())
            }
        }
    }
}

/// tonic's builder with the limits that apply to a gRPC server: the
/// HTTP/2 keepalive, and `body_timeout` as the most a call may take.
fn tonic_limits(
    builder: tonic::transport::Server,
    limits: &ConnectionLimits,
) -> tonic::transport::Server {
    builder
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .timeout(limits.body_timeout)
}

/// The server without TLS: hyper, HTTP/2 only.
async fn serve_plain<A: Answer>(
    listener: Listener,
    answer: A,
    routes: Routes,
    limits: &ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let mut builder = auto::Builder::new(AnswerInline).http2_only();
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout);
    let shared = Arc::new(Shared {
        answer,
        routes,
        most: limits.body_timeout,
    });
    accept(listener, stop, move |io| {
        let shared = shared.clone();
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            // One count per call: what a call needs is shared.
            let shared = shared.clone();
            async move { Ok::<_, std::convert::Infallible>(shared.call(request).await) }
        });
        builder.serve_connection(io, service).into_owned()
    })
    .await;
}

/// What every call of the server answers with: the mode's answer, the
/// other routes, and the longest a call may take.
struct Shared<A> {
    answer: A,
    routes: Routes,
    most: Duration,
}

impl<A: Answer> Shared<A> {
    /// A call's answer: `ShouldRateLimit` answered here, the rest by the
    /// routes; `CANCELLED` once its deadline has passed. Both answers'
    /// futures are boxed when first polled: hyper moves the call's future
    /// into a task of its own (tokio copies it into the task's cell), and
    /// an async function's future is as large as its largest state (the
    /// decision's, some kilobytes), so one allocation costs less than the
    /// copies.
    async fn call(
        &self,
        request: Request<Incoming>,
    ) -> Response<Either<UnaryBody, tonic::body::Body>> {
        let within = grpc_timeout(request.headers()).map_or(self.most, |t| t.min(self.most));
        let answered = if request.uri().path() == SHOULD_RATE_LIMIT {
            Box::pin(within_deadline(within, respond(&self.answer, request)))
                .await
                .map(|r| r.map(Either::Left))
        } else {
            Box::pin(within_deadline(within, async {
                let mut routes = self.routes.clone();
                match routes.call(request).await {
                    Ok(response) => response.map(Either::Right),
                    Err(never) => match never {},
                }
            }))
            .await
        };
        answered.unwrap_or_else(|| {
            Status::cancelled("Timeout expired")
                .into_http::<UnaryBody>()
                .map(Either::Left)
        })
    }
}

/// `answered`, or `None` once `within` has passed (as
/// `tokio::time::timeout`, which polls the answer first too). The timer is
/// made only when the answer is not ready when first asked (most are:
/// the body came with the headers), and boxed, so a call pays neither the
/// timer's registration nor its size in the call's future.
async fn within_deadline<F: Future>(within: Duration, answered: F) -> Option<F::Output> {
    let mut answered = std::pin::pin!(answered);
    let mut timer: Option<Pin<Box<tokio::time::Sleep>>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = answered.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep(within)));
        timer.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// The `grpc-timeout` header as a duration: at most 8 digits and a unit
/// (`H`, `M`, `S`, `m`, `u`, `n`); `None` when absent or malformed, as
/// tonic reads it.
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.as_bytes();
    let (&unit, digits) = value.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits
        .iter()
        .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_reads_as_tonic_reads_it() {
        let read = |v: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&headers)
        };
        assert_eq!(read("3S"), Some(Duration::from_secs(3)));
        assert_eq!(read("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(read("5M"), Some(Duration::from_secs(300)));
        assert_eq!(read("250m"), Some(Duration::from_millis(250)));
        assert_eq!(read("7u"), Some(Duration::from_micros(7)));
        assert_eq!(read("99999999n"), Some(Duration::from_nanos(99_999_999)));
        for bad in ["", "S", "123456789S", "1x", "-1S", "1.5S"] {
            assert_eq!(read(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
