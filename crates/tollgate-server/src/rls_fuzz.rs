//! Property tests of the rate limit gRPC API as it is served: arbitrary
//! bytes, and valid `RateLimitRequest`s encoded then mutated (a byte
//! flipped, the message cut, a byte put in), each sent as a request's body
//! through the whole service in-process (`grpc_unary`'s reading and
//! decoding, the handler, the memory store). Whatever comes
//! in, the service never panics and answers a status its docs name; an
//! `OK` answer holds one status per descriptor. Here for tollgate's own
//! mode; `erl/tests/fuzz.rs` runs the same inputs in ERL mode.
//!
//! Each property runs 256 cases (about a second in a debug build).

use std::sync::Arc;

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use http_body_util::{BodyExt, Full};
use proptest::prelude::*;
use prost::Message;
use tonic::codegen::{Body, Service};
use tonic::{Code, Status};
use tower::ServiceExt;

use crate::config::{Config, StoreSettings};
use crate::state::AppState;

/// A request's body: one gRPC frame holding `message`.
pub(crate) fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = vec![0];
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// What the service answered: its status, and the response on `OK`.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) code: Code,
    pub(crate) response: Option<RateLimitResponse>,
}

/// Sends `body` as a `ShouldRateLimit` call to `service`.
pub(crate) async fn call<S, B>(service: S, body: Vec<u8>) -> Answer
where
    S: Service<http::Request<Full<Bytes>>, Response = http::Response<B>>,
    S::Error: std::fmt::Debug,
    B: Body,
    B::Error: std::fmt::Debug,
{
    let request =
        http::Request::post("http://t/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(body)))
            .unwrap();
    let response = service.oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    if let Some(status) = Status::from_header_map(&parts.headers) {
        return Answer {
            code: status.code(),
            response: None,
        };
    }
    let collected = body.collect().await.unwrap();
    let status = collected
        .trailers()
        .and_then(Status::from_header_map)
        .expect("a grpc-status in the trailers");
    let data = collected.to_bytes();
    let response = (status.code() == Code::Ok).then(|| {
        assert!(data.len() >= 5, "an OK answer without a message");
        RateLimitResponse::decode(&data[5..]).unwrap()
    });
    Answer {
        code: status.code(),
        response,
    }
}

/// Valid requests over the names the test configs know, and some they
/// do not: domains, entry keys, overrides with any unit, any hits.
pub(crate) fn requests() -> impl Strategy<Value = RateLimitRequest> {
    let text = prop_oneof![
        Just(String::new()),
        Just("edge".to_string()),
        Just("remote_address".to_string()),
        Just("path".to_string()),
        "[a-z/.*]{1,12}",
        ".{0,40}",
        (1usize..1_100).prop_map(|n| "k".repeat(n)),
    ];
    let entry = (text.clone(), text.clone()).prop_map(|(key, value)| Entry { key, value });
    let limit = (any::<u32>(), -1i32..9).prop_map(|(requests_per_unit, unit)| RateLimitOverride {
        requests_per_unit,
        unit,
    });
    let hits = prop_oneof![Just(0u64), 1u64..5, any::<u64>(), Just(u64::MAX)];
    let descriptor = (
        prop::collection::vec(entry, 0..4),
        prop::option::of(limit),
        prop::option::of(hits),
        any::<bool>(),
    )
        .prop_map(|(entries, limit, hits, negative)| RateLimitDescriptor {
            entries,
            limit,
            hits_addend: hits.map(|value| UInt64Value { value }),
            is_negative_hits: negative,
        });
    (
        prop_oneof![Just("edge".to_string()), text],
        prop::collection::vec(descriptor, 0..6),
        prop_oneof![Just(0u32), 1u32..4, any::<u32>()],
    )
        .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
            domain,
            descriptors,
            hits_addend,
        })
}

/// A request's encoding, then one mutation of its bytes.
pub(crate) fn mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        requests(),
        any::<prop::sample::Index>(),
        any::<u8>(),
        0u8..4,
    )
        .prop_map(|(request, at, byte, how)| {
            let mut bytes = request.encode_to_vec();
            if bytes.is_empty() {
                return vec![byte];
            }
            let i = at.index(bytes.len());
            match how {
                0 => bytes[i] ^= byte | 1,
                1 => bytes.truncate(i),
                2 => bytes.insert(i, byte),
                _ => bytes.splice(i..i, [0xff; 10]).for_each(drop),
            }
            bytes
        })
}

/// Cases per property.
pub(crate) fn cases() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

const CONFIG: &str = include_str!("../tests/common/grpc.toml");

fn state(runtime: &tokio::runtime::Runtime) -> Arc<AppState> {
    let config = Config::parse("fuzz.toml", CONFIG).unwrap();
    let backend = runtime
        .block_on(crate::store::build(&StoreSettings::default()))
        .unwrap();
    Arc::new(AppState {
        backend,
        policies: arc_swap::ArcSwap::from_pointee(config.policies),
        tokens: Default::default(),
        metrics: None,
        status: Default::default(),
        overrides: crate::overrides::SharedOverrides::local(),
    })
}

/// Checks that `answer` has one of the codes `allowed`, and, when it is
/// `OK` to a request of `descriptors` descriptors, as many statuses.
pub(crate) fn check(
    answer: &Answer,
    allowed: &[Code],
    descriptors: Option<usize>,
) -> Result<(), TestCaseError> {
    prop_assert!(allowed.contains(&answer.code), "{answer:?}");
    if let (Some(response), Some(n)) = (&answer.response, descriptors) {
        prop_assert_eq!(response.statuses.len(), n);
    }
    Ok(())
}

/// tollgate's own mode answers `OK`, `INVALID_ARGUMENT` (bad input, an
/// undecodable message included) or `OUT_OF_RANGE` (a frame that says it
/// holds more than 4 MiB), never `INTERNAL` or `UNKNOWN`.
fn check_native(answer: &Answer, descriptors: Option<usize>) -> Result<(), TestCaseError> {
    let allowed = [Code::Ok, Code::InvalidArgument, Code::OutOfRange];
    check(answer, &allowed, descriptors)
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn arbitrary_bytes_are_answered(message in prop::collection::vec(any::<u8>(), 0..300)) {
        let runtime = runtime();
        let service = crate::grpc::service(state(&runtime));
        let answer = runtime.block_on(call(service, frame(&message)));
        check_native(&answer, None)?;
    }

    #[test]
    fn arbitrary_bodies_are_answered(body in prop::collection::vec(any::<u8>(), 0..64)) {
        let runtime = runtime();
        let service = crate::grpc::service(state(&runtime));
        let answer = runtime.block_on(call(service, body));
        check_native(&answer, None)?;
    }

    #[test]
    fn valid_requests_are_answered(request in requests()) {
        let runtime = runtime();
        let service = crate::grpc::service(state(&runtime));
        let answer = runtime.block_on(call(service, frame(&request.encode_to_vec())));
        check_native(&answer, Some(request.descriptors.len()))?;
    }

    #[test]
    fn mutated_requests_are_answered(message in mutated()) {
        let runtime = runtime();
        let service = crate::grpc::service(state(&runtime));
        let answer = runtime.block_on(call(service, frame(&message)));
        let descriptors = RateLimitRequest::decode(message.as_slice())
            .ok()
            .map(|r| r.descriptors.len());
        check_native(&answer, descriptors)?;
    }
}
