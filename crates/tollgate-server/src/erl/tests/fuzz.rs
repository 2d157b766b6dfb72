//! `crate::rls_fuzz`'s properties in ERL mode: arbitrary bytes, valid
//! requests and mutated ones, through tonic and ERL mode's service on the
//! memory counter. ERL mode answers `OK`, `UNKNOWN` (a call ERL fails: an
//! empty domain or descriptor list, an override without a unit),
//! `INVALID_ARGUMENT` (an undecodable message) or `OUT_OF_RANGE` (a frame
//! that says it holds more than 4 MiB), never `INTERNAL`; an `OK` answer
//! holds one status per descriptor.

use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use proptest::prelude::*;
use prost::Message;
use tonic::Code;

use crate::erl::counter::MemoryCounter;
use crate::erl::files::parse;
use crate::erl::settings::Settings;
use crate::erl::state::ErlState;
use crate::rls_fuzz::{Answer, call, cases, frame, mutated, requests, runtime};

const CONFIG: &str = "
domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 3}
    descriptors:
      - key: path
        value: /api/*
        share_threshold: true
        rate_limit: {unit: hour, requests_per_unit: 5}
  - key: path
    rate_limit: {unlimited: true}
  - key: user
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 0}
";

fn service() -> crate::erl::grpc::Served {
    let config = parse(&[("edge.yaml".to_string(), CONFIG.to_string())], None).unwrap();
    let settings = Settings {
        near_limit_ratio: 0.8,
        ..Settings::default()
    };
    let state = ErlState::new(config, settings, Arc::new(MemoryCounter::default()), None);
    crate::erl::grpc::service(Arc::new(state))
}

fn check(answer: &Answer, descriptors: Option<usize>) -> Result<(), TestCaseError> {
    let allowed = [
        Code::Ok,
        Code::Unknown,
        Code::InvalidArgument,
        Code::OutOfRange,
    ];
    crate::rls_fuzz::check(answer, &allowed, descriptors)
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn arbitrary_bytes_are_answered(message in prop::collection::vec(any::<u8>(), 0..300)) {
        let answer = runtime().block_on(call(service(), frame(&message)));
        check(&answer, None)?;
    }

    #[test]
    fn arbitrary_bodies_are_answered(body in prop::collection::vec(any::<u8>(), 0..64)) {
        let answer = runtime().block_on(call(service(), body));
        check(&answer, None)?;
    }

    #[test]
    fn valid_requests_are_answered(request in requests()) {
        let answer = runtime().block_on(call(service(), frame(&request.encode_to_vec())));
        check(&answer, Some(request.descriptors.len()))?;
    }

    #[test]
    fn mutated_requests_are_answered(message in mutated()) {
        let answer = runtime().block_on(call(service(), frame(&message)));
        let descriptors = RateLimitRequest::decode(message.as_slice())
            .ok()
            .map(|r| r.descriptors.len());
        check(&answer, descriptors)?;
    }
}
