//! The gRPC APIs of `tollgate serve` (own mode and ERL mode) against what a
//! hostile or broken client sends: no token or a wrong one, messages that
//! do not decode (framed by hand and sent on a real HTTP/2 connection),
//! a flood of distinct limit overrides, `hits_addend` at the edge of
//! uint64, and a Redis that is gone.

mod common;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;
use envoy_types::pb::google::protobuf::UInt64Value;
use prost::Message;
use tollgate_testkit::RedisServer;
use tonic::transport::Channel;

use common::envoy::{ERL_CONFIG, request};
use common::h2::{frame, framed, raw_call};
use common::service::{Service, temp_dir};

const CONFIG: &str = include_str!("common/grpc.toml");

/// `tollgate serve` in its own mode, gRPC on, with `args`.
fn native(args: &[&str]) -> Service {
    let path = temp_dir().join("tollgate.toml");
    std::fs::write(&path, CONFIG).unwrap();
    let mut all = vec!["--grpc-listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    Service::start(&path, &all)
}

/// `tollgate serve` in ERL mode, with the environment `env`.
fn erl(env: &[(&str, &str)]) -> Service {
    let path = temp_dir().join("edge.yaml");
    std::fs::write(&path, ERL_CONFIG).unwrap();
    Service::erl(&path, env)
}

/// Request bodies that no `RateLimitRequest` decodes from, each with
/// what is wrong with it.
fn undecodable() -> Vec<(&'static str, Vec<u8>)> {
    let valid = request("edge", &[("remote_address", "10.0.0.1")]).encode_to_vec();
    vec![
        // field 1 (domain), its length a varint of eleven bytes
        (
            "a bad varint",
            frame(
                false,
                &[
                    0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                ],
            ),
        ),
        ("invalid UTF-8", frame(false, &[0x0a, 0x02, 0xff, 0xfe])),
        ("a length past the end", frame(false, &[0x0a, 0x7f, b'e'])),
        ("wire type 7", frame(false, &[0x0f, 0x00])),
        (
            "a compressed flag without grpc-encoding",
            frame(true, &valid),
        ),
        ("a frame cut short", frame(false, &valid)[..9].to_vec()),
        ("no message at all", Vec::new()),
    ]
}

/// Every undecodable message answers INVALID_ARGUMENT (tonic's own answer
/// is INTERNAL, which tollgate keeps for its own bugs), in both modes, and
/// the service goes on answering.
#[tokio::test]
async fn undecodable_messages_are_invalid_argument_in_both_modes() {
    let own = native(&[]);
    let erl = erl(&[]);
    for service in [&own, &erl] {
        let addr = service.grpc();
        for (what, body) in undecodable() {
            let (status, message) = raw_call(addr, body, &[]).await;
            assert_eq!(status, "3", "{what}: {message}");
            assert!(!message.is_empty(), "{what}");
        }
        // A valid message framed by hand is answered.
        let valid = framed("10.0.0.9");
        assert_eq!(raw_call(addr, valid, &[]).await.0, "0");
    }
}

/// With `--token`, a call without `authorization: Bearer <token>`, or with
/// another token, is UNAUTHENTICATED and consumes nothing; the health
/// check stays open.
#[tokio::test]
async fn the_token_guards_the_grpc_api_but_not_its_health_check() {
    let service = native(&["--token", "s3cret"]);
    let mut client = service.client().await;
    let with = |token: Option<&str>| {
        let mut call = tonic::Request::new(request("edge", &[("remote_address", "10.0.0.1")]));
        if let Some(token) = token {
            call.metadata_mut()
                .insert("authorization", token.parse().unwrap());
        }
        call
    };
    for bad in [
        None,
        Some("Bearer s3cres"),
        Some("s3cret"),
        Some("Basic s3cret"),
    ] {
        for _ in 0..3 {
            let e = client.should_rate_limit(with(bad)).await.unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{bad:?}");
        }
    }
    // Undecodable and unauthenticated: the token is checked first.
    let (status, _) = raw_call(service.grpc(), frame(false, &[0x0a, 0x02, 0xff, 0xfe]), &[]).await;
    assert_eq!(status, "16");
    let r = client
        .should_rate_limit(with(Some("Bearer s3cret")))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 2),
        "the refused calls took nothing of the limit of 3"
    );

    let channel = Channel::from_shared(format!("http://{}", service.grpc()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for name in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
        let answer = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: name.to_string(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            answer.status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{name:?}"
        );
    }
}

