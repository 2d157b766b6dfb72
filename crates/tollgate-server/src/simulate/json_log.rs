//! JSON-lines access logs: one JSON object a line, such as Envoy's JSON
//! access log or nginx's `escape=json`. A line is read into its top-level
//! fields borrowed from the line (no allocation per field); only the
//! fields the time and the key need are decoded.

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::log_line::{KeyPart, KeySpec, TimeCache, epoch_micros, join_key, names, path_prefix};

/// Where JSON access logs usually keep the request's time.
const TIME_FIELDS: [&str; 6] = [
    "start_time",
    "timestamp",
    "time",
    "@timestamp",
    "ts",
    "time_iso8601",
];
/// … the client's address.
const CLIENT_FIELDS: [&str; 5] = [
    "downstream_remote_address",
    "remote_addr",
    "client_ip",
    "client_address",
    "remote_ip",
];
/// … the path (or the whole request line, `request`).
const PATH_FIELDS: [&str; 5] = ["path", "request_path", "uri", "request_uri", "request"];

/// A field name or string value, borrowed unless it has escapes.
#[derive(Debug, Deserialize, PartialEq, Eq, Hash)]
#[serde(transparent)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl Borrow<str> for Text<'_> {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// An object's fields, their values still JSON text.
type Object<'a> = HashMap<Text<'a>, &'a RawValue>;

fn object(json: &str) -> Result<Object<'_>, String> {
    serde_json::from_str(json).map_err(|e| format!("not a JSON object: {e}"))
}

/// One line's time (µs since the epoch) and key.
pub(super) fn parse_line(
    line: &str,
    key: &KeySpec,
    time_field: Option<&str>,
    times: &mut TimeCache,
) -> Result<(u64, String), String> {
    let fields = object(line)?;
    let t = time(&fields, time_field, times)?;
    Ok((t, key_of(&fields, key)?))
}

fn time(fields: &Object<'_>, field: Option<&str>, times: &mut TimeCache) -> Result<u64, String> {
    let (name, value) = match field {
        Some(name) => (
            name,
            lookup(fields, name)?.ok_or_else(|| format!("field `{name}` is missing"))?,
        ),
        None => TIME_FIELDS
            .iter()
            .find_map(|&n| fields.get(n).map(|v| (n, *v)))
            .ok_or_else(|| {
                format!(
                    "field `time`: none of {} (name another with --time-field)",
                    names(&TIME_FIELDS)
                )
            })?,
    };
    let raw = value.get();
    if raw.starts_with('"') {
        let text = string(name, raw)?;
        times.get(&text, |text| time_text(name, text))
    } else if raw.starts_with(|c: char| c == '-' || c.is_ascii_digit()) {
        epoch_number(name, raw)
    } else {
        Err(format!(
            "field `{name}` must be an RFC 3339 time or a number of seconds since the epoch, got {raw}"
        ))
    }
}

/// RFC 3339 (`2024-05-01T12:00:00.123Z`, what Envoy's `%START_TIME%` and
/// nginx's `$time_iso8601` write) or a number in a string (`$msec`).
fn time_text(name: &str, text: &str) -> Result<u64, String> {
    if let Ok(t) = text.parse::<jiff::Timestamp>() {
        return epoch_micros(t, name, text);
    }
    epoch_number(name, text).map_err(|_| {
        format!(
            "field `{name}`: `{text}` is neither an RFC 3339 time nor a number of seconds since the epoch"
        )
    })
}

/// A number since the epoch; its size says the unit: seconds below 10^11
/// (the year 5138), milliseconds below 10^14, microseconds above.
fn epoch_number(name: &str, text: &str) -> Result<u64, String> {
    let bad = || format!("field `{name}`: `{text}` is not a non-negative time since the epoch");
    let n: f64 = text.parse().map_err(|_| bad())?;
    if !n.is_finite() || n < 0.0 {
        return Err(bad());
    }
    let micros = if n < 1e11 {
        n * 1e6
    } else if n < 1e14 {
        n * 1e3
    } else {
        n
    };
    Ok(micros.round() as u64)
}

fn key_of(fields: &Object<'_>, spec: &KeySpec) -> Result<String, String> {
    join_key(spec, |part| match part {
        KeyPart::Client => {
            let (name, v) = first_of(fields, &CLIENT_FIELDS, "client")?;
            Ok(strip_port(&text_of(name, v)?).to_string())
        }
        KeyPart::Path(n) => {
            let (name, v) = first_of(fields, &PATH_FIELDS, "path")?;
            let text = text_of(name, v)?;
            let path = if name == "request" {
                text.split(' ')
                    .nth(1)
                    .ok_or_else(|| format!("field `request`: no path in `{text}`"))?
            } else {
                &text
            };
            Ok(path_prefix(path, *n))
        }
        KeyPart::Field(name) => {
            let v = lookup(fields, name)?.ok_or_else(|| format!("field `{name}` is missing"))?;
            text_of(name, v)
        }
        KeyPart::Header(header) => {
            let snake = header.replace('-', "_");
            let http = format!("http_{snake}");
            let candidates = [header.as_str(), snake.as_str(), http.as_str()];
            let mut found = candidates
                .iter()
                .find_map(|&n| fields.get(n).map(|v| (n.to_string(), *v)));
            for nested in ["headers", "request_headers"] {
                if found.is_some() {
                    break;
                }
                if let Some(v) = fields.get(nested).filter(|v| v.get().starts_with('{')) {
                    found = object(v.get())?
                        .into_iter()
                        .find(|(k, _)| k.0.eq_ignore_ascii_case(header))
                        .map(|(k, v)| (format!("{nested}.{}", k.0), v));
                }
            }
            let (name, v) = found.ok_or_else(|| {
                format!(
                    "field `header:{header}`: the line has none of {} or `headers.{header}`",
                    names(&candidates)
                )
            })?;
            text_of(&name, v)
        }
    })
}

