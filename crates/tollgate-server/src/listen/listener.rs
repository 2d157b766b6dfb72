//! A listener that keeps at most `max_connections` open, and connections
//! that close when no byte has moved either way for `idle_timeout`. Both
//! front ends (the HTTP API and gRPC, in ERL mode too) accept through it.
//!
//! Over the cap, a connection is accepted and closed at once (so that it
//! neither waits in the backlog nor costs a file descriptor for long), and
//! a warning is logged at most every [`WARN_EVERY`], with how many were
//! closed since the last one. Accept errors (`EMFILE` when the process is
//! out of file descriptors) are logged the same way and retried after a
//! pause, never ending the service.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use futures_util::Stream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;

use crate::config::ConnectionLimits;

/// The least time between two warnings of one listener.
const WARN_EVERY: Duration = Duration::from_secs(10);

/// How long accepting pauses after an accept error.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

/// Accepts connections under the cap (a `Stream` of them, as tonic takes).
#[derive(Debug)]
pub(crate) struct Listener {
    tcp: TcpListener,
    /// `http` or `gRPC`, for the log.
    name: &'static str,
    slots: Arc<Semaphore>,
    max: usize,
    idle: Duration,
    refused: Warnings,
    failed: Warnings,
    pause: Option<Pin<Box<Sleep>>>,
}

impl Listener {
    pub(crate) fn new(tcp: TcpListener, name: &'static str, limits: &ConnectionLimits) -> Self {
        Listener {
            tcp,
            name,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            max: limits.max_connections,
            idle: limits.idle_timeout,
            refused: Warnings::default(),
            failed: Warnings::default(),
            pause: None,
        }
    }

    pub(crate) fn local_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// The next connection under the cap.
    fn poll_accept(&mut self, cx: &mut Context<'_>) -> Poll<Connection> {
        loop {
            if let Some(pause) = &mut self.pause {
                ready!(pause.as_mut().poll(cx));
                self.pause = None;
            }
            match ready!(self.tcp.poll_accept(cx)) {
                Ok((stream, _)) => match self.slots.clone().try_acquire_owned() {
                    Ok(slot) => {
                        let _ = stream.set_nodelay(true);
                        return Poll::Ready(Connection::new(stream, slot, self.idle));
                    }
                    Err(_) => {
                        drop(stream);
                        if let Some(n) = self.refused.note() {
                            tracing::warn!(
                                listener = self.name,
                                max_connections = self.max,
                                "connection closed: the {} listener holds its cap of {} connections (`max_connections` under [server]); {n} closed since the last warning",
                                self.name,
                                self.max
                            );
                        }
                    }
                },
                Err(e) => {
                    if let Some(n) = self.failed.note() {
                        tracing::warn!(
                            listener = self.name,
                            "cannot accept a connection on the {} listener: {e} ({n} failures since the last warning)",
                            self.name
                        );
                    }
                    self.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_PAUSE)));
                }
            }
        }
    }
}

impl Stream for Listener {
    type Item = io::Result<Connection>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_accept(cx).map(|c| Some(Ok(c)))
    }
}

/// Events counted between warnings: [`Warnings::note`] says how many when
/// one is due.
#[derive(Debug, Default)]
struct Warnings {
    since: u64,
    last: Option<Instant>,
}

impl Warnings {
    fn note(&mut self) -> Option<u64> {
        self.since += 1;
        let now = Instant::now();
        if self
            .last
            .is_some_and(|at| now.duration_since(at) < WARN_EVERY)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.since))
    }
}

/// An accepted connection: holds its slot under the cap until dropped,
/// and fails its reads and writes once idle for too long.
#[derive(Debug)]
pub(crate) struct Connection {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
    idle: Duration,
    /// A byte moved since the timer was last set.
    moved: bool,
    timer: Pin<Box<Sleep>>,
}

impl Connection {
    fn new(stream: TcpStream, slot: OwnedSemaphorePermit, idle: Duration) -> Self {
        Connection {
            stream,
            _slot: slot,
            idle,
            moved: false,
            timer: Box::pin(tokio::time::sleep(idle)),
        }
    }

    /// What a read or write that found nothing to do answers: pending,
    /// or an error once the connection has been idle for too long.
    fn waiting<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        if self.moved {
            self.moved = false;
            let at = tokio::time::Instant::now() + self.idle;
            self.timer.as_mut().reset(at);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "idle for longer than `idle_timeout`",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The outcome of an operation that moved `n` bytes.
    fn moved<T>(&mut self, done: io::Result<T>, n: usize) -> Poll<io::Result<T>> {
        if n > 0 {
            self.moved = true;
        }
        Poll::Ready(done)
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.stream).poll_read(cx, buf) {
            Poll::Ready(done) => {
                let n = buf.filled().len() - before;
                this.moved(done, n)
            }
            Poll::Pending => this.waiting(cx),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write(cx, buf) {
            Poll::Ready(done) => {
                let n = *done.as_ref().unwrap_or(&0);
                this.moved(done, n)
            }
            Poll::Pending => this.waiting(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_write_vectored(cx, bufs) {
            Poll::Ready(done) => {
                let n = *done.as_ref().unwrap_or(&0);
                this.moved(done, n)
            }
            Poll::Pending => this.waiting(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.stream).poll_flush(cx) {
            Poll::Ready(done) => Poll::Ready(done),
            Poll::Pending => this.waiting(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl tonic::transport::server::Connected for Connection {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}
