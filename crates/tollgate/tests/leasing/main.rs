//! Leases: many instances, many tasks, one hot key. Every admission from
//! a lease was consumed in the store first (the store's consumed units,
//! granted less refunded, are never below the admissions), no window
//! admits more than its limit and no span of a bucket more than the
//! bucket's own bound, `burst + rate·T` (`bound.rs`); a bucket's idle
//! lease goes back exactly, and with refunds the bound still holds
//! (`refund.rs`); through an outage, held leases are spent and then the
//! failure policy answers (`outage.rs`); a flooded key is denied locally,
//! its script calls within their bound, and a reset or refund elsewhere
//! ends the local denials within a second (`flood.rs`).

#![cfg(feature = "redis")]

mod bound;
mod flood;
mod outage;
mod refund;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tollgate::algorithm::{LeaseId, Usage};
use tollgate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store, Valid};
use tollgate::{Decision, Policy, Result};

/// A store that counts what `check_at_most` (held or not) granted and what was
/// refunded through it (a held take's exact refund, when it applied).
#[derive(Debug)]
pub(crate) struct Counting {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) granted: AtomicU64,
    pub(crate) refunded: AtomicU64,
}

impl Counting {
    pub(crate) fn new(store: Arc<dyn Store>) -> Counting {
        Counting {
            store,
            granted: AtomicU64::new(0),
            refunded: AtomicU64::new(0),
        }
    }
}

impl Store for Counting {
    fn check_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.store.check_unchecked(p, k, c, valid)
    }
    fn reserve_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        w: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.store.reserve_unchecked(p, k, c, w, valid)
    }
    fn check_many_unchecked<'a>(
        &'a self,
        r: &'a [Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        self.store.check_many_unchecked(r, atomic, valid)
    }
    fn acquire_lease_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<Lease>> {
        self.store.acquire_lease_unchecked(p, k, valid)
    }
    fn release_lease_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        l: LeaseId,
        valid: Valid,
    ) -> BoxFuture<'a, Result<bool>> {
        self.store.release_lease_unchecked(p, k, l, valid)
    }
    fn reset_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        self.store.reset_unchecked(p, k, valid)
    }
    fn usage_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        op: Usage,
        c: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let d = self.store.usage_unchecked(p, k, op, c, valid).await?;
            match op {
                op if op.is_at_most() => self.granted.fetch_add(d.granted, Ordering::Relaxed),
                Usage::Refund => self.refunded.fetch_add(c, Ordering::Relaxed),
                _ => 0,
            };
            Ok(d)
        })
    }
    fn take_held_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        hold: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move {
            let held = self.store.take_held_unchecked(p, k, c, hold, valid).await?;
            self.granted
                .fetch_add(held.decision.granted, Ordering::Relaxed);
            Ok(held)
        })
    }
    fn refund_held_unchecked<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        stamp: Stamp,
        units: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move {
            let d = self
                .store
                .refund_held_unchecked(p, k, stamp, units, valid)
                .await?;
            if d.is_some() {
                self.refunded.fetch_add(units, Ordering::Relaxed);
            }
            Ok(d)
        })
    }
}
