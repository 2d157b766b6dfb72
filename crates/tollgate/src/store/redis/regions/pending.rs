//! The keys waiting for replication: every window key this instance
//! admitted on since the replicator last carried it, with, per remote
//! region, whether it still has to go there.
//!
//! Bounded: a key that finds the set full is not queued, and its decision
//! is made as under a partition (capped at the region's share), so the
//! bound holds for it too. Keys given back after a failed round may take
//! the set past its capacity, by at most what that round took.

use std::collections::HashMap;

use parking_lot::Mutex;

/// One queued key: when its window's state expires (µs, the store's
/// clock) and which remote regions (bits) still need it.
#[derive(Debug, Clone, Copy)]
struct Entry {
    expires: u64,
    unsent: u32,
}

#[derive(Debug)]
pub(super) struct Pending {
    keys: Mutex<HashMap<Vec<u8>, Entry>>,
    capacity: usize,
    /// Every remote's bit.
    all: u32,
}

/// A key taken for one remote: its name and its expiry (µs).
pub(super) type Taken = (Vec<u8>, u64);

impl Pending {
    pub(super) fn new(capacity: usize, remotes: usize) -> Pending {
        Pending {
            keys: Mutex::new(HashMap::new()),
            capacity,
            all: (1u32 << remotes) - 1,
        }
    }

    /// Queues `key` for every remote region; false when the set is full.
    pub(super) fn mark(&self, key: &[u8], expires: u64) -> bool {
        let mut keys = self.keys.lock();
        if keys.len() >= self.capacity && !keys.contains_key(key) {
            return false;
        }
        self.put(&mut keys, key, expires);
        true
    }

    /// Queues `key` again after an admission, room or not: it was
    /// queued before its script, and a round may have taken it since (the
    /// set can so pass its capacity by the decisions in flight).
    pub(super) fn remark(&self, key: &[u8], expires: u64) {
        self.put(&mut self.keys.lock(), key, expires);
    }

    fn put(&self, keys: &mut HashMap<Vec<u8>, Entry>, key: &[u8], expires: u64) {
        match keys.get_mut(key) {
            Some(entry) => {
                entry.unsent = self.all;
                entry.expires = entry.expires.max(expires);
            }
            None => {
                keys.insert(
                    key.to_vec(),
                    Entry {
                        expires,
                        unsent: self.all,
                    },
                );
            }
        }
    }

    /// Takes every key remote `link` still needs whose window is live at
    /// `now`; keys no remote needs any more, and expired ones, leave.
    pub(super) fn take(&self, link: usize, now: u64) -> Vec<Taken> {
        let bit = 1u32 << link;
        let mut taken = Vec::new();
        self.keys.lock().retain(|key, entry| {
            if entry.expires <= now {
                return false;
            }
            if entry.unsent & bit != 0 {
                entry.unsent &= !bit;
                taken.push((key.clone(), entry.expires));
            }
            entry.unsent != 0
        });
        taken
    }

    /// Gives back keys a failed round took for `link`.
    pub(super) fn give_back(&self, link: usize, keys: Vec<Taken>) {
        let bit = 1u32 << link;
        let mut held = self.keys.lock();
        for (key, expires) in keys {
            let entry = held.entry(key).or_insert(Entry { expires, unsent: 0 });
            entry.unsent |= bit;
        }
    }

    /// How many keys wait.
    pub(super) fn len(&self) -> usize {
        self.keys.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_remote_takes_a_key_once_until_marked_again() {
        let p = Pending::new(2, 2);
        assert!(p.mark(b"a", 100));
        assert!(p.mark(b"b", 100));
        assert!(!p.mark(b"c", 100), "full");
        assert!(p.mark(b"a", 200), "a queued key is always taken in");
        assert_eq!(p.take(0, 0).len(), 2);
        assert!(p.take(0, 0).is_empty());
        assert_eq!(p.len(), 2, "remote 1 still needs them");
        let one = p.take(1, 150);
        assert_eq!(one, vec![(b"a".to_vec(), 200)], "b's window ended");
        assert_eq!(p.len(), 0);
        p.give_back(1, one);
        assert_eq!(p.take(0, 0).len(), 0);
        assert_eq!(p.take(1, 0).len(), 1, "a failed round's keys go again");
    }
}