fn first_of<'a>(
    fields: &Object<'a>,
    candidates: &[&'static str],
    what: &str,
) -> Result<(&'static str, &'a RawValue), String> {
    candidates
        .iter()
        .find_map(|&n| fields.get(n).filter(|v| v.get() != "null").map(|v| (n, *v)))
        .ok_or_else(|| {
            format!(
                "field `{what}`: none of {} (pick one with --key field:NAME)",
                names(candidates)
            )
        })
}

/// `a.b` is the field `b` of the object `a` (or a field named `a.b`).
fn lookup<'a>(fields: &Object<'a>, name: &str) -> Result<Option<&'a RawValue>, String> {
    if let Some(v) = fields.get(name) {
        return Ok(Some(*v));
    }
    let Some((head, rest)) = name.split_once('.') else {
        return Ok(None);
    };
    match fields.get(head) {
        Some(v) if v.get().starts_with('{') => lookup(&object(v.get())?, rest),
        _ => Ok(None),
    }
}

fn string<'a>(name: &str, raw: &'a str) -> Result<Cow<'a, str>, String> {
    serde_json::from_str::<Text<'a>>(raw)
        .map(|t| t.0)
        .map_err(|e| format!("field `{name}`: {e}"))
}

/// A string as itself, a number or boolean as its JSON text.
fn text_of(name: &str, v: &RawValue) -> Result<String, String> {
    let raw = v.get();
    match raw.as_bytes().first() {
        Some(b'"') => string(name, raw).map(Cow::into_owned),
        Some(b'-' | b'0'..=b'9' | b't' | b'f') => Ok(raw.to_string()),
        Some(b'n') => Err(format!("field `{name}` is null")),
        _ => Err(format!("field `{name}` is not a string or a number")),
    }
}

/// `1.2.3.4:5678` → `1.2.3.4`, `[::1]:80` → `::1`; a bare address as is.
fn strip_port(addr: &str) -> &str {
    if let Some(rest) = addr.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    match addr.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &str, key: &str) -> Result<(u64, String), String> {
        parse_line(line, &key.parse().unwrap(), None, &mut TimeCache::default())
    }

    #[test]
    fn json_lines_read_envoy_and_nginx_fields() {
        let envoy = r#"{"start_time":"2024-05-01T12:00:00.250Z","method":"GET","path":"/api/books/7","downstream_remote_address":"198.51.100.4:51334","user_agent":"curl/8.5","x_api_key":"k-1","response_code":429}"#;
        let t = 1_714_564_800_250_000;
        assert_eq!(json(envoy, "client").unwrap(), (t, "198.51.100.4".into()));
        assert_eq!(json(envoy, "path:1").unwrap().1, "/api");
        assert_eq!(json(envoy, "header:x-api-key").unwrap().1, "k-1");
        assert_eq!(json(envoy, "field:response_code").unwrap().1, "429");
        let nginx = r#"{"time":"1714564800.5","remote_addr":"[2001:db8::1]:443","request":"POST /login HTTP/2.0","http_user_agent":"ua","user":{"id":17}}"#;
        assert_eq!(
            json(nginx, "client").unwrap(),
            (1_714_564_800_500_000, "2001:db8::1".into())
        );
        assert_eq!(json(nginx, "path").unwrap().1, "/login");
        assert_eq!(json(nginx, "header:user-agent").unwrap().1, "ua");
        assert_eq!(json(nginx, "field:user.id").unwrap().1, "17");
        let ms = r#"{"ts":1714564800250,"client_ip":"10.0.0.1"}"#;
        assert_eq!(json(ms, "client").unwrap(), (t, "10.0.0.1".into()));
    }

    #[test]
    fn bad_json_lines_name_the_field() {
        for (line, key, field) in [
            ("{\"path\":\"/\"}", "path", "`time`"),
            ("{\"time\":\"yesterday\"}", "path", "`time`"),
            ("{\"time\":-5}", "path", "`time`"),
            ("{\"time\":1}", "path", "`path`"),
            ("{\"time\":1}", "field:tenant", "`tenant`"),
            ("{\"time\":1,\"tenant\":null}", "field:tenant", "`tenant`"),
            ("{\"time\":1}", "header:x-api-key", "`header:x-api-key`"),
        ] {
            let err = json(line, key).unwrap_err();
            assert!(err.contains(field), "{line}: {err}");
        }
        assert!(json("{\"time\":1", "client").unwrap_err().contains("JSON"));
        assert!(json("[1]", "client").unwrap_err().contains("JSON object"));
    }
}
