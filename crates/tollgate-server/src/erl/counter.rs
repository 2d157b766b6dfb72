//! Where ERL mode keeps its counters: the call's hits are added to each
//! key and the new counts come back, all keys in one round trip, every
//! key's expiry set to one window (plus jitter) on each call. That is all
//! ERL's fixed window needs, since every call counts: no script.
//!
//! `MemoryCounter` is the same without Redis; `redis::RedisCounter`
//! is ERL's own arithmetic on ERL's own keys.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// Hits to add to one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit<'a> {
    pub(crate) key: &'a str,
    /// May be 0: the count is read, not changed.
    pub(crate) hits: u64,
    pub(crate) expire_seconds: u64,
}

/// A future of the counts after a call's hits.
pub(crate) type Counts<'a> = Pin<Box<dyn Future<Output = Result<Vec<u64>, String>> + Send + 'a>>;

/// Adds hits to keys and answers each key's count after its hits.
pub(crate) trait Counter: Send + Sync + std::fmt::Debug {
    /// Adds every hit, in order (a key given twice counts twice), and
    /// answers the counts, one per hit.
    fn count<'a>(&'a self, hits: &'a [Hit<'a>]) -> Counts<'a>;
}

const SHARDS: usize = 16;

/// Counters in this process: a sharded map of key to (count, expiry).
#[derive(Debug)]
pub(crate) struct MemoryCounter {
    shards: Vec<Mutex<Shard>>,
}

#[derive(Debug, Default)]
struct Shard {
    counts: HashMap<String, (u64, u64)>,
    /// Insertions since the last sweep of expired keys.
    inserted: usize,
}

impl Default for MemoryCounter {
    fn default() -> Self {
        MemoryCounter {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
        }
    }
}

fn now() -> u64 {
    crate::test_clock::unix_secs()
}

impl MemoryCounter {
    fn add(&self, hit: &Hit<'_>, now: u64) -> u64 {
        let shard = hit.key.bytes().fold(0usize, |h, b| {
            h.wrapping_mul(31).wrapping_add(usize::from(b))
        });
        let mut shard = self.shards[shard % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let expires = now + hit.expire_seconds;
        if let Some((count, expiry)) = shard.counts.get_mut(hit.key) {
            if *expiry <= now {
                *count = 0;
            }
            *count = count.saturating_add(hit.hits);
            *expiry = expires;
            return *count;
        }
        shard.inserted += 1;
        if shard.inserted >= 1024 {
            shard.inserted = 0;
            shard.counts.retain(|_, (_, expiry)| *expiry > now);
        }
        shard
            .counts
            .insert(hit.key.to_string(), (hit.hits, expires));
        hit.hits
    }
}

impl Counter for MemoryCounter {
    fn count<'a>(&'a self, hits: &'a [Hit<'a>]) -> Counts<'a> {
        let now = now();
        let counts = hits.iter().map(|h| self.add(h, now)).collect();
        Box::pin(std::future::ready(Ok(counts)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_add_up_and_zero_only_reads() {
        let c = MemoryCounter::default();
        let hit = |key, hits| Hit {
            key,
            hits,
            expire_seconds: 60,
        };
        assert_eq!(
            c.count(&[hit("a", 3), hit("b", 1), hit("a", 2)])
                .await
                .unwrap(),
            [3, 1, 5]
        );
        assert_eq!(c.count(&[hit("a", 0)]).await.unwrap(), [5]);
        assert_eq!(c.count(&[hit("c", 0)]).await.unwrap(), [0]);
    }
}
