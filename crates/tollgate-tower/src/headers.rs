//! The `RateLimit-Policy` and `RateLimit` header fields
//! (draft-ietf-httpapi-ratelimit-headers), and `Retry-After`.
//!
//! Both fields are Structured Field lists with one item per policy that
//! decided the request, named by the policy's name:
//!
//! ```text
//! RateLimit-Policy: "per-ip";q=120;w=60, "uploads";q=4;qu="concurrent-requests"
//! RateLimit: "per-ip";r=119;t=60, "uploads";r=3
//! ```
//!
//! The service (`tollgate serve`) sends the same fields from this module.
//!
//! `q` is the policy's `limit`, `burst` or `capacity`; `w` the span it is
//! counted over (window, `per`, in whole seconds rounded up). `r` is what
//! remains after this request; `t` is when more quota is certain to be
//! there: the retry delay on a denial, the time until the key is back to
//! its fresh state otherwise. Concurrency policies are quotas of
//! `concurrent-requests` with no window and no `t`: a slot frees when a
//! request in flight ends, which no clock says. No partition key (`pk`) is
//! sent, so client addresses and API keys never echo back in headers.

use std::fmt::Write;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use tollgate::{Algorithm, Decision, Policy};

/// `RateLimit-Policy`.
pub const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
/// `RateLimit`.
pub const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// Whole seconds, rounded up: waiting this long is always enough.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Whole milliseconds, rounded up.
pub fn ceil_millis(d: Duration) -> u64 {
    let ms = d.as_millis();
    let exact = Duration::from_millis(ms as u64) == d;
    (ms as u64).saturating_add(u64::from(!exact))
}

fn is_concurrency(policy: &Policy) -> bool {
    matches!(policy.algorithm(), Algorithm::Concurrency(_))
}

/// The policy's item of `RateLimit-Policy`.
fn policy_item(out: &mut String, policy: &Policy) {
    let _ = write!(out, "\"{}\";q={}", policy.name(), policy.limit());
    if is_concurrency(policy) {
        out.push_str(";qu=\"concurrent-requests\"");
    } else {
        let _ = write!(out, ";w={}", ceil_secs(policy.time_span()).max(1));
    }
}

/// The policy's item of `RateLimit` for this decision.
fn limit_item(out: &mut String, policy: &Policy, decision: &Decision) {
    let _ = write!(out, "\"{}\";r={}", policy.name(), decision.remaining);
    if !is_concurrency(policy) {
        // A denial with nothing to wait for is a policy that would have
        // admitted the request alone (an atomic batch denied by another).
        let until = if decision.allowed || decision.retry_after.is_zero() {
            decision.reset_after
        } else {
            decision.retry_after
        };
        let _ = write!(out, ";t={}", ceil_secs(until));
    }
}

/// The two fields for a set of decisions.
#[derive(Debug, Clone)]
pub struct RateLimitHeaders {
    policy: HeaderValue,
    limit: HeaderValue,
}

impl RateLimitHeaders {
    /// The fields for `decided`, in the order given; `None` when empty.
    pub fn new<'a>(
        decided: impl Iterator<Item = (&'a Policy, &'a Decision)>,
    ) -> Option<RateLimitHeaders> {
        let mut policy = String::new();
        let mut limit = String::new();
        for (i, (p, d)) in decided.enumerate() {
            if i > 0 {
                policy.push_str(", ");
                limit.push_str(", ");
            }
            policy_item(&mut policy, p);
            limit_item(&mut limit, p, d);
        }
        if policy.is_empty() {
            return None;
        }
        // Policy names are `A-Z a-z 0-9 _ - .` and the rest is digits and
        // punctuation, so both values are always valid header values.
        Some(RateLimitHeaders {
            policy: HeaderValue::try_from(policy).ok()?,
            limit: HeaderValue::try_from(limit).ok()?,
        })
    }

    /// Adds both fields to `headers`, after any an inner limiter set (the
    /// lists then combine, as Structured Fields allow).
    pub fn append_to(self, headers: &mut HeaderMap) {
        headers.append(RATELIMIT_POLICY, self.policy);
        headers.append(RATELIMIT, self.limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_up_and_exact_values_stay() {
        assert_eq!(ceil_secs(Duration::ZERO), 0);
        assert_eq!(ceil_secs(Duration::from_micros(1)), 1);
        assert_eq!(ceil_secs(Duration::from_secs(3)), 3);
        assert_eq!(ceil_secs(Duration::from_millis(3001)), 4);
        assert_eq!(ceil_millis(Duration::from_micros(1500)), 2);
        assert_eq!(ceil_millis(Duration::from_millis(250)), 250);
    }

    #[test]
    fn items_follow_the_draft() {
        let fw = Policy::fixed_window("books", 120, Duration::from_secs(60)).unwrap();
        let cc = Policy::concurrency("uploads", 4, Duration::from_secs(30)).unwrap();
        let tiny = Policy::fixed_window("tiny", 5, Duration::from_millis(100)).unwrap();
        let allowed = Decision::from_micros(true, 120, 119, 59_000_001, 0, 0);
        let lease = Decision::from_micros(true, 4, 3, 30_000_000, 0, 0);
        let denied = Decision::from_micros(false, 5, 0, 100_000, 99_999, 0);
        let h =
            RateLimitHeaders::new([(&fw, &allowed), (&cc, &lease), (&tiny, &denied)].into_iter())
                .unwrap();
        assert_eq!(
            h.policy,
            "\"books\";q=120;w=60, \"uploads\";q=4;qu=\"concurrent-requests\", \"tiny\";q=5;w=1"
        );
        assert_eq!(
            h.limit,
            "\"books\";r=119;t=60, \"uploads\";r=3, \"tiny\";r=0;t=1"
        );
        assert!(RateLimitHeaders::new(std::iter::empty()).is_none());
    }
}
