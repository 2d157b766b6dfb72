//! The protojson shapes of ERL's `POST /json`: a `RateLimitRequest` in
//! (field names in camelCase or as in the proto, enums by name or number,
//! 64-bit integers as numbers or strings, unknown fields and duplicate
//! keys refused) and a
//! `RateLimitResponse` out (camelCase, enums by name, durations as
//! `"37s"`, fields holding their zero value left out), as Go's protojson
//! reads and writes them.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use serde_json::{Map, Value, json};

use super::window::Unit;

type Fields<'a> = &'a Map<String, Value>;

/// Reads a request; the error says which field is wrong.
pub(crate) fn request(body: &[u8]) -> Result<RateLimitRequest, String> {
    let value = crate::json_value::parse(body).map_err(|e| format!("not JSON: {e}"))?;
    let mut req = RateLimitRequest::default();
    for (name, v) in object(&value, "request")? {
        match name.as_str() {
            "domain" => req.domain = string(v, name)?,
            "descriptors" => {
                req.descriptors = list(v, name)?
                    .iter()
                    .map(descriptor)
                    .collect::<Result<_, _>>()?;
            }
            "hitsAddend" | "hits_addend" => {
                req.hits_addend = number(v, name, u64::from(u32::MAX))? as u32
            }
            other => return Err(format!("unknown field {other:?} in the request")),
        }
    }
    Ok(req)
}

fn descriptor(value: &Value) -> Result<RateLimitDescriptor, String> {
    let mut d = RateLimitDescriptor::default();
    for (name, v) in object(value, "descriptor")? {
        match name.as_str() {
            "entries" => {
                d.entries = list(v, name)?.iter().map(entry).collect::<Result<_, _>>()?;
            }
            "limit" => {
                if !v.is_null() {
                    d.limit = Some(limit_override(v)?);
                }
            }
            "hitsAddend" | "hits_addend" => {
                if !v.is_null() {
                    d.hits_addend = Some(UInt64Value {
                        value: number(v, name, u64::MAX)?,
                    });
                }
            }
            "isNegativeHits" | "is_negative_hits" => {}
            other => return Err(format!("unknown field {other:?} in a descriptor")),
        }
    }
    Ok(d)
}

fn entry(value: &Value) -> Result<Entry, String> {
    let mut e = Entry::default();
    for (name, v) in object(value, "entry")? {
        match name.as_str() {
            "key" => e.key = string(v, name)?,
            "value" => e.value = string(v, name)?,
            other => return Err(format!("unknown field {other:?} in an entry")),
        }
    }
    Ok(e)
}

fn limit_override(value: &Value) -> Result<RateLimitOverride, String> {
    let mut o = RateLimitOverride::default();
    for (name, v) in object(value, "limit")? {
        match name.as_str() {
            "requestsPerUnit" | "requests_per_unit" => {
                o.requests_per_unit = number(v, name, u64::from(u32::MAX))? as u32;
            }
            "unit" => {
                o.unit = match v {
                    Value::String(s) if s == "UNKNOWN" => 0,
                    Value::String(s) => Unit::from_name(s)
                        .filter(|u| u.name() == s)
                        .ok_or_else(|| format!("invalid value for enum field unit: {s:?}"))?
                        as i32,
                    Value::Null => 0,
                    _ => number(v, name, u64::from(i32::MAX as u32))? as i32,
                };
            }
            other => return Err(format!("unknown field {other:?} in a limit")),
        }
    }
    Ok(o)
}

fn object<'a>(value: &'a Value, what: &str) -> Result<Fields<'a>, String> {
    value
        .as_object()
        .ok_or_else(|| format!("the {what} must be an object"))
}

fn list<'a>(value: &'a Value, name: &str) -> Result<&'a [Value], String> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(&[]),
        _ => Err(format!("{name} must be a list")),
    }
}

fn string(value: &Value, name: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Null => Ok(String::new()),
        _ => Err(format!("{name} must be a string")),
    }
}

/// An unsigned integer up to `max`, as a JSON number or a decimal string.
fn number(value: &Value, name: &str, max: u64) -> Result<u64, String> {
    let n = match value {
        Value::Number(n) => n.as_u64().or_else(|| {
            // `u64::MAX as f64` is 2^64, itself out of range: a float that
            // large would saturate to u64::MAX and be taken as such.
            n.as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < u64::MAX as f64)
                .map(|f| f as u64)
        }),
        Value::String(s) => s.parse::<u64>().ok(),
        Value::Null => Some(0),
        _ => None,
    };
    n.filter(|n| *n <= max)
        .ok_or_else(|| format!("{name} must be an integer from 0 to {max}"))
}

fn code_name(code: i32) -> &'static str {
    match Code::try_from(code) {
        Ok(Code::Ok) => "OK",
        Ok(Code::OverLimit) => "OVER_LIMIT",
        _ => "UNKNOWN",
    }
}

/// Writes a response as protojson.
pub(crate) fn response(resp: &RateLimitResponse) -> Value {
    let mut out = Map::new();
    if resp.overall_code != 0 {
        out.insert("overallCode".into(), json!(code_name(resp.overall_code)));
    }
    if !resp.statuses.is_empty() {
        out.insert(
            "statuses".into(),
            resp.statuses.iter().map(status).collect(),
        );
    }
    if !resp.response_headers_to_add.is_empty() {
        let headers = resp
            .response_headers_to_add
            .iter()
            .map(|h| json!({"key": h.key, "value": h.value}))
            .collect();
        out.insert("responseHeadersToAdd".into(), headers);
    }
    if let Some(metadata) = &resp.dynamic_metadata {
        out.insert("dynamicMetadata".into(), super::metadata::to_json(metadata));
    }
    Value::Object(out)
}

