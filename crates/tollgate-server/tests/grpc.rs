//! Envoy's rate limit gRPC API of `tollgate serve`, driven by a real tonic
//! client built from envoy-types, as Envoy would call it.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;

mod common;

use common::envoy::descriptor;
use common::service::{Service, temp_dir};

/// The instant (2027-01-15T08:00:00Z, the start of a minute and of an
/// hour) every service here decides at: its clock is pinned there
/// (`TOLLGATE_TEST_CLOCK_MS`, for tests only), so that no window turns
/// while a test counts in it, however slow the machine.
const PINNED_MS: &str = "1800000000000";

const CONFIG: &str = include_str!("common/grpc.toml");

/// `tollgate serve` with gRPC, on `CONFIG`, its clock pinned.
fn start() -> Service {
    let path = temp_dir().join("tollgate.toml");
    std::fs::write(&path, CONFIG).unwrap();
    Service::start_env(
        &path,
        &["--grpc-listen", "127.0.0.1:0"],
        &[("TOLLGATE_TEST_CLOCK_MS", PINNED_MS)],
    )
}

async fn ask(
    client: &mut RateLimitServiceClient<tonic::transport::Channel>,
    domain: &str,
    descriptors: Vec<RateLimitDescriptor>,
    hits: u32,
) -> Result<RateLimitResponse, tonic::Status> {
    let request = RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: hits,
    };
    client
        .should_rate_limit(request)
        .await
        .map(|r| r.into_inner())
}

#[tokio::test]
async fn should_rate_limit_answers_like_envoys_rate_limit_service() {
    let service = start();
    let mut client = RateLimitServiceClient::connect(format!("http://{}", service.grpc()))
        .await
        .unwrap();
    let ip = || descriptor(&[("remote_address", "10.0.0.1")]);

    let r = ask(&mut client, "edge", vec![ip()], 0).await.unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    let s = &r.statuses[0];
    assert_eq!(s.code, Code::Ok as i32);
    assert_eq!(s.limit_remaining, 2, "hits_addend 0 counts as 1");
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (3, Unit::Minute as i32, "per-ip")
    );
    // The whole minute: the clock stands at its start.
    assert_eq!(s.duration_until_reset.as_ref().unwrap().seconds, 60);
    let headers: Vec<(&str, &str)> = r
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.as_str(), h.value.as_str()))
        .collect();
    assert!(
        headers.contains(&("ratelimit-policy", "\"per-ip\";q=3;w=60")),
        "{headers:?}"
    );

    let r = ask(&mut client, "edge", vec![ip()], 2).await.unwrap();
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 0),
        "hits_addend 2"
    );
    let r = ask(&mut client, "edge", vec![ip()], 0).await.unwrap();
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(r.statuses[0].code, Code::OverLimit as i32);
    assert!(r.statuses[0].duration_until_reset.as_ref().unwrap().seconds <= 60);

    // Several descriptors: one per policy, one unknown (OK, no limit), and
    // a value that must match exactly.
    let books = descriptor(&[("remote_address", "10.0.0.2"), ("path", "/api/books")]);
    let unknown = descriptor(&[("user", "u1")]);
    let other_path = descriptor(&[("remote_address", "10.0.0.2"), ("path", "/api/other")]);
    let r = ask(&mut client, "edge", vec![books, unknown, other_path], 0)
        .await
        .unwrap();
    assert_eq!(r.overall_code, Code::Ok as i32);
    assert_eq!(r.statuses.len(), 3);
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().name, "books");
    assert_eq!(r.statuses[0].limit_remaining, 1);
    assert!(r.statuses[1].current_limit.is_none() && r.statuses[1].code == Code::Ok as i32);
    assert!(
        r.statuses[2].current_limit.is_none(),
        "a value that differs does not match"
    );
    // Another domain shares nothing.
    let r = ask(&mut client, "internal", vec![ip()], 0).await.unwrap();
    assert!(r.statuses[0].current_limit.is_none());

    // Bad input.
    let e = ask(&mut client, "", vec![ip()], 0).await.unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    let long = "x".repeat(2000);
    let e = ask(
        &mut client,
        "edge",
        vec![descriptor(&[("remote_address", &long)])],
        0,
    )
    .await
    .unwrap_err();
    assert_eq!(e.code(), tonic::Code::InvalidArgument);
    assert!(e.message().contains("descriptor 0"), "{}", e.message());
    let e = ask(&mut client, "edge", vec![ip()], 5).await.unwrap_err();
    assert_eq!(
        e.code(),
        tonic::Code::InvalidArgument,
        "5 hits on a limit of 3"
    );

    let metrics = service.request("GET", "/metrics", "");
    assert!(
        metrics.contains("tollgate_grpc_requests_total{method=\"ShouldRateLimit\",code=\"ok\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("code=\"invalidargument\""), "{metrics}");
}

