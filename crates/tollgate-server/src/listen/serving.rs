//! Serving on a [`Listener`]: the HTTP API's connections through hyper,
//! with the `[server]` limits set where hyper has them (the HTTP/1 head's
//! timeout, the HTTP/2 keepalive) and a deadline on every request body;
//! an HTTP/2 stream is answered in its connection's task when it can be
//! (`inline.rs`).
//! The gRPC listener's server is `grpc.rs`.

use std::future::Future;

use axum::Router;
use axum::body::Body;
use futures_util::StreamExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::{GracefulConnection, GracefulShutdown};
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

use super::inline::AnswerInline;
use super::listener::{Connection, Listener};
use crate::config::ConnectionLimits;
use crate::http::{MAX_HEAD, TimedBody};

/// Serves `app` on `listener` until `stop` completes, then stops accepting
/// and waits for the requests in flight.
pub(crate) async fn serve_http(
    listener: Listener,
    app: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let mut builder = auto::Builder::new(AnswerInline);
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
    let body_timeout = limits.body_timeout;
    accept(listener, stop, move |io| {
        let app = app
            .clone()
            .map_request(move |request: http::Request<Incoming>| {
                request.map(|body| Body::new(TimedBody::new(body, body_timeout)))
            });
        builder
            .serve_connection(io, TowerToHyperService::new(app))
            .into_owned()
    })
    .await;
    Ok(())
}

/// Accepts on `listener` until `stop` completes, each connection served
/// on its own task by what `serve` makes of it; then stops accepting and
/// waits for the connections to finish what is in flight.
pub(crate) async fn accept<C>(
    mut listener: Listener,
    stop: impl Future<Output = ()>,
    mut serve: impl FnMut(TokioIo<Connection>) -> C,
) where
    C: GracefulConnection + Send + 'static,
    C::Error: Send,
{
    let graceful = GracefulShutdown::new();
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
        let serving = graceful.watch(serve(TokioIo::new(connection)));
        tokio::spawn(async move {
            // A connection's end (closed, timed out, malformed) is the
            // client's business; hyper has answered what it could.
            let _ = serving.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
