//! Every decision the service answers is counted once in
//! `tollgate_decisions_total`, whatever the store stack: memory, Redis
//! (leases over the resilient store, its deny cache), Redis killed under
//! it (the failure policy), and Redis down from the start (the deferred
//! store). Mixed traffic (single checks, batches, leased keys flooded
//! until they deny locally, acquisitions) goes through the binary; the
//! metric, summed per policy and outcome, must equal what the clients
//! received.

mod common;

use std::collections::BTreeMap;

use serde_json::Value;
use tollgate_testkit::RedisServer;

use common::service::{Service, temp_dir};

const CONFIG: &str = r#"
[store]
deadline = "10s"

[[policy]]
name = "plain"
algorithm = "fixed_window"
limit = 5
window = "1h"

[[policy]]
name = "leased-window"
algorithm = "fixed_window"
limit = 40
window = "1h"
batch = "auto"

[[policy]]
name = "leased-bucket"
algorithm = "token_bucket"
rate = 1
per = "1h"
burst = 30
# The old name of `batch`, read (with a warning) until the next release.
lease = "auto"

[[policy]]
name = "bucket"
algorithm = "gcra"
rate = 1
per = "1h"
burst = 3

[[policy]]
name = "slots"
algorithm = "concurrency"
limit = 2
lease = "30s"
"#;

/// (policy, outcome) → count.
type Tally = BTreeMap<(String, String), u64>;

