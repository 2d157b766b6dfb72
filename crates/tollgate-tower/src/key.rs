//! What a request is limited by: the [`KeyExtractor`] trait and the
//! [`Key`] it produces.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use http::request::Parts;

/// The bytes that name who or what a request is counted against: an
/// address, an API key, a user id.
///
/// Keys are compared as bytes; the store namespaces them by policy, so two
/// policies may use the same key without sharing a count.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key(Bytes);

impl Key {
    /// A key from `bytes`.
    pub fn new(bytes: impl Into<Bytes>) -> Key {
        Key(bytes.into())
    }

    /// A key from a constant, without allocating.
    pub const fn from_static(bytes: &'static [u8]) -> Key {
        Key(Bytes::from_static(bytes))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl From<String> for Key {
    fn from(s: String) -> Key {
        Key(Bytes::from(s))
    }
}

impl From<&'static str> for Key {
    fn from(s: &'static str) -> Key {
        Key(Bytes::from_static(s.as_bytes()))
    }
}

impl From<Vec<u8>> for Key {
    fn from(v: Vec<u8>) -> Key {
        Key(Bytes::from(v))
    }
}

impl From<&'static [u8]> for Key {
    fn from(v: &'static [u8]) -> Key {
        Key(Bytes::from_static(v))
    }
}

impl From<Bytes> for Key {
    fn from(b: Bytes) -> Key {
        Key(b)
    }
}

/// Finds the key of a request for one limit.
///
/// The extractor sees the request's head (method, URI, headers and
/// extensions), never its body. It answers:
///
/// - `Ok(Some(key))`: the request is counted against `key`;
/// - `Ok(None)`: the limit does not apply to this request (an anonymous
///   request under a per-user limit, a request without the header of a
///   per-API-key limit). Other limits of the layer still apply;
/// - `Err(_)`: the service is set up wrongly (for example [`PeerIp`] on a
///   server that does not record peer addresses). The request is answered
///   `500` with a problem description, and the error is logged: a limit
///   that silently never applies would be worse.
///
/// Any `Fn(&Parts) -> Option<K>` closure is an extractor through
/// [`from_fn`](crate::extract::from_fn).
///
/// [`PeerIp`]: crate::extract::PeerIp
pub trait KeyExtractor: Send + Sync + 'static {
    /// The key of the request with head `request`, if the limit applies.
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError>;
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for Box<E> {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        (**self).extract(request)
    }
}

impl<E: KeyExtractor + ?Sized> KeyExtractor for std::sync::Arc<E> {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        (**self).extract(request)
    }
}

/// An extractor could not work because the service is set up wrongly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    message: Cow<'static, str>,
}

impl KeyError {
    /// An error saying what is missing and how to fix it.
    pub fn new(message: impl Into<Cow<'static, str>>) -> KeyError {
        KeyError {
            message: message.into(),
        }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for KeyError {}
