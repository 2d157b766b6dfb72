//! Forwarding written once: the operations a wrapping store only passes on
//! to the store it wraps, with the call's [`Valid`](super::Valid), so
//! nothing is validated twice.
//!
//! A wrapper implements [`Forward`] (where its calls go) and, inside its
//! `impl Store`, names the operations it passes on unchanged:
//! `forward!(reserve_unchecked, check_many_unchecked);`. The others it
//! writes itself.

use super::Store;
use crate::Result;

/// The store a wrapper passes its calls on to, or the error every call
/// answers while there is none (a deferred store not connected yet).
pub(crate) trait Forward {
    /// Where the calls go.
    fn target(&self) -> Result<&dyn Store>;
}

/// Writes each named `*_unchecked` method of [`Store`] as a call of the
/// same method on [`Forward::target`], with the same arguments.
macro_rules! forward {
    ($($method:ident),+ $(,)?) => {
        $($crate::store::forward::forward!(@ $method);)+
    };
    (@ check_unchecked) => {
        $crate::store::forward::forward!(@fn check_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8], cost: u64,
        ) -> $crate::Decision);
    };
    (@ reserve_unchecked) => {
        $crate::store::forward::forward!(@fn reserve_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8], cost: u64,
            max_wait: ::std::time::Duration,
        ) -> $crate::Decision);
    };
    (@ check_many_unchecked) => {
        $crate::store::forward::forward!(@fn check_many_unchecked(
            requests: &'a [$crate::store::Request<'a>], atomic: bool,
        ) -> Vec<$crate::Decision>);
    };
    (@ acquire_lease_unchecked) => {
        $crate::store::forward::forward!(@fn acquire_lease_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8],
        ) -> $crate::store::Lease);
    };
    (@ release_lease_unchecked) => {
        $crate::store::forward::forward!(@fn release_lease_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8],
            lease: $crate::algorithm::LeaseId,
        ) -> bool);
    };
    (@ reset_unchecked) => {
        $crate::store::forward::forward!(@fn reset_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8],
        ) -> ());
    };
    (@ usage_unchecked) => {
        $crate::store::forward::forward!(@fn usage_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8],
            op: $crate::algorithm::Usage, cost: u64,
        ) -> $crate::Decision);
    };
    (@ take_held_unchecked) => {
        $crate::store::forward::forward!(@fn take_held_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8], max_cost: u64,
            hold: ::std::time::Duration,
        ) -> $crate::store::HeldGrant);
    };
    (@ refund_held_unchecked) => {
        $crate::store::forward::forward!(@fn refund_held_unchecked(
            policy: &'a $crate::Policy, key: &'a [u8],
            stamp: $crate::store::Stamp, units: u64,
        ) -> Option<$crate::Decision>);
    };
    (@fn $name:ident($($arg:ident: $ty:ty),+ $(,)?) -> $out:ty) => {
        #[inline]
        fn $name<'a>(
            &'a self,
            $($arg: $ty,)+
            valid: $crate::store::Valid,
        ) -> $crate::store::BoxFuture<'a, $crate::Result<$out>> {
            match $crate::store::forward::Forward::target(self) {
                Ok(store) => $crate::store::Store::$name(store, $($arg,)+ valid),
                Err(e) => $crate::store::ready(Err(e)),
            }
        }
    };
}

pub(crate) use forward;
