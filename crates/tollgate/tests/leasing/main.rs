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
use tollgate::store::{BoxFuture, HeldGrant, Lease, Request, Stamp, Store};
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
    fn check<'a>(&'a self, p: &'a Policy, k: &'a [u8], c: u64) -> BoxFuture<'a, Result<Decision>> {
        self.store.check(p, k, c)
    }
    fn reserve<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        w: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        self.store.reserve(p, k, c, w)
    }
    fn check_many<'a>(
        &'a self,
        r: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        self.store.check_many(r, atomic)
    }
    fn acquire_lease<'a>(&'a self, p: &'a Policy, k: &'a [u8]) -> BoxFuture<'a, Result<Lease>> {
        self.store.acquire_lease(p, k)
    }
    fn release_lease<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        l: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        self.store.release_lease(p, k, l)
    }
    fn reset<'a>(&'a self, p: &'a Policy, k: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        self.store.reset(p, k)
    }
    fn usage<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        op: Usage,
        c: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            let d = self.store.usage(p, k, op, c).await?;
            match op {
                op if op.is_at_most() => self.granted.fetch_add(d.granted, Ordering::Relaxed),
                Usage::Refund => self.refunded.fetch_add(c, Ordering::Relaxed),
                _ => 0,
            };
            Ok(d)
        })
    }
    fn take_held<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        c: u64,
        hold: Duration,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move {
            let held = self.store.take_held(p, k, c, hold).await?;
            self.granted
                .fetch_add(held.decision.granted, Ordering::Relaxed);
            Ok(held)
        })
    }
    fn refund_held<'a>(
        &'a self,
        p: &'a Policy,
        k: &'a [u8],
        stamp: Stamp,
        units: u64,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move {
            let d = self.store.refund_held(p, k, stamp, units).await?;
            if d.is_some() {
                self.refunded.fetch_add(units, Ordering::Relaxed);
            }
            Ok(d)
        })
    }
}
