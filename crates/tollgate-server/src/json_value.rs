//! JSON read into a [`serde_json::Value`] with every object's keys
//! unique: `serde_json` alone keeps the last of two equal keys, so that
//! `{"domain": "a", "domain": "b"}` would be decided for `b` with no word.
//! A duplicate is an error that names the key, shortened as every quote of
//! a request is ([`shorten`]). Both JSON front ends read their bodies
//! here: the HTTP API (`http/json.rs`) and ERL mode's `/json`.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Parses `body`; a duplicate key anywhere is an error.
pub(crate) fn parse(body: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Unique>(body).map(|u| u.0)
}

/// A value whose objects, at every depth, have unique keys.
struct Unique(Value);

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Unique, D::Error> {
        deserializer.deserialize_any(UniqueVisitor).map(Unique)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // serde_json reads no NaN or infinity, so every f64 here is a number.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(Unique(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if fields.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    shorten(&key)
                )));
            }
            let Unique(value) = map.next_value()?;
            fields.insert(key, value);
        }
        Ok(Value::Object(fields))
    }
}

/// The longest text a message quotes from a request.
const QUOTED: usize = 64;

/// `text`, cut after [`QUOTED`] bytes (at a character boundary) with its
/// full length said.
pub(crate) fn shorten(text: &str) -> String {
    cut(text, QUOTED)
}

/// `text`, cut after `max` bytes (at a character boundary) with its full
/// length said.
pub(crate) fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            parse(br#"{"a":[1,{"b":null}],"c":-2.5,"d":"x","e":true}"#).unwrap(),
            serde_json::json!({"a":[1,{"b":null}],"c":-2.5,"d":"x","e":true})
        );
        for body in [
            &br#"{"domain":"a","domain":"b"}"#[..],
            br#"{"d":[{"k":1,"k":1}]}"#,
            br#"{"x":{"y":{"z":1,"z":2}}}"#,
        ] {
            let e = parse(body).unwrap_err().to_string();
            assert!(e.contains("duplicate key"), "{e}");
        }
        let long = format!(r#"{{"{k}":1,"{k}":2}}"#, k = "k".repeat(10_000));
        let e = parse(long.as_bytes()).unwrap_err().to_string();
        assert!(e.len() < 200, "{e}");
    }
}
