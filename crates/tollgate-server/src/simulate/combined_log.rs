//! nginx's and Apache's combined access log (and the common log, which
//! stops before the two headers).

use super::log_line::{KeyPart, KeySpec, TimeCache, epoch_micros, join_key, path_prefix};

/// One line's time (µs since the epoch) and key.
pub(super) fn parse_line(
    line: &str,
    key: &KeySpec,
    times: &mut TimeCache,
) -> Result<(u64, String), String> {
    let l = Combined::split(line)?;
    let t = times.get(l.time, combined_time)?;
    Ok((t, l.key(key)?))
}

/// The fields of a combined log line:
/// `client ident user [time] "request" status bytes "referer" "user-agent"`
/// (the common format stops after `bytes`).
#[derive(Debug)]
struct Combined<'a> {
    client: &'a str,
    time: &'a str,
    request: &'a str,
    referer: Option<&'a str>,
    user_agent: Option<&'a str>,
}

impl<'a> Combined<'a> {
    fn split(line: &'a str) -> Result<Self, String> {
        let client = line
            .split(' ')
            .next()
            .filter(|c| !c.is_empty())
            .ok_or("field `client`: the line starts with a space")?;
        let open = line
            .find(" [")
            .ok_or("field `time`: no `[time]` after the client")?;
        let rest = &line[open + 2..];
        let close = rest.find(']').ok_or("field `time`: no `]` closes `[`")?;
        let time = &rest[..close];
        let rest = rest[close + 1..]
            .strip_prefix(" \"")
            .ok_or("field `request`: no quoted request line after the time")?;
        let (request, rest) = quoted(rest).ok_or("field `request`: no closing quote")?;
        // status and bytes, then the two quoted headers of the combined form
        let mut rest = rest.trim_start();
        for _ in 0..2 {
            rest = rest.split_once(' ').map_or("", |(_, r)| r).trim_start();
        }
        let (referer, user_agent) = match rest.strip_prefix('"').and_then(quoted) {
            Some((referer, rest)) => (
                Some(referer),
                rest.trim_start()
                    .strip_prefix('"')
                    .and_then(quoted)
                    .map(|(ua, _)| ua),
            ),
            None => (None, None),
        };
        Ok(Combined {
            client,
            time,
            request,
            referer,
            user_agent,
        })
    }

    fn key(&self, spec: &KeySpec) -> Result<String, String> {
        join_key(spec, |part| match part {
            KeyPart::Client => Ok(self.client.to_string()),
            KeyPart::Path(n) => {
                let path = self
                    .request
                    .split(' ')
                    .nth(1)
                    .ok_or_else(|| format!("field `request`: no path in `{}`", self.request))?;
                Ok(path_prefix(path, *n))
            }
            KeyPart::Header(name) => {
                let value = if name == "referer" {
                    self.referer
                } else {
                    self.user_agent
                };
                value
                    .map(str::to_string)
                    .ok_or_else(|| format!("field `{name}`: the line has no {name} (common rather than combined format?)"))
            }
            KeyPart::Field(name) => Err(format!("field `{name}`: a combined log has no fields")),
        })
    }
}

/// The text up to the closing quote (`\"` escapes one) and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some((&s[..i], &s[i + 1..])),
            _ => i += 1,
        }
    }
    None
}

/// `10/Oct/2000:13:55:36 -0700` as µs since the epoch.
fn combined_time(text: &str) -> Result<u64, String> {
    jiff::fmt::strtime::parse("%d/%b/%Y:%H:%M:%S %z", text)
        .and_then(|t| t.to_timestamp())
        .map_err(|_| {
            format!("field `time`: `{text}` is not a time like `10/Oct/2000:13:55:36 -0700`")
        })
        .and_then(|t| epoch_micros(t, "time", text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn combined(line: &str, key: &str) -> Result<(u64, String), String> {
        parse_line(line, &key.parse().unwrap(), &mut TimeCache::default())
    }

    const LINE: &str = r#"203.0.113.7 - frank [10/Oct/2000:13:55:36 -0700] "GET /api/books/42?x=1 HTTP/1.1" 200 2326 "http://example.com/start.html" "Mozilla/4.08 [en] (Win98; I ;Nav)""#;

    #[test]
    fn combined_lines_give_time_and_every_key() {
        let t = 971_211_336_000_000; // 2000-10-10T20:55:36Z
        assert_eq!(combined(LINE, "client").unwrap(), (t, "203.0.113.7".into()));
        assert_eq!(combined(LINE, "path").unwrap().1, "/api/books/42");
        assert_eq!(combined(LINE, "path:2").unwrap().1, "/api/books");
        assert_eq!(combined(LINE, "path:9").unwrap().1, "/api/books/42");
        assert_eq!(
            combined(LINE, "header:User-Agent").unwrap().1,
            "Mozilla/4.08 [en] (Win98; I ;Nav)"
        );
        assert_eq!(
            combined(LINE, "client,path:1").unwrap().1,
            "203.0.113.7 /api"
        );
        let common = LINE.split(" \"http").next().unwrap();
        assert_eq!(combined(common, "path:1").unwrap().1, "/api");
        assert!(
            combined(common, "header:referer")
                .unwrap_err()
                .contains("`referer`")
        );
    }

    #[test]
    fn bad_combined_lines_name_the_field() {
        for (line, field) in [
            (
                "203.0.113.7 - - 10/Oct/2000 \"GET / HTTP/1.1\" 200 1",
                "`time`",
            ),
            (
                "203.0.113.7 - - [10/Oct/2000:13:55:36] \"GET / HTTP/1.1\" 200 1",
                "`time`",
            ),
            (
                "203.0.113.7 - - [10/Oct/2000:13:55:36 -0700] GET",
                "`request`",
            ),
            (
                "203.0.113.7 - - [10/Oct/2000:13:55:36 -0700] \"GET / HTTP/1.1 200 1",
                "`request`",
            ),
        ] {
            let err = combined(line, "client").unwrap_err();
            assert!(err.contains(field), "{line}: {err}");
        }
        let err = combined(
            "203.0.113.7 - - [10/Oct/2000:13:55:36 -0700] \"-\" 400 0 \"-\" \"-\"",
            "path",
        )
        .unwrap_err();
        assert!(err.contains("`request`"), "{err}");
    }
}
