//! Remembers denials, so that a flood on a key over its limit does not
//! become a flood of Redis calls.
//!
//! Exact by construction: every algorithm here is monotone in cost (if a
//! cost is denied, every larger cost is too) and in time without other
//! requests (a denied cost stays denied until its `retry_after`; requests
//! from other instances only consume more). So a denial of cost `c` with
//! `retry_after` `r`, decided by the store at some moment after `sent`,
//! proves that every cost ≥ `c` is denied until `sent + r`. Smaller costs,
//! and everything after that moment, go to the store. Concurrency policies
//! are never cached: a release anywhere frees a lease at once. The one
//! thing the cache cannot see is a reset or a refund of the key through
//! another instance: until the denial's `retry_after` (at most one retry
//! interval) it stays stricter than the store; a reset or refund through
//! this store forgets the key here at once.
//!
//! A denial is remembered however long its `retry_after` (a window's end,
//! a bucket with a slow rate or in debt), since the store stands by it.
//! One shorter than the threshold (10 ms in a `ResilientStore`) is not:
//! under a flood, a fast bucket's denials (1 ms apart at 1,000 a second)
//! each cost a store call, which leases answer locally instead (see
//! [`LeasingStore`](crate::store::leasing::LeasingStore)).
//!
//! [`ResilientStore`](super::ResilientStore) keeps one in front of its
//! primary store; it is public for callers that make their own store calls
//! (`tollgate serve`'s ERL mode answers keys already over their window from
//! one, as ERL's `LOCAL_CACHE_SIZE_IN_BYTES` does).

use std::time::Duration;

use hashbrown::HashMap;
use parking_lot::Mutex;

use crate::algorithm::Algorithm;
use crate::store::key::{KeyRef, StoredKey};
use crate::{Decision, Policy, Source};

#[derive(Debug, Clone, Copy)]
struct Denial {
    algorithm: Algorithm,
    cost: u64,
    /// Local µs: until when every cost ≥ `cost` is denied.
    until: u64,
    /// Local µs: when the state is fresh again, as of the denial.
    reset_at: u64,
    limit: u64,
    remaining: u64,
}

/// Proven denials by (policy, key), each answered locally until its
/// `retry_after` has passed. Times are µs on any clock the caller keeps
/// (the same one for every call); at most `max_keys` keys are held.
///
/// ```
/// use std::time::Duration;
/// use tollgate::store::resilient::DenyCache;
/// use tollgate::{Decision, Policy, Source};
///
/// let cache = DenyCache::new(Duration::ZERO, 1_000);
/// let p = Policy::fixed_window("books", 10, Duration::from_secs(60))?;
/// // The store denied a cost of 1 at t = 5 s, retry in 55 s.
/// let denied = Decision::from_micros(false, 10, 0, 55_000_000, 55_000_000, 0);
/// cache.remember(&p, b"user-42", 1, &denied, 5_000_000);
/// let hit = cache.lookup(&p, b"user-42", 1, 6_000_000).unwrap();
/// assert_eq!((hit.allowed, hit.source), (false, Source::Cache));
/// assert_eq!(hit.retry_after, Duration::from_secs(54));
/// assert!(cache.lookup(&p, b"user-42", 1, 60_000_000).is_none(), "over at the retry");
/// # Ok::<(), tollgate::Error>(())
/// ```
#[derive(Debug)]
pub struct DenyCache {
    threshold: u64,
    max_keys: usize,
    denials: Mutex<HashMap<StoredKey, Denial>>,
}

impl DenyCache {
    /// A cache of the denials whose `retry_after` is at least `threshold`
    /// (shorter ones are not worth a lookup), holding at most `max_keys`
    /// keys: when full, expired denials are dropped, and a new key waits
    /// for room.
    pub fn new(threshold: Duration, max_keys: usize) -> DenyCache {
        DenyCache {
            threshold: threshold.as_micros() as u64,
            max_keys,
            denials: Mutex::new(HashMap::new()),
        }
    }

    /// How many keys have a denial remembered (expired ones included until
    /// a lookup or the cap drops them).
    pub fn len(&self) -> usize {
        self.denials.lock().len()
    }

