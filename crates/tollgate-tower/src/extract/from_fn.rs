//! An extractor from a closure.

use std::fmt;

use http::request::Parts;

use crate::{Key, KeyError, KeyExtractor};

/// A [`KeyExtractor`] made from a closure: see [`from_fn`].
#[derive(Clone)]
pub struct FromFn<F> {
    f: F,
}

/// Keys requests by what `f` returns; `None` means the limit does not apply
/// to the request.
///
/// ```
/// use tollgate_tower::extract::from_fn;
///
/// // One budget per tenant, named by the first path segment.
/// let per_tenant = from_fn(|request: &http::request::Parts| {
///     let tenant = request.uri.path().trim_start_matches('/').split('/').next()?;
///     (!tenant.is_empty()).then(|| tenant.to_owned())
/// });
/// ```
pub fn from_fn<F, K>(f: F) -> FromFn<F>
where
    F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
    K: Into<Key>,
{
    FromFn { f }
}

impl<F> fmt::Debug for FromFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromFn")
    }
}

impl<F, K> KeyExtractor for FromFn<F>
where
    F: Fn(&Parts) -> Option<K> + Send + Sync + 'static,
    K: Into<Key>,
{
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        Ok((self.f)(request).map(Into::into))
    }
}