/// Distinct limit overrides (one per `requests_per_unit` value) make no
/// policy and no metric series each: the `policy` label of the decisions
/// has one value per unit, and the counts stay exact, each override value
/// apart.
#[tokio::test]
async fn distinct_limit_overrides_leave_a_fixed_set_of_series() {
    let service = native(&[]);
    let mut client = service.client().await;
    let with = |ip: &str, requests_per_unit: u32, unit: RateLimitUnit| {
        let mut r = request("edge", &[("remote_address", ip)]);
        r.descriptors[0].limit = Some(RateLimitOverride {
            requests_per_unit,
            unit: unit as i32,
        });
        r.descriptors.remove(0)
    };
    let units = [
        RateLimitUnit::Second,
        RateLimitUnit::Minute,
        RateLimitUnit::Day,
    ];
    for batch in 0..20u32 {
        let descriptors = (0..100u32)
            .map(|i| {
                let n = batch * 100 + i + 1;
                with("10.0.0.1", n, units[n as usize % units.len()])
            })
            .collect();
        let r = client
            .should_rate_limit(RateLimitRequest {
                domain: "edge".to_string(),
                descriptors,
                hits_addend: 0,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    let metrics = service.request("GET", "/metrics", "");
    let mut policies: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("tollgate_decisions_total{"))
        .filter_map(|l| l.split("policy=\"").nth(1)?.split('"').next())
        .collect();
    policies.sort_unstable();
    policies.dedup();
    assert!(
        policies
            == [
                "override-per-day",
                "override-per-minute",
                "override-per-second"
            ],
        "2000 distinct overrides: {} policy labels, the first {:?}",
        policies.len(),
        &policies[..policies.len().min(5)]
    );
    // Exact: an override of 2 a minute admits two, then refuses; another
    // value on the same descriptor counts apart.
    let mut codes = Vec::new();
    for _ in 0..3 {
        let mut r = request("edge", &[("remote_address", "10.0.0.2")]);
        r.descriptors = vec![with("10.0.0.2", 2, RateLimitUnit::Minute)];
        let r = client.should_rate_limit(r).await.unwrap().into_inner();
        let limit = r.statuses[0].current_limit.clone().unwrap();
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit),
            ("override-per-minute", 2)
        );
        codes.push((r.statuses[0].code, r.statuses[0].limit_remaining));
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(codes, [(ok, 1), (ok, 0), (over, 0)]);
    let mut r = request("edge", &[("remote_address", "10.0.0.2")]);
    r.descriptors = vec![with("10.0.0.2", 5, RateLimitUnit::Minute)];
    let r = client.should_rate_limit(r).await.unwrap().into_inner();
    assert_eq!((r.statuses[0].code, r.statuses[0].limit_remaining), (ok, 4));
}

/// ERL mode on a Redis that is gone: the counters cannot be reached, which
/// is UNAVAILABLE over gRPC and 503 over `/json`, not a bad request.
#[tokio::test]
async fn erl_mode_without_its_redis_is_unavailable() {
    let redis = RedisServer::start();
    let addr = redis.addr().to_string();
    let service = erl(&[("REDIS_URL", &addr), ("REDIS_SOCKET_TYPE", "tcp")]);
    let mut client = service.client().await;
    let r = client
        .should_rate_limit(request("edge", &[("remote_address", "10.0.0.1")]))
        .await
        .unwrap();
    assert_eq!(r.into_inner().statuses[0].limit_remaining, 2);
    redis.kill9();
    let e = client
        .should_rate_limit(request("edge", &[("remote_address", "10.0.0.1")]))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    let json = r#"{"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;
    let answer = service.request("POST", "/json", json);
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    // A bad request is still the caller's fault, Redis or not.
    let answer = service.request("POST", "/json", r#"{"domain":""}"#);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
}

/// `hits_addend` of 2^64 − 1 is OVER_LIMIT on both front ends of ERL mode,
/// as the memory counter answers it; 2^64 and more is a 400 on `/json`;
/// a key given twice is a 400.
#[tokio::test]
async fn erl_hits_addend_at_the_edge_of_uint64() {
    let redis = RedisServer::start();
    let addr = redis.addr().to_string();
    let service = erl(&[("REDIS_URL", &addr), ("REDIS_SOCKET_TYPE", "tcp")]);
    let mut client = service.client().await;
    let mut huge = request("edge", &[("remote_address", "10.0.0.1")]);
    huge.descriptors[0].hits_addend = Some(UInt64Value { value: u64::MAX });
    let r = client.should_rate_limit(huge).await.unwrap().into_inner();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    let body = |ip: &str, hits: &str| {
        format!(
            r#"{{"domain":"edge","descriptors":[{{"entries":[{{"key":"remote_address","value":"{ip}"}}],"hitsAddend":{hits}}}]}}"#
        )
    };
    let answer = service.request("POST", "/json", &body("10.0.0.2", "18446744073709551615"));
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    // The key is not poisoned: the next call is answered.
    let answer = service.request("POST", "/json", &body("10.0.0.2", "1"));
    assert!(answer.starts_with("HTTP/1.1 429 "), "{answer}");
    for hits in [
        "18446744073709551616",
        "18446744073709551617",
        "\"18446744073709551616\"",
    ] {
        let answer = service.request("POST", "/json", &body("10.0.0.3", hits));
        assert!(answer.starts_with("HTTP/1.1 400 "), "{hits}: {answer}");
    }
    let twice = r#"{"domain":"nowhere","domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.4"}]}]}"#;
    let answer = service.request("POST", "/json", twice);
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    // Nothing of that reached Redis for 10.0.0.3 or 10.0.0.4.
    let keys = redis.cli(&["KEYS", "*10.0.0.[34]*"]);
    assert_eq!(keys.trim(), "", "{keys}");
}