    /// Whether no key has a denial remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A denial of `cost` at `now`, if one is proven: a remembered denial
    /// of at most `cost` on the same key and algorithm, whose retry is
    /// later than `now`. A cost of 0 (a peek) is never answered here.
    pub fn lookup(&self, policy: &Policy, key: &[u8], cost: u64, now: u64) -> Option<Decision> {
        if cost == 0 {
            return None;
        }
        let k = KeyRef::new(policy, key);
        let mut denials = self.denials.lock();
        let d = *denials.get(&k)?;
        if now >= d.until || d.algorithm != *policy.algorithm() {
            denials.remove(&k);
            return None;
        }
        if cost < d.cost {
            return None;
        }
        Some(
            Decision::from_micros(
                false,
                d.limit,
                d.remaining,
                d.reset_at.saturating_sub(now),
                d.until - now,
                0,
            )
            .with_source(Source::Cache),
        )
    }

    /// Remembers `decision`, the store's answer to a check of `cost` sent
    /// at `sent`, when it is a denial worth remembering (not of a
    /// concurrency policy, nor of a peek).
    pub fn remember(&self, policy: &Policy, key: &[u8], cost: u64, decision: &Decision, sent: u64) {
        let retry = decision.retry_after.as_micros() as u64;
        if decision.allowed
            || cost == 0
            || retry < self.threshold
            || matches!(policy.algorithm(), Algorithm::Concurrency(_))
        {
            return;
        }
        let denial = Denial {
            algorithm: *policy.algorithm(),
            cost,
            until: sent + retry,
            reset_at: sent + decision.reset_after.as_micros() as u64,
            limit: decision.limit,
            remaining: decision.remaining,
        };
        let k = KeyRef::new(policy, key);
        let mut denials = self.denials.lock();
        if let Some(old) = denials.get(&k)
            && old.until > sent
            && old.cost < cost
            && old.algorithm == denial.algorithm
        {
            // The older denial covers more costs; keep it.
            return;
        }
        if denials.len() >= self.max_keys && !denials.contains_key(&k) {
            denials.retain(|_, d| d.until > sent);
            if denials.len() >= self.max_keys {
                return;
            }
        }
        denials.insert(StoredKey::new(k), denial);
    }

    /// Forgets the denial of `key` under `policy` (after a reset).
    pub fn forget(&self, policy: &Policy, key: &[u8]) {
        self.denials.lock().remove(&KeyRef::new(policy, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denies_larger_costs_until_the_retry_and_nothing_else() {
        let cache = DenyCache::new(Duration::from_millis(1), 16);
        let p = Policy::fixed_window("p", 10, Duration::from_secs(1)).unwrap();
        let denied = Decision::from_micros(false, 10, 2, 500_000, 500_000, 0);
        cache.remember(&p, b"k", 3, &denied, 1_000_000);
        let hit = cache
            .lookup(&p, b"k", 3, 1_100_000)
            .expect("cost 3 is denied");
        assert_eq!(hit.retry_after, Duration::from_millis(400));
        assert_eq!(hit.source, Source::Cache);
        assert!(cache.lookup(&p, b"k", 5, 1_499_999).is_some());
        assert!(
            cache.lookup(&p, b"k", 2, 1_100_000).is_none(),
            "a smaller cost may fit"
        );
        assert!(cache.lookup(&p, b"other", 3, 1_100_000).is_none());
        assert!(
            cache.lookup(&p, b"k", 3, 1_500_000).is_none(),
            "expired at the retry"
        );
        let short = Decision::from_micros(false, 10, 0, 500, 500, 0);
        cache.remember(&p, b"s", 1, &short, 0);
        assert!(
            cache.lookup(&p, b"s", 1, 1).is_none(),
            "below the threshold"
        );
        let changed = Policy::fixed_window("p", 20, Duration::from_secs(1)).unwrap();
        cache.remember(&p, b"k", 3, &denied, 2_000_000);
        assert!(
            cache.lookup(&changed, b"k", 3, 2_000_001).is_none(),
            "a reloaded policy"
        );
    }
}
