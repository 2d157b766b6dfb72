//! The common case of `POST /v1/check` without the general path's
//! allocations: a flat body of `policy`, `key` and an optional `cost`,
//! its strings borrowed from the request (none escaped), each field once
//! and no other; the answer's body formatted on the stack.
//!
//! Anything else (a batch, `at_most`, a `tier`, an escaped string, a duplicate or
//! unknown field, a wrong type, an unknown policy) is not an error here:
//! the general path (`api.rs`, over `json.rs`) reads the body again and
//! answers it, with the same messages as always. So this path answers
//! only what the general one would answer the same way.

use std::fmt::Write;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use tollgate::overrides::Selector;
use tollgate::{Decision, Policy};
use tollgate_tower::headers::{QuotaItem, RATELIMIT, RATELIMIT_POLICY, ceil_millis, ceil_secs};

/// A single check, borrowed from the body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Single<'a> {
    pub(super) policy: &'a str,
    pub(super) key: &'a str,
    #[serde(default = "one")]
    pub(super) cost: u64,
}

fn one() -> u64 {
    1
}

impl<'a> Single<'a> {
    /// The check, when `body` is one the fast path answers.
    pub(super) fn parse(body: &'a Bytes) -> Option<Single<'a>> {
        // A derived struct reads a JSON array too (`["a", "k"]`): only an
        // object is taken here.
        let first = body.iter().find(|b| !b.is_ascii_whitespace())?;
        if *first != b'{' {
            return None;
        }
        serde_json::from_slice(body).ok()
    }
}

/// The longest answer formatted here (its body, its `RateLimit` value and
/// its length): a longer policy name takes the general path's serializer.
const MAX_ANSWER: usize = 1024;

/// The answer's text, formatted on the stack then moved to the heap
/// whole: the body and two header values are slices of it, one
/// allocation for the three.
struct Answer {
    buf: [u8; MAX_ANSWER],
    len: usize,
}

impl AsRef<[u8]> for Answer {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::fmt::Write for Answer {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        self.buf
            .get_mut(self.len..end)
            .ok_or(std::fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl Answer {
    /// `label`, then `n` in decimal (as `write!` writes it, without its
    /// formatting machinery, a third of this answer's cost when it was
    /// used).
    fn number(&mut self, label: &str, n: u64) -> std::fmt::Result {
        self.write_str(label)?;
        self.write_str(itoa::Buffer::new().format(n))
    }

    /// The range of what `write` writes.
    fn part(
        &mut self,
        write: impl FnOnce(&mut Answer) -> std::fmt::Result,
    ) -> Option<std::ops::Range<usize>> {
        let start = self.len;
        write(self).ok()?;
        Some(start..self.len)
    }
}

/// Whether `name` is written in JSON as it is (no `"`, `\` or control
/// character to escape).
fn plain(name: &str) -> bool {
    name.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\')
}

/// The answer to one check of `policy` (its headers from `decider`: the
/// policy, its tier, or the override `by`'s policy): the same status,
/// headers and body as the general path's (`api::answer` over a
/// `DecisionBody`), `Content-Length` set, or `None` when the policy's name
/// or the override's selector would need escaping. `policy_field` is
/// `decider`'s `RateLimit-Policy` value when it was made before
/// (`PolicySet::policy_field`).
pub(super) fn answer(
    policy: &Policy,
    decider: &Policy,
    d: &Decision,
    by: Option<&Selector>,
    policy_field: Option<&HeaderValue>,
) -> Option<Response> {
    let name = policy.name();
    if !plain(name) {
        return None;
    }
    let mut text = Answer {
        buf: [0; MAX_ANSWER],
        len: 0,
    };
    let body = text.part(|out| {
        out.write_str(if d.allowed {
            r#"{"allowed":true,"policy":""#
        } else {
            r#"{"allowed":false,"policy":""#
        })?;
        out.write_str(name)?;
        out.number(r#"","limit":"#, d.limit)?;
        out.number(r#","remaining":"#, d.remaining)?;
        out.number(r#","reset_after_ms":"#, ceil_millis(d.reset_after))?;
        out.number(r#","retry_after_ms":"#, ceil_millis(d.retry_after))?;
        out.number(r#","delay_ms":"#, ceil_millis(d.delay))?;
        out.write_str(r#","source":""#)?;
        out.write_str(d.source.as_str())?;
        out.write_str(if d.shadow { r#"","shadow":true"# } else { "\"" })?;
        if let Some(by) = by {
            out.write_str(r#","override":""#)?;
            let start = out.len;
            write!(out, "{by}")?;
            // Escaping is the general path's: its serializer writes it.
            let written =
                std::str::from_utf8(&out.buf[start..out.len]).map_err(|_| std::fmt::Error)?;
            if !plain(written) {
                return Err(std::fmt::Error);
            }
            out.write_str("\"")?;
        }
        out.write_str("}")
    })?;
    let item = QuotaItem::of(decider, d);
    let limit = text.part(|out| item.write_limit(out))?;
    let policy_field = match policy_field {
        Some(field) => field.clone(),
        None => {
            let range = text.part(|out| item.write_policy(out))?;
            HeaderValue::from_bytes(&text.buf[range]).ok()?
        }
    };
    let length = body.len();
    let length = text.part(|out| out.number("", length as u64))?;
    let retry = text.part(|out| out.number("", ceil_secs(d.retry_after)))?;
    let text = Bytes::from_owner(text);
    let value = |range| HeaderValue::from_maybe_shared(text.slice(range)).ok();
    let mut response = Response::new(Body::from(text.slice(body)));
    if !d.allowed {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    }
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONTENT_LENGTH, value(length)?);
    headers.append(RATELIMIT_POLICY, policy_field);
    headers.append(RATELIMIT, value(limit)?);
    if !d.allowed {
        headers.insert(header::RETRY_AFTER, value(retry)?);
    }
    Some(response)
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use serde_json::Value;

    use super::*;
    use crate::http::api;
    use crate::http::body::{CheckAnswer, DecisionBody};
    use crate::state::AppState;

    async fn parts(response: Response) -> (StatusCode, http::HeaderMap, Bytes) {
        let (parts, body) = response.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        (parts.status, parts.headers, bytes)
    }

    /// The fast answer and the general one, for the same decision.
    async fn both(state: &AppState, name: &str) -> [(StatusCode, http::HeaderMap, Bytes); 2] {
        let set = state.policies();
        let policy = set.get(name).unwrap();
        let (d, decider, by) = state.check_overridden(policy, b"k", 1, None).await.unwrap();
        assert!(by.is_none() && *decider == *policy);
        let general = api::answer(
            &[(policy, d)],
            CheckAnswer::One(DecisionBody::new(policy, &d)),
        );
        // The fast answer sets its length; the general one has it set by
        // axum's router, after the handler.
        let mut fast =
            parts(answer(policy, policy, &d, None, set.policy_field(policy)).unwrap()).await;
        let length = fast.1.remove(header::CONTENT_LENGTH).unwrap();
        assert_eq!(length.to_str().unwrap(), fast.2.len().to_string());
        // Without the policy's field made before, the same answer.
        let made = parts(answer(policy, policy, &d, None, None).unwrap()).await;
        assert_eq!((made.0, &made.2), (fast.0, &fast.2));
        assert_eq!(made.1.get(RATELIMIT_POLICY), fast.1.get(RATELIMIT_POLICY));
        [fast, parts(general).await]
    }

    #[tokio::test]
    async fn the_fast_answer_is_the_general_ones_byte_for_byte() {
        let state = crate::http::tests::memory().await;
        // `books` admits 3 an hour: admitted, then denied (429, Retry-After).
        let mut seen = Vec::new();
        for _ in 0..4 {
            let [fast, general] = both(&state, "books").await;
            assert_eq!(fast, general);
            serde_json::from_slice::<Value>(&fast.2).unwrap();
            seen.push(fast.0);
        }
        assert_eq!(seen.last(), Some(&StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(seen[0], StatusCode::OK);
        let [fast, general] = both(&state, "api").await;
        assert_eq!(fast, general);
        // A shadow policy's would-be denial: admitted, `"shadow": true`.
        for n in 0..2 {
            let [fast, general] = both(&state, "audit").await;
            assert_eq!(fast, general);
            let json: Value = serde_json::from_slice(&fast.2).unwrap();
            assert_eq!(
                (json["allowed"].as_bool(), json.get("shadow").is_some()),
                (Some(true), n == 1)
            );
        }
    }

    /// A key under an override (exact or prefix): the fast answer is the
    /// general one, byte for byte, with the override named in the body and
    /// its limit in the headers; a selector that needs escaping is left to
    /// the general path.
    #[tokio::test]
    async fn an_overridden_answer_is_the_general_ones_byte_for_byte() {
        use tollgate::overrides::{Limits, Override};
        let state = crate::http::tests::memory().await;
        let set = state.policies();
        let policy = set.get("books").unwrap();
        let five = || {
            Override::limits(Limits {
                limit: Some(5),
                ..Limits::default()
            })
        };
        for (selector, key) in [("vip", "vip"), ("team_*", "team_a"), ("q\"x", "q\"x")] {
            let parsed = Selector::parse(selector.as_bytes()).unwrap();
            state.overrides.set(policy, parsed, five()).await.unwrap();
            let mut statuses = Vec::new();
            for _ in 0..6 {
                let (d, decider, by) = state
                    .check_overridden(policy, key.as_bytes(), 1, None)
                    .await
                    .unwrap();
                let by = by.expect("the override decides");
                assert_eq!((by.to_string().as_str(), d.limit), (selector, 5));
                let fast = answer(policy, &decider, &d, Some(&by), set.policy_field(&decider));
                let mut body = DecisionBody::new(policy, &d);
                body.by_override = Some(by.to_string());
                let general = parts(api::answer(&[(&*decider, d)], CheckAnswer::One(body))).await;
                let Some(fast) = fast else {
                    assert_eq!(selector, "q\"x", "only a selector to escape is left");
                    continue;
                };
                let mut fast = parts(fast).await;
                fast.1.remove(header::CONTENT_LENGTH).unwrap();
                assert_eq!(fast, general, "{selector}");
                let json: Value = serde_json::from_slice(&fast.2).unwrap();
                assert_eq!(json["override"], selector);
                statuses.push(fast.0);
            }
            if selector != "q\"x" {
                assert_eq!(statuses[4], StatusCode::OK, "{selector}");
                assert_eq!(statuses[5], StatusCode::TOO_MANY_REQUESTS, "{selector}");
            }
        }
    }

    #[test]
    fn only_plain_flat_bodies_take_the_fast_path() {
        let fast =
            |text: &'static str| Single::parse(&Bytes::from_static(text.as_bytes())).is_some();
        assert!(fast(r#"{"policy":"a","key":"k"}"#));
        assert!(fast(r#" {"key":"k","cost":0,"policy":"a"} "#));
        for general in [
            r#"{"policy":"a","key":"\u006b"}"#,
            r#"{"policy":"a","key":"k","key":"k"}"#,
            r#"{"policy":"a","key":"k","at_most":3}"#,
            r#"{"policy":"a","key":"k","cost":null}"#,
            r#"{"policy":"a","key":"k","cost":1.0}"#,
            r#"{"policy":"a","key":"k","cost":-1}"#,
            r#"{"checks":[]}"#,
            r#"{"policy":"a"}"#,
            r#"{"policy":"a","key":"k"} x"#,
            r#"["a","k"]"#,
        ] {
            assert!(!fast(general), "{general}");
        }
    }

    #[test]
    fn names_that_need_escaping_are_not_formatted_here() {
        assert!(plain("api-v1.é"));
        assert!(!plain("a\"b") && !plain("a\\b") && !plain("a\nb"));
    }
}
