//! Tiers through `tollgate serve`: a request's `"tier"` is honoured by
//! every decision endpoint (a batch's checks, reservations, leases, usage
//! records), an unknown one is a 400 naming `tier`, and the answer's
//! `limit` and `RateLimit-Policy` show the tier's (or the key's
//! override's) numbers; over gRPC a `[[descriptor]]` table's `tier_from`
//! takes the tier from a descriptor entry (Envoy's `x-plan`), an unknown
//! one `INVALID_ARGUMENT` naming `tier`.

mod common;

use common::service::{Service, temp_dir};
use serde_json::Value;

const CONFIG: &str = r#"[[policy]]
name = "api"
algorithm = "fixed_window"
limit = 3
window = "1h"

[policy.tiers.pro]
limit = 50

[[policy]]
name = "bucket"
algorithm = "token_bucket"
rate = 1
per = "1h"
burst = 5

[policy.tiers.pro]
burst = 40

[[policy]]
name = "conc"
algorithm = "concurrency"
limit = 1
lease = "1m"

[policy.tiers.pro]
limit = 4

[[descriptor]]
domain = "edge"
entries = [{ key = "user" }, { key = "x-plan" }]
policy = "api"
tier_from = "x-plan"
"#;

fn start() -> Service {
    let dir = temp_dir();
    let config = dir.join("tollgate.toml");
    std::fs::write(&config, CONFIG).unwrap();
    Service::start(&config, &["--grpc-listen", "127.0.0.1:0"])
}

/// The status, the `RateLimit-Policy` header and the JSON body.
fn post(s: &Service, path: &str, body: &str) -> (u16, String, Value) {
    let response = s.request("POST", path, body);
    let status = response[9..12].parse().unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let policy = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(": ")?;
            name.eq_ignore_ascii_case("ratelimit-policy")
                .then(|| value.to_string())
        })
        .unwrap_or_default();
    (status, policy, serde_json::from_str(body).unwrap())
}

