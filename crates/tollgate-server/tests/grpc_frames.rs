//! The gRPC server of `tollgate serve` (own mode and ERL mode) on how a
//! call arrives, with calls framed by hand on real HTTP/2 connections: a
//! body in pieces, several messages in one body, a frame over 4 MiB, a
//! compressed message, a deadline (`grpc-timeout`) that passes while the
//! body is awaited, methods and services it does not have. Each answers as
//! tonic's server did before `ShouldRateLimit` was answered without it.

mod common;

use bytes::Bytes;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use prost::Message;

use common::envoy::{ERL_CONFIG, descriptor, request};
use common::h2::{PATH, call_in_pieces, frame, framed, raw_call};
use common::service::{Service, temp_dir};

const CONFIG: &str = include_str!("common/grpc.toml");

/// Both modes: `tollgate serve` in its own mode (with `args`) and in ERL
/// mode, gRPC on.
fn both(args: &[&str]) -> [Service; 2] {
    let path = temp_dir().join("tollgate.toml");
    std::fs::write(&path, CONFIG).unwrap();
    let mut all = vec!["--grpc-listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let own = Service::start(&path, &all);
    let path = temp_dir().join("edge.yaml");
    std::fs::write(&path, ERL_CONFIG).unwrap();
    [own, Service::erl(&path, &[])]
}

/// A request of two descriptors on `ip`, framed.
fn two_descriptors(ip: &str) -> Vec<u8> {
    let message = RateLimitRequest {
        domain: "edge".to_string(),
        descriptors: vec![
            descriptor(&[("remote_address", ip)]),
            descriptor(&[("remote_address", ip)]),
        ],
        hits_addend: 0,
    };
    frame(false, &message.encode_to_vec())
}

/// The answer's message, from its frame.
fn response(data: &Bytes) -> RateLimitResponse {
    assert!(data.len() >= 5, "no message: {data:?}");
    assert_eq!(data[0], 0, "an uncompressed answer");
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    assert_eq!(data.len(), 5 + len, "one whole frame");
    RateLimitResponse::decode(&data[5..]).unwrap()
}

/// A message sent in pieces (its frame header cut in two) is read whole;
/// of several messages in one body the first is answered, and every one
/// must decode.
#[tokio::test]
async fn a_body_in_pieces_and_several_messages_are_read_whole() {
    for service in both(&[]) {
        let addr = service.grpc();
        let body = two_descriptors("10.0.1.1");
        let pieces = vec![body[..3].to_vec(), body[3..9].to_vec(), body[9..].to_vec()];
        let answer = call_in_pieces(addr, PATH, pieces, &[]).await;
        assert_eq!(answer.status, "0", "{}", answer.message);
        assert_eq!(response(&answer.data).statuses.len(), 2);
        let content_type = answer.headers.get("content-type").unwrap();
        assert_eq!(content_type, "application/grpc");

        // Two messages: the first (two descriptors) is answered.
        let one = framed("10.0.1.2");
        let body = [two_descriptors("10.0.1.2"), one.clone()].concat();
        let answer = call_in_pieces(addr, PATH, vec![body], &[]).await;
        assert_eq!(answer.status, "0", "{}", answer.message);
        assert_eq!(response(&answer.data).statuses.len(), 2);

        // A second message that does not decode fails the call.
        let body = [one, frame(false, &[0x0a, 0x02, 0xff, 0xfe])].concat();
        let (status, message) = raw_call(addr, body, &[]).await;
        assert_eq!(status, "3", "{message}");
        assert!(message.contains("not a valid message"), "{message}");
    }
}

/// A frame that says it holds more than 4 MiB is OUT_OF_RANGE at once,
/// naming the limit; a compressed message under a `grpc-encoding` the
/// server does not take is UNIMPLEMENTED, naming it; a flag other than 0
/// or 1 is INVALID_ARGUMENT; `grpc-encoding: identity` is no compression.
#[tokio::test]
async fn oversized_and_compressed_messages_are_refused() {
    for service in both(&[]) {
        let addr = service.grpc();
        let mut over = vec![0u8];
        over.extend_from_slice(&(4 * 1024 * 1024 + 1u32).to_be_bytes());
        over.extend_from_slice(&[0x0a; 64]);
        let (status, message) = raw_call(addr, over, &[]).await;
        assert_eq!(status, "11", "{message}");
        assert!(
            message.contains("4194305") && message.contains("4194304"),
            "{message}"
        );

        let valid = request("edge", &[("remote_address", "10.0.2.1")]).encode_to_vec();
        let answer = call_in_pieces(
            addr,
            PATH,
            vec![frame(true, &valid)],
            &[("grpc-encoding", "gzip")],
        )
        .await;
        assert_eq!(answer.status, "12", "{}", answer.message);
        assert!(answer.message.contains("gzip"), "{}", answer.message);
        let accepted = answer.headers.get("grpc-accept-encoding").unwrap();
        assert_eq!(accepted, "identity");

        let mut flag = frame(false, &valid);
        flag[0] = 2;
        let (status, message) = raw_call(addr, flag, &[]).await;
        assert_eq!(status, "3", "{message}");
        assert!(message.contains("compression flag: 2"), "{message}");

        let identity = frame(false, &valid);
        let (status, message) = raw_call(addr, identity, &[("grpc-encoding", "identity")]).await;
        assert_eq!(status, "0", "{message}");
    }
}

/// A call whose `grpc-timeout` passes while its body is still awaited is
/// CANCELLED ("Timeout expired"), and the service goes on answering.
#[tokio::test]
async fn a_call_past_its_grpc_timeout_is_cancelled() {
    for service in both(&[]) {
        let addr = service.grpc();
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (mut h2, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let call = http::Request::post(format!("http://{addr}{PATH}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .header("grpc-timeout", "200m")
            .body(())
            .unwrap();
        let (answer, mut send) = h2.send_request(call, false).unwrap();
        // Half a frame header, and the rest never.
        send.send_data(Bytes::from_static(&[0, 0]), false).unwrap();
        let answer = answer.await.unwrap();
        let headers = answer.headers();
        assert_eq!(headers.get("grpc-status").unwrap(), "1", "{headers:?}");
        assert_eq!(headers.get("grpc-message").unwrap(), "Timeout%20expired");
        drop(send);

        let valid = framed("10.0.3.1");
        assert_eq!(raw_call(addr, valid, &[]).await.0, "0");
    }
}

/// Another method of the rate limit service, or another service, is
/// UNIMPLEMENTED with no message; with `--token`, the rate limit service's
/// paths want the token first, as they did.
#[tokio::test]
async fn unknown_methods_and_services_are_unimplemented() {
    let [own, erl] = both(&["--token", "s3cret"]);
    let bearer = [("authorization", "Bearer s3cret")];
    let valid = framed("10.0.4.1");
    for (service, headers) in [(&own, &bearer[..]), (&erl, &[][..])] {
        for path in [
            "/envoy.service.ratelimit.v3.RateLimitService/Other",
            "/envoy.service.ratelimit.v2.RateLimitService/ShouldRateLimit",
            "/no.Such/Method",
        ] {
            let answer = call_in_pieces(service.grpc(), path, vec![valid.clone()], headers).await;
            assert_eq!(answer.status, "12", "{path}: {}", answer.message);
            assert_eq!(answer.message, "", "{path}");
        }
    }
    let other = "/envoy.service.ratelimit.v3.RateLimitService/Other";
    let answer = call_in_pieces(own.grpc(), other, vec![valid], &[]).await;
    assert_eq!(answer.status, "16", "{}", answer.message);
}
