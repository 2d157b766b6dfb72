//! The answers the middleware gives itself, instead of the inner service:
//! as HTTP problem details (RFC 9457) or as gRPC statuses.

use std::fmt::Write;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use crate::body::ResponseBody;
use crate::headers::{RateLimitHeaders, ceil_millis, ceil_secs};

/// The problem type of a denial, from draft-ietf-httpapi-ratelimit-headers.
pub const QUOTA_EXCEEDED: &str = "https://iana.org/assignments/http-problem-types#quota-exceeded";

const QUOTA_EXCEEDED_TITLE: &str =
    "Request cannot be satisfied as assigned quota has been exceeded";

const PROBLEM_JSON: HeaderValue = HeaderValue::from_static("application/problem+json");
const GRPC: HeaderValue = HeaderValue::from_static("application/grpc");
const GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");
const GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");
const GRPC_RETRY_PUSHBACK_MS: HeaderName = HeaderName::from_static("grpc-retry-pushback-ms");

/// gRPC status codes used here.
const RESOURCE_EXHAUSTED: u16 = 8;
const UNAVAILABLE: u16 = 14;
const INVALID_ARGUMENT: u16 = 3;
const INTERNAL: u16 = 13;

/// A complete answer, independent of the inner service's body type.
#[derive(Debug)]
pub(crate) struct Rejection {
    status: StatusCode,
    // Boxed: a `HeaderMap` is large, and a rejection travels in `Result`s.
    headers: Box<HeaderMap>,
    body: Bytes,
}

/// What went wrong, in the words of both protocols.
struct Problem<'a> {
    status: StatusCode,
    grpc_code: u16,
    type_uri: &'a str,
    title: &'a str,
    detail: &'a str,
    violated: &'a [&'a str],
}

impl Rejection {
    /// `429` (gRPC `RESOURCE_EXHAUSTED`): over the quota of the `violated`
    /// policies; retry after `retry_after`.
    pub(crate) fn quota_exceeded(
        grpc: bool,
        retry_after: Duration,
        violated: &[&str],
        ratelimit: Option<RateLimitHeaders>,
    ) -> Rejection {
        // At least one second: `Retry-After: 0` invites an immediate retry
        // that a sub-second wait would deny again.
        let secs = ceil_secs(retry_after).max(1);
        let mut rejection = Rejection::new(
            grpc,
            &Problem {
                status: StatusCode::TOO_MANY_REQUESTS,
                grpc_code: RESOURCE_EXHAUSTED,
                type_uri: QUOTA_EXCEEDED,
                title: QUOTA_EXCEEDED_TITLE,
                detail: "rate limit exceeded",
                violated,
            },
        );
        rejection
            .headers
            .insert(RETRY_AFTER, HeaderValue::from(secs));
        if grpc {
            rejection.headers.insert(
                GRPC_RETRY_PUSHBACK_MS,
                HeaderValue::from(ceil_millis(retry_after).max(1)),
            );
        }
        if let Some(h) = ratelimit {
            h.append_to(&mut rejection.headers);
        }
        rejection
    }

    /// `503` (gRPC `UNAVAILABLE`): the store cannot decide and its failure
    /// policy is to deny.
    pub(crate) fn store_unavailable(grpc: bool) -> Rejection {
        let mut rejection = Rejection::new(
            grpc,
            &Problem {
                status: StatusCode::SERVICE_UNAVAILABLE,
                grpc_code: UNAVAILABLE,
                type_uri: "about:blank",
                title: "Service Unavailable",
                detail: "rate limiting is temporarily unavailable",
                violated: &[],
            },
        );
        rejection
            .headers
            .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        rejection
    }

    /// `400` (gRPC `INVALID_ARGUMENT`): the request's key cannot be used
    /// (too long).
    pub(crate) fn bad_key(grpc: bool, reason: &str) -> Rejection {
        Rejection::bad_request(grpc, "key", reason)
    }

    /// `400` (gRPC `INVALID_ARGUMENT`): the request names a tier its
    /// policy does not have.
    pub(crate) fn bad_tier(grpc: bool, reason: &str) -> Rejection {
        Rejection::bad_request(grpc, "tier", reason)
    }

    /// `400` (gRPC `INVALID_ARGUMENT`): the request's rate-limit `what`
    /// is invalid, for `reason`.
    fn bad_request(grpc: bool, what: &str, reason: &str) -> Rejection {
        Rejection::new(
            grpc,
            &Problem {
                status: StatusCode::BAD_REQUEST,
                grpc_code: INVALID_ARGUMENT,
                type_uri: "about:blank",
                title: "Bad Request",
                detail: &format!("the request's rate-limit {what} is invalid: {reason}"),
                violated: &[],
            },
        )
    }

    /// `500` (gRPC `INTERNAL`): the limiter is set up wrongly; the details
    /// are in the log, not in the answer.
    pub(crate) fn misconfigured(grpc: bool) -> Rejection {
        Rejection::new(
            grpc,
            &Problem {
                status: StatusCode::INTERNAL_SERVER_ERROR,
                grpc_code: INTERNAL,
                type_uri: "about:blank",
                title: "Internal Server Error",
                detail: "the rate limiter is misconfigured; see the service's log",
                violated: &[],
            },
        )
    }

    fn new(grpc: bool, problem: &Problem<'_>) -> Rejection {
        let mut headers = Box::new(HeaderMap::new());
        if grpc {
            // A trailers-only gRPC response: HTTP 200, the status in the
            // headers, no message.
            headers.insert(CONTENT_TYPE, GRPC);
            headers.insert(GRPC_STATUS, HeaderValue::from(problem.grpc_code));
            if let Ok(message) = HeaderValue::try_from(percent_encode(problem.detail)) {
                headers.insert(GRPC_MESSAGE, message);
            }
            return Rejection {
                status: StatusCode::OK,
                headers,
                body: Bytes::new(),
            };
        }
        headers.insert(CONTENT_TYPE, PROBLEM_JSON);
        Rejection {
            status: problem.status,
            headers,
            body: Bytes::from(problem_json(problem)),
        }
    }

    /// The response, with a body of the inner service's type.
    pub(crate) fn into_response<B>(self) -> Response<ResponseBody<B>> {
        let mut response = Response::new(ResponseBody::full(self.body));
        *response.status_mut() = self.status;
        *response.headers_mut() = *self.headers;
        response
    }
}

/// An RFC 9457 problem details object.
fn problem_json(p: &Problem<'_>) -> String {
    let mut out = String::with_capacity(256);
    out.push_str("{\"type\":");
    json_string(&mut out, p.type_uri);
    out.push_str(",\"title\":");
    json_string(&mut out, p.title);
    let _ = write!(out, ",\"status\":{}", p.status.as_u16());
    out.push_str(",\"detail\":");
    json_string(&mut out, p.detail);
    if !p.violated.is_empty() {
        out.push_str(",\"violated-policies\":[");
        for (i, name) in p.violated.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            json_string(&mut out, name);
        }
        out.push(']');
    }
    out.push('}');
    out
}

fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `grpc-message` is percent-encoded outside printable ASCII, and `%`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_grpc_messages_are_escaped() {
        let mut s = String::new();
        json_string(&mut s, "a\"b\\c\nd");
        assert_eq!(s, r#""a\"b\\c\u000ad""#);
        assert_eq!(percent_encode("50% off é"), "50%25 off %C3%A9");
    }
}
