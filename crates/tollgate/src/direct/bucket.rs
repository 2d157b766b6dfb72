//! A token bucket's state for a direct limiter, behind a sequence lock.
//!
//! A token bucket takes a late request (one whose time is behind the
//! bucket's) at the bucket's time, so its state is two numbers, the deficit
//! and the bucket's time, which do not fit one 64-bit word together; a
//! 128-bit compare-and-swap (`CMPXCHG16B`) costs about as much again as the
//! rest of a decision. A sequence lock costs one 64-bit compare-and-swap: a
//! caller copies the numbers between two reads of the sequence (even and
//! unchanged: a consistent copy), decides on the copy, and, when the
//! decision changes the state, claims the sequence (even to odd) from the
//! value it copied under, so that a claim that succeeds proves the copy is
//! still the state. The claimant writes the numbers and ends the sequence's
//! odd turn; no one else writes in it, and readers retry. A decision that
//! changes nothing (a denial at the bucket's time, a peek) writes nothing.
//!
//! Unlike a compare-and-swap on the whole state, a writer holds the others
//! off for its stores; a caller that finds the sequence odd spins a little,
//! then yields its time slice, so a writer descheduled mid-write gets the
//! processor back.
//!
//! The decision itself is the token bucket algorithm's, on a copy of its
//! state, as the memory store makes it.

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crate::algorithm::{Algorithm, TokenBucket, TokenBucketState};
use crate::decision::Verdict;

/// `state`, or the fresh one when nothing is left to refill, as the memory
/// store drops an entry with nothing to reset.
fn stored(state: TokenBucketState) -> TokenBucketState {
    if state.deficit == 0 {
        TokenBucketState::default()
    } else {
        state
    }
}

/// How many times a caller spins on a writer's turn before yielding.
const SPINS: u32 = 64;

/// A token bucket's state behind a sequence lock; the three words share
/// one cache line.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct SeqBucket {
    /// Even while the state is stable; odd while its one writer writes.
    seq: AtomicU64,
    deficit: AtomicU64,
    at: AtomicU64,
    bucket: TokenBucket,
}

impl SeqBucket {
    /// The form of a token bucket policy; `None` for other algorithms.
    pub(super) fn new(algorithm: &Algorithm) -> Option<SeqBucket> {
        let Algorithm::TokenBucket(bucket) = algorithm else {
            return None;
        };
        Some(SeqBucket {
            seq: AtomicU64::new(0),
            deficit: AtomicU64::new(0),
            at: AtomicU64::new(0),
            bucket: *bucket,
        })
    }

    #[inline(always)]
    pub(super) fn decide(&self, now: u64, cost: u64, max_wait: u64) -> Verdict {
        let mut spins = 0;
        loop {
            let Some((seq, entry)) = self.read() else {
                wait_turn(&mut spins);
                continue;
            };
            let (verdict, next) = self.step(entry, now, cost, max_wait);
            if next == entry {
                return verdict;
            }
            if self.claim(seq) {
                self.write(seq, next);
                return verdict;
            }
        }
    }

