//! The selectors of one kind (exact keys or prefixes) of one table, by
//! their bytes: open addressing with linear probing over slots that hold
//! each entry's full 64-bit hash beside it, at most half full.
//!
//! A selector of up to 16 bytes is hashed by its filter sketch
//! (`bytes.rs`), which reads every byte of it at that length, so a lookup
//! that passed the filter probes with the hash it already has; a longer
//! one by foldhash. Both are seeded per table at random: keys are the
//! clients' (the selectors are the operators').
//!
//! Not a `hashbrown` table: its probe (a control group read and matched,
//! its bits walked, the comparison a closure called out of line) cost
//! some 70 instructions a hit, most of a hit's cost; here a hit compares
//! one slot's hash and the entry's bytes (at half full, 1.5 slots on
//! average, in one cache line), a miss stops at the first empty slot. A
//! change clones the whole table anyway (the overrides are swapped whole),
//! so removal simply places the others again.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::bytes::sketch;
use super::stored::Entry;

/// The longest selector the sketch hashes whole.
pub(super) const SKETCHED: usize = 16;

#[derive(Debug, Clone)]
pub(super) struct Map {
    /// A power of two slots (none while empty), at most half of them used.
    slots: Box<[Slot]>,
    len: usize,
    /// The lengths of its selectors, one bit each ([`len_bit`]).
    lens: u64,
    seed: u64,
    /// `EXACT` or `PREFIX`: the sketches' kind.
    kind: u64,
}

/// A length's bit in [`Map::lens`]: bit `len`, or 63 for any from 63 on.
#[inline(always)]
fn len_bit(len: usize) -> u64 {
    1 << len.min(63)
}

/// One slot: an entry and its hash (an empty slot has no entry).
#[derive(Debug, Clone, Default)]
struct Slot {
    hash: u64,
    entry: Option<Arc<Entry>>,
}

impl Map {
    pub(super) fn new(seed: u64, kind: u64) -> Map {
        Map {
            slots: Box::default(),
            len: 0,
            lens: 0,
            seed,
            kind,
        }
    }

    /// Whether a selector of `len` bytes may be held (false when none of
    /// that length is: a key of a length no exact selector has costs
    /// one test, no sketch and no probe).
    #[inline(always)]
    pub(super) fn may_hold_len(&self, len: usize) -> bool {
        self.lens & len_bit(len) != 0
    }

    /// The sketch of `bytes` (what the table's filter holds).
    #[inline(always)]
    pub(super) fn sketch(&self, bytes: &[u8]) -> u64 {
        sketch(self.seed, bytes, bytes.len(), self.kind)
    }

    /// The entry of `bytes`, whose sketch is `sketched`.
    #[inline(always)]
    pub(super) fn find(&self, bytes: &[u8], sketched: u64) -> Option<&Arc<Entry>> {
        let i = self.index_of(bytes, hash(self.seed, self.kind, bytes, sketched))?;
        self.slots.get(i)?.entry.as_ref()
    }

