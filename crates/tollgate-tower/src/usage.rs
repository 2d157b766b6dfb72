//! How the inner service reports what a request really cost: [`Usage`] in
//! the response's extensions, or a response header the layer is told to
//! read.

use http::{HeaderMap, HeaderName, Response};

/// The units a request really used (tokens, bytes, rows), reported by the
/// inner service in its response's extensions for a layer that limits by
/// an estimate ([`RateLimitLayerBuilder::usage_limit`]).
///
/// The layer checked the request's estimate before calling the service; once
/// the response body has ended (or been dropped), it settles every usage
/// limit with this: the difference is charged, or refunded.
///
/// ```
/// use http::Response;
/// use tollgate_tower::Usage;
///
/// // In a handler, once the work is done and its cost known:
/// let mut response = Response::new("the answer".to_owned());
/// response.extensions_mut().insert(Usage(1_180));
/// ```
///
/// [`RateLimitLayerBuilder::usage_limit`]: crate::RateLimitLayerBuilder::usage_limit
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Usage(pub u64);

/// Where a layer reads a response's usage: [`Usage`] in its extensions
/// first, then, when configured, a header holding a whole number, in the
/// response's head or in its body's trailers.
#[derive(Debug, Clone, Default)]
pub(crate) struct UsageSource {
    header: Option<HeaderName>,
}

impl UsageSource {
    pub(crate) fn with_header(header: Option<HeaderName>) -> UsageSource {
        UsageSource { header }
    }

    /// Whether a header is configured (trailers may then report usage).
    pub(crate) fn has_header(&self) -> bool {
        self.header.is_some()
    }

    /// The usage the response's head reports, if any.
    pub(crate) fn read<B>(&self, response: &Response<B>) -> Option<u64> {
        if let Some(Usage(units)) = response.extensions().get::<Usage>() {
            return Some(*units);
        }
        self.read_header(response.headers())
    }

    /// The usage header's value among `headers` (a response's, or its
    /// trailers). A value that is not a whole number (digits only, below
    /// 2^64) is no report: it is logged at `warn`, and what was known
    /// before stands.
    pub(crate) fn read_header(&self, headers: &HeaderMap) -> Option<u64> {
        let name = self.header.as_ref()?;
        let value = headers.get(name)?;
        let parsed = std::str::from_utf8(value.as_bytes())
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok());
        if parsed.is_none() {
            tracing::warn!(
                header = %name,
                value = %String::from_utf8_lossy(value.as_bytes()),
                "the usage header is not a whole number of units; the usage known before it (the estimate, if nothing else) stands"
            );
        }
        parsed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(value: Option<&'static str>) -> Response<()> {
        let mut r = Response::new(());
        if let Some(v) = value {
            r.headers_mut().insert("x-usage", v.parse().unwrap());
        }
        r
    }

    #[test]
    fn reads_the_extension_before_the_header() {
        let source = UsageSource::with_header(Some(HeaderName::from_static("x-usage")));
        let mut r = response(Some("7"));
        assert_eq!(source.read(&r), Some(7));
        r.extensions_mut().insert(Usage(3));
        assert_eq!(source.read(&r), Some(3));
        assert_eq!(UsageSource::default().read(&response(Some("7"))), None);
    }

    #[test]
    fn reads_trailers_only_with_a_header_configured() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-usage", "12".parse().unwrap());
        let source = UsageSource::with_header(Some(HeaderName::from_static("x-usage")));
        assert!(source.has_header());
        assert_eq!(source.read_header(&trailers), Some(12));
        assert!(!UsageSource::default().has_header());
        assert_eq!(UsageSource::default().read_header(&trailers), None);
    }

    #[test]
    fn a_header_that_is_not_a_whole_number_is_no_report() {
        let source = UsageSource::with_header(Some(HeaderName::from_static("x-usage")));
        assert_eq!(source.read(&response(Some("0"))), Some(0));
        assert_eq!(
            source.read(&response(Some("18446744073709551615"))),
            Some(u64::MAX)
        );
        for bad in [
            "-3",
            "+3",
            "3.5",
            " 3",
            "",
            "3 tokens",
            "18446744073709551616",
        ] {
            assert_eq!(source.read(&response(Some(bad))), None, "{bad:?}");
        }
        assert_eq!(source.read(&response(None)), None);
    }
}
