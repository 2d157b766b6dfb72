//! The native gRPC service's two paths give the same answers: the common
//! message read from its bytes (`rls_view`) and its response written into
//! its frame (`rls_encode`), against prost's message and prost's encoding
//! of the message the general path builds, over a table of requests that
//! covers allowed and denied descriptors, several per request, tiers, an
//! unknown descriptor, `hits_addend` (the request's and a descriptor's),
//! keys under overrides (blocked, allowed, other numbers), a shadow
//! policy, a limit override and bad input.

use bytes::Bytes;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use prost::Message as _;

use crate::grpc::{Native, response};
use crate::grpc_unary::{Answer, Message, frame};
use crate::rls_encode::framed;
use crate::rls_view::View;

const CONFIG: &str = r#"
[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 3
window = "1h"

[policy.tiers.pro]
limit = 5

[[policy]]
name = "bucket"
algorithm = "token_bucket"
rate = 2
per = "1m"
burst = 4

[[policy]]
name = "watch"
algorithm = "fixed_window"
limit = 1
window = "1s"
mode = "shadow"

[[policy]]
name = "a-policy-name-long-enough-for-two-length-bytes-in-its-fields-xxx"
algorithm = "sliding_window"
limit = 2
window = "90s"

[[descriptor]]
domain = "edge"
entries = [{ key = "user" }]
policy = "api"

[[descriptor]]
domain = "edge"
entries = [{ key = "user" }, { key = "x-plan" }]
policy = "api"
tier_from = "x-plan"

[[descriptor]]
domain = "edge"
entries = [{ key = "ip" }]
policy = "bucket"

[[descriptor]]
domain = "edge"
entries = [{ key = "watched" }]
policy = "watch"

[[descriptor]]
domain = "edge"
entries = [{ key = "long" }]
policy = "a-policy-name-long-enough-for-two-length-bytes-in-its-fields-xxx"

[[override]]
policy = "api"
key = "4:edge4:user3:bot"
action = "block"

[[override]]
policy = "api"
key = "4:edge4:user3:vip"
action = "allow"

[[override]]
policy = "api"
key = "4:edge4:user4:big1"
limit = 7
"#;

async fn native() -> Native {
    let state = crate::alloc_tests::state_of(CONFIG).await;
    state.overrides.set_base(&state.policies());
    crate::grpc::service(state).0
}

fn descriptor(entries: &[(&str, &str)], hits: Option<u64>) -> RateLimitDescriptor {
    RateLimitDescriptor {
        hits_addend: hits.map(|value| UInt64Value { value }),
        ..crate::erl::tests::service::descriptor(entries)
    }
}

fn request(domain: &str, hits: u32, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: hits,
    }
}

/// The table: each request asked several times, so that counts run out.
fn requests() -> Vec<RateLimitRequest> {
    let one = |k: &str, v: &str| descriptor(&[(k, v)], None);
    let mut limited = descriptor(&[("user", "o")], None);
    limited.limit = Some(RateLimitOverride {
        requests_per_unit: 2,
        unit: 2,
    });
    vec![
        request("edge", 0, vec![one("user", "alice")]),
        request("edge", 0, vec![one("user", "bob"), one("ip", "10.0.0.1")]),
        request("edge", 2, vec![one("ip", "10.0.0.2")]),
        request("edge", 0, vec![descriptor(&[("ip", "10.0.0.3")], Some(3))]),
        request("edge", 0, vec![descriptor(&[("ip", "10.0.0.4")], Some(0))]),
        request(
            "edge",
            0,
            vec![descriptor(&[("user", "carol"), ("x-plan", "pro")], None)],
        ),
        request("edge", 0, vec![one("unknown", "x"), one("user", "dave")]),
        request("edge", 0, vec![one("unknown", "x")]),
        request("other", 0, vec![one("user", "alice")]),
        request("edge", 0, vec![]),
        request("edge", 0, vec![one("user", "bot")]),
        request("edge", 0, vec![one("user", "vip")]),
        request("edge", 0, vec![one("user", "big1")]),
        request("edge", 0, vec![one("watched", "w")]),
        request("edge", 0, vec![one("long", "l"), one("long", "m")]),
        request("edge", 0, vec![limited]),
        // Errors: the same status from both paths.
        request("", 0, vec![one("user", "alice")]),
        request(
            "edge",
            0,
            vec![descriptor(&[("user", "erin"), ("x-plan", "gold")], None)],
        ),
        request("edge", 0, vec![descriptor(&[("ip", "10.0.0.5")], Some(99))]),
    ]
}

/// The same decisions written both ways are the same bytes.
#[tokio::test]
async fn the_frame_written_in_place_is_prosts_byte_for_byte() {
    let native = native().await;
    let set = native.state().policies();
    let mut compared = 0;
    for round in 0..6 {
        for r in requests() {
            let both = native
                .decide(&set, &View::of(&r), |slots| {
                    (frame(&response(slots)), framed(slots))
                })
                .await;
            if let Ok((general, fast)) = both {
                assert_eq!(general, fast, "round {round}: {r:?}");
                compared += 1;
            }
        }
    }
    assert!(compared > 80, "{compared}");
}

/// Through the service: the common message's bytes and prost's decoded
/// message get the same answer from two services in the same state (the
/// same status, or a response prost reads the same but for the times).
#[tokio::test]
async fn both_paths_answer_alike() {
    let (fast, general) = (native().await, native().await);
    for round in 0..6 {
        for r in requests() {
            let bytes = Bytes::from(r.encode_to_vec());
            let read = View::parse(&bytes).is_some();
            let a = fast.answer_framed(Message::Raw(bytes.clone())).await;
            let b = general.answer_framed(Message::Decoded(r.clone())).await;
            match (a, b) {
                (Ok(a), Ok(b)) => {
                    let decode = |f: &Bytes| {
                        let mut m = envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse::decode(&f[5..]).unwrap();
                        for s in &mut m.statuses {
                            s.duration_until_reset = None;
                        }
                        m.response_headers_to_add.clear();
                        m
                    };
                    assert_eq!(decode(&a), decode(&b), "round {round}: {r:?}");
                }
                (Err(a), Err(b)) => {
                    assert_eq!((a.code(), a.message()), (b.code(), b.message()), "{r:?}");
                }
                (a, b) => panic!("{r:?} (read here: {read}): {a:?} against {b:?}"),
            }
        }
    }
}
