//! `LOCAL_CACHE_SIZE_IN_BYTES`: ERL's cache of counters already over their
//! limit (a freecache in its `src/limiter/base_limiter.go`), kept in
//! tollgate's [`DenyCache`].
//!
//! A counter that a call takes past its limit is remembered until its
//! window ends; until then every call on it is answered `OVER_LIMIT`
//! here, and its hits are not sent to Redis (no `INCRBY`, as ERL's
//! `fixed_cache_impl.go` skips the key). That is exact: in a window a
//! counter only grows (every call counts), so once over it stays over.
//!
//! The key is ERL's counter key, which names the window, so one policy
//! stands for every entry; the denial lasts until the window's end (ERL
//! gives its entries a TTL of one unit from the refusal, but the next
//! window has another key, so the two answer alike).
//!
//! freecache takes a size in bytes; the deny cache a number of keys. One
//! key is counted as [`BYTES_PER_KEY`] bytes: freecache's 24-byte entry
//! header and 16-byte slot, plus a key of ERL's usual length (a domain and
//! two or three entries, 60 to 90 bytes).

use std::time::Duration;

use tollgate::store::resilient::DenyCache;
use tollgate::{Decision, Policy};

/// What one remembered counter is counted as, of `LOCAL_CACHE_SIZE_IN_BYTES`.
pub(crate) const BYTES_PER_KEY: u64 = 128;

/// Counters over their limit, answered without Redis until their window ends.
#[derive(Debug)]
pub(crate) struct LocalCache {
    cache: DenyCache,
    /// The one policy the entries are kept under (the key says the rest).
    policy: Policy,
}

impl LocalCache {
    /// A cache of `bytes / BYTES_PER_KEY` counters (at least one); `None`
    /// for 0, ERL's "off".
    pub(crate) fn with_bytes(bytes: u64) -> Option<LocalCache> {
        if bytes == 0 {
            return None;
        }
        let keys = usize::try_from(bytes / BYTES_PER_KEY)
            .unwrap_or(usize::MAX)
            .max(1);
        // A window of 1 s and a limit of 1: only the name and the
        // algorithm's identity matter here, and they never change.
        let policy = Policy::fixed_window("erl-local-cache", 1, Duration::from_secs(1)).ok()?;
        Some(LocalCache {
            cache: DenyCache::new(Duration::ZERO, keys),
            policy,
        })
    }

    /// Whether the counter `key` is over its limit at `now` (Unix seconds).
    pub(crate) fn is_over(&self, key: &str, now: u64) -> bool {
        self.cache
            .lookup(&self.policy, key.as_bytes(), 1, now * 1_000_000)
            .is_some()
    }

    /// Remembers that the counter `key` went over its limit at `now`, until
    /// its window ends `until_reset` seconds later.
    pub(crate) fn over(&self, key: &str, now: u64, until_reset: u64) {
        let micros = until_reset * 1_000_000;
        let denied = Decision::from_micros(false, 1, 0, micros, micros, 0);
        self.cache
            .remember(&self.policy, key.as_bytes(), 1, &denied, now * 1_000_000);
    }

    /// How many counters are remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_until_the_window_ends() {
        assert!(LocalCache::with_bytes(0).is_none());
        let cache = LocalCache::with_bytes(1).unwrap();
        cache.over("d_k_v_60", 70, 50);
        assert!(cache.is_over("d_k_v_60", 70));
        assert!(cache.is_over("d_k_v_60", 119));
        assert!(!cache.is_over("d_k_v_60", 120), "the window is over");
        assert!(!cache.is_over("d_k_w_60", 70));
    }

    #[test]
    fn holds_bytes_over_bytes_per_key_counters() {
        let cache = LocalCache::with_bytes(2 * BYTES_PER_KEY).unwrap();
        for key in ["a", "b", "c"] {
            cache.over(key, 0, 60);
        }
        assert_eq!(cache.len(), 2);
        assert!(cache.is_over("a", 1) && cache.is_over("b", 1));
        assert!(!cache.is_over("c", 1), "no room for a third");
    }
}
