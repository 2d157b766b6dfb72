//! The selectors of one kind (exact keys or prefixes) of one table, by
//! their bytes. A selector of up to 16 bytes is hashed by its filter
//! sketch (`bytes.rs`), which reads every byte of it at that length, so
//! a lookup that passed the filter probes with the hash it already has;
//! a longer one by foldhash. Both are seeded per table at random: keys
//! are the clients' (the selectors are the operators').

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::{HashTable, hash_table};

use super::bytes::{same, sketch};
use super::stored::Entry;

/// The longest selector the sketch hashes whole.
const SKETCHED: usize = 16;

#[derive(Debug, Clone)]
pub(super) struct Map {
    entries: HashTable<Arc<Entry>>,
    seed: u64,
    /// `EXACT` or `PREFIX`: the sketches' kind.
    kind: u64,
}

impl Map {
    pub(super) fn new(seed: u64, kind: u64) -> Map {
        Map {
            entries: HashTable::new(),
            seed,
            kind,
        }
    }

    /// The sketch of `bytes` (what the table's filter holds).
    #[inline(always)]
    pub(super) fn sketch(&self, bytes: &[u8]) -> u64 {
        sketch(self.seed, bytes, bytes.len(), self.kind)
    }

    /// The entry of `bytes`, whose sketch is `sketched`.
    #[inline(always)]
    pub(super) fn find(&self, bytes: &[u8], sketched: u64) -> Option<&Arc<Entry>> {
        let h = hash(self.seed, self.kind, bytes, sketched);
        self.entries.find(h, |e| e.is(bytes))
    }

    pub(super) fn get(&self, bytes: &[u8]) -> Option<&Arc<Entry>> {
        self.find(bytes, self.sketch(bytes))
    }

    /// Adds `entry`, or replaces the one of its selector.
    pub(super) fn insert(&mut self, entry: Arc<Entry>) {
        let (seed, kind) = (self.seed, self.kind);
        let bytes = entry.selector.bytes();
        let found = self.entries.entry(
            hash_of(seed, kind, bytes),
            |e| same(e.selector.bytes(), bytes),
            |e| hash_of(seed, kind, e.selector.bytes()),
        );
        match found {
            hash_table::Entry::Occupied(mut o) => *o.get_mut() = entry,
            hash_table::Entry::Vacant(v) => {
                v.insert(entry);
            }
        }
    }

    pub(super) fn remove(&mut self, bytes: &[u8]) -> Option<Arc<Entry>> {
        let h = hash_of(self.seed, self.kind, bytes);
        let found = self
            .entries
            .find_entry(h, |e| same(e.selector.bytes(), bytes));
        found.ok().map(|o| o.remove().0)
    }

    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Arc<Entry>) -> bool) {
        self.entries.retain(|e| keep(e));
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.entries.iter()
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Arc<Entry>> {
        self.entries.iter_mut()
    }
}

/// The hash of `bytes` whose sketch (of `kind`, from `seed`) is
/// `sketched`: that sketch, if it read every byte.
#[inline(always)]
fn hash(seed: u64, kind: u64, bytes: &[u8], sketched: u64) -> u64 {
    if bytes.len() <= SKETCHED {
        sketched
    } else {
        foldhash::fast::FixedState::with_seed(seed).hash_one(bytes) ^ kind
    }
}

/// The hash of `bytes` (see [`hash`]).
fn hash_of(seed: u64, kind: u64, bytes: &[u8]) -> u64 {
    hash(seed, kind, bytes, sketch(seed, bytes, bytes.len(), kind))
}