#[test]
fn every_decision_endpoint_honours_the_tier_and_shows_its_numbers() {
    let s = start();
    // A batch: each check in its own tier.
    let (status, header, body) = post(
        &s,
        "/v1/check",
        r#"{"checks": [{"policy": "api", "key": "a", "tier": "pro"}, {"policy": "api", "key": "b"}]}"#,
    );
    assert_eq!(status, 200, "{body}");
    let d = &body["decisions"];
    assert_eq!(
        (d[0]["limit"].as_u64(), d[0]["remaining"].as_u64()),
        (Some(50), Some(49))
    );
    assert_eq!(
        (d[1]["limit"].as_u64(), d[1]["remaining"].as_u64()),
        (Some(3), Some(2))
    );
    assert!(
        header.contains("q=50") && header.contains("q=3"),
        "{header}"
    );

    // A reservation.
    let (status, header, body) = post(
        &s,
        "/v1/reserve",
        r#"{"policy": "bucket", "key": "r", "cost": 30, "tier": "pro"}"#,
    );
    assert_eq!((status, body["limit"].as_u64()), (200, Some(40)), "{body}");
    assert!(header.contains("q=40"), "{header}");
    let (status, _, body) = post(
        &s,
        "/v1/reserve",
        r#"{"policy": "bucket", "key": "r2", "cost": 30}"#,
    );
    assert_eq!(status, 400, "over the policy's own burst: {body}");

    // A lease: the tier's capacity.
    for i in 0..4 {
        let (status, header, body) = post(
            &s,
            "/v1/acquire",
            r#"{"policy": "conc", "key": "c", "tier": "pro"}"#,
        );
        assert_eq!(status, 200, "lease {i}: {body}");
        assert!(header.contains("q=4"), "{header}");
    }
    let (status, _, _) = post(
        &s,
        "/v1/acquire",
        r#"{"policy": "conc", "key": "c", "tier": "pro"}"#,
    );
    assert_eq!(status, 429, "the fifth lease");
    let (status, _, _) = post(&s, "/v1/acquire", r#"{"policy": "conc", "key": "d"}"#);
    assert_eq!(status, 200);
    let (status, _, _) = post(&s, "/v1/acquire", r#"{"policy": "conc", "key": "d"}"#);
    assert_eq!(status, 429, "the policy's own capacity, 1");

    // Usage records and `at_most`.
    let (status, header, body) = post(
        &s,
        "/v1/charge",
        r#"{"policy": "bucket", "key": "u", "cost": 10, "tier": "pro"}"#,
    );
    assert_eq!(
        (status, body["allowed"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    assert_eq!(
        (body["limit"].as_u64(), body["remaining"].as_u64()),
        (Some(40), Some(30))
    );
    assert!(header.contains("q=40"), "{header}");
    let (_, _, body) = post(
        &s,
        "/v1/settle",
        r#"{"policy": "bucket", "key": "u", "estimate": 10, "actual": 5, "tier": "pro"}"#,
    );
    assert_eq!(body["remaining"].as_u64(), Some(35), "{body}");
    let (_, _, body) = post(
        &s,
        "/v1/refund",
        r#"{"policy": "bucket", "key": "u", "cost": 5, "tier": "pro"}"#,
    );
    assert_eq!(body["remaining"].as_u64(), Some(40), "{body}");
    let (_, header, body) = post(
        &s,
        "/v1/check",
        r#"{"policy": "bucket", "key": "m", "at_most": 100, "tier": "pro"}"#,
    );
    assert_eq!(body["granted"].as_u64(), Some(40), "{body}");
    assert!(header.contains("q=40"), "{header}");

    // An unknown tier, on each endpoint: a 400 naming `tier`.
    for (path, body) in [
        (
            "/v1/check",
            r#"{"checks": [{"policy": "api", "key": "a", "tier": "gold"}]}"#,
        ),
        (
            "/v1/reserve",
            r#"{"policy": "bucket", "key": "a", "tier": "gold"}"#,
        ),
        (
            "/v1/acquire",
            r#"{"policy": "conc", "key": "a", "tier": "gold"}"#,
        ),
        (
            "/v1/charge",
            r#"{"policy": "bucket", "key": "a", "cost": 1, "tier": "gold"}"#,
        ),
        (
            "/v1/refund",
            r#"{"policy": "bucket", "key": "a", "cost": 1, "tier": "gold"}"#,
        ),
        (
            "/v1/settle",
            r#"{"policy": "bucket", "key": "a", "estimate": 1, "actual": 1, "tier": "gold"}"#,
        ),
        (
            "/v1/check",
            r#"{"policy": "bucket", "key": "a", "at_most": 1, "tier": "gold"}"#,
        ),
        (
            "/v1/check",
            r#"{"checks": [{"policy": "api", "key": "a", "tier": 7}]}"#,
        ),
    ] {
        let (status, _, answer) = post(&s, path, body);
        assert_eq!(status, 400, "{path} {body}: {answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("`tier`"),
            "{path} {body}: {answer}"
        );
    }
}

#[test]
fn an_override_shows_its_numbers_on_every_endpoint() {
    let s = start();
    let put = |path: &str, body: &str| {
        let response = s.request("PUT", path, body);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    };
    put("/v1/overrides/bucket/acme", r#"{"burst": 20}"#);
    put("/v1/overrides/conc/acme", r#"{"limit": 2}"#);
    let (_, header, body) = post(
        &s,
        "/v1/reserve",
        r#"{"policy": "bucket", "key": "acme", "cost": 1}"#,
    );
    assert!(header.contains("q=20"), "{header} {body}");
    let (_, header, body) = post(
        &s,
        "/v1/charge",
        r#"{"policy": "bucket", "key": "acme", "cost": 1}"#,
    );
    assert!(header.contains("q=20"), "{header} {body}");
    assert_eq!(body["limit"].as_u64(), Some(20), "{body}");
    let (_, header, body) = post(&s, "/v1/acquire", r#"{"policy": "conc", "key": "acme"}"#);
    assert!(header.contains("q=2"), "{header} {body}");
    // The key's override wins over the request's tier.
    let (_, header, body) = post(
        &s,
        "/v1/reserve",
        r#"{"policy": "bucket", "key": "acme", "cost": 1, "tier": "pro"}"#,
    );
    assert!(header.contains("q=20"), "{header} {body}");
}

#[tokio::test]
async fn a_descriptor_entry_names_the_tier_over_grpc() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;

    let s = start();
    let grpc = s.grpc.clone().expect("a gRPC listener");
    let mut client = RateLimitServiceClient::connect(format!("http://{grpc}"))
        .await
        .unwrap();
    let mut ask = async |user: &str, plan: &str| {
        let entry = |key: &str, value: &str| Entry {
            key: key.into(),
            value: value.into(),
        };
        let request = RateLimitRequest {
            domain: "edge".into(),
            descriptors: vec![RateLimitDescriptor {
                entries: vec![entry("user", user), entry("x-plan", plan)],
                ..Default::default()
            }],
            hits_addend: 1,
        };
        client.should_rate_limit(request).await
    };
    let r = ask("acme", "pro").await.unwrap().into_inner();
    let status = &r.statuses[0];
    assert_eq!(status.current_limit.as_ref().unwrap().requests_per_unit, 50);
    assert_eq!(status.limit_remaining, 49);
    assert!(
        r.response_headers_to_add
            .iter()
            .any(|h| h.key.eq_ignore_ascii_case("ratelimit-policy") && h.value.contains("q=50")),
        "{:?}",
        r.response_headers_to_add
    );
    // A plan the policy lacks.
    let err = ask("acme", "gold").await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument);
    assert!(
        err.message().contains("`tier`") && err.message().contains("descriptor 0"),
        "{}",
        err.message()
    );
    let err = ask("acme", "").await.unwrap_err();
    assert_eq!(
        err.code(),
        tonic::Code::InvalidArgument,
        "an empty tier: {}",
        err.message()
    );
    // The tier entry is left out of the key: the HTTP API sees the count.
    let (_, _, body) = post(
        &s,
        "/v1/check",
        r#"{"policy": "api", "key": "4:edge4:user4:acme", "cost": 0, "tier": "pro"}"#,
    );
    assert_eq!(body["remaining"].as_u64(), Some(49), "{body}");
}