fn status(s: &DescriptorStatus) -> Value {
    let mut out = Map::new();
    if s.code != 0 {
        out.insert("code".into(), json!(code_name(s.code)));
    }
    if let Some(limit) = &s.current_limit {
        let mut l = Map::new();
        if !limit.name.is_empty() {
            l.insert("name".into(), json!(limit.name));
        }
        if limit.requests_per_unit != 0 {
            l.insert("requestsPerUnit".into(), json!(limit.requests_per_unit));
        }
        if limit.unit != 0 {
            let name = Unit::from_proto(limit.unit).map_or("UNKNOWN", Unit::name);
            l.insert("unit".into(), json!(name));
        }
        out.insert("currentLimit".into(), Value::Object(l));
    }
    if s.limit_remaining != 0 {
        out.insert("limitRemaining".into(), json!(s.limit_remaining));
    }
    if let Some(d) = &s.duration_until_reset {
        let text = if d.nanos == 0 {
            format!("{}s", d.seconds)
        } else {
            let mut fraction = format!("{:09}", d.nanos);
            while fraction.ends_with("000") {
                fraction.truncate(fraction.len() - 3);
            }
            format!("{}.{fraction}s", d.seconds)
        };
        out.insert("durationUntilReset".into(), json!(text));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::RateLimit;
    use envoy_types::pb::google::protobuf::Duration;

    #[test]
    fn reads_both_spellings() {
        let req = request(br#"{"domain":"d","hitsAddend":2,"descriptors":[{"entries":[{"key":"k","value":"v"}],"limit":{"requests_per_unit":"5","unit":"MINUTE"},"hitsAddend":"0"}]}"#).unwrap();
        assert_eq!((req.domain.as_str(), req.hits_addend), ("d", 2));
        let d = &req.descriptors[0];
        assert_eq!(
            (d.entries[0].key.as_str(), d.entries[0].value.as_str()),
            ("k", "v")
        );
        assert_eq!(
            d.limit,
            Some(RateLimitOverride {
                requests_per_unit: 5,
                unit: 2
            })
        );
        assert_eq!(d.hits_addend, Some(UInt64Value { value: 0 }));
        let req =
            request(br#"{"domain":"d","descriptors":[{"entries":[{"key":"perday"}]}]}"#).unwrap();
        assert_eq!(req.descriptors[0].entries[0].value, "");
    }

    #[test]
    fn refuses_what_protojson_refuses() {
        for body in [
            &br#"{"domain":"d","bogus":1}"#[..],
            br#"{"domain":5}"#,
            br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","extra":""}]}]}"#,
            br#"{"domain":"d","hitsAddend":-1}"#,
            br#"{"domain":"d","descriptors":[{"limit":{"unit":"minute"}}]}"#,
            br#"not json"#,
            // Out of range for a uint64, as a number or a string.
            br#"{"domain":"d","descriptors":[{"hitsAddend":18446744073709551616}]}"#,
            br#"{"domain":"d","descriptors":[{"hitsAddend":18446744073709551617}]}"#,
            br#"{"domain":"d","descriptors":[{"hitsAddend":"18446744073709551616"}]}"#,
            br#"{"domain":"d","descriptors":[{"hitsAddend":1e20}]}"#,
            // A key twice: protojson refuses it, as tollgate does.
            br#"{"domain":"a","domain":"b"}"#,
            br#"{"domain":"d","descriptors":[{"entries":[{"key":"k","key":"j"}]}]}"#,
        ] {
            assert!(request(body).is_err(), "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_largest_uint64_is_read_and_a_wrong_one_is_named() {
        let req = request(br#"{"domain":"d","descriptors":[{"hitsAddend":18446744073709551615}]}"#)
            .unwrap();
        assert_eq!(
            req.descriptors[0].hits_addend,
            Some(UInt64Value { value: u64::MAX })
        );
        let e = request(br#"{"domain":"d","descriptors":[{"hitsAddend":18446744073709551616}]}"#)
            .unwrap_err();
        assert!(e.contains("hitsAddend"), "{e}");
        let e = request(br#"{"domain":"a","descriptors":[],"domain":"b"}"#).unwrap_err();
        assert!(e.contains("duplicate key `domain`"), "{e}");
    }

    #[test]
    fn writes_camel_case_names_and_durations() {
        let resp = RateLimitResponse {
            overall_code: Code::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: Code::OverLimit as i32,
                    current_limit: Some(RateLimit {
                        name: String::new(),
                        requests_per_unit: 20,
                        unit: 2,
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(Duration {
                        seconds: 37,
                        nanos: 0,
                    }),
                    quota: None,
                },
                DescriptorStatus {
                    code: Code::Ok as i32,
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            response(&resp),
            json!({
                "overallCode": "OVER_LIMIT",
                "statuses": [
                    {"code": "OVER_LIMIT", "currentLimit": {"requestsPerUnit": 20, "unit": "MINUTE"}, "durationUntilReset": "37s"},
                    {"code": "OK"}
                ]
            })
        );
    }
}