/// A descriptor's limit override (Envoy's `limit`, from route metadata)
/// replaces the table's limit with a fixed window of `requests_per_unit`
/// per `unit` under the descriptor's key, as Envoy's own service does, in
/// any domain that has a table, whether or not a table matches.
#[tokio::test]
async fn limit_overrides_count_as_envoys_service_does() {
    let service = start();
    let mut client = RateLimitServiceClient::connect(format!("http://{}", service.grpc()))
        .await
        .unwrap();
    let with =
        |entries: &[(&str, &str)], requests_per_unit, unit: RateLimitUnit| RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit,
                unit: unit as i32,
            }),
            ..descriptor(entries)
        };
    // The table says 3 a minute for this address; the override says 2.
    let ip = || with(&[("remote_address", "10.9.9.9")], 2, RateLimitUnit::Minute);
    let mut codes = Vec::new();
    for _ in 0..3 {
        let r = ask(&mut client, "edge", vec![ip()], 0).await.unwrap();
        let s = &r.statuses[0];
        let limit = s.current_limit.as_ref().unwrap();
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("override-per-minute", 2, Unit::Minute as i32)
        );
        assert!(s.duration_until_reset.as_ref().unwrap().seconds <= 60);
        codes.push((s.code, s.limit_remaining));
    }
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    assert_eq!(codes, [(ok, 1), (ok, 0), (over, 0)]);
    // Another override of the same descriptor counts apart; the table's
    // own limit, without an override, too.
    let five = with(&[("remote_address", "10.9.9.9")], 5, RateLimitUnit::Day);
    let r = ask(&mut client, "edge", vec![five], 0).await.unwrap();
    assert_eq!((r.statuses[0].code, r.statuses[0].limit_remaining), (ok, 4));
    let plain = descriptor(&[("remote_address", "10.9.9.9")]);
    let r = ask(&mut client, "edge", vec![plain], 0).await.unwrap();
    assert_eq!(r.statuses[0].current_limit.as_ref().unwrap().name, "per-ip");
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // No table matches these entries, but the domain has tables.
    let user = || with(&[("user", "u9")], 1, RateLimitUnit::Hour);
    let r = ask(&mut client, "edge", vec![user(), user()], 0)
        .await
        .unwrap();
    assert_eq!(r.overall_code, over, "{r:?}");
    assert_eq!((r.statuses[0].code, r.statuses[1].code), (ok, over));
    // A domain without tables limits nothing, as without an override.
    let r = ask(&mut client, "nowhere", vec![user()], 0).await.unwrap();
    assert!(r.statuses[0].current_limit.is_none() && r.statuses[0].code == ok);
    // Bad overrides name the descriptor and the field.
    for (bad, field) in [
        (
            with(&[("user", "u9")], 1, RateLimitUnit::Unknown),
            "limit.unit",
        ),
        (
            with(&[("user", "u9")], 0, RateLimitUnit::Second),
            "limit.requests_per_unit",
        ),
    ] {
        let e = ask(
            &mut client,
            "edge",
            vec![descriptor(&[("user", "u1")]), bad],
            0,
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(
            e.message().contains("descriptor 1") && e.message().contains(field),
            "{}",
            e.message()
        );
    }
}

#[test]
fn descriptors_are_validated_with_their_lines() {
    let path = temp_dir().join("bad.toml");
    let bad = format!(
        "{CONFIG}\n[[descriptor]]\ndomain = \"edge\"\nentries = [{{ key = \"remote_address\" }}]\npolicy = \"per-ip\"\n\n[[descriptor]]\ndomain = \"edge\"\nentries = [{{ key = \"k\" }}]\npolicy = \"nope\"\n"
    );
    std::fs::write(&path, &bad).unwrap();
    let out = common::tollgate()
        .args(["validate", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line_of = |needle: &str| bad.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(err.contains("appear twice"), "{err}");
    assert!(
        err.contains(&format!("bad.toml:{}", line_of("policy = \"nope\""))) && err.contains("nope"),
        "{err}"
    );
}
