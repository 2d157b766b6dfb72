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

/// One quota policy's part of both fields, for callers whose limits are
/// not [`Policy`] values (the service's ERL mode, whose rules are ERL's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaItem<'a> {
    /// The policy's name, written as a Structured Field string: `"` and
    /// `\` escaped, any character outside printable ASCII written `_`.
    pub name: &'a str,
    /// `q`: the quota.
    pub quota: u64,
    /// `w`: the window, in whole seconds; `None` for a quota of
    /// `concurrent-requests`, which has neither `w` nor `t`.
    pub window: Option<u64>,
    /// `r`: what remains.
    pub remaining: u64,
    /// `t`: whole seconds until more quota is certain; `None` leaves it out.
    pub reset: Option<u64>,
}

impl<'a> QuotaItem<'a> {
    /// The item of `policy` for `decision`.
    pub fn of(policy: &'a Policy, decision: &Decision) -> QuotaItem<'a> {
        let concurrency = is_concurrency(policy);
        // A denial with nothing to wait for is a policy that would have
        // admitted the request alone (an atomic batch denied by another).
        let until = if decision.allowed || decision.retry_after.is_zero() {
            decision.reset_after
        } else {
            decision.retry_after
        };
        QuotaItem {
            name: policy.name(),
            quota: policy.limit(),
            window: (!concurrency).then(|| ceil_secs(policy.time_span()).max(1)),
            remaining: decision.remaining,
            reset: (!concurrency).then(|| ceil_secs(until)),
        }
    }
}

/// `name` as a Structured Field string.
fn write_name(out: &mut impl Write, name: &str) -> std::fmt::Result {
    out.write_char('"')?;
    for c in name.chars() {
        match c {
            '"' | '\\' => {
                out.write_char('\\')?;
                out.write_char(c)?;
            }
            ' '..='~' => out.write_char(c)?,
            _ => out.write_char('_')?,
        }
    }
    out.write_char('"')
}

/// `label` and `n` (as `write!` would write them, without its
/// formatting machinery: these are written on every decision).
fn write_param(out: &mut impl Write, label: &str, n: u64) -> std::fmt::Result {
    out.write_str(label)?;
    out.write_str(itoa::Buffer::new().format(n))
}

impl QuotaItem<'_> {
    /// Writes the item's part of `RateLimit-Policy` (for callers that
    /// format the field themselves, beside other text).
    pub fn write_policy(&self, out: &mut impl Write) -> std::fmt::Result {
        write_name(out, self.name)?;
        write_param(out, ";q=", self.quota)?;
        match self.window {
            Some(w) => write_param(out, ";w=", w),
            None => out.write_str(";qu=\"concurrent-requests\""),
        }
    }

    /// Writes the item's part of `RateLimit` (for callers that format the
    /// field themselves, beside other text).
    pub fn write_limit(&self, out: &mut impl Write) -> std::fmt::Result {
        write_name(out, self.name)?;
        write_param(out, ";r=", self.remaining)?;
        if let (Some(_), Some(t)) = (self.window, self.reset) {
            write_param(out, ";t=", t)?;
        }
        Ok(())
    }
}

/// A field's value as it is written: on the stack while it fits (one or
/// two policies with short names, the common case), then on the heap. The
/// value is copied into its `HeaderValue` once, so a field costs one
/// allocation, not a `String` growing as it is written.
struct Field {
    stack: [u8; FIELD_STACK],
    len: usize,
    heap: String,
}

const FIELD_STACK: usize = 256;

impl Field {
    fn new() -> Field {
        Field {
            stack: [0; FIELD_STACK],
            len: 0,
            heap: String::new(),
        }
    }

    fn as_bytes(&self) -> &[u8] {
        if self.heap.is_empty() {
            &self.stack[..self.len]
        } else {
            self.heap.as_bytes()
        }
    }
}

impl Write for Field {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = self.len + s.len();
        if self.heap.is_empty() && end <= FIELD_STACK {
            self.stack[self.len..end].copy_from_slice(s.as_bytes());
            self.len = end;
        } else {
            if self.heap.is_empty() {
                // Only whole `str`s were copied in: still UTF-8.
                self.heap.push_str(
                    std::str::from_utf8(&self.stack[..self.len]).map_err(|_| std::fmt::Error)?,
                );
            }
            self.heap.push_str(s);
        }
        Ok(())
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
        RateLimitHeaders::from_items(decided.map(|(p, d)| QuotaItem::of(p, d)))
    }

    /// The fields for `items`, in the order given; `None` when empty.
    pub fn from_items<'a>(
        items: impl IntoIterator<Item = QuotaItem<'a>>,
    ) -> Option<RateLimitHeaders> {
        let mut policy = Field::new();
        let mut limit = Field::new();
        for (i, item) in items.into_iter().enumerate() {
            if i > 0 {
                policy.write_str(", ").ok()?;
                limit.write_str(", ").ok()?;
            }
            item.write_policy(&mut policy).ok()?;
            item.write_limit(&mut limit).ok()?;
        }
        if policy.as_bytes().is_empty() {
            return None;
        }
        // Names are written in printable ASCII and the rest is digits and
        // punctuation, so both values are always valid header values.
        Some(RateLimitHeaders {
            policy: HeaderValue::from_bytes(policy.as_bytes()).ok()?,
            limit: HeaderValue::from_bytes(limit.as_bytes()).ok()?,
        })
    }

    /// The `RateLimit-Policy` value.
    pub fn policy(&self) -> &HeaderValue {
        &self.policy
    }

    /// The `RateLimit` value.
    pub fn limit(&self) -> &HeaderValue {
        &self.limit
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

    #[test]
    fn items_without_a_policy_are_escaped() {
        let item = QuotaItem {
            name: "say \"hi\" \\ caf\u{e9}",
            quota: 10,
            window: Some(60),
            remaining: 0,
            reset: Some(37),
        };
        let untimed = QuotaItem {
            name: "n",
            reset: None,
            ..item
        };
        let h = RateLimitHeaders::from_items([item, untimed]).unwrap();
        assert_eq!(
            h.policy(),
            "\"say \\\"hi\\\" \\\\ caf_\";q=10;w=60, \"n\";q=10;w=60"
        );
        assert_eq!(
            h.limit(),
            "\"say \\\"hi\\\" \\\\ caf_\";r=0;t=37, \"n\";r=0"
        );
    }
}
