//! ERL's dynamic metadata (`RESPONSE_DYNAMIC_METADATA=true`,
//! `ratelimitToMetadata` in ERL's `src/service/ratelimit.go`): the
//! response's `dynamic_metadata` (field 6, a `google.protobuf.Struct`),
//! which Envoy's filter puts in the request's dynamic metadata for later
//! filters and access logs:
//!
//! - `domain`: the request's domain;
//! - `descriptors`: each request descriptor as `{entries: ["key=value", …]}`,
//!   with `limit` (its limit override in protobuf text form,
//!   `requests_per_unit:10 unit:MINUTE`; Go varies that form's spacing)
//!   and `hitsAddend` (its own, when set) when present;
//! - `hitsAddend`: the request's, when not 0;
//! - `metadata`: the `metadata` maps of the config rules whose descriptors
//!   were not refused, merged (maps inside merged again; for any other
//!   value the first rule's stays), when any has one.
//!
//! A rule's `metadata` is kept from the YAML as a `Struct` here too.

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::google::protobuf::{ListValue, NullValue, Struct, Value, value::Kind as V};
use serde_json::json;

use super::window::Unit;
use super::yaml::{self, Kind};

fn value(kind: V) -> Value {
    Value { kind: Some(kind) }
}

fn string(s: impl Into<String>) -> Value {
    value(V::StringValue(s.into()))
}

/// The response's dynamic metadata for `request`, with the `metadata` of
/// the rules of its descriptors that passed.
pub(crate) fn dynamic_metadata<'a>(
    request: &RateLimitRequest,
    passed: impl Iterator<Item = &'a Struct>,
) -> Struct {
    let mut fields = std::collections::BTreeMap::new();
    fields.insert("domain".to_string(), string(&request.domain));
    let descriptors = request
        .descriptors
        .iter()
        .map(|d| {
            let mut f = std::collections::BTreeMap::new();
            let entries = d
                .entries
                .iter()
                .map(|e| string(format!("{}={}", e.key, e.value)))
                .collect();
            f.insert(
                "entries".to_string(),
                value(V::ListValue(ListValue { values: entries })),
            );
            if let Some(o) = &d.limit {
                let mut text = Vec::new();
                if o.requests_per_unit != 0 {
                    text.push(format!("requests_per_unit:{}", o.requests_per_unit));
                }
                if o.unit != 0 {
                    let unit = Unit::from_proto(o.unit)
                        .map_or_else(|| o.unit.to_string(), |u| u.name().to_string());
                    text.push(format!("unit:{unit}"));
                }
                f.insert("limit".to_string(), string(text.join(" ")));
            }
            if let Some(h) = &d.hits_addend {
                f.insert(
                    "hitsAddend".to_string(),
                    value(V::NumberValue(h.value as f64)),
                );
            }
            value(V::StructValue(Struct {
                fields: f.into_iter().collect(),
            }))
        })
        .collect();
    fields.insert(
        "descriptors".to_string(),
        value(V::ListValue(ListValue {
            values: descriptors,
        })),
    );
    if request.hits_addend != 0 {
        fields.insert(
            "hitsAddend".to_string(),
            value(V::NumberValue(f64::from(request.hits_addend))),
        );
    }
    let mut merged = Struct::default();
    for metadata in passed {
        merge(&mut merged, metadata);
    }
    if !merged.fields.is_empty() {
        fields.insert("metadata".to_string(), value(V::StructValue(merged)));
    }
    Struct {
        fields: fields.into_iter().collect(),
    }
}

/// Puts `src`'s fields in `dest`: a field both have as maps is merged; for
/// any other field `dest` has, `dest`'s stays.
fn merge(dest: &mut Struct, src: &Struct) {
    for (k, v) in &src.fields {
        match (dest.fields.get_mut(k), &v.kind) {
            (None, _) => {
                dest.fields.insert(k.clone(), v.clone());
            }
            (
                Some(Value {
                    kind: Some(V::StructValue(d)),
                }),
                Some(V::StructValue(s)),
            ) => merge(d, s),
            (Some(_), _) => {}
        }
    }
}

/// A YAML `metadata` map as a `Struct`: scalars as YAML resolves them
/// (null, bools, numbers, the rest strings), lists and maps within.
pub(crate) fn from_yaml(node: &yaml::Node) -> Option<Struct> {
    match from_node(node).kind {
        Some(V::StructValue(s)) => Some(s),
        _ => None,
    }
}

fn from_node(node: &yaml::Node) -> Value {
    match &node.kind {
        Kind::Scalar { text, value: v } => match v {
            yaml::Value::Null => value(V::NullValue(NullValue::NullValue as i32)),
            yaml::Value::Bool(b) => value(V::BoolValue(*b)),
            yaml::Value::Int(i) => value(V::NumberValue(*i as f64)),
            yaml::Value::BigInt(u) => value(V::NumberValue(*u as f64)),
            yaml::Value::Float => match text.parse::<f64>() {
                Ok(f) => value(V::NumberValue(f)),
                Err(_) => string(text.clone()),
            },
            yaml::Value::Str | yaml::Value::Merge => string(text.clone()),
        },
        Kind::Seq(items) => value(V::ListValue(ListValue {
            values: items.iter().map(from_node).collect(),
        })),
        Kind::Map(entries) => value(V::StructValue(Struct {
            fields: entries
                .iter()
                .map(|(k, v)| (k.text().unwrap_or_default().to_string(), from_node(v)))
                .collect(),
        })),
    }
}

/// A `Struct` as protojson writes it: a plain JSON object.
pub(crate) fn to_json(s: &Struct) -> serde_json::Value {
    serde_json::Value::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), json_value(v)))
            .collect(),
    )
}

fn json_value(v: &Value) -> serde_json::Value {
    match &v.kind {
        None | Some(V::NullValue(_)) => serde_json::Value::Null,
        Some(V::BoolValue(b)) => json!(b),
        // protojson writes a whole number without a fraction
        Some(V::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.007_199_254_740_992e15 => {
            json!(*n as i64)
        }
        Some(V::NumberValue(n)) => json!(n),
        Some(V::StringValue(s)) => json!(s),
        Some(V::StructValue(s)) => to_json(s),
        Some(V::ListValue(l)) => l.values.iter().map(json_value).collect(),
    }
}
