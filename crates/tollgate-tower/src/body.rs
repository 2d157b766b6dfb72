//! The response body: the inner service's, or the middleware's own answer.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::lease::Leases;
use crate::settle::Settlement;

pin_project! {
    /// The body of every response of [`RateLimit`](crate::RateLimit).
    ///
    /// It is the inner service's body, or the body of an answer the
    /// middleware gave itself (a `429`). It also holds the request's
    /// concurrency leases: they are given back when the body has been sent
    /// to its end, fails, or is dropped — so a streamed download counts as
    /// in flight until its last byte, not until its headers. At the same
    /// moment, once, the request's usage limits are settled with the
    /// [`Usage`](crate::Usage) its response reported (at once with a store
    /// that answers without waiting, else in a task spawned on the tokio
    /// runtime).
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        leases: Leases,
        settlement: Option<Settlement>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    pub(crate) fn inner(
        body: B,
        leases: Leases,
        settlement: Option<Settlement>,
    ) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Inner { body },
            leases,
            settlement,
        }
    }

    pub(crate) fn full(data: Bytes) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            leases: Leases::new(),
            settlement: None,
        }
    }

    /// The request is no longer in flight: its leases go back and its
    /// usage is settled (each drop spawns its store call), once.
    fn end(leases: &mut Leases, settlement: &mut Option<Settlement>) {
        leases.clear();
        drop(settlement.take());
    }
}

impl<B> fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner { .. } => "inner",
            Kind::Full { .. } => "full",
        };
        f.debug_struct("ResponseBody")
            .field("kind", &kind)
            .field("leases", &self.leases.len())
            .field("settles", &self.settlement.is_some())
            .finish()
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body,
    B::Data: From<Bytes>,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let (frame, ended) = match this.kind.project() {
            KindProj::Inner { mut body } => {
                let frame = ready!(body.as_mut().poll_frame(cx));
                if let (Some(Ok(frame)), Some(settlement)) = (&frame, this.settlement.as_mut())
                    && let Some(trailers) = frame.trailers_ref()
                {
                    settlement.trailers(trailers);
                }
                // A body that knows it has sent its last frame may not be
                // polled again: end there rather than when it is dropped.
                let ended = !matches!(frame, Some(Ok(_))) || body.is_end_stream();
                (frame, ended)
            }
            KindProj::Full { data } => (data.take().map(|d| Ok(Frame::data(d.into()))), true),
        };
        if ended {
            // The end, or a failure: the request is no longer in flight.
            ResponseBody::<B>::end(this.leases, this.settlement);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}
