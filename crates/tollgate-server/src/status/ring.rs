//! Per-policy decision counts by second for the status page: a ring of
//! the last [`SECONDS`] seconds per policy, fed from the one decision path
//! (`decide.rs`). Only policy names are kept, never a limited key.
//!
//! A decision adds to its policy's ring without a lock: each count is one
//! `AtomicU64` that carries, beside the count, which lap of the ring it
//! belongs to, so a stale slot is replaced and counted in one
//! compare-and-swap. The map from names to rings is locked only to find a
//! ring (`ring`), which the decision path does once per policy and config
//! (`crate::meters`), not per decision.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// How many seconds each policy's ring holds (three minutes).
pub(crate) const SECONDS: usize = 180;

/// The bits of a slot's word that count; the rest hold the lap.
const COUNT_BITS: u32 = 40;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// The lap of the ring that second `second` falls in, as a slot stores it
/// (24 bits: a lap is three minutes, so it repeats after 95 years).
fn lap(second: u64) -> u64 {
    (second / SECONDS as u64) << COUNT_BITS
}

/// One policy's ring: slot `s % SECONDS` holds second `s`'s admissions
/// and denials, each tagged with the lap of `s`.
#[derive(Debug)]
pub(crate) struct Ring {
    allowed: Box<[AtomicU64]>,
    denied: Box<[AtomicU64]>,
}

impl Ring {
    fn new() -> Ring {
        let slots = || (0..SECONDS).map(|_| AtomicU64::new(0)).collect();
        Ring {
            allowed: slots(),
            denied: slots(),
        }
    }

    /// Counts one decision in second `second`.
    pub(crate) fn add(&self, second: u64, allowed: bool) {
        let slots = if allowed { &self.allowed } else { &self.denied };
        let slot = &slots[second as usize % SECONDS];
        let tag = lap(second);
        let mut current = slot.load(Ordering::Relaxed);
        loop {
            let next = if current & !COUNT_MASK == tag {
                current + 1
            } else if current & !COUNT_MASK > tag {
                // A later lap already (a decision that took three minutes):
                // too old to show.
                return;
            } else {
                tag | 1
            };
            match slot.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return,
                Err(seen) => current = seen,
            }
        }
    }

    /// Second `second`'s count in `slots`: 0 when its slot holds another lap.
    fn count(slots: &[AtomicU64], second: u64) -> u64 {
        let word = slots[second as usize % SECONDS].load(Ordering::Relaxed);
        if word & !COUNT_MASK == lap(second) {
            word & COUNT_MASK
        } else {
            0
        }
    }

    /// Allowed and denied per second, oldest first, ending with `now`;
    /// zeros for seconds nothing was decided in (or before the start).
    fn series(&self, now: u64) -> (Vec<u64>, Vec<u64>) {
        let mut allowed = Vec::with_capacity(SECONDS);
        let mut denied = Vec::with_capacity(SECONDS);
        for back in (0..SECONDS as u64).rev() {
            let (a, d) = now.checked_sub(back).map_or((0, 0), |s| {
                (Ring::count(&self.allowed, s), Ring::count(&self.denied, s))
            });
            allowed.push(a);
            denied.push(d);
        }
        (allowed, denied)
    }
}

/// The counts of every policy decided on since the start.
#[derive(Debug)]
pub(crate) struct Stats {
    started: Instant,
    rings: Mutex<HashMap<String, Arc<Ring>>>,
}

impl Stats {
    pub(crate) fn new(started: Instant) -> Stats {
        Stats {
            started,
            rings: Mutex::new(HashMap::new()),
        }
    }

