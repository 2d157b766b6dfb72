//! A token bucket's state for a direct limiter in one 128-bit atomic word.
//!
//! While time moves forward a token bucket decides as GCRA does, on one
//! number: the time it is full again. A late request (one whose time is
//! behind the bucket's) is taken at the bucket's time, so the bucket needs
//! that time too; and the memory store, whose decisions a direct limiter
//! repeats, forgets an entry at the last request's time plus the time the
//! deficit takes to refill, which after a late request comes before the
//! bucket is full. Three numbers, then: the full time, the deficit (which
//! gives the bucket's time), and how late the last request was. A request
//! on time after one on time decides on the first alone, exactly as the
//! packed GCRA does; the others go the general way. A state that does not
//! fit the word (a request more than 4 ms late, a time past the year 2112)
//! moves behind a mutex until one that fits replaces it, so the decisions
//! stay exact.

use parking_lot::Mutex;
use portable_atomic::{AtomicU128, Ordering};

use super::MAX_PACKED_DRIP;
use crate::algorithm::{Algorithm, Gcra};
use crate::decision::Verdict;

/// One token-bucket key as the memory store keeps it: the bucket (its
/// deficit in scaled units, measured at `at`, in µs) and, in `late`, how
/// far behind `at` the last request was, which fixes the entry's expiry
/// (`at − late`, the last request's time, plus the deficit's refill time).
/// A zero deficit is the fresh state, all zeros, as the store drops an
/// entry with nothing to reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Entry {
    deficit: u64,
    at: u64,
    late: u64,
}

impl Entry {
    /// The entry, or the fresh one when nothing is left to refill.
    fn new(deficit: u64, at: u64, late: u64) -> Entry {
        if deficit == 0 {
            Entry::default()
        } else {
            Entry { deficit, at, late }
        }
    }
}

/// The word: in its low half the full time (`at · drip + deficit`, scaled
/// units since the epoch, GCRA's TAT); in its high half the deficit (below
/// 2^51: a capacity and a reservation's borrowing are each at most 2^50)
/// and above it how late, in µs (all ones is [`SPILLED`]).
const DEFICIT_BITS: u32 = 52;
const LATE_BITS: u32 = 64 - DEFICIT_BITS;

/// The word while the state is behind the mutex.
const SPILLED: u128 = u128::MAX;

/// A token bucket's [`Entry`], packed in one word updated by
/// compare-and-swap; [`SPILLED`] while it is behind the mutex instead.
#[derive(Debug)]
pub(super) struct PackedBucket {
    /// GCRA with the bucket's parameters: on the deficit, which is its
    /// debt, it decides as the bucket does.
    gcra: Gcra,
    /// Scaled units a µs.
    drip: u64,
    word: AtomicU128,
    /// The state while it does not fit the word. Whoever holds this lock
    /// is the only one to write the word while it is [`SPILLED`]; every
    /// other caller that reads [`SPILLED`] waits here.
    spilled: Mutex<Entry>,
}

impl PackedBucket {
    /// The packed form of a token bucket policy with at most
    /// [`MAX_PACKED_DRIP`] scaled units a µs.
    pub(super) fn new(algorithm: &Algorithm) -> Option<PackedBucket> {
        let Algorithm::TokenBucket(bucket) = algorithm else {
            return None;
        };
        let rate = bucket.rate();
        if rate.units_per_micro > MAX_PACKED_DRIP {
            return None;
        }
        let per = std::time::Duration::from_micros(rate.per);
        // Same bounds as the bucket's own, so this never fails.
        let gcra = Gcra::new(rate.rate, per, bucket.burst()).ok()?;
        Some(PackedBucket {
            gcra,
            drip: rate.units_per_micro,
            word: AtomicU128::new(0),
            spilled: Mutex::new(Entry::default()),
        })
    }

    #[inline(always)]
    pub(super) fn decide(&self, now: u64, cost: u64, max_wait: u64) -> Verdict {
        let mut current = self.word.load(Ordering::Acquire);
        while let Some((verdict, next)) = self.on_time(current, now, cost, max_wait) {
            match self.replace(current, next) {
                Ok(()) => return verdict,
                Err(seen) => current = seen,
            }
        }
        // The decision again, here, on the state the cold path decided on:
        // a verdict that came back from a call through memory would make
        // every caller build it whole, fields it never reads included.
        let entry = self.decide_late(current, now, cost, max_wait);
        self.step(entry, now, cost, max_wait).0
    }

