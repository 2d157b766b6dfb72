//! The value of a request header.

use http::HeaderName;
use http::request::Parts;

use crate::{Key, KeyError, KeyExtractor};

/// Counts requests by the value of a header, such as an API key.
///
/// A request without the header, or with an empty value, is not counted by
/// this limit (other limits of the layer still apply). The first value is
/// used when the header appears more than once. The value is the client's
/// word: limit by a header only when it is verified before the request
/// reaches a handler (an API key that is checked), or when a client
/// choosing its own key does no harm.
///
/// ```
/// use http::HeaderName;
/// use tollgate_tower::extract::Header;
///
/// let by_api_key = Header::new(HeaderName::from_static("x-api-key"));
/// ```
#[derive(Debug, Clone)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// Keys requests by the header `name`.
    pub fn new(name: HeaderName) -> Header {
        Header { name }
    }
}

impl KeyExtractor for Header {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        Ok(request
            .headers
            .get(&self.name)
            .filter(|v| !v.is_empty())
            .map(|v| Key::new(bytes::Bytes::copy_from_slice(v.as_bytes()))))
    }
}
