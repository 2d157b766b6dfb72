//! The policy a request is decided by once its overrides are looked up:
//! the policy itself (borrowed), a tier's (made for the request), or an
//! override's (made once when the override was set, and borrowed from a
//! snapshot or shared).

use std::ops::Deref;
use std::sync::Arc;

use crate::Policy;

/// The policy a request is decided by (see
/// [`Resolved::Decide`](super::Resolved::Decide)); it derefs to a
/// [`Policy`], as a `Cow` would, without cloning one for a key under an
/// override.
#[derive(Debug, Clone)]
pub enum ResolvedPolicy<'p> {
    /// The policy asked about, as it is, or an override's borrowed from a
    /// [`Snapshot`](super::Snapshot).
    Borrowed(&'p Policy),
    /// A policy made for this request (a tier the request named).
    Owned(Policy),
    /// An override's policy, made when it was set and shared by every
    /// request under it.
    Shared(Arc<Policy>),
}

impl ResolvedPolicy<'_> {
    /// The policy, owned (a clone unless it was [`ResolvedPolicy::Owned`]).
    pub fn into_owned(self) -> Policy {
        match self {
            ResolvedPolicy::Borrowed(p) => p.clone(),
            ResolvedPolicy::Owned(p) => p,
            ResolvedPolicy::Shared(p) => Arc::unwrap_or_clone(p),
        }
    }
}

impl Deref for ResolvedPolicy<'_> {
    type Target = Policy;

    #[inline]
    fn deref(&self) -> &Policy {
        match self {
            ResolvedPolicy::Borrowed(p) => p,
            ResolvedPolicy::Owned(p) => p,
            ResolvedPolicy::Shared(p) => p,
        }
    }
}

impl AsRef<Policy> for ResolvedPolicy<'_> {
    fn as_ref(&self) -> &Policy {
        self
    }
}

impl<'p> From<&'p Policy> for ResolvedPolicy<'p> {
    fn from(p: &'p Policy) -> ResolvedPolicy<'p> {
        ResolvedPolicy::Borrowed(p)
    }
}

impl From<Policy> for ResolvedPolicy<'_> {
    fn from(p: Policy) -> Self {
        ResolvedPolicy::Owned(p)
    }
}