    /// The decision and the next word for a request on time (`now` at or
    /// after the bucket's time) after a request on time (`late` 0): GCRA's,
    /// on the full time. `None` for any other request or state.
    #[inline(always)]
    fn on_time(&self, word: u128, now: u64, cost: u64, max_wait: u64) -> Option<(Verdict, u128)> {
        let (full, high) = (word as u64, (word >> 64) as u64);
        let now_units = now.checked_mul(self.drip)?;
        // `high` is the deficit alone when `late` is 0 (never when spilled).
        if high >> DEFICIT_BITS != 0 || now_units < full - high {
            return None;
        }
        // Refilled up to now (past the full time, the memory store's entry
        // has expired: the same, a full bucket), the deficit is the debt.
        let debt = full.saturating_sub(now_units);
        let (verdict, debt) = self.gcra.reserve_debt(debt, cost, max_wait)?;
        let next = if debt == 0 {
            0
        } else {
            now_units.checked_add(debt)? as u128 | (debt as u128) << 64
        };
        Some((verdict, next))
    }

    /// [`decide`](Self::decide) for a late request, or after one: the
    /// memory store's rule in full. The state it decided on.
    #[cold]
    #[inline(never)]
    fn decide_late(&self, mut current: u128, now: u64, cost: u64, max_wait: u64) -> Entry {
        while current != SPILLED {
            let entry = self.unpack(current);
            let (_, next) = self.step(entry, now, cost, max_wait);
            let Some(next) = self.pack(next) else {
                break;
            };
            match self.replace(current, next) {
                Ok(()) => return entry,
                Err(seen) => current = seen,
            }
        }
        self.decide_spilled(now, cost, max_wait)
    }

