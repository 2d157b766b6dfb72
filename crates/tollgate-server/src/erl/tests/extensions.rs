//! What tollgate adds to ERL, opt-in: rules naming a policy of the TOML
//! config (`tollgate_policy`), the IETF headers, and the local over-limit
//! cache (`LOCAL_CACHE_SIZE_IN_BYTES`), on the memory counter and store.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use tollgate::MemoryStore;

use crate::config::Config;
use crate::erl::config::{ErlConfig, PolicyLookup};
use crate::erl::counter::{Counter, Hit, MemoryCounter};
use crate::erl::files::parse;
use crate::erl::local_cache::LocalCache;
use crate::erl::service::{Deciders, should_rate_limit};
use crate::erl::settings::{HeaderNames, Settings};

/// 2026-11-25 10:00:07 UTC.
const NOW: u64 = 1_795_600_807;

pub(super) const TOML: &str = r#"
[[policy]]
name = "smooth"
algorithm = "gcra"
rate = 1
per = "1h"
burst = 3

[[policy]]
name = "sliding"
algorithm = "sliding_window"
limit = 5
window = "60s"

[[policy]]
name = "uploads"
algorithm = "concurrency"
limit = 2
lease = "30s"

[[policy]]
name = "shaped"
algorithm = "leaky_bucket"
rate = 5
per = "1s"
capacity = 10
"#;

pub(super) const YAML: &str = "
domain: d
descriptors:
  - key: user
    rate_limit: {tollgate_policy: smooth}
  - key: path
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: trial
    shadow_mode: true
    rate_limit: {tollgate_policy: sliding}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {tollgate_policy: sliding}
";

/// The ERL config of `yaml` with the policies of `TOML` (extensions on).
pub(super) fn with_policies(yaml: &str) -> Result<ErlConfig, Vec<String>> {
    let toml = Config::parse("t.toml", TOML).unwrap();
    let lookup = |name: &str| toml.policies.get(name).cloned();
    let policies: PolicyLookup<'_> = &lookup;
    parse(&[("t.yaml".to_string(), yaml.to_string())], Some(policies))
        .map_err(|e| e.iter().map(ToString::to_string).collect())
}

struct Harness {
    config: ErlConfig,
    settings: Settings,
    counter: MemoryCounter,
    store: MemoryStore,
    cache: Option<LocalCache>,
}

fn harness() -> Harness {
    Harness {
        config: with_policies(YAML).unwrap(),
        settings: Settings {
            near_limit_ratio: 0.8,
            ..Settings::default()
        },
        counter: MemoryCounter::default(),
        store: MemoryStore::new(),
        cache: None,
    }
}

fn request(descriptors: &[(&str, &str, Option<u64>)]) -> RateLimitRequest {
    RateLimitRequest {
        domain: "d".to_string(),
        descriptors: descriptors
            .iter()
            .map(|(k, v, hits)| RateLimitDescriptor {
                entries: vec![Entry {
                    key: k.to_string(),
                    value: v.to_string(),
                }],
                hits_addend: hits.map(|value| UInt64Value { value }),
                ..Default::default()
            })
            .collect(),
        hits_addend: 0,
    }
}

impl Harness {
    async fn call_at(&self, now: u64, r: &RateLimitRequest) -> RateLimitResponse {
        let deciders = Deciders {
            counter: &self.counter,
            store: Some(&self.store),
            local_cache: self.cache.as_ref(),
        };
        should_rate_limit(&self.config, &self.settings, deciders, now, r)
            .await
            .unwrap()
    }

    async fn call(&self, descriptors: &[(&str, &str, Option<u64>)]) -> RateLimitResponse {
        self.call_at(NOW, &request(descriptors)).await
    }

    /// The count ERL's counter `key` holds (read with 0 hits).
    async fn count(&self, key: &str) -> u64 {
        let hit = Hit {
            key,
            hits: 0,
            expire_seconds: 60,
        };
        self.counter.count(&[hit]).await.unwrap()[0]
    }
}

fn codes(r: &RateLimitResponse) -> Vec<i32> {
    r.statuses.iter().map(|s| s.code).collect()
}

#[tokio::test]
async fn the_named_policy_decides_and_answers() {
    let h = harness();
    for remaining in [2, 1, 0] {
        let r = h.call(&[("user", "alice", None)]).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
        let s = &r.statuses[0];
        assert_eq!(s.limit_remaining, remaining);
        let limit = s.current_limit.as_ref().unwrap();
        // the policy's limit (the burst), its name, its span as a unit
        assert_eq!(
            (limit.name.as_str(), limit.requests_per_unit, limit.unit),
            ("smooth", 3, Unit::Hour as i32)
        );
    }
    let r = h.call(&[("user", "alice", None)]).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    // GCRA's retry: one emission interval (1 h) less the time since the burst
    let retry = r.statuses[0].duration_until_reset.unwrap().seconds;
    assert!((3590..=3600).contains(&retry), "{retry}");
    // another value is another key
    assert_eq!(
        h.call(&[("user", "bob", None)]).await.statuses[0].limit_remaining,
        2
    );
}

