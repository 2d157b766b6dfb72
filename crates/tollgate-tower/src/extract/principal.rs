//! The authenticated principal, from the request's extensions.

use std::fmt::{self, Display};
use std::marker::PhantomData;

use http::request::Parts;

use crate::{Key, KeyError, KeyExtractor};

/// Counts requests by a value of type `T` that your authentication layer
/// inserted into the request's extensions (a user id, a tenant, a token's
/// subject); the key is its [`Display`] form.
///
/// A request without a `T` (an anonymous one) is not counted by this limit;
/// pair it with a per-address limit to cover those. **Layer order
/// matters**: the authentication layer must run before this one, so in
/// axum it is added *after* the rate-limit layer (the last `.layer` is the
/// outermost). If it runs after, no request ever has a `T` and the limit
/// never applies.
///
/// ```
/// use std::fmt;
/// use tollgate_tower::extract::Principal;
///
/// #[derive(Clone)]
/// struct UserId(u64);
///
/// impl fmt::Display for UserId {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         write!(f, "user-{}", self.0)
///     }
/// }
///
/// let per_user = Principal::<UserId>::new();
/// ```
pub struct Principal<T> {
    _type: PhantomData<fn() -> T>,
}

impl<T> Principal<T> {
    /// Keys requests by the `T` in their extensions.
    pub fn new() -> Principal<T> {
        Principal { _type: PhantomData }
    }
}

impl<T> Default for Principal<T> {
    fn default() -> Self {
        Principal::new()
    }
}

impl<T> Clone for Principal<T> {
    fn clone(&self) -> Self {
        Principal::new()
    }
}

impl<T> fmt::Debug for Principal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Principal<{}>", std::any::type_name::<T>())
    }
}

impl<T: Display + Send + Sync + 'static> KeyExtractor for Principal<T> {
    fn extract(&self, request: &Parts) -> Result<Option<Key>, KeyError> {
        Ok(request
            .extensions
            .get::<T>()
            .map(|principal| Key::from(principal.to_string())))
    }
}