    /// [`decide`](Self::decide) under the lock, for a state that is or
    /// will be spilled. The state it decided on.
    #[cold]
    #[inline(never)]
    fn decide_spilled(&self, now: u64, cost: u64, max_wait: u64) -> Entry {
        let mut spilled = self.spilled.lock();
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            let entry = if current == SPILLED {
                *spilled
            } else {
                self.unpack(current)
            };
            let (_, next) = self.step(entry, now, cost, max_wait);
            let word = self.pack(next).unwrap_or_else(|| {
                *spilled = next;
                SPILLED
            });
            if current == SPILLED && word != SPILLED {
                // No one else writes a spilled word (see `spilled`).
                self.word.store(word, Ordering::Release);
                return entry;
            }
            match self.replace(current, word) {
                Ok(()) => return entry,
                Err(seen) => current = seen,
            }
        }
    }

    /// Puts `next` in the word if it still holds `current`, else the word
    /// it holds.
    #[inline(always)]
    fn replace(&self, current: u128, next: u128) -> Result<(), u128> {
        if next == current {
            return Ok(());
        }
        self.word
            .compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
    }

    /// The word, when every number fits.
    fn pack(&self, entry: Entry) -> Option<u128> {
        if entry.deficit >> DEFICIT_BITS != 0 || entry.late >= (1 << LATE_BITS) - 1 {
            return None;
        }
        let full = entry
            .at
            .checked_mul(self.drip)?
            .checked_add(entry.deficit)?;
        let high = entry.deficit | entry.late << DEFICIT_BITS;
        Some(full as u128 | (high as u128) << 64)
    }

    fn unpack(&self, word: u128) -> Entry {
        let (full, high) = (word as u64, (word >> 64) as u64);
        let deficit = high & ((1 << DEFICIT_BITS) - 1);
        Entry {
            deficit,
            at: (full - deficit) / self.drip,
            late: high >> DEFICIT_BITS,
        }
    }

    /// Back to fresh.
    pub(super) fn reset(&self) {
        let _spilled = self.spilled.lock();
        self.word.store(0, Ordering::Release);
    }

    /// The memory store's operation on the entry: a fresh state once its
    /// expiry has passed, the bucket refilled up to `now` (never back), the
    /// decision on the deficit, the fresh state again when nothing is left
    /// to refill.
    #[inline]
    fn step(&self, entry: Entry, now: u64, cost: u64, max_wait: u64) -> (Verdict, Entry) {
        let drip = self.drip;
        let last = entry.at - entry.late;
        // Past `last + ceil(deficit / drip)`, without the division.
        let expired = now >= last && (now - last).saturating_mul(drip) >= entry.deficit;
        let (deficit, at) = if expired {
            (0, now)
        } else if now > entry.at {
            // Not expired, so this stays above 0 (`now − at ≤ now − last`).
            (entry.deficit - (now - entry.at) * drip, now)
        } else {
            (entry.deficit, entry.at)
        };
        let (verdict, deficit) = self
            .gcra
            .reserve_debt(deficit, cost, max_wait)
            .expect("a deficit below 2^52 and a cost within the burst do not overflow");
        (verdict, Entry::new(deficit, at, at - now))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Policy;
    use crate::algorithm::near_cases;

    /// The on-time path decides and packs as the general one does wherever
    /// it answers: on states after requests on time and late, near and far
    /// from `now`, with checks and reservations, for every rate shape.
    #[test]
    fn the_on_time_path_agrees_with_the_general_one() {
        let mut rng = fastrand::Rng::with_seed(5);
        let mut answered = 0;
        for (rate, per, burst) in near_cases::RATES {
            let policy =
                Policy::token_bucket("t", rate, Duration::from_micros(per), burst).unwrap();
            let Some(bucket) = PackedBucket::new(policy.algorithm()) else {
                continue; // too fine a rate to pack
            };
            let unit = bucket.gcra.rate().units_per_token;
            for _ in 0..20_000 {
                let now = rng.u64(1 << 40..1 << 50);
                let at = match rng.u8(..3) {
                    0 => now - rng.u64(..=now.min(10_000_000)),
                    1 => now + rng.u64(..1_000),
                    _ => now,
                };
                let deficit = match rng.u8(..3) {
                    0 => 0,
                    1 => rng.u64(..=burst * unit),
                    _ => rng.u64(..=2 * burst * unit),
                };
                let late = if rng.bool() {
                    0
                } else {
                    rng.u64(..=at.min(4_000))
                };
                let entry = Entry::new(deficit, at, late);
                let word = bucket.pack(entry).unwrap();
                let cost = rng.u64(..=burst);
                let max_wait = if rng.bool() { 0 } else { rng.u64(..10_000_000) };
                let Some((verdict, next)) = bucket.on_time(word, now, cost, max_wait) else {
                    assert!(entry.late > 0 || now < entry.at, "{entry:?} at {now}");
                    continue;
                };
                answered += 1;
                let (expected, after) = bucket.step(entry, now, cost, max_wait);
                assert_eq!(verdict, expected, "{entry:?} at {now}, cost {cost}");
                assert_eq!(Some(next), bucket.pack(after), "{entry:?} at {now}");
            }
        }
        assert!(answered > 30_000, "the on-time path answers most cases");
    }

    /// A state too late for the word waits behind the lock only until a
    /// request on time packs it again.
    #[test]
    fn a_spilled_state_packs_again() {
        let policy = Policy::token_bucket("t", 1, Duration::from_secs(3600), 5).unwrap();
        let bucket = PackedBucket::new(policy.algorithm()).unwrap();
        let now = 100_000_000;
        assert!(bucket.decide(now, 1, 0).allowed);
        assert!(bucket.decide(now - 20_000_000, 1, 0).allowed);
        assert_eq!(bucket.word.load(Ordering::Relaxed), SPILLED);
        let on_time = bucket.decide(now, 1, 0);
        assert_eq!((on_time.allowed, on_time.remaining), (true, 2));
        assert_ne!(bucket.word.load(Ordering::Relaxed), SPILLED);
    }

    #[test]
    fn entries_round_trip_and_never_pack_to_spilled() {
        for (rate, per) in [(1, 3_600), (7, 1)] {
            let policy = Policy::token_bucket("t", rate, Duration::from_secs(per), 5).unwrap();
            let bucket = PackedBucket::new(policy.algorithm()).unwrap();
            let deficit = (1 << DEFICIT_BITS) - 1;
            let widest = Entry {
                deficit,
                at: (u64::MAX - deficit) / bucket.drip,
                late: (1 << LATE_BITS) - 2,
            };
            for entry in [Entry::default(), widest] {
                let word = bucket.pack(entry).unwrap();
                assert_ne!(word, SPILLED);
                assert_eq!(bucket.unpack(word), entry);
            }
            for too_wide in [
                Entry {
                    late: widest.late + 1,
                    ..widest
                },
                Entry {
                    at: widest.at + 1,
                    ..widest
                },
                Entry {
                    deficit: 1 << DEFICIT_BITS,
                    ..Entry::default()
                },
            ] {
                assert_eq!(bucket.pack(too_wide), None);
            }
        }
    }
}
