//! One policy's overrides, as lookups read them: exact keys in one hash
//! map, prefixes in another with the lengths present, and bit filters
//! (`filter.rs`) asked before either map is probed.
//!
//! A lookup tests the key's lead first (`lead.rs`: one test turns away
//! most keys that match nothing), then the exact key, then each prefix length present (a few, in practice:
//! prefixes such as `trial_` or `org-42:` come in a handful of lengths
//! however many there are), and probes a map (foldhash, the whole
//! selector) only where the filter lets it through, longest prefix
//! first (the filters' hashes are `bytes.rs`'s sketches). A key that no
//! override matches, most traffic, costs one test, or a few per length,
//! and no probe; nothing is allocated.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::Selector;
use super::bytes::{EXACT, PREFIX, sketch};
use super::filter::Filter;
use super::lead::Lead;
use super::map::Map;
use super::stored::Entry;

/// One policy's overrides.
#[derive(Debug, Clone)]
pub(super) struct Table {
    exact: Map,
    prefixes: Map,
    /// The distinct lengths in `prefixes`, longest first.
    lens: Vec<usize>,
    /// Every selector's [`sketch`], so that most keys probe no map.
    filter: Filter,
    /// Every selector's first bytes, as many as the shortest has.
    lead: Lead,
    /// Where every sketch starts (random, per table).
    seed: u64,
}

impl Default for Table {
    fn default() -> Table {
        let seed = foldhash::fast::RandomState::default().hash_one(0x7011_6a7e_u64);
        Table {
            exact: Map::new(seed, EXACT),
            prefixes: Map::new(seed, PREFIX),
            lens: Vec::new(),
            filter: Filter::with_capacity(0),
            lead: Lead::new(usize::MAX, 0),
            seed,
        }
    }
}

impl Table {
    /// The override of `key`, unless it has ended by `now_ms` (read only
    /// when a match has an end): an exact one, else the longest prefix.
    #[inline(always)]
    pub(super) fn lookup(&self, key: &[u8], now_ms: impl Fn() -> u64) -> Option<&Arc<Entry>> {
        if !self.lead.admits(self.seed, key) {
            return None;
        }
        let live = |e: &&Arc<Entry>| e.over.expires_at().is_none_or(|at| at > now_ms());
        if !self.exact.is_empty() {
            let h = sketch(self.seed, key, key.len(), EXACT);
            if self.filter.has(h)
                && let Some(e) = self.exact.find(key, h).filter(live)
            {
                return Some(e);
            }
        }
        for &len in &self.lens {
            if len > key.len() {
                continue;
            }
            let h = sketch(self.seed, key, len, PREFIX);
            if self.filter.has(h)
                && let Some(e) = self.prefixes.find(&key[..len], h).filter(live)
            {
                return Some(e);
            }
        }
        None
    }

    /// The sketch `selector` is filtered under.
    fn sketch(&self, selector: &Selector) -> u64 {
        self.map(selector.is_prefix()).sketch(selector.bytes())
    }

    pub(super) fn get(&self, selector: &Selector) -> Option<&Arc<Entry>> {
        self.map(selector.is_prefix()).get(selector.bytes())
    }

    fn map(&self, prefix: bool) -> &Map {
        if prefix { &self.prefixes } else { &self.exact }
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let bytes = entry.selector.shared_bytes().clone();
        let len = bytes.len();
        if entry.selector.is_prefix() && !self.lens.contains(&len) {
            self.lens.push(len);
            self.lens.sort_unstable_by(|a, b| b.cmp(a));
        }
        let h = self.sketch(&entry.selector);
        // A selector shorter than the lead changes every selector's lead.
        let fits = len >= self.lead.len();
        let map = if entry.selector.is_prefix() {
            &mut self.prefixes
        } else {
            &mut self.exact
        };
        map.insert(Arc::new(entry));
        if fits && self.len() <= self.filter.capacity() {
            self.filter.set(h);
            self.lead.set(self.seed, &bytes);
        } else {
            self.refilter();
        }
    }

    pub(super) fn remove(&mut self, selector: &Selector) -> Option<Arc<Entry>> {
        let removed = if selector.is_prefix() {
            let removed = self.prefixes.remove(selector.bytes())?;
            let len = selector.bytes().len();
            if !self
                .prefixes
                .iter()
                .any(|e| e.selector.bytes().len() == len)
            {
                self.lens.retain(|&l| l != len);
            }
            removed
        } else {
            self.exact.remove(selector.bytes())?
        };
        self.refilter();
        Some(removed)
    }

    pub(super) fn len(&self) -> usize {
        self.exact.len() + self.prefixes.len()
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.exact.iter().chain(self.prefixes.iter())
    }

    /// Replaces each entry `f` gives another for (the same selector).
    pub(super) fn rebuild(&mut self, f: impl Fn(&Entry) -> Option<Entry>) {
        for e in self.exact.iter_mut().chain(self.prefixes.iter_mut()) {
            if let Some(new) = f(e) {
                *e = Arc::new(new);
            }
        }
    }

    /// Drops the overrides that ended by `now_ms`: whether any did.
    pub(super) fn purge(&mut self, now_ms: u64) -> bool {
        let before = self.len();
        self.exact.retain(|e| !e.over.expired_at(now_ms));
        self.prefixes.retain(|e| !e.over.expired_at(now_ms));
        let prefixes = &self.prefixes;
        self.lens
            .retain(|&l| prefixes.iter().any(|e| e.selector.bytes().len() == l));
        self.refilter();
        self.len() != before
    }

    /// The filters made again from every selector (sized for them).
    fn refilter(&mut self) {
        let mut filter = Filter::with_capacity(self.len() * 2);
        let shortest = self.entries().map(|e| e.selector.bytes().len()).min();
        let mut lead = Lead::new(shortest.unwrap_or(usize::MAX), self.len() * 2);
        for e in self.entries() {
            filter.set(self.sketch(&e.selector));
            lead.set(self.seed, e.selector.bytes());
        }
        (self.filter, self.lead) = (filter, lead);
    }
}
