//! A gRPC request whose message cannot be decoded (a bad varint, invalid
//! UTF-8 in a string, a frame cut short, a compressed flag without
//! `grpc-encoding`, no message at all) is the caller's fault: it answers
//! `INVALID_ARGUMENT`, as every other bad input does, not the `INTERNAL`
//! tonic gives it (which `crate::error` keeps for the service's own bugs).
//!
//! tonic decodes the message before the handler runs and answers a
//! failure itself, so [`DecodeStatus`] wraps the generated server: each
//! request carries a [`Decoded`] flag that the handler raises first thing
//! ([`Decoded::mark`]). An `INTERNAL` answer to a request whose handler
//! never ran is a decoding failure, and its status is rewritten; an
//! `INTERNAL` from the handler, or from encoding its answer, stays.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tonic::codegen::http::{self, HeaderMap};
use tonic::codegen::{BoxFuture, Context, Poll, Service};
use tonic::server::NamedService;
use tonic::{Code, Status};

/// Raised once the handler holds the decoded message.
#[derive(Debug, Clone, Default)]
pub(crate) struct Decoded(Arc<AtomicBool>);

impl Decoded {
    /// Says that `request`'s message was decoded: each handler calls it
    /// before anything else.
    pub(crate) fn mark<T>(request: &tonic::Request<T>) {
        if let Some(decoded) = request.extensions().get::<Decoded>() {
            decoded.0.store(true, Ordering::Release);
        }
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A generated gRPC server whose decoding failures answer `INVALID_ARGUMENT`.
#[derive(Debug, Clone)]
pub(crate) struct DecodeStatus<S> {
    inner: S,
}

impl<S> DecodeStatus<S> {
    pub(crate) fn new(inner: S) -> DecodeStatus<S> {
        DecodeStatus { inner }
    }
}

impl<S: NamedService> NamedService for DecodeStatus<S> {
    const NAME: &'static str = S::NAME;
}

impl<S, B, R> Service<http::Request<B>> for DecodeStatus<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let decoded = Decoded::default();
        request.extensions_mut().insert(decoded.clone());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let mut response = answer.await?;
            if !decoded.is_set() {
                reclassify(response.headers_mut());
            }
            Ok(response)
        })
    }
}

/// An `INTERNAL` status in `headers` (a trailers-only answer) becomes
/// `INVALID_ARGUMENT`, its message kept after what it is about.
fn reclassify(headers: &mut HeaderMap) {
    let Some(status) = Status::from_header_map(headers) else {
        return;
    };
    if status.code() != Code::Internal {
        return;
    }
    let invalid = Status::invalid_argument(format!(
        "the request is not a valid message: {}",
        status.message()
    ));
    for name in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        headers.remove(name);
    }
    // Fails only for a message no header can hold; tonic's are ASCII.
    if invalid.add_header(headers).is_err() {
        headers.insert("grpc-status", http::HeaderValue::from_static("3"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_internal_becomes_invalid_argument() {
        let mut headers = HeaderMap::new();
        Status::internal("failed to decode Protobuf message")
            .add_header(&mut headers)
            .unwrap();
        reclassify(&mut headers);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::InvalidArgument);
        assert!(status.message().contains("failed to decode"), "{status:?}");

        let mut headers = HeaderMap::new();
        Status::unimplemented("gzip")
            .add_header(&mut headers)
            .unwrap();
        reclassify(&mut headers);
        let status = Status::from_header_map(&headers).unwrap();
        assert_eq!(status.code(), Code::Unimplemented);

        let mut headers = HeaderMap::new();
        reclassify(&mut headers);
        assert!(headers.is_empty());
    }
}
