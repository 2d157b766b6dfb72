//! One shard's hash table: open addressing with linear probing over the
//! entries themselves.
//!
//! A lookup starts at the slot its hash names and reads entries forward
//! until it finds its key or an empty slot. There is no separate array of
//! control bytes to read first, as in a SwissTable: with one million keys
//! that array no longer stays in cache either, and reading it was a second
//! cache miss, before the entry's, on every decision. Here a lookup that
//! finds its key at its home slot reads one cache line (the memory store's
//! entries are one line each), and at the load this table keeps (at most
//! 3/4, and between 3/8 and 3/4 as it grows) a hit reads 1.3 to 2.5 entries
//! on average, its neighbours next in memory. A key in steady use found away
//! from its home slot moves there (see [`Table::find_mut`]), so a busy key
//! reads one.
//!
//! Removal shifts the entries that follow back into the gap (no
//! tombstones), so a table never fills up with dead slots and a lookup
//! stops at the first empty one. The table does not hash: the caller passes
//! the hash of the key it looks for, and a function that hashes a stored
//! entry again when entries move (on removal and growth).

/// Open-addressed slots; `None` is empty.
#[derive(Debug)]
pub(super) struct Table<T> {
    slots: Box<[Option<T>]>,
    len: usize,
    /// Counts the lookups by [`find_mut`](Table::find_mut) that found their
    /// entry away from its home slot.
    displaced_hits: u32,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            slots: Box::default(),
            len: 0,
            displaced_hits: 0,
        }
    }
}

/// One in this many lookups that find their entry away from its home slot
/// move it there (see [`Table::find_mut`]).
const PROMOTE_EVERY: u32 = 8;

/// The smallest table allocated.
const MIN_SLOTS: usize = 8;