    /// A consistent copy of the state and the sequence it was read under;
    /// `None` while a writer writes or when one wrote meanwhile.
    #[inline(always)]
    fn read(&self) -> Option<(u64, TokenBucketState)> {
        let seq = self.seq.load(Ordering::Acquire);
        if seq & 1 == 1 {
            return None;
        }
        let entry = TokenBucketState {
            deficit: self.deficit.load(Ordering::Relaxed),
            at: self.at.load(Ordering::Relaxed),
        };
        // The copy's loads before the second read of the sequence: a
        // writer's store seen above means its odd turn is seen here.
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == seq).then_some((seq, entry))
    }

    /// Takes the writer's turn if the sequence is still `seq` (even).
    #[inline(always)]
    fn claim(&self, seq: u64) -> bool {
        self.seq
            .compare_exchange_weak(seq, seq + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Writes `entry` in the turn claimed from `seq`, then ends it.
    #[inline(always)]
    fn write(&self, seq: u64, entry: TokenBucketState) {
        // The odd sequence before any of the stores below, for a reader
        // that sees one of them (its acquire fence pairs with this one).
        fence(Ordering::Release);
        self.deficit.store(entry.deficit, Ordering::Relaxed);
        self.at.store(entry.at, Ordering::Relaxed);
        self.seq.store(seq + 2, Ordering::Release);
    }

    /// Back to fresh.
    pub(super) fn reset(&self) {
        let mut spins = 0;
        loop {
            let seq = self.seq.load(Ordering::Relaxed);
            if seq & 1 == 0 && self.claim(seq) {
                self.write(seq, TokenBucketState::default());
                return;
            }
            wait_turn(&mut spins);
        }
    }

    /// The memory store's operation on the entry: the token bucket's own
    /// decision, then the fresh state when nothing is left to refill (the
    /// store drops such an entry; its expiry, the time the bucket is full
    /// again, is the refill's own rule).
    #[inline(always)]
    fn step(
        &self,
        entry: TokenBucketState,
        now: u64,
        cost: u64,
        max_wait: u64,
    ) -> (Verdict, TokenBucketState) {
        let mut state = entry;
        let verdict = self.bucket.reserve_micros(&mut state, now, cost, max_wait);
        (verdict, stored(state))
    }
}

/// Waits for a writer's turn to end: spins, then yields the processor.
#[cold]
fn wait_turn(spins: &mut u32) {
    if *spins < SPINS {
        *spins += 1;
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use super::*;
    use crate::Policy;

    fn bucket() -> SeqBucket {
        let policy = Policy::token_bucket("t", 1, Duration::from_secs(3600), 5).unwrap();
        SeqBucket::new(policy.algorithm()).unwrap()
    }

    /// While one thread writes states whose two numbers are equal, the
    /// others' copies are always one whole state, never parts of two. The
    /// writer goes on until the readers have copied enough, however the
    /// threads are scheduled (the whole suite shares two cores).
    #[test]
    fn copies_are_never_torn() {
        let bucket = bucket();
        let done = AtomicBool::new(false);
        let copied = AtomicU64::new(0);
        let start = Barrier::new(3);
        let (writes, torn) = std::thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        let mut torn = 0u64;
                        while !done.load(Ordering::Relaxed) {
                            if let Some((_, e)) = bucket.read() {
                                copied.fetch_add(1, Ordering::Relaxed);
                                torn += u64::from(e.deficit != e.at);
                            }
                        }
                        torn
                    })
                })
                .collect();
            start.wait();
            let mut k = 0u64;
            while k < 200_000 || (copied.load(Ordering::Relaxed) < 100_000 && k < 1 << 30) {
                k += 1;
                let seq = loop {
                    let seq = bucket.seq.load(Ordering::Relaxed);
                    if bucket.claim(seq) {
                        break seq;
                    }
                };
                bucket.write(seq, TokenBucketState { deficit: k, at: k });
            }
            done.store(true, Ordering::Relaxed);
            let torn: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
            (k, torn)
        });
        let copies = copied.load(Ordering::Relaxed);
        assert!(copies >= 100_000, "the readers copied {copies} states");
        assert_eq!(torn, 0, "{torn} of {copies} copies mixed two states");
        assert_eq!(bucket.seq.load(Ordering::Relaxed), 2 * writes);
    }

    /// A writer's turn (odd sequence) refuses copies; a claim from a stale
    /// sequence fails, so a decision on an old copy is never written.
    #[test]
    fn a_writers_turn_and_a_stale_claim_are_refused() {
        let bucket = bucket();
        assert_eq!(bucket.read(), Some((0, TokenBucketState::default())));
        // A weak compare-and-swap may fail spuriously (LL/SC machines).
        assert!((0..1_000).any(|_| bucket.claim(0)));
        assert_eq!(bucket.read(), None, "mid-write");
        assert!(!bucket.claim(0), "one writer at a time");
        bucket.write(0, TokenBucketState { deficit: 7, at: 9 });
        assert_eq!(
            bucket.read(),
            Some((2, TokenBucketState { deficit: 7, at: 9 }))
        );
        assert!(!bucket.claim(0), "a claim from before the write");
        bucket.reset();
        assert_eq!(bucket.read(), Some((4, TokenBucketState::default())));
    }
}
