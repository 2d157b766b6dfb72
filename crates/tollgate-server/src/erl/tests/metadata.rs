//! `RESPONSE_DYNAMIC_METADATA`: the response carries the request's
//! descriptors and the `metadata` of the rules whose descriptors passed,
//! as ERL's `ratelimitToMetadata` builds them (its
//! `TestMetadataReturnedForPassedDescriptors`, written anew), on gRPC and
//! as `/json` writes it.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::UInt64Value;
use serde_json::json;

use crate::erl::counter::MemoryCounter;
use crate::erl::files::parse;
use crate::erl::json;
use crate::erl::service::should_rate_limit;
use crate::erl::settings::Settings;

const CONFIG: &str = "
domain: d
descriptors:
  - key: service_1
    metadata: {name: service_1, owner: {team: a}, weight: 1.5, tags: [x, 2]}
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: service_2
    metadata: {name: service_2, refused: true}
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: service_3
    metadata: {name: service_3, owner: {region: eu, team: b}, extra: true}
    rate_limit: {unit: minute, requests_per_unit: 10}
";

fn descriptor(key: &str) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: vec![Entry {
            key: key.to_string(),
            value: "v".to_string(),
        }],
        ..Default::default()
    }
}

#[tokio::test]
async fn passed_descriptors_bring_their_metadata() {
    let config = parse(&[("t.yaml".to_string(), CONFIG.to_string())], None).unwrap();
    let mut settings = Settings {
        dynamic_metadata: true,
        ..Settings::default()
    };
    let mut overridden = descriptor("other");
    overridden.limit = Some(RateLimitOverride {
        requests_per_unit: 10,
        unit: 2,
    });
    overridden.hits_addend = Some(UInt64Value { value: 0 });
    let request = RateLimitRequest {
        domain: "d".to_string(),
        descriptors: vec![
            descriptor("service_1"),
            // over its limit of 0: its metadata stays out
            descriptor("service_2"),
            descriptor("service_3"),
            overridden,
        ],
        hits_addend: 3,
    };
    let counter = MemoryCounter::default();
    let response = should_rate_limit(&config, &settings, &counter, 1_000_000, &request)
        .await
        .unwrap();
    assert_eq!(
        json::response(&response)["dynamicMetadata"],
        json!({
            "domain": "d",
            "hitsAddend": 3,
            "descriptors": [
                {"entries": ["service_1=v"]},
                {"entries": ["service_2=v"]},
                {"entries": ["service_3=v"]},
                {"entries": ["other=v"], "limit": "requests_per_unit:10 unit:MINUTE", "hitsAddend": 0},
            ],
            // merged: maps within maps merged, the first rule's other values kept
            "metadata": {
                "name": "service_1",
                "owner": {"team": "a", "region": "eu"},
                "weight": 1.5,
                "tags": ["x", 2],
                "extra": true,
            },
        })
    );
    // off by default: no dynamic metadata
    settings.dynamic_metadata = false;
    let response = should_rate_limit(&config, &settings, &counter, 1_000_000, &request)
        .await
        .unwrap();
    assert!(response.dynamic_metadata.is_none());
    assert!(json::response(&response).get("dynamicMetadata").is_none());
}
