//! What the two access-log parsers share: the format, the key a line is
//! limited by (`--key`), the cache of the last timestamp, and how a key and
//! a time are made. A leaf: the parsers (`combined_log.rs`, `json_log.rs`)
//! and the dispatch over them (`access_log.rs`) import it, it imports
//! neither.

use std::fmt;
use std::str::FromStr;

/// The two log formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogFormat {
    Combined,
    Json,
}

/// What a line is limited by: one or more parts, joined with a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySpec(Vec<KeyPart>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum KeyPart {
    /// The client's address (without a port).
    Client,
    /// The path without its query, or its first `n` segments.
    Path(Option<usize>),
    /// A JSON field, `a.b` for a nested one.
    Field(String),
    /// A request header the log records.
    Header(String),
}

impl Default for KeySpec {
    fn default() -> Self {
        KeySpec(vec![KeyPart::Client])
    }
}

impl FromStr for KeySpec {
    type Err = String;

    /// `client`, `path`, `path:N`, `field:NAME`, `header:NAME`, or several
    /// of them separated by commas.
    fn from_str(s: &str) -> Result<Self, String> {
        let parts = s
            .split(',')
            .map(|part| {
                let part = part.trim();
                let (kind, arg) = match part.split_once(':') {
                    Some((k, a)) => (k, Some(a)),
                    None => (part, None),
                };
                match (kind, arg) {
                    ("client", None) => Ok(KeyPart::Client),
                    ("path", None) => Ok(KeyPart::Path(None)),
                    ("path", Some(n)) => match n.parse::<usize>() {
                        Ok(n) if n >= 1 => Ok(KeyPart::Path(Some(n))),
                        _ => Err(format!(
                            "`{part}`: the number of path segments must be an integer ≥ 1"
                        )),
                    },
                    ("field", Some(name)) if !name.is_empty() => {
                        Ok(KeyPart::Field(name.to_string()))
                    }
                    ("header", Some(name)) if !name.is_empty() => {
                        Ok(KeyPart::Header(name.to_ascii_lowercase()))
                    }
                    _ => Err(format!(
                        "`{part}` is not a key: use client, path, path:N (the first N segments), field:NAME or header:NAME, separated by commas"
                    )),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(KeySpec(parts))
    }
}

impl fmt::Display for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, part) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match part {
                KeyPart::Client => f.write_str("client")?,
                KeyPart::Path(None) => f.write_str("path")?,
                KeyPart::Path(Some(n)) => write!(f, "path:{n}")?,
                KeyPart::Field(name) => write!(f, "field:{name}")?,
                KeyPart::Header(name) => write!(f, "header:{name}")?,
            }
        }
        Ok(())
    }
}

impl KeySpec {
    /// Refuses parts the format does not record: a combined log has no
    /// JSON fields and only two headers.
    pub(crate) fn check(&self, format: LogFormat) -> Result<(), String> {
        if format == LogFormat::Json {
            return Ok(());
        }
        for part in &self.0 {
            match part {
                KeyPart::Field(name) => {
                    return Err(format!(
                        "--key field:{name}: a combined log has no fields; use client, path, path:N, header:referer or header:user-agent"
                    ));
                }
                KeyPart::Header(name) if name != "referer" && name != "user-agent" => {
                    return Err(format!(
                        "--key header:{name}: a combined log records only the referer and user-agent headers"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// The last timestamp text and its value: consecutive lines of a log
/// mostly share their second.
#[derive(Debug, Default)]
pub(crate) struct TimeCache {
    text: String,
    micros: u64,
}

impl TimeCache {
    pub(super) fn get(
        &mut self,
        text: &str,
        parse: impl FnOnce(&str) -> Result<u64, String>,
    ) -> Result<u64, String> {
        if self.text != text || self.text.is_empty() {
            self.micros = parse(text)?;
            self.text.clear();
            self.text.push_str(text);
        }
        Ok(self.micros)
    }
}

/// The path without its query string, or its first `n` segments.
pub(super) fn path_prefix(path: &str, n: Option<usize>) -> String {
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let Some(n) = n else {
        return path.to_string();
    };
    let end = path
        .char_indices()
        .filter(|&(i, c)| c == '/' && i > 0)
        .nth(n - 1)
        .map_or(path.len(), |(i, _)| i);
    path[..end].to_string()
}

/// The key's parts, joined with a space.
pub(super) fn join_key(
    spec: &KeySpec,
    mut part: impl FnMut(&KeyPart) -> Result<String, String>,
) -> Result<String, String> {
    let mut key = String::new();
    for (i, p) in spec.0.iter().enumerate() {
        if i > 0 {
            key.push(' ');
        }
        key.push_str(&part(p)?);
    }
    Ok(key)
}

/// A time as µs since the epoch; before 1970 is an error naming `field`.
pub(super) fn epoch_micros(t: jiff::Timestamp, field: &str, text: &str) -> Result<u64, String> {
    u64::try_from(t.as_microsecond())
        .map_err(|_| format!("field `{field}`: `{text}` is before 1970"))
}

/// `a`, `b` as "`a`, `b`", for messages.
pub(super) fn names(fields: &[&str]) -> String {
    fields
        .iter()
        .map(|f| format!("`{f}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_specs_parse_and_refuse_what_a_format_lacks() {
        for bad in ["", "ip", "path:0", "path:x", "field:", "header"] {
            assert!(bad.parse::<KeySpec>().is_err(), "{bad}");
        }
        let spec: KeySpec = "client, path:2,header:X-Api-Key".parse().unwrap();
        assert_eq!(spec.to_string(), "client,path:2,header:x-api-key");
        assert!(spec.check(LogFormat::Json).is_ok());
        assert!(
            spec.check(LogFormat::Combined)
                .unwrap_err()
                .contains("x-api-key")
        );
        let field: KeySpec = "field:tenant".parse().unwrap();
        assert!(field.check(LogFormat::Combined).is_err());
    }
}