/// The status and JSON body of a raw HTTP response.
fn parse(response: &str) -> (u16, Value) {
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

fn outcome(allowed: bool) -> String {
    if allowed { "allowed" } else { "denied" }.to_string()
}

/// Mixed traffic on every policy; what the clients were told.
fn traffic(s: &Service, tally: &mut Tally, round: usize) {
    let mut count = |policy: &str, allowed: bool| {
        *tally
            .entry((policy.to_string(), outcome(allowed)))
            .or_default() += 1;
    };
    for policy in ["plain", "leased-window", "leased-bucket", "bucket"] {
        // One key flooded past its limit, a few others once each.
        for i in 0..60 {
            let key = if i % 10 == 9 {
                format!("other-{round}-{i}")
            } else {
                format!("hot-{round}")
            };
            let body = format!(r#"{{"policy":"{policy}","key":"{key}"}}"#);
            let (status, answer) = parse(&s.request("POST", "/v1/check", &body));
            assert!(status == 200 || status == 429, "{status}: {answer}");
            assert_eq!(answer["allowed"], status == 200);
            count(policy, status == 200);
        }
    }
    // Batches, across policies.
    for _ in 0..5 {
        let body = format!(
            r#"{{"checks":[{{"policy":"plain","key":"batch-{round}"}},{{"policy":"leased-window","key":"batch-{round}"}},{{"policy":"bucket","key":"batch-{round}"}}]}}"#
        );
        let (status, answer) = parse(&s.request("POST", "/v1/check", &body));
        assert!(status == 200 || status == 429, "{status}: {answer}");
        for (d, policy) in
            answer["decisions"]
                .as_array()
                .unwrap()
                .iter()
                .zip(["plain", "leased-window", "bucket"])
        {
            count(policy, d["allowed"].as_bool().unwrap());
        }
    }
    for _ in 0..3 {
        let body = format!(r#"{{"policy":"slots","key":"s-{round}"}}"#);
        let (status, _) = parse(&s.request("POST", "/v1/acquire", &body));
        assert!(status == 200 || status == 429, "{status}");
        count("slots", status == 200);
    }
}

/// `tollgate_decisions_total` summed per (policy, outcome), and the
/// sources it names.
fn counted(s: &Service) -> (Tally, Vec<String>) {
    let (status, _) = parse(&s.request("GET", "/healthz", ""));
    assert_eq!(status, 200);
    let text = s.request("GET", "/metrics", "");
    let mut tally = Tally::new();
    let mut sources = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("tollgate_decisions_total{") else {
            continue;
        };
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|l| l.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap()
        };
        *tally
            .entry((label("policy"), label("outcome")))
            .or_default() += value.trim().parse::<u64>().unwrap();
        sources.push(format!("{}/{}", label("policy"), label("source")));
    }
    (tally, sources)
}

fn config() -> std::path::PathBuf {
    let path = temp_dir().join("tollgate.toml");
    std::fs::write(&path, CONFIG).unwrap();
    path
}

fn assert_counted_once(s: &Service, received: &Tally, stack: &str) -> Vec<String> {
    let (metric, sources) = counted(s);
    assert_eq!(
        &metric, received,
        "{stack}: the metric (left) against what the clients received (right)"
    );
    sources
}

#[test]
fn every_decision_is_counted_once_on_memory() {
    let s = Service::start(&config(), &[]);
    let mut received = Tally::new();
    traffic(&s, &mut received, 0);
    let sources = assert_counted_once(&s, &received, "memory");
    assert!(sources.iter().all(|s| s.ends_with("/store")), "{sources:?}");
}

#[test]
fn every_decision_is_counted_once_on_redis_leased_cached_and_failed() {
    let redis = RedisServer::start();
    let s = Service::start(&config(), &["--redis", &redis.url()]);
    let mut received = Tally::new();
    traffic(&s, &mut received, 0);
    let sources = assert_counted_once(&s, &received, "redis");
    for wanted in [
        "leased-window/lease",
        "leased-bucket/lease",
        "bucket/cache",
        "plain/store",
    ] {
        assert!(
            sources.iter().any(|s| s == wanted),
            "no {wanted} in {sources:?}"
        );
    }
    // Redis gone: the failure policy answers, the leases held still do.
    redis.kill9();
    traffic(&s, &mut received, 1);
    let sources = assert_counted_once(&s, &received, "redis killed");
    assert!(
        sources.iter().any(|s| s.ends_with("/fallback")),
        "{sources:?}"
    );
}

#[test]
fn every_decision_is_counted_once_on_a_store_deferred_at_startup() {
    // A port nothing listens on: the service starts on the deferred store.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("redis://{}", closed.local_addr().unwrap());
    drop(closed);
    let s = Service::start(&config(), &["--redis", &url]);
    let mut received = Tally::new();
    traffic(&s, &mut received, 0);
    let sources = assert_counted_once(&s, &received, "deferred");
    assert!(
        sources.iter().all(|s| s.ends_with("/fallback")),
        "{sources:?}"
    );
}

/// A gRPC request's descriptors are each the check it would be alone:
/// on a leased policy the lease answers them (one batch of a request's
/// descriptors must not go around the leases), and each is counted once.
#[test]
fn grpc_descriptors_are_answered_by_leases_and_counted_once() {
    let redis = RedisServer::start();
    let path = temp_dir().join("tollgate.toml");
    let tables = "[[descriptor]]\ndomain = \"edge\"\nentries = [{ key = \"user\" }]\npolicy = \"leased-window\"\n\n\
                  [[descriptor]]\ndomain = \"edge\"\nentries = [{ key = \"plan\" }]\npolicy = \"plain\"\n";
    std::fs::write(&path, format!("{CONFIG}\n{tables}")).unwrap();
    let s = Service::start(
        &path,
        &["--redis", &redis.url(), "--grpc-listen", "127.0.0.1:0"],
    );
    let mut received = Tally::new();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let mut client = s.client().await;
        for _ in 0..60 {
            let mut request = common::envoy::request("edge", &[("user", "u1")]);
            request
                .descriptors
                .push(common::envoy::descriptor(&[("plan", "p1")]));
            let answer = client
                .should_rate_limit(request)
                .await
                .unwrap()
                .into_inner();
            for (policy, status) in ["leased-window", "plain"].iter().zip(&answer.statuses) {
                // 1 is OK, 2 OVER_LIMIT in Envoy's `Code`.
                assert!(status.code == 1 || status.code == 2, "{answer:?}");
                *received
                    .entry((policy.to_string(), outcome(status.code == 1)))
                    .or_default() += 1;
            }
        }
    });
    let sources = assert_counted_once(&s, &received, "gRPC on redis");
    assert!(
        sources.iter().any(|s| s == "leased-window/lease"),
        "the lease answered none of the gRPC descriptors: {sources:?}"
    );
    assert_eq!(received[&("leased-window".into(), "allowed".into())], 40);
    assert_eq!(received[&("plain".into(), "allowed".into())], 5);
}
