//! Calls answered as ERL answers them: the outcomes ERL's own service,
//! integration and README examples assert, written anew, on the memory
//! counter.
//!
//! Kept whole on purpose: one concern, ERL's answers on the memory counter, with one set of request builders.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;

use crate::erl::config::ErlConfig;
use crate::erl::counter::MemoryCounter;
use crate::erl::files::parse;
use crate::erl::service::should_rate_limit;
use crate::erl::settings::{CallError, HeaderNames, Settings};

/// 2026-11-25 10:00:07 UTC.
const NOW: u64 = 1_795_600_807;

const CONFIG: &str = "
domain: d
descriptors:
  - key: fast
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: minute
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: files_no_share
    value: files/*
    rate_limit: {unit: hour, requests_per_unit: 10}
  - key: free
    rate_limit: {unlimited: true}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: banned
    rate_limit: {unit: minute, requests_per_unit: 0, name: banned}
  - key: allowed
    rate_limit: {unit: minute, requests_per_unit: 2, replaces: [{name: banned}]}
  - key: quota_a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota_b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: weekly
    rate_limit: {unit: week, requests_per_unit: 100}
";

struct Harness {
    config: ErlConfig,
    settings: Settings,
    counter: MemoryCounter,
}

fn harness() -> Harness {
    Harness {
        config: parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap(),
        settings: Settings {
            near_limit_ratio: 0.8,
            ..Settings::default()
        },
        counter: MemoryCounter::default(),
    }
}

/// A descriptor of `entries` (key, value), nothing else set.
pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    }
}

fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: 0,
    }
}

impl Harness {
    async fn call_at(
        &self,
        now: u64,
        r: &RateLimitRequest,
    ) -> Result<RateLimitResponse, CallError> {
        should_rate_limit(&self.config, &self.settings, &self.counter, now, r).await
    }

    async fn call(&self, r: &RateLimitRequest) -> RateLimitResponse {
        self.call_at(NOW, r).await.unwrap()
    }

    async fn one(&self, entries: &[(&str, &str)]) -> RateLimitResponse {
        self.call(&request("d", vec![descriptor(entries)])).await
    }
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

#[tokio::test]
async fn unknown_domains_and_unmatched_descriptors_have_no_limit() {
    let h = harness();
    for r in [
        request("nope", vec![descriptor(&[("minute", "x")])]),
        request("d", vec![descriptor(&[("nothing", "x")])]),
    ] {
        let resp = h.call(&r).await;
        assert_eq!(resp.overall_code, OK);
        let s = &resp.statuses[0];
        assert_eq!((s.code, s.limit_remaining), (OK, 0));
        assert!(s.current_limit.is_none() && s.duration_until_reset.is_none());
    }
}

#[tokio::test]
async fn counts_down_then_refuses_and_keeps_counting() {
    let h = harness();
    assert_eq!(
        h.one(&[("fast", "a")]).await.statuses[0].limit_remaining,
        49
    );
    for i in 1..=25u32 {
        let resp = h.one(&[("minute", "a")]).await;
        let s = &resp.statuses[0];
        let limit = s.current_limit.as_ref().unwrap();
        assert_eq!((limit.requests_per_unit, limit.unit), (20, 2));
        assert_eq!(s.duration_until_reset.unwrap().seconds, 53);
        if i <= 20 {
            assert_eq!((resp.overall_code, s.limit_remaining), (OK, 20 - i));
        } else {
            assert_eq!(
                (resp.overall_code, s.code, s.limit_remaining),
                (OVER, OVER, 0)
            );
        }
    }
    // another value of a key-only rule has its own counter
    assert_eq!(
        h.one(&[("minute", "b")]).await.statuses[0].limit_remaining,
        19
    );
    // the next window starts afresh
    let next = h
        .call_at(
            NOW + 60,
            &request("d", vec![descriptor(&[("minute", "a")])]),
        )
        .await
        .unwrap();
    assert_eq!(next.statuses[0].limit_remaining, 19);
}

#[tokio::test]
async fn every_descriptor_counts_even_when_another_is_over() {
    let h = harness();
    let r = request(
        "d",
        vec![descriptor(&[("minute", "a")]), descriptor(&[("hour", "a")])],
    );
    for i in 1..=15u32 {
        let resp = h.call(&r).await;
        assert_eq!(resp.statuses[0].limit_remaining, 20 - i, "call {i}");
        assert_eq!(resp.statuses[0].code, OK);
        let over = i > 10;
        assert_eq!(
            resp.statuses[1].code,
            if over { OVER } else { OK },
            "call {i}"
        );
        assert_eq!(resp.overall_code, if over { OVER } else { OK });
    }
}

#[tokio::test]
async fn share_threshold_shares_one_counter() {
    let h = harness();
    for _ in 0..10 {
        assert_eq!(h.one(&[("files", "files/a.pdf")]).await.overall_code, OK);
    }
    assert_eq!(h.one(&[("files", "files/b.csv")]).await.overall_code, OVER);
    for v in ["files/a", "files/b", "files/c"] {
        assert_eq!(
            h.one(&[("files_no_share", v)]).await.statuses[0].limit_remaining,
            9
        );
    }
}

#[tokio::test]
async fn unlimited_is_never_counted() {
    let h = harness();
    for _ in 0..3 {
        let resp = h.one(&[("free", "x")]).await;
        let s = &resp.statuses[0];
        assert_eq!((s.code, s.limit_remaining), (OK, u32::MAX));
        assert!(s.current_limit.is_none() && s.duration_until_reset.is_none());
    }
}

#[tokio::test]
async fn shadow_mode_rules_answer_ok_and_keep_counting() {
    let h = harness();
    h.one(&[("trial", "x")]).await;
    let resp = h.one(&[("trial", "x")]).await;
    let s = &resp.statuses[0];
    assert_eq!((resp.overall_code, s.code, s.limit_remaining), (OK, OK, 0));
    assert_eq!(s.current_limit.as_ref().unwrap().requests_per_unit, 1);
}

#[tokio::test]
async fn global_shadow_mode_keeps_the_statuses() {
    let mut h = harness();
    h.settings.global_shadow = true;
    let r = request("d", vec![descriptor(&[("banned", "x")])]);
    let resp = h.call(&r).await;
    assert_eq!((resp.overall_code, resp.statuses[0].code), (OK, OVER));
}

#[tokio::test]
async fn replaced_rules_are_dropped_and_not_counted() {
    let h = harness();
    let r = request(
        "d",
        vec![
            descriptor(&[("banned", "x")]),
            descriptor(&[("allowed", "x")]),
        ],
    );
    let codes: Vec<i32> = {
        let mut codes = Vec::new();
        for _ in 0..3 {
            codes.push(h.call(&r).await.overall_code);
        }
        codes
    };
    assert_eq!(codes, [OK, OK, OVER]);
    let resp = h.call(&r).await;
    assert!(resp.statuses[0].current_limit.is_none());
    // alone, banned was never counted and refuses on its own (0 per minute)
    let alone = h.one(&[("banned", "x")]).await;
    assert_eq!(alone.overall_code, OVER);
}

#[tokio::test]
async fn quota_mode_refuses_only_when_every_quota_descriptor_is_over() {
    let h = harness();
    let r = request(
        "d",
        vec![
            descriptor(&[("quota_a", "x")]),
            descriptor(&[("quota_b", "x")]),
        ],
    );
    assert_eq!(h.call(&r).await.overall_code, OK);
    // quota_a is over (2 > 1), quota_b is not (2 <= 2)
    let resp = h.call(&r).await;
    assert_eq!((resp.statuses[0].code, resp.statuses[1].code), (OVER, OK));
    assert_eq!(resp.overall_code, OK);
    assert_eq!(h.call(&r).await.overall_code, OVER);
    // one quota descriptor, over, with an ordinary one under its limit: refused
    let h = harness();
    let r = request(
        "d",
        vec![
            descriptor(&[("quota_a", "y")]),
            descriptor(&[("minute", "y")]),
        ],
    );
    assert_eq!(h.call(&r).await.overall_code, OK);
    assert_eq!(h.call(&r).await.overall_code, OVER);
    // global quota mode: an ordinary rule over is no refusal while another quota descriptor passes
    let mut h = harness();
    h.settings.global_quota = true;
    let r = request(
        "d",
        vec![
            descriptor(&[("banned", "z")]),
            descriptor(&[("minute", "z")]),
        ],
    );
    assert_eq!(h.call(&r).await.overall_code, OK);
}

#[tokio::test]
async fn hits_addend_of_the_request_and_of_each_descriptor() {
    let h = harness();
    let mut r = request("d", vec![descriptor(&[("minute", "h")])]);
    r.hits_addend = 3;
    assert_eq!(h.call(&r).await.statuses[0].limit_remaining, 17);
    // per-descriptor 0: look without counting
    let mut look = descriptor(&[("minute", "h")]);
    look.hits_addend = Some(UInt64Value { value: 0 });
    let resp = h.call(&request("d", vec![look.clone()])).await;
    assert_eq!(resp.statuses[0].limit_remaining, 17);
    // per-descriptor wins over the request's
    let mut r = request("d", vec![descriptor(&[("minute", "h")])]);
    r.descriptors[0].hits_addend = Some(UInt64Value { value: 18 });
    r.hits_addend = 1;
    let resp = h.call(&r).await;
    assert_eq!(
        (resp.overall_code, resp.statuses[0].limit_remaining),
        (OVER, 0)
    );
    // an oversized call leaves every later call of the window over
    assert_eq!(h.call(&request("d", vec![look])).await.overall_code, OVER);
}

#[tokio::test]
async fn limit_overrides_apply_in_known_domains_only() {
    let h = harness();
    let mut d = descriptor(&[("anything", "x")]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 10,
        unit: 4,
    });
    let resp = h.call(&request("d", vec![d.clone()])).await;
    let s = &resp.statuses[0];
    let limit = s.current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (10, 4, "")
    );
    assert_eq!(s.limit_remaining, 9);
    let unknown = h.call(&request("nope", vec![d.clone()])).await;
    assert!(unknown.statuses[0].current_limit.is_none());
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 10,
        unit: 0,
    });
    assert!(matches!(
        h.call_at(NOW, &request("d", vec![d])).await,
        Err(CallError::Request(_))
    ));
}

#[tokio::test]
async fn weeks_start_on_thursday() {
    let h = harness();
    // 2026-11-25 is a Wednesday: the week ends on Thursday 26th, 00:00
    let resp = h.one(&[("weekly", "x")]).await;
    let thursday = 1_795_651_200;
    assert_eq!(
        resp.statuses[0].duration_until_reset.unwrap().seconds as u64,
        thursday - NOW
    );
}

#[tokio::test]
async fn headers_name_the_descriptor_closest_to_its_limit() {
    let mut h = harness();
    h.settings.headers = Some(HeaderNames::default());
    let r = request(
        "d",
        vec![
            descriptor(&[("fast", "x")]),
            descriptor(&[("hour", "x")]),
            descriptor(&[("free", "x")]),
        ],
    );
    let resp = h.call(&r).await;
    let headers = super::header_pairs(&resp);
    assert_eq!(
        headers,
        [
            ("RateLimit-Limit", "10"),
            ("RateLimit-Remaining", "9"),
            ("RateLimit-Reset", "3593")
        ]
    );
    h.settings.headers = None;
    assert!(h.call(&r).await.response_headers_to_add.is_empty());
}

#[tokio::test]
async fn empty_domain_or_descriptors_is_an_error() {
    let h = harness();
    let e = h
        .call_at(NOW, &request("", vec![descriptor(&[("a", "b")])]))
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "rate limit domain must not be empty");
    let e = h.call_at(NOW, &request("d", vec![])).await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "rate limit descriptor list must not be empty"
    );
}
