//! The response body: the inner service's, or the middleware's own answer.

use std::fmt;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::lease::Leases;

pin_project! {
    /// The body of every response of [`RateLimit`](crate::RateLimit).
    ///
    /// It is the inner service's body, or the body of an answer the
    /// middleware gave itself (a `429`). It also holds the request's
    /// concurrency leases: they are given back when the body has been sent
    /// to its end, fails, or is dropped — so a streamed download counts as
    /// in flight until its last byte, not until its headers.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
        leases: Leases,
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
    pub(crate) fn inner(body: B, leases: Leases) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Inner { body },
            leases,
        }
    }

    pub(crate) fn full(data: Bytes) -> ResponseBody<B> {
        ResponseBody {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            leases: Leases::new(),
        }
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
        let frame = match this.kind.project() {
            KindProj::Inner { body } => ready!(body.poll_frame(cx)),
            KindProj::Full { data } => data.take().map(|d| Ok(Frame::data(d.into()))),
        };
        if !matches!(frame, Some(Ok(_))) {
            // The end, or a failure: the request is no longer in flight.
            this.leases.clear();
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
