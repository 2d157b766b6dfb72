//! A request body with a deadline: the whole body must have arrived within
//! `body_timeout` of the request's head, or reading it fails with
//! [`BodyTimeout`] (answered 408 by the API; the connection is then
//! closed, its body unread). The timer is armed only when the body is not
//! there yet, so a body that came with its head costs none.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::BoxError;
use axum::extract::rejection::BytesRejection;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The body did not arrive in time.
#[derive(Debug)]
pub(crate) struct BodyTimeout {
    after: Duration,
}

impl fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the request body did not arrive within {:?} (`body_timeout` under [server])",
            self.after
        )
    }
}

impl Error for BodyTimeout {}

/// The [`BodyTimeout`] behind a body's rejection, if that is why.
pub(super) fn cause(rejection: &BytesRejection) -> Option<&BodyTimeout> {
    let mut source: Option<&(dyn Error + 'static)> = Some(rejection);
    while let Some(e) = source {
        if let Some(late) = e.downcast_ref::<BodyTimeout>() {
            return Some(late);
        }
        source = e.source();
    }
    None
}

/// `B`, failing once `after` has passed since it was made.
#[derive(Debug)]
pub(crate) struct TimedBody<B> {
    inner: B,
    after: Duration,
    deadline: Instant,
    /// Armed when the body first makes the reader wait.
    timer: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    pub(crate) fn new(inner: B, after: Duration) -> Self {
        TimedBody {
            inner,
            after,
            deadline: Instant::now() + after,
            timer: None,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = this.deadline;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout { after: this.after })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Bytes;
    use axum::extract::FromRequest;
    use futures_util::StreamExt;
    use http_body_util::StreamBody;

    use super::*;

    /// A body that sends one byte and then nothing is cut at its
    /// deadline, and the extractor's rejection says so.
    #[tokio::test]
    async fn a_stalled_body_fails_with_its_timeout() {
        let frames = futures_util::stream::iter([Ok::<_, std::io::Error>(Frame::data(
            Bytes::from_static(b"{"),
        ))])
        .chain(futures_util::stream::pending());
        let body = TimedBody::new(StreamBody::new(frames), Duration::from_millis(50));
        let request = http::Request::new(axum::body::Body::new(body));
        let rejection = Bytes::from_request(request, &()).await.unwrap_err();
        let late = cause(&rejection).expect("the timeout behind the rejection");
        assert!(late.to_string().contains("body_timeout"), "{late}");
    }
}
