//! Serving on a [`Listener`]: the HTTP API's connections through hyper,
//! with the `[server]` limits set where hyper has them (the HTTP/1 head's
//! timeout, the HTTP/2 keepalive) and a deadline on every request body;
//! and the same limits on tonic's builder for the gRPC listener.

use std::future::Future;

use axum::Router;
use axum::body::Body;
use futures_util::StreamExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

use super::listener::Listener;
use crate::config::ConnectionLimits;
use crate::http::{MAX_HEAD, TimedBody};

/// Serves `app` on `listener` until `stop` completes, then stops accepting
/// and waits for the requests in flight.
pub(crate) async fn serve_http(
    mut listener: Listener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // hyper answers a head over these itself, with an empty body: they
        // are well above `MAX_HEAD`, which the API answers in JSON.
        .max_buf_size(4 * MAX_HEAD.bytes)
        .max_headers(2 * MAX_HEAD.fields);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(limits.http2_keepalive_interval)
        .keep_alive_timeout(limits.http2_keepalive_timeout)
        .max_header_list_size(MAX_HEAD.bytes as u32);
    let graceful = GracefulShutdown::new();
    let body_timeout = limits.body_timeout;
    tokio::pin!(stop);
    loop {
        let connection = tokio::select! {
            next = listener.next() => match next {
                Some(Ok(connection)) => connection,
                // The listener never ends nor fails: it logs and retries.
                _ => continue,
            },
            () = &mut stop => break,
        };
        let app = app
            .clone()
            .map_request(move |request: http::Request<Incoming>| {
                request.map(|body| Body::new(TimedBody::new(body, body_timeout)))
            });
        let serving = builder
            .serve_connection(TokioIo::new(connection), TowerToHyperService::new(app))
            .into_owned();
        let serving = graceful.watch(serving);
        tokio::spawn(async move {
            // A connection's end (closed, timed out, malformed) is the
            // client's business; hyper has answered what it could.
            let _ = serving.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// tonic's builder with the limits that apply to a gRPC server: the
/// HTTP/2 keepalive, and `body_timeout` as the most a call may take.
pub(crate) fn grpc_limits(
    builder: tonic::transport::Server,
    limits: &ConnectionLimits,
) -> tonic::transport::Server {
    builder
        .http2_keepalive_interval(Some(limits.http2_keepalive_interval))
        .http2_keepalive_timeout(Some(limits.http2_keepalive_timeout))
        .timeout(limits.body_timeout)
}
