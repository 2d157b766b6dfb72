//! Per-policy decision counts by second for the status page: a ring of
//! the last [`SECONDS`] seconds per policy, fed from the one decision path
//! (`decide.rs`). Only policy names are kept, never a limited key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// How many seconds each policy's ring holds (three minutes).
pub(crate) const SECONDS: usize = 180;

/// One second's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Slot {
    /// Seconds since the service started; tells a fresh slot from a stale one.
    second: u64,
    allowed: u64,
    denied: u64,
}

/// One policy's ring: slot `s % SECONDS` holds second `s`.
#[derive(Debug, Clone)]
struct Ring([Slot; SECONDS]);

impl Ring {
    fn add(&mut self, second: u64, allowed: bool) {
        let slot = &mut self.0[second as usize % SECONDS];
        if slot.second != second {
            *slot = Slot {
                second,
                ..Slot::default()
            };
        }
        if allowed {
            slot.allowed += 1;
        } else {
            slot.denied += 1;
        }
    }

    /// Allowed and denied per second, oldest first, ending with `now`;
    /// zeros for seconds nothing was decided in (or before the start).
    fn series(&self, now: u64) -> (Vec<u64>, Vec<u64>) {
        let mut allowed = Vec::with_capacity(SECONDS);
        let mut denied = Vec::with_capacity(SECONDS);
        for back in (0..SECONDS as u64).rev() {
            let slot = now
                .checked_sub(back)
                .map(|s| (s, self.0[s as usize % SECONDS]))
                .filter(|(s, slot)| slot.second == *s);
            let (a, d) = slot.map_or((0, 0), |(_, slot)| (slot.allowed, slot.denied));
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
    rings: Mutex<HashMap<String, Ring>>,
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

    /// Counts one decision of `policy` now. A shadow denial (allowed only
    /// because the policy is in shadow mode) counts as denied: it is what
    /// the limit would do.
    pub(crate) fn record(&self, policy: &str, allowed: bool) {
        self.record_at(policy, self.second(Instant::now()), allowed);
    }

    pub(crate) fn record_at(&self, policy: &str, second: u64, allowed: bool) {
        let mut rings = self.rings.lock().expect("stats lock");
        match rings.get_mut(policy) {
            Some(ring) => ring.add(second, allowed),
            None => {
                let mut ring = Ring([Slot::default(); SECONDS]);
                ring.add(second, allowed);
                rings.insert(policy.to_string(), ring);
            }
        }
    }

    /// `policy`'s allowed and denied per second over the last [`SECONDS`]
    /// seconds ending with `now`, oldest first.
    pub(crate) fn series(&self, policy: &str, now: u64) -> (Vec<u64>, Vec<u64>) {
        let rings = self.rings.lock().expect("stats lock");
        match rings.get(policy) {
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
}