#[tokio::test]
async fn a_refused_cost_consumes_nothing_where_an_erl_window_counts_it() {
    let h = harness();
    h.call(&[("user", "carol", None)]).await;
    // 2 left: 3 hits refused, then 2 hits still fit
    let r = h.call(&[("user", "carol", Some(3))]).await;
    assert_eq!(codes(&r), [Code::OverLimit as i32]);
    let r = h.call(&[("user", "carol", Some(2))]).await;
    assert_eq!(
        (r.statuses[0].code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 0)
    );
    // hits above the limit are refused without a store call
    let r = h.call(&[("user", "dave", Some(4))]).await;
    assert_eq!(codes(&r), [Code::OverLimit as i32]);
    assert!(r.statuses[0].duration_until_reset.is_none());
    assert_eq!(
        h.call(&[("user", "dave", None)]).await.statuses[0].limit_remaining,
        2
    );
    // per-descriptor 0 looks without counting
    let r = h.call(&[("user", "erin", Some(0))]).await;
    assert_eq!(r.statuses[0].limit_remaining, 3);
}

#[tokio::test]
async fn a_policy_descriptor_is_checked_whatever_the_others_answer() {
    let h = harness();
    let mut last = None;
    for _ in 0..3 {
        last = Some(h.call(&[("user", "f", None), ("path", "/a", None)]).await);
    }
    let r = last.unwrap();
    assert_eq!(codes(&r), [Code::Ok as i32, Code::OverLimit as i32]);
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(
        r.statuses[0].limit_remaining, 0,
        "the policy admitted each call"
    );
}

#[tokio::test]
async fn shadow_and_share_threshold_apply_to_policy_rules() {
    let h = harness();
    for _ in 0..5 {
        h.call(&[("trial", "x", None)]).await;
    }
    let r = h.call(&[("trial", "x", None)]).await;
    assert_eq!(r.overall_code, Code::Ok as i32, "shadow_mode");
    assert_eq!(r.statuses[0].limit_remaining, 0);

    for file in [
        "files/a.pdf",
        "files/b.csv",
        "files/c",
        "files/d",
        "files/e",
    ] {
        let r = h.call(&[("files", file, None)]).await;
        assert_eq!(r.overall_code, Code::Ok as i32);
    }
    let r = h.call(&[("files", "files/f", None)]).await;
    assert_eq!(
        r.overall_code,
        Code::OverLimit as i32,
        "every value the wildcard matches shares the policy's key"
    );
}

#[test]
fn validation_names_the_file_line_and_rule() {
    let errors = with_policies(
        "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {tollgate_policy: nope}\n  - key: b\n    rate_limit: {tollgate_policy: uploads}\n  - key: c\n    rate_limit:\n      tollgate_policy: smooth\n      unit: second\n  - key: d\n    rate_limit: {tollgate_policy: shaped}\n",
    )
    .unwrap_err();
    assert_eq!(
        errors,
        [
            "t.yaml:4: 'd.a': tollgate_policy 'nope' is no policy of the TOML config",
            "t.yaml:6: 'd.b': tollgate_policy 'uploads' is a concurrency policy, which takes leases that Envoy never gives back",
            "t.yaml:9: 'd.c': tollgate_policy takes the place of unit, requests_per_unit and unlimited; give it alone",
            "t.yaml:12: 'd.d': tollgate_policy 'shaped' is a leaky bucket, which admits with a delay that Envoy cannot wait (gcra or token_bucket limit the same rate by refusing)",
        ]
    );
    // without extensions the key is refused as ERL refuses unknown keys
    let off = parse(&[("t.yaml".to_string(), YAML.to_string())], None).unwrap_err();
    assert!(
        off[0]
            .to_string()
            .starts_with("t.yaml:5: config error, unknown key 'tollgate_policy'"),
        "{off:?}"
    );
}

#[tokio::test]
async fn ietf_headers_in_place_of_erls() {
    let mut h = harness();
    h.settings.headers = Some(HeaderNames::default());
    h.settings.ietf_headers = true;
    let r = h
        .call(&[
            ("user", "g", None),
            ("path", "/b", None),
            ("other", "", None),
        ])
        .await;
    let headers = super::header_pairs(&r);
    // 10:00:07: the minute's window resets in 53 s; GCRA is full again in 1 h
    assert_eq!(
        headers,
        [
            (
                "ratelimit-policy",
                "\"smooth\";q=3;w=3600, \"d.path\";q=2;w=60"
            ),
            ("ratelimit", "\"smooth\";r=2;t=3600, \"d.path\";r=1;t=53"),
        ]
    );
    h.settings.ietf_headers = false;
    let r = h.call(&[("path", "/b", None)]).await;
    let names: Vec<&str> = super::header_pairs(&r).iter().map(|h| h.0).collect();
    assert_eq!(
        names,
        ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"]
    );
}

#[tokio::test]
async fn the_local_cache_answers_a_counter_over_its_limit_until_its_window_ends() {
    let mut h = harness();
    h.cache = LocalCache::with_bytes(1 << 20);
    let key = format!("d_path_/c_{}", NOW - NOW % 60);
    for _ in 0..2 {
        h.call(&[("path", "/c", None)]).await;
    }
    let r = h.call(&[("path", "/c", Some(5))]).await;
    assert_eq!(codes(&r), [Code::OverLimit as i32]);
    assert_eq!(h.count(&key).await, 7, "the call that went over is counted");
    for _ in 0..3 {
        let r = h.call(&[("path", "/c", None)]).await;
        assert_eq!(r.overall_code, Code::OverLimit as i32);
        let s = &r.statuses[0];
        assert_eq!(
            (s.limit_remaining, s.duration_until_reset.unwrap().seconds),
            (0, 53)
        );
    }
    assert_eq!(
        h.count(&key).await,
        7,
        "answered from the cache, not counted"
    );
    // the next window has its own counter
    let r = h.call_at(NOW + 60, &request(&[("path", "/c", None)])).await;
    assert_eq!(
        (r.overall_code, r.statuses[0].limit_remaining),
        (Code::Ok as i32, 1)
    );
}
