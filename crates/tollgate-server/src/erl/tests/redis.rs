//! ERL and tollgate on one Redis: tollgate counts on ERL's keys with ERL's
//! arithmetic, and a simulated ERL instance (plain `INCRBY`/`EXPIRE` from
//! the test, as ERL's pipeline sends them) counts on the same keys.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::UInt64Value;
use tollgate_testkit::RedisServer;

use tollgate::store::redis::RedisStore;

use crate::erl::counter::Counter;
use crate::erl::files::parse;
use crate::erl::local_cache::LocalCache;
use crate::erl::redis::RedisCounter;
use crate::erl::redis_env::RedisTarget;
use crate::erl::service::{Deciders, should_rate_limit};
use crate::erl::settings::Settings;

const CONFIG: &str = "
domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: path
    value: /files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 5}
";

fn request(key: &str, value: &str) -> RateLimitRequest {
    RateLimitRequest {
        domain: "api".to_string(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: key.to_string(),
                value: value.to_string(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn erl_and_tollgate_count_together_on_erls_keys() {
    let server = RedisServer::start();
    let config = parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap();
    let settings = Settings {
        prefix: "erl:".to_string(),
        near_limit_ratio: 0.8,
        ..Settings::default()
    };
    let counter = RedisCounter::connect(&RedisTarget::Urls(vec![server.url()]))
        .await
        .unwrap();
    // The middle of a minute, so that the test stays in one window.
    let now = {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        wall - wall % 60 + 30
    };
    let window = now - now % 60;
    let key = format!("erl:api_user_alice_{window}");

    let r = request("user", "alice");
    let resp = should_rate_limit(&config, &settings, &counter, now, &r)
        .await
        .unwrap();
    assert_eq!(resp.statuses[0].limit_remaining, 9);
    assert_eq!(server.cli(&["GET", &key]), "1");
    let ttl: u64 = server.cli(&["TTL", &key]).parse().unwrap();
    assert!((1..=60).contains(&ttl), "TTL {ttl}");

    // ERL's pipeline for a call of 4 hits on the same key
    assert_eq!(server.cli(&["INCRBY", &key, "4"]), "5");
    server.cli(&["EXPIRE", &key, "60"]);
    let resp = should_rate_limit(&config, &settings, &counter, now, &r)
        .await
        .unwrap();
    assert_eq!(
        resp.statuses[0].limit_remaining, 4,
        "tollgate sees ERL's hits"
    );
    assert_eq!(server.cli(&["GET", &key]), "6", "ERL sees tollgate's");

    // over the limit: refused, and still counted, as ERL counts
    server.cli(&["INCRBY", &key, "4"]);
    let resp = should_rate_limit(&config, &settings, &counter, now, &r)
        .await
        .unwrap();
    assert_eq!(resp.overall_code, Code::OverLimit as i32);
    assert_eq!(server.cli(&["GET", &key]), "11");

    // share_threshold: the pattern stands in the key for every value
    let hour = now - now % 3600;
    let shared = format!("erl:api_path_/files/*_{hour}");
    server.cli(&["INCRBY", &shared, "5"]);
    let resp = should_rate_limit(
        &config,
        &settings,
        &counter,
        now,
        &request("path", "/files/x.pdf"),
    )
    .await
    .unwrap();
    assert_eq!(resp.overall_code, Code::OverLimit as i32);
    assert_eq!(server.cli(&["GET", &shared]), "6");
}

/// The middle of the present minute, so that a test stays in one window.
fn mid_minute() -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    wall - wall % 60 + 30
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_local_cache_a_counter_over_its_limit_stops_moving_in_redis() {
    let server = RedisServer::start();
    let config = parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap();
    let settings = Settings::default();
    let counter = RedisCounter::connect(&RedisTarget::Urls(vec![server.url()]))
        .await
        .unwrap();
    let cache = LocalCache::with_bytes(64 * 1024);
    let deciders = Deciders {
        counter: &counter,
        store: None,
        local_cache: cache.as_ref(),
    };
    let now = mid_minute();
    let key = format!("api_user_zoe_{}", now - now % 60);
    let r = request("user", "zoe");
    for _ in 0..10 {
        let resp = should_rate_limit(&config, &settings, deciders, now, &r)
            .await
            .unwrap();
        assert_eq!(resp.overall_code, Code::Ok as i32);
    }
    let resp = should_rate_limit(&config, &settings, deciders, now, &r)
        .await
        .unwrap();
    assert_eq!(resp.overall_code, Code::OverLimit as i32);
    assert_eq!(server.cli(&["GET", &key]), "11");
    for _ in 0..5 {
        let resp = should_rate_limit(&config, &settings, deciders, now, &r)
            .await
            .unwrap();
        assert_eq!(resp.overall_code, Code::OverLimit as i32);
    }
    assert_eq!(
        server.cli(&["GET", &key]),
        "11",
        "answered locally: no INCRBY"
    );
    // the next window is another counter, counted again
    let resp = should_rate_limit(&config, &settings, deciders, now + 60, &r)
        .await
        .unwrap();
    assert_eq!(resp.statuses[0].limit_remaining, 9);
    let next = format!("api_user_zoe_{}", now - now % 60 + 60);
    assert_eq!(server.cli(&["GET", &next]), "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_rule_decides_on_tollgates_own_redis_keys() {
    let server = RedisServer::start();
    let config = super::extensions::with_policies(super::extensions::YAML).unwrap();
    let settings = Settings::default();
    let counter = RedisCounter::connect(&RedisTarget::Urls(vec![server.url()]))
        .await
        .unwrap();
    let store = RedisStore::connect(&server.url()).await.unwrap();
    let deciders = Deciders {
        counter: &counter,
        store: Some(&store),
        local_cache: None,
    };
    let now = mid_minute();
    let r = RateLimitRequest {
        domain: "d".to_string(),
        ..request("user", "alice")
    };
    for remaining in [2, 1, 0] {
        let resp = should_rate_limit(&config, &settings, deciders, now, &r)
            .await
            .unwrap();
        assert_eq!(resp.statuses[0].limit_remaining, remaining);
    }
    let resp = should_rate_limit(&config, &settings, deciders, now, &r)
        .await
        .unwrap();
    assert_eq!(resp.overall_code, Code::OverLimit as i32);
    let keys = server.cli(&["KEYS", "*"]);
    assert!(
        keys.lines().count() == 1 && keys.contains("{smooth:") && keys.contains("alice"),
        "one key, in tollgate's layout: {keys}"
    );
}

/// A huge `hits_addend` cannot poison a key: hits above 2^32 (more than
/// any limit) count as 2^32, so `INCRBY` never reaches 2^63 − 1. Redis and
/// the memory counter answer alike, for that call (`OVER_LIMIT`), for the
/// next calls on the key, and for calls that carry other descriptors too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_hits_addend_is_over_the_limit_and_leaves_the_key_usable() {
    let server = RedisServer::start();
    let config = parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap();
    let settings = Settings::default();
    let redis = RedisCounter::connect(&RedisTarget::Urls(vec![server.url()]))
        .await
        .unwrap();
    let memory = crate::erl::counter::MemoryCounter::default();
    let now = mid_minute();
    let huge = |user: &str, hits: u64| {
        let mut r = request("user", user);
        r.descriptors[0].hits_addend = Some(UInt64Value { value: hits });
        r
    };
    let both = |user: &str| {
        let mut r = request("user", user);
        r.descriptors
            .push(request("path", "/files/a").descriptors.remove(0));
        r
    };
    let (ok, over) = (Code::Ok as i32, Code::OverLimit as i32);
    for (i, hits) in [i64::MAX as u64, u64::MAX].into_iter().enumerate() {
        let user = format!("mallory{i}");
        let mut answers = Vec::new();
        for counter in [&redis as &dyn Counter, &memory] {
            let deciders = Deciders {
                counter,
                store: None,
                local_cache: None,
            };
            let calls = [huge(&user, hits), request("user", &user), both(&user)];
            let mut codes = Vec::new();
            for call in &calls {
                let r = should_rate_limit(&config, &settings, deciders, now, call)
                    .await
                    .unwrap_or_else(|e| panic!("hits {hits}: {e}"));
                codes.push(r.statuses.iter().map(|s| s.code).collect::<Vec<_>>());
            }
            answers.push(codes);
        }
        assert_eq!(
            answers[0],
            [vec![over], vec![over], vec![over, ok]],
            "hits {hits}"
        );
        assert_eq!(answers[0], answers[1], "Redis and memory, hits {hits}");
    }
    // The count went up by 2^32, not by the hits, then by one twice.
    let window = now - now % 60;
    let count = server.cli(&["GET", &format!("api_user_mallory0_{window}")]);
    assert_eq!(count, ((1u64 << 32) + 2).to_string());
}