    /// The slot of the entry of `bytes`, hashed `h`.
    #[inline(always)]
    fn index_of(&self, bytes: &[u8], h: u64) -> Option<usize> {
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = home(h) & mask;
        loop {
            let slot = self.slots.get(i)?;
            match &slot.entry {
                None => return None,
                Some(e) if slot.hash == h && e.is(bytes) => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn get(&self, bytes: &[u8]) -> Option<&Arc<Entry>> {
        self.find(bytes, self.sketch(bytes))
    }

    /// Adds `entry`, or replaces the one of its selector.
    pub(super) fn insert(&mut self, entry: Arc<Entry>) {
        let h = hash_of(self.seed, self.kind, entry.selector.bytes());
        if let Some(slot) = self.slot_of(entry.selector.bytes(), h) {
            slot.entry = Some(entry);
            return;
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.lens |= len_bit(entry.selector.bytes().len());
        self.place(h, entry);
        self.len += 1;
    }

    /// The slot holding the entry of `bytes` (hashed `h`), for a change.
    fn slot_of(&mut self, bytes: &[u8], h: u64) -> Option<&mut Slot> {
        let i = self.index_of(bytes, h)?;
        self.slots.get_mut(i)
    }

    /// Puts `entry` in the first empty slot from its home on (one exists:
    /// the map is at most half full).
    fn place(&mut self, h: u64, entry: Arc<Entry>) {
        let mask = self.slots.len() - 1;
        let mut i = home(h) & mask;
        while self.slots[i].entry.is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Slot {
            hash: h,
            entry: Some(entry),
        };
    }

    /// Twice the slots (at least 8), every entry placed again.
    fn grow(&mut self) {
        let slots = (self.slots.len() * 2).max(8);
        self.replace_slots(slots, |_| true);
    }

    /// `slots` new slots holding the entries `keep` accepts.
    fn replace_slots(&mut self, slots: usize, mut keep: impl FnMut(&Arc<Entry>) -> bool) {
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); slots].into());
        (self.len, self.lens) = (0, 0);
        for slot in old.into_vec() {
            if let Some(e) = slot.entry.filter(|e| keep(e)) {
                self.lens |= len_bit(e.selector.bytes().len());
                self.place(slot.hash, e);
                self.len += 1;
            }
        }
    }

    pub(super) fn remove(&mut self, bytes: &[u8]) -> Option<Arc<Entry>> {
        let h = hash_of(self.seed, self.kind, bytes);
        let removed = self.slot_of(bytes, h)?.entry.clone()?;
        self.retain(|e| !Arc::ptr_eq(e, &removed));
        Some(removed)
    }

    /// Keeps the entries `keep` accepts (the slots are sized for them).
    pub(super) fn retain(&mut self, keep: impl FnMut(&Arc<Entry>) -> bool) {
        let slots = self.slots.len();
        self.replace_slots(slots, keep);
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.slots.iter().filter_map(|s| s.entry.as_ref())
    }

    /// Each entry, to replace with another of the same selector (which
    /// hashes the same, so stays where it is).
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Arc<Entry>> {
        self.slots.iter_mut().filter_map(|s| s.entry.as_mut())
    }
}

/// The slot a hash starts from, before the mask: its high half (the
/// filters place a sketch by its low bits and its top twelve).
#[inline(always)]
fn home(h: u64) -> usize {
    (h >> 32) as usize
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;
    use crate::Policy;
    use crate::overrides::bytes::EXACT;
    use crate::overrides::{Override, Selector, checked};

    fn entry(bytes: &[u8], n: u64) -> Arc<Entry> {
        let p = Policy::fixed_window("api", 10 + n, Duration::from_secs(1)).unwrap();
        let selector = Selector::exact(bytes).unwrap();
        Arc::new(checked(&p, selector, Override::block()).unwrap())
    }

    proptest! {
        /// Against a `HashMap`: after inserts (new or replacing), removals
        /// and a retain, every selector held is found with its entry, no
        /// other is, and the count agrees; short and long selectors, with a
        /// seed of 0 so that some sketches collide in their home slots.
        #[test]
        fn behaves_as_a_map(
            ops in proptest::collection::vec((0..3u8, 0..48u32, any::<bool>()), 1..300),
        ) {
            let mut map = Map::new(0, EXACT);
            let mut model: HashMap<Vec<u8>, u64> = HashMap::new();
            let name = |k: u32, long: bool| -> Vec<u8> {
                if long { format!("a-long-selector-of-{k:04}").into_bytes() } else { format!("k{k}").into_bytes() }
            };
            for (n, (op, k, long)) in ops.into_iter().enumerate() {
                let bytes = name(k, long);
                match op {
                    0 | 1 => {
                        map.insert(entry(&bytes, n as u64));
                        model.insert(bytes, 10 + n as u64);
                    }
                    _ => {
                        let removed = map.remove(&bytes).map(|e| e.base.limit().0);
                        prop_assert_eq!(removed, model.remove(&bytes));
                    }
                }
                prop_assert_eq!(map.len(), model.len());
                prop_assert!(map.len() * 2 <= map.slots.len().max(1));
                for len in 0..40 {
                    let held = model.keys().any(|k| k.len() == len);
                    prop_assert_eq!(map.may_hold_len(len), held, "length {}", len);
                }
                prop_assert_eq!(map.iter().count(), model.len());
            }
            map.retain(|e| e.base.limit().0 % 2 == 0);
            model.retain(|_, limit| *limit % 2 == 0);
            for k in 0..48 {
                for long in [false, true] {
                    let bytes = name(k, long);
                    let found = map.get(&bytes).map(|e| e.base.limit().0);
                    prop_assert_eq!(found, model.get(&bytes).copied(), "{:?}", bytes);
                }
            }
        }
    }
}
