//! The plumbing both services share, native (`serve/`) and ERL mode
//! (`erl/serve.rs`): the connection-capped [`listener`], [`serving`] the
//! HTTP API and [`grpc`] on it (HTTP/2 streams polled first in their
//! connection's task, `inline.rs`), the stop signal both servers wait on, and the
//! exit code once they have stopped. A leaf: it imports neither `serve/`
//! nor `erl/`, so that `serve/` can dispatch to ERL mode without ERL mode
//! importing anything back.

use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

pub(crate) mod grpc;
mod inline;
pub(crate) mod listener;
pub(crate) mod serving;

/// The stop both servers wait on: set once SIGTERM or SIGINT arrives, so
/// that one signal stops both.
#[derive(Clone)]
pub(crate) struct Stopping(watch::Receiver<bool>);

impl Stopping {
    /// Starts waiting for SIGTERM or SIGINT (on the running runtime).
    pub(crate) fn on_signal() -> Self {
        let (stop, stopping) = watch::channel(false);
        tokio::spawn(async move {
            shutdown().await;
            let _ = stop.send(true);
        });
        Self(stopping)
    }

    /// Completes once the signal has come: stop accepting, finish what is
    /// in flight.
    pub(crate) async fn stopped(mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// SIGTERM or SIGINT: stop accepting, finish what is in flight.
async fn shutdown() {
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
    tracing::info!("shutting down: finishing requests in flight");
}

/// The exit code once the HTTP and gRPC servers have stopped.
pub(crate) fn finish(http: std::io::Result<()>, grpc: Result<(), String>) -> i32 {
    match (http, grpc) {
        (Ok(()), Ok(())) => {
            eprintln!("stopped");
            0
        }
        (Err(e), _) => {
            eprintln!("error: {e}");
            1
        }
        (_, Err(e)) => {
            eprintln!("error: gRPC: {e}");
            1
        }
    }
}
