//! `envoy.service.ratelimit.v3.RateLimitService`, the service of both gRPC
//! modes (the native `grpc.rs`, ERL mode's `erl/grpc.rs`), answered
//! straight from the HTTP/2 request: its one method, `ShouldRateLimit`,
//! read, decoded with prost, decided by an [`Answer`], and its response
//! encoded into one buffer behind the 5-byte gRPC frame header. It stands
//! where tonic's generated server and codec stood, which cost a boxed
//! decoder and encoder, 8 KiB buffers and several streams per call; what
//! a client sees is theirs:
//!
//! - the [`Answer`]'s own check of the headers first (the native mode's
//!   `--token`, `UNAUTHENTICATED`), before anything is read;
//! - a method the service does not have: `UNIMPLEMENTED`, no message;
//! - `grpc-encoding` other than `identity`: `UNIMPLEMENTED`, "Content is
//!   compressed with `…` which isn't supported", `grpc-accept-encoding:
//!   identity` (no compression is enabled, as before);
//! - a frame that says it holds more than 4 MiB (tonic's default, which
//!   tollgate never changed): `OUT_OF_RANGE`, before the rest is read;
//! - a message that cannot be decoded (a compressed flag, a flag other
//!   than 0 or 1, a frame cut short, no message, bytes prost refuses):
//!   `INVALID_ARGUMENT`, "the request is not a valid message: " and
//!   tonic's words (tonic answered `INTERNAL`, which tollgate keeps for
//!   its own bugs);
//! - every message of the body is decoded, the first one answered;
//! - the answer: `content-type: application/grpc`, the message, and
//!   `grpc-status: 0` in the trailers; an error, trailers-only
//!   (`Status::into_http`).
//!
//! The first message is kept as its bytes when `rls_view` reads it (then
//! the native mode answers it from them, `rls_encode`); any other is
//! decoded by prost as it is read.
//!
//! The gRPC server (`listen/grpc.rs`) calls [`respond`] directly for
//! `ShouldRateLimit` and routes everything else (health, unknown
//! services) to tonic's `Routes`, where [`Rls`] is also registered as a
//! tower service, so that its other paths, and a server running tonic's
//! transport (with TLS), answer the same.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use prost::Message as _;
use tonic::Status;
use tonic::codegen::BoxFuture;
use tonic::metadata::MetadataValue;
use tonic::server::NamedService;

use crate::rls_view::View;

/// The service's name, as its routes and the health service know it.
pub(crate) const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";

/// The path of its one method.
pub(crate) const SHOULD_RATE_LIMIT: &str =
    "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The most a message may say it holds: tonic's default, kept.
pub(crate) const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// The frame header: the compressed flag and the length (big-endian u32).
const HEADER: usize = 5;

const GRPC: HeaderValue = HeaderValue::from_static("application/grpc");

/// What a mode answers `ShouldRateLimit` with.
pub(crate) trait Answer: Clone + Send + Sync + 'static {
    /// Checked on the headers before the message is read: an error is the
    /// answer.
    fn admit(&self, _headers: &HeaderMap) -> Result<(), Status> {
        Ok(())
    }

    /// The answer to a decoded request.
    fn answer(
        &self,
        request: RateLimitRequest,
    ) -> impl Future<Output = Result<RateLimitResponse, Status>> + Send;

    /// The call's message answered, framed: by default decoded by prost
    /// and answered by [`answer`](Self::answer) ([`framed_answer`]); the
    /// native mode answers the common message from its bytes.
    fn answer_framed(
        &self,
        message: Message,
    ) -> impl Future<Output = Result<Bytes, Status>> + Send {
        framed_answer(self, message)
    }
}

/// The call's first message: its bytes when `rls_view` reads them (the
/// common message), else prost's decoded message.
#[derive(Debug)]
pub(crate) enum Message {
    Raw(Bytes),
    Decoded(RateLimitRequest),
}

impl Message {
    /// Prost's decoded message.
    pub(crate) fn decoded(self) -> Result<RateLimitRequest, Status> {
        match self {
            Message::Raw(bytes) => RateLimitRequest::decode(bytes).map_err(invalid),
            Message::Decoded(request) => Ok(request),
        }
    }
}

/// `message` decoded by prost, answered by `answer`, framed.
pub(crate) async fn framed_answer<A: Answer>(
    answer: &A,
    message: Message,
) -> Result<Bytes, Status> {
    let response = answer.answer(message.decoded()?).await?;
    Ok(frame(&response))
}

/// The service as a tower service, for tonic's `Routes` and its server.
#[derive(Debug, Clone)]
pub(crate) struct Rls<A>(pub(crate) A);

impl<A> NamedService for Rls<A> {
    const NAME: &'static str = SERVICE;
}

impl<A, B> tower::Service<Request<B>> for Rls<A>
where
    A: Answer,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<tonic::codegen::StdError>,
{
    type Response = Response<UnaryBody>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let answer = self.0.clone();
        Box::pin(async move { Ok(respond(&answer, request).await) })
    }
}

/// The answer to one call of the service (any of its paths).
pub(crate) async fn respond<A, B>(answer: &A, request: Request<B>) -> Response<UnaryBody>
where
    A: Answer,
    B: Body,
    B::Error: Into<tonic::codegen::StdError>,
{
    if let Err(status) = answer.admit(request.headers()) {
        return status.into_http();
    }
    if request.uri().path() != SHOULD_RATE_LIMIT {
        return Status::unimplemented("").into_http();
    }
    if let Some(status) = encoding(request.headers()) {
        return status.into_http();
    }
    let message = match read(request.into_body()).await {
        Ok(message) => message,
        Err(status) => return status.into_http(),
    };
    match answer.answer_framed(message).await {
        Ok(framed) => ok(framed),
        Err(status) => status.into_http(),
    }
}

