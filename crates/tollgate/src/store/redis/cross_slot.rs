//! Atomic batches across Redis Cluster slots, all or nothing by
//! compensation.
//!
//! A script touches one slot only. A batch whose keys span slots is
//! decided slot by slot, in ascending slot order (so that batches over the
//! same slots meet them in the same order), each slot's part by one
//! `lua/batch.lua` call, all or nothing within the slot. When one slot's
//! part is denied, what the slots before it consumed is refunded
//! ([`Store::refund`]) and the whole batch is denied.
//!
//! It never admits beyond a limit: every unit it keeps was consumed by a
//! script that checked it, and a refund gives back at most what was
//! consumed. What it can do is deny a concurrent request that would have
//! passed: from a slot's consume until its refund (a round trip or two),
//! a batch that will be denied holds that capacity.
//!
//! A refund that could give back capacity the batch did not take is not
//! made: a fixed or sliding window whose window may have turned between
//! the consume and the refund (the refund would come out of the new
//! window), and a sliding log (whose refund removes its newest entries,
//! which may be another caller's, newer than ours). Those units stay
//! consumed until they expire: more denials than needed, never an
//! admission too many. Neither is a failed refund retried: the batch is
//! still denied, the unit stays consumed, and a warning is logged.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::algorithm::{self, Refund};
use super::form::Form;
use super::{RedisStore, TimeSource, keys};
use crate::store::{Request, Store};
use crate::{Decision, Policy, Result};

/// Added to our clock's error when telling whether a window turned: the
/// server's own clock moves between our two readings of it.
const WINDOW_MARGIN_MICROS: u64 = 2_000;

impl RedisStore {
    /// Decides `requests`, whose keys span slots, all or nothing (see the
    /// module's docs).
    pub(super) async fn batch_across_slots(
        &self,
        requests: &[Request<'_>],
        forms: &[Form],
        keys: &[Vec<u8>],
    ) -> Result<Vec<Decision>> {
        let mut slots: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
        for (i, key) in keys.iter().enumerate() {
            slots.entry(keys::slot(key)).or_default().push(i);
        }
        let mut decisions: Vec<Option<Decision>> = vec![None; requests.len()];
        // What was consumed, and the earliest moment it can have been.
        let mut consumed: Vec<(usize, u64)> = Vec::new();
        for which in slots.values() {
            let sent = self.now_bounds().0;
            let part = match self.batch_script(requests, forms, keys, which).await {
                Ok(part) => part,
                Err(e) => {
                    // The failed part may have consumed or not; what the
                    // others consumed goes back.
                    self.refund_consumed(requests, &consumed, &mut decisions)
                        .await;
                    return Err(e);
                }
            };
            let admitted = part.iter().all(|d| d.allowed);
            for (&i, d) in which.iter().zip(part) {
                decisions[i] = Some(d);
            }
            if admitted {
                consumed.extend(which.iter().map(|&i| (i, sent)));
                continue;
            }
            self.refund_consumed(requests, &consumed, &mut decisions)
                .await;
            // The parts not tried are reported as peeks, denied.
            for (i, slot) in decisions.iter_mut().enumerate() {
                if slot.is_none() {
                    let r = &requests[i];
                    let peek = self.decide(r.policy, r.key, 0, 0).await?.shadowed(r.policy);
                    *slot = Some(denied_peek(peek, r.cost));
                }
            }
            return Ok(decisions
                .into_iter()
                .map(|d| d.expect("every request decided"))
                .collect());
        }
        Ok(decisions
            .into_iter()
            .map(|d| d.expect("every request decided"))
            .collect())
    }

    /// Gives back what `consumed` took, where that is exact (see the
    /// module's docs), and turns their decisions into denials that would
    /// have passed alone.
    async fn refund_consumed(
        &self,
        requests: &[Request<'_>],
        consumed: &[(usize, u64)],
        decisions: &mut [Option<Decision>],
    ) {
        for &(i, sent) in consumed {
            let r = &requests[i];
            if self.refund_is_exact(r.policy, sent) {
                match self.refund(r.policy, r.key, r.cost).await {
                    Ok(after) => {
                        self.inner.refunds.fetch_add(1, Ordering::Relaxed);
                        crate::metrics::record_batch_refund();
                        decisions[i] = Some(after);
                    }
                    Err(e) => tracing::warn!(
                        policy = r.policy.name(),
                        error = %e,
                        "an atomic batch across slots could not refund a denied batch's unit; it stays consumed until it expires"
                    ),
                }
            }
            if let Some(d) = &mut decisions[i] {
                d.allowed = false;
                d.retry_after = Duration::ZERO;
            }
        }
    }

    /// Whether refunding `policy` now gives back exactly what a consume
    /// sent at `sent` (our estimate of the server's clock, its lower
    /// bound) took.
    fn refund_is_exact(&self, policy: &Policy, sent: u64) -> bool {
        let window = match algorithm::side(policy.algorithm()).refund {
            Refund::Exact => return true,
            Refund::Inexact => return false,
            Refund::InItsWindow => policy.time_span().as_micros() as u64,
        };
        let latest = self.now_bounds().1 + WINDOW_MARGIN_MICROS;
        sent.saturating_sub(WINDOW_MARGIN_MICROS) / window == latest / window
    }

    /// The time the scripts read now, in µs: an interval that holds it
    /// (our estimate of the server's clock give or take its error, or the
    /// caller's clock exactly).
    fn now_bounds(&self) -> (u64, u64) {
        match &self.inner.time {
            TimeSource::Server => {
                let now = self.server_now();
                let error = self.inner.offset_error.load(Ordering::Relaxed);
                (now.saturating_sub(error), now + error)
            }
            TimeSource::Client(clock) => {
                let now = clock.now_micros();
                (now, now)
            }
        }
    }

    /// Atomic batches across slots that were denied and gave back what an
    /// earlier slot had consumed: refunds made, one per request.
    pub fn batch_refunds(&self) -> u64 {
        self.inner.refunds.load(Ordering::Relaxed)
    }
}

/// A peek's decision as a member of a denied batch: denied, with a zero
/// retry when `cost` would have passed alone, else the time until the key
/// is fresh (a bound on the wait).
fn denied_peek(mut peek: Decision, cost: u64) -> Decision {
    peek.allowed = false;
    peek.retry_after = if peek.remaining >= cost {
        Duration::ZERO
    } else {
        peek.reset_after.max(Duration::from_micros(1))
    };
    peek
}