impl<T> Table<T> {
    /// How many entries are held.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len().wrapping_sub(1)
    }

    /// The slot holding the entry that `eq` accepts, among those whose
    /// hash is `hash`.
    #[inline]
    pub(super) fn find(&self, hash: u64, mut eq: impl FnMut(&T) -> bool) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let mask = self.mask();
        let mut i = hash as usize & mask;
        loop {
            match &self.slots[i] {
                None => return None,
                Some(entry) if eq(entry) => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    /// The slot and the entry that `eq` accepts, among those whose hash is
    /// `hash`, for a change.
    ///
    /// An entry found away from its home slot moves there one time in
    /// [`PROMOTE_EVERY`], swapping with the entry that held it, so that a
    /// key in steady use soon costs one slot's read however late it was
    /// added (the swap keeps every entry reachable: the slots from the
    /// home to where the entry was are all occupied, and the other entry
    /// only moves further along that run). Only a counter decides, so two
    /// busy keys sharing a home swap one time in eight, not on every call.
    ///
    /// (The slot is indexed again once found, as the borrow checker does not
    /// let the loop return the entry; the compiler merges the two reads, and
    /// an absent entry is `None` rather than a panic, which it keeps out of
    /// the lookup.)
    #[inline]
    pub(super) fn find_mut(
        &mut self,
        hash: u64,
        eq: impl FnMut(&T) -> bool,
    ) -> Option<(usize, &mut T)> {
        let mut i = self.find(hash, eq)?;
        let home = hash as usize & self.mask();
        if i != home {
            self.displaced_hits = self.displaced_hits.wrapping_add(1);
            if self.displaced_hits.is_multiple_of(PROMOTE_EVERY) {
                self.slots.swap(i, home);
                i = home;
            }
        }
        self.slots[i].as_mut().map(|entry| (i, entry))
    }

    /// The entry in slot `i`, which [`find`](Self::find) returned.
    #[inline]
    pub(super) fn get(&self, i: usize) -> &T {
        self.slots[i].as_ref().expect("an occupied slot")
    }

    /// Adds an entry whose key is not held, growing the table first when it
    /// would be more than 3/4 full.
    #[inline]
    pub(super) fn insert_unique(&mut self, hash: u64, entry: T, rehash: impl Fn(&T) -> u64) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow(&rehash);
        }
        self.place(hash, entry);
        self.len += 1;
    }

    /// Puts `entry` in the first empty slot from its home on (one exists:
    /// the table is never full).
    #[inline]
    fn place(&mut self, hash: u64, entry: T) {
        let mask = self.mask();
        let mut i = hash as usize & mask;
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(entry);
    }

    /// Twice the slots (at least [`MIN_SLOTS`]), every entry placed again.
    #[cold]
    #[inline(never)]
    fn grow(&mut self, rehash: &impl Fn(&T) -> u64) {
        let slots = (self.slots.len() * 2).max(MIN_SLOTS);
        let old = std::mem::replace(
            &mut self.slots,
            std::iter::repeat_with(|| None).take(slots).collect(),
        );
        for entry in old.into_vec().into_iter().flatten() {
            let hash = rehash(&entry);
            self.place(hash, entry);
        }
    }

    /// Drops the entry in slot `i` (where it lies, not moved out first),
    /// then moves back each entry of the run that follows whose home slot
    /// is not between the gap and where it is, so that every entry stays
    /// reachable from its home without crossing an empty slot.
    #[inline]
    pub(super) fn remove(&mut self, i: usize, rehash: impl Fn(&T) -> u64) {
        let mask = self.mask();
        debug_assert!(self.slots[i].is_some(), "an occupied slot");
        self.slots[i] = None;
        self.len -= 1;
        let mut gap = i;
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let Some(entry) = &self.slots[j] else { break };
            let home = rehash(entry) as usize & mask;
            // Stays if its home lies cyclically in (gap, j].
            let stays = if gap <= j {
                gap < home && home <= j
            } else {
                gap < home || home <= j
            };
            if !stays {
                self.slots[gap] = self.slots[j].take();
                gap = j;
            }
        }
    }

    /// Keeps only the entries `keep` accepts; returns how many went.
    pub(super) fn retain(
        &mut self,
        mut keep: impl FnMut(&T) -> bool,
        rehash: impl Fn(&T) -> u64,
    ) -> usize {
        let before = self.len;
        let mut i = 0;
        // A removal may move a later entry (or, at the end, one from the
        // start) into slot `i`, so `i` is looked at again before moving on;
        // each removal shortens the table, so this ends.
        while i < self.slots.len() {
            match &self.slots[i] {
                Some(entry) if !keep(entry) => {
                    self.remove(i, &rehash);
                }
                _ => i += 1,
            }
        }
        before - self.len
    }

    /// The held entries with their slots, in slot order.
    pub(super) fn iter(&self) -> impl Iterator<Item = (usize, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, slot)| slot.as_ref().map(|entry| (i, entry)))
    }

    /// Drops every entry and frees the slots.
    pub(super) fn clear(&mut self) {
        *self = Table::default();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// A key's hash, deliberately poor (few distinct values), so that runs
    /// are long, wrap around the end and mix homes.
    fn hash(key: &u32) -> u64 {
        u64::from(key.wrapping_mul(2_654_435_761) >> 27)
    }

    /// Few enough that most lookups find a key, and runs grow long.
    const KEYS: u32 = 64;

    #[derive(Debug, Clone)]
    enum Op {
        /// Finds a key for a change (which may move it home).
        Touch(u32),
        Insert(u32),
        Remove(u32),
        RetainEven,
        Clear,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0..KEYS).prop_map(Op::Insert),
            8 => (0..KEYS).prop_map(Op::Touch),
            6 => (0..KEYS).prop_map(Op::Remove),
            1 => Just(Op::RetainEven),
            1 => Just(Op::Clear),
        ]
    }

    proptest! {
        /// Against a `HashMap`: after every operation, every held key is
        /// found with its value, no other key is found, and the count agrees.
        #[test]
        fn behaves_as_a_map(ops in proptest::collection::vec(op(), 1..400)) {
            let mut table: Table<(u32, u64)> = Table::default();
            let mut model: HashMap<u32, u64> = HashMap::new();
            let rehash = |e: &(u32, u64)| hash(&e.0);
            for (n, op) in ops.into_iter().enumerate() {
                let n = n as u64;
                match op {
                    Op::Touch(k) => {
                        let found = table.find_mut(hash(&k), |e| e.0 == k).map(|(_, e)| e.1);
                        prop_assert_eq!(found, model.get(&k).copied());
                    }
                    Op::Insert(k) => match table.find_mut(hash(&k), |e| e.0 == k) {
                        Some((i, entry)) => {
                            prop_assert_eq!(entry.0, k);
                            entry.1 = n;
                            prop_assert_eq!(table.get(i), &(k, n));
                            model.insert(k, n);
                        }
                        None => {
                            table.insert_unique(hash(&k), (k, n), rehash);
                            model.insert(k, n);
                        }
                    },
                    Op::Remove(k) => {
                        let found = table.find(hash(&k), |e| e.0 == k);
                        prop_assert_eq!(found.is_some(), model.contains_key(&k));
                        if let Some(i) = found {
                            prop_assert_eq!(table.get(i), &(k, model[&k]));
                            table.remove(i, rehash);
                            model.remove(&k);
                        }
                    }
                    Op::RetainEven => {
                        let odd = model.keys().filter(|k| *k % 2 == 1).count();
                        prop_assert_eq!(table.retain(|e| e.0 % 2 == 0, rehash), odd);
                        model.retain(|k, _| k % 2 == 0);
                    }
                    Op::Clear => {
                        table.clear();
                        model.clear();
                    }
                }
                prop_assert_eq!(table.len(), model.len());
                prop_assert_eq!(table.iter().count(), model.len());
                // Every entry is reachable: no empty slot between its home
                // and where it is.
                let mask = table.mask();
                for (at, entry) in table.iter() {
                    let mut i = hash(&entry.0) as usize & mask;
                    while i != at {
                        prop_assert!(table.slots[i].is_some(), "gap before key {}", entry.0);
                        i = (i + 1) & mask;
                    }
                }
                for k in 0..KEYS {
                    let found = table.find(hash(&k), |e| e.0 == k).map(|i| table.get(i).1);
                    prop_assert_eq!(found, model.get(&k).copied(), "key {}", k);
                }
            }
        }
    }

    /// A key added late, behind others sharing its home slot, moves home
    /// after a few lookups and stays there; the others stay reachable.
    #[test]
    fn a_busy_key_moves_to_its_home_slot() {
        let mut table: Table<(u32, u64)> = Table::default();
        let same_home = |_: &(u32, u64)| 3;
        for k in 0..4 {
            table.insert_unique(3, (k, 0), same_home);
        }
        assert_eq!(table.find(3, |e| e.0 == 3), Some(6));
        let mut moves = 0;
        for _ in 0..PROMOTE_EVERY {
            let (i, _) = table.find_mut(3, |e| e.0 == 3).unwrap();
            moves += usize::from(i == 3);
        }
        assert_eq!(moves, 1, "moved once, on the last of the lookups");
        for _ in 0..100 {
            assert_eq!(table.find_mut(3, |e| e.0 == 3).map(|(i, _)| i), Some(3));
        }
        for k in 0..4 {
            assert!(table.find(3, |e| e.0 == k).is_some(), "key {k}");
        }
    }

    #[test]
    fn stays_at_most_three_quarters_full() {
        let mut table: Table<u32> = Table::default();
        for k in 0..10_000u32 {
            table.insert_unique(u64::from(k), k, |e| u64::from(*e));
            assert!(table.len() * 4 <= table.slots.len() * 3, "at {k}");
        }
        assert_eq!(table.slots.len(), 16_384);
    }
}