/// `UNIMPLEMENTED` for a `grpc-encoding` other than `identity`.
fn encoding(headers: &HeaderMap) -> Option<Status> {
    let value = headers.get("grpc-encoding")?;
    if value == "identity" {
        return None;
    }
    let named = match std::str::from_utf8(value.as_bytes()) {
        Ok(s) => s.to_string(),
        Err(_) => format!("{:?}", value.as_bytes()),
    };
    let mut status = Status::unimplemented(format!(
        "Content is compressed with `{named}` which isn't supported"
    ));
    status.metadata_mut().insert(
        "grpc-accept-encoding",
        MetadataValue::from_static("identity"),
    );
    Some(status)
}

/// A message that cannot be decoded: `INVALID_ARGUMENT`.
fn invalid(why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("the request is not a valid message: {why}"))
}

/// The length the frame header at the start of `bytes` gives (at least
/// [`HEADER`] bytes), once its flag and length are acceptable.
fn frame_length(bytes: &[u8]) -> Result<usize, Status> {
    match bytes[0] {
        0 => {}
        1 => {
            return Err(invalid(
                "protocol error: received message with compressed-flag but no grpc-encoding was specified",
            ));
        }
        f => {
            return Err(invalid(format!(
                "protocol error: received message with invalid compression flag: {f} (valid flags are 0 and 1), while sending request"
            )));
        }
    }
    let len = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
    if len > MAX_MESSAGE {
        return Err(Status::out_of_range(format!(
            "Error, decoded message length too large: found {len} bytes, the limit is: {MAX_MESSAGE} bytes"
        )));
    }
    Ok(len)
}

/// The whole frames at the front of `data`, decoded, cut off it; the
/// first message kept in `first`. What is left is a frame not yet whole.
fn take_frames(data: &mut Bytes, first: &mut Option<Message>) -> Result<(), Status> {
    while data.len() >= HEADER {
        let len = frame_length(data)?;
        if data.len() < HEADER + len {
            break;
        }
        let message = data.slice(HEADER..HEADER + len);
        data.advance(HEADER + len);
        // The first message kept as bytes when the fast reader reads it
        // (so prost would too); any other decoded here, as before.
        if first.is_none() && View::parse(&message).is_some() {
            *first = Some(Message::Raw(message));
            continue;
        }
        let request = RateLimitRequest::decode(message).map_err(invalid)?;
        first.get_or_insert(Message::Decoded(request));
    }
    Ok(())
}

/// The request's first message, every frame of the body decoded. A body
/// that arrives in one piece is decoded in place; one in pieces is
/// gathered, at most one frame (4 MiB and its header) at a time.
async fn read<B>(body: B) -> Result<Message, Status>
where
    B: Body,
    B::Error: Into<tonic::codegen::StdError>,
{
    let mut body = std::pin::pin!(body);
    let mut first = None;
    let mut gathered = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                let status = Status::from_error(e.into());
                // A client that cancels ends its request, as tonic reads it.
                if status.code() == tonic::Code::Cancelled {
                    break;
                }
                return Err(status);
            }
        };
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        let mut data = if gathered.is_empty() {
            data.copy_to_bytes(data.remaining())
        } else {
            // Only a header's worth is looked at per piece until the
            // frame is whole.
            gathered.put(data);
            if gathered.len() < HEADER {
                continue;
            }
            let len = frame_length(&gathered)?;
            if gathered.len() < HEADER + len {
                continue;
            }
            gathered.split().freeze()
        };
        take_frames(&mut data, &mut first)?;
        if !data.is_empty() {
            gathered.extend_from_slice(&data);
            if gathered.len() >= HEADER {
                gathered.reserve(HEADER + frame_length(&gathered)? - gathered.len());
            }
        }
    }
    if !gathered.is_empty() {
        return Err(invalid("Unexpected EOF decoding stream."));
    }
    first.ok_or_else(|| invalid("Missing request message."))
}

/// `response` framed in one buffer.
pub(crate) fn frame(response: &RateLimitResponse) -> Bytes {
    let len = response.encoded_len();
    let mut buf = BytesMut::with_capacity(HEADER + len);
    buf.put_u8(0);
    // A message over 4 GiB cannot be: a response holds a few descriptors.
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    response.encode_raw(&mut buf);
    buf.freeze()
}

/// The OK answer: the framed message, `grpc-status: 0` in the trailers.
fn ok(framed: Bytes) -> Response<UnaryBody> {
    let mut trailers = HeaderMap::with_capacity(1);
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let mut answer = Response::new(UnaryBody {
        data: Some(framed),
        trailers: Some(trailers),
    });
    answer.headers_mut().insert(CONTENT_TYPE, GRPC);
    answer
}

/// A unary answer's body: one message, then the trailers; empty for a
/// trailers-only answer.
#[derive(Debug, Default)]
pub(crate) struct UnaryBody {
    data: Option<Bytes>,
    trailers: Option<HeaderMap>,
}

impl Body for UnaryBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if let Some(data) = this.data.take() {
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        Poll::Ready(this.trailers.take().map(|t| Ok(Frame::trailers(t))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none() && self.trailers.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
