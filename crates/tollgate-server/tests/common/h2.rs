//! gRPC calls framed by hand on a real HTTP/2 connection (the `h2`
//! client), for what tonic's client will not send: undecodable or
//! oversized messages, compressed flags, a body in pieces, unknown paths.

use bytes::{Bytes, BytesMut};

/// The path of `ShouldRateLimit`.
pub(crate) const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// `message` as one gRPC frame: the compressed flag, the length, the bytes.
pub(crate) fn frame(compressed: bool, message: &[u8]) -> Vec<u8> {
    let mut out = vec![u8::from(compressed)];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// `RateLimitRequest{domain: "edge", descriptors: [{remote_address: ip}]}`
/// as one uncompressed frame.
pub(crate) fn framed(ip: &str) -> Vec<u8> {
    use prost::Message;
    let message = super::envoy::request("edge", &[("remote_address", ip)]);
    frame(false, &message.encode_to_vec())
}

/// What a call was answered: its `grpc-status` and `grpc-message` (from
/// the headers of a trailers-only answer, or from the trailers), and the
/// message bytes before the trailers (with their frame header).
#[derive(Debug)]
pub(crate) struct RawAnswer {
    pub(crate) status: String,
    pub(crate) message: String,
    pub(crate) data: Bytes,
    /// The answer's headers (a trailers-only answer's status among them).
    pub(crate) headers: http::HeaderMap,
}

/// One `ShouldRateLimit` call whose body is `body`, byte for byte, on a
/// fresh HTTP/2 connection, with `headers` added: its `grpc-status` and
/// `grpc-message`.
pub(crate) async fn raw_call(
    addr: &str,
    body: Vec<u8>,
    headers: &[(&str, &str)],
) -> (String, String) {
    let answer = call_in_pieces(addr, PATH, vec![body], headers).await;
    (answer.status, answer.message)
}

/// A call to `path` whose body is sent as `pieces`, one DATA frame each
/// (the last ending the stream), on a fresh HTTP/2 connection.
pub(crate) async fn call_in_pieces(
    addr: &str,
    path: &str,
    pieces: Vec<Vec<u8>>,
    headers: &[(&str, &str)],
) -> RawAnswer {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut call = http::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        call = call.header(*name, *value);
    }
    let (answer, mut send) = h2.send_request(call.body(()).unwrap(), false).unwrap();
    let n = pieces.len();
    if n == 0 {
        send.send_data(Bytes::new(), true).unwrap();
    }
    for (i, piece) in pieces.into_iter().enumerate() {
        send.send_data(Bytes::from(piece), i + 1 == n).unwrap();
    }
    let (parts, mut body) = answer.await.unwrap().into_parts();
    let status_of = |h: &http::HeaderMap| {
        let get = |name: &str| {
            h.get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        let message = h.get("grpc-message").map(|v| unescape(v.as_bytes()));
        get("grpc-status").map(|s| (s, message.unwrap_or_default()))
    };
    if let Some((status, message)) = status_of(&parts.headers) {
        return RawAnswer {
            status,
            message,
            data: Bytes::new(),
            headers: parts.headers,
        };
    }
    let mut data = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    let (status, message) = status_of(&trailers).expect("a grpc-status in the trailers");
    RawAnswer {
        status,
        message,
        data: data.freeze(),
        headers: parts.headers,
    }
}

/// A `grpc-message` as it was written: its `%XX` escapes decoded.
fn unescape(escaped: &[u8]) -> String {
    let mut out = Vec::with_capacity(escaped.len());
    let mut i = 0;
    while i < escaped.len() {
        let hex = escaped
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (escaped[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
