//! The request body as strict JSON: a duplicate key, at any depth, is an
//! error (serde_json's `Value` would keep the last one; `crate::json_value`
//! reads the body), and so is a field an endpoint does not take. Values
//! and names quoted back in a message are shortened, so an answer never
//! echoes a large body.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use http::StatusCode;
use serde_json::{Map, Value};

use super::MAX_BODY;
use crate::error::{Code, ServiceError};

pub(crate) use crate::json_value::{cut, shorten};

/// A JSON value as a message quotes it.
pub(super) fn shown(value: &Value) -> String {
    shorten(&value.to_string())
}

/// The body as a JSON object; every problem named.
pub(super) fn object(
    body: Result<Bytes, BytesRejection>,
) -> Result<Map<String, Value>, ServiceError> {
    let bytes = body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ServiceError::new(
                Code::PayloadTooLarge,
                format!("the body exceeds {MAX_BODY} bytes"),
            )
        } else if let Some(late) = super::deadline::cause(&e) {
            ServiceError::new(Code::Timeout, late.to_string())
        } else {
            // The framework's words (hyper's reason included), not the body.
            ServiceError::invalid(cut(&e.body_text(), 512))
        }
    })?;
    match crate::json_value::parse(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ServiceError::invalid("the body must be a JSON object")),
        Err(e) => Err(ServiceError::invalid(format!("malformed JSON: {e}"))),
    }
}

/// Refuses a field of `obj` not in `fields`, naming it and those taken.
pub(super) fn only(obj: &Map<String, Value>, fields: &[&str]) -> Result<(), ServiceError> {
    match obj.keys().find(|k| !fields.contains(&k.as_str())) {
        None => Ok(()),
        Some(unknown) => Err(ServiceError::invalid(format!(
            "unknown field `{}` (expected {})",
            shorten(unknown),
            fields
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

pub(super) fn string<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
) -> Result<&'a str, ServiceError> {
    match obj.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ServiceError::invalid(format!(
            "field `{field}` must be a string, got {}",
            shown(other)
        ))),
        None => Err(ServiceError::invalid(format!("missing field `{field}`"))),
    }
}

pub(super) fn integer(
    obj: &Map<String, Value>,
    field: &str,
    default: Option<u64>,
) -> Result<u64, ServiceError> {
    match (obj.get(field), default) {
        (Some(v), _) => v.as_u64().ok_or_else(|| {
            ServiceError::invalid(format!(
                "field `{field}` must be a non-negative integer, got {}",
                shown(v)
            ))
        }),
        (None, Some(d)) => Ok(d),
        (None, None) => Err(ServiceError::invalid(format!("missing field `{field}`"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Map<String, Value>, String> {
        object(Ok(Bytes::from(text.to_string()))).map_err(|e| e.message().to_string())
    }

    #[test]
    fn a_duplicate_key_is_refused_at_any_depth() {
        let e = parsed(r#"{"policy": "a", "policy": "b"}"#).unwrap_err();
        assert!(e.contains("duplicate key `policy`"), "{e}");
        let e = parsed(r#"{"checks": [{"key": "a", "key": "b"}]}"#).unwrap_err();
        assert!(e.contains("duplicate key `key`"), "{e}");
        // The same key in two objects is no duplicate.
        let ok = parsed(r#"{"checks": [{"key": "a"}, {"key": "b"}], "atomic": true}"#).unwrap();
        assert_eq!(ok["checks"][1]["key"], "b");
    }

    #[test]
    fn numbers_and_nesting_read_as_serde_json_reads_them() {
        let text = r#"{"a": [1, -2, 2.5, 18446744073709551615, true, null, "s", {"b": {}}]}"#;
        let strict = parsed(text).unwrap();
        let plain: Map<String, Value> = serde_json::from_str(text).unwrap();
        assert_eq!(strict, plain);
    }

    #[test]
    fn quoted_names_and_values_are_shortened() {
        let long = "x".repeat(100_000);
        let e = parsed(&format!(r#"{{"{long}": 1, "{long}": 2}}"#)).unwrap_err();
        assert!(e.len() < 300 && e.contains("(100000 bytes)"), "{e}");
        let obj: Map<String, Value> = serde_json::from_str(&format!(r#"{{"{long}": 1}}"#)).unwrap();
        let e = only(&obj, &["policy"]).unwrap_err();
        assert!(e.message().len() < 300, "{}", e.message());
        let obj: Map<String, Value> =
            serde_json::from_str(&format!(r#"{{"cost": "{long}"}}"#)).unwrap();
        let e = integer(&obj, "cost", None).unwrap_err();
        assert!(e.message().len() < 300, "{}", e.message());
        assert_eq!(shorten("é".repeat(40).as_str()).chars().next(), Some('é'));
    }
}