    /// The second (since the start) that `at` falls in.
    pub(crate) fn second(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.started).as_secs()
    }

    /// The second (since the start) it is now.
    pub(crate) fn now(&self) -> u64 {
        self.second(Instant::now())
    }

    /// `policy`'s ring, made on first use: kept by a caller that decides
    /// on `policy` often, so that counting takes no lock.
    pub(crate) fn ring(&self, policy: &str) -> Arc<Ring> {
        let mut rings = self.rings.lock().expect("stats lock");
        if let Some(ring) = rings.get(policy) {
            return ring.clone();
        }
        let ring = Arc::new(Ring::new());
        rings.insert(policy.to_string(), ring.clone());
        ring
    }

    /// Counts one decision of `policy` in second `second`. A shadow denial
    /// (allowed only because the policy is in shadow mode) counts as
    /// denied: it is what the limit would do.
    pub(crate) fn record_at(&self, policy: &str, second: u64, allowed: bool) {
        self.ring(policy).add(second, allowed);
    }

    /// `policy`'s allowed and denied per second over the last [`SECONDS`]
    /// seconds ending with `now`, oldest first.
    pub(crate) fn series(&self, policy: &str, now: u64) -> (Vec<u64>, Vec<u64>) {
        let ring = self.rings.lock().expect("stats lock").get(policy).cloned();
        match ring {
            Some(ring) => ring.series(now),
            None => (vec![0; SECONDS], vec![0; SECONDS]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Stats {
        Stats::new(Instant::now())
    }

    #[test]
    fn counts_land_in_their_second() {
        let s = stats();
        s.record_at("api", 10, true);
        s.record_at("api", 10, true);
        s.record_at("api", 10, false);
        s.record_at("api", 12, false);
        s.record_at("other", 12, true);
        let (allowed, denied) = s.series("api", 12);
        assert_eq!(allowed.len(), SECONDS);
        // The last entry is second 12, the one before second 11, …
        assert_eq!(&allowed[SECONDS - 3..], &[2, 0, 0]);
        assert_eq!(&denied[SECONDS - 3..], &[1, 0, 1]);
        assert_eq!(allowed.iter().sum::<u64>(), 2);
        let (allowed, denied) = s.series("other", 12);
        assert_eq!((allowed[SECONDS - 1], denied[SECONDS - 1]), (1, 0));
        assert_eq!(s.series("nobody", 12), (vec![0; SECONDS], vec![0; SECONDS]));
    }

    #[test]
    fn old_seconds_roll_off() {
        let s = stats();
        s.record_at("api", 5, true);
        s.record_at("api", 6, false);
        // Second 5 is the oldest one shown at 5 + SECONDS - 1, gone after.
        let last = 5 + SECONDS as u64 - 1;
        let (allowed, denied) = s.series("api", last);
        assert_eq!((allowed[0], denied[1]), (1, 1));
        let (allowed, denied) = s.series("api", last + 1);
        assert_eq!(allowed.iter().sum::<u64>(), 0);
        assert_eq!((denied[0], denied.iter().sum::<u64>()), (1, 1));
        // A new count in second 5's slot replaces it rather than adding.
        s.record_at("api", 5 + SECONDS as u64, true);
        s.record_at("api", 5 + SECONDS as u64, true);
        let (allowed, _) = s.series("api", 5 + SECONDS as u64);
        assert_eq!((allowed[SECONDS - 1], allowed.iter().sum::<u64>()), (2, 2));
    }

    #[test]
    fn a_second_before_the_start_reads_zero() {
        let s = stats();
        s.record_at("api", 0, true);
        let (allowed, _) = s.series("api", 0);
        assert_eq!(allowed[SECONDS - 1], 1);
        assert_eq!(allowed.iter().sum::<u64>(), 1);
    }

    #[test]
    fn concurrent_counts_are_all_kept() {
        let s = Arc::new(stats());
        let ring = s.ring("api");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let ring = ring.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        // Two seconds a lap apart share a slot: the later
                        // lap replaces the earlier one.
                        ring.add(7 + (i % 2) * SECONDS as u64, t % 2 == 0);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let (allowed, denied) = s.series("api", 7 + SECONDS as u64);
        let (a, d) = (allowed[SECONDS - 1], denied[SECONDS - 1]);
        // Each thread added 5,000 to the later lap; the earlier lap's
        // additions are dropped or replaced, never added to the later's.
        assert_eq!((a, d), (10_000, 10_000));
    }
}
