//! One policy's overrides, as lookups read them: exact keys in one hash
//! table, prefixes in another with the lengths present, and a bit filter
//! of both (`filter.rs`) asked before either is probed.
//!
//! A lookup hashes the key once for the exact table (foldhash) and once,
//! incrementally, for every prefix length: one pass over the key's bytes
//! up to the longest prefix, the hash taken at each length present and
//! tested against the filter. Only the lengths the filter lets through
//! are probed (longest first, with the hash already made), so a key that
//! no override matches costs that pass and a few bit tests, however many
//! overrides and prefix lengths there are, and nothing is allocated.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;

use super::filter::Filter;
use super::{Override, Selector};
use crate::algorithm::Algorithm;

/// One override as stored: the override, and its parameters applied to
/// the policy they were checked against.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) selector: Selector,
    pub(super) over: Override,
    /// The policy's algorithm `derived` was made from.
    pub(super) base: Algorithm,
    /// The override's parameters applied to `base` (for `Action::Limits`).
    pub(super) derived: Option<Algorithm>,
}

/// Prefix matches a lookup keeps from its pass over the key before
/// probing; more (nested prefixes all matching) takes the slow path.
const HITS: usize = 16;

/// One policy's overrides.
#[derive(Debug, Clone)]
pub(super) struct Table {
    exact: HashTable<Arc<Entry>>,
    prefixes: HashTable<Arc<Entry>>,
    /// The distinct lengths in `prefixes`, shortest first.
    lens: Vec<usize>,
    filter: Filter,
    /// The exact keys' hasher.
    state: foldhash::fast::RandomState,
    /// Where the prefixes' incremental hash starts.
    seed: u64,
}

impl Default for Table {
    fn default() -> Table {
        let state = foldhash::fast::RandomState::default();
        Table {
            exact: HashTable::new(),
            prefixes: HashTable::new(),
            lens: Vec::new(),
            filter: Filter::with_capacity(0),
            seed: state.hash_one(0x7011_6a7e_u64),
            state,
        }
    }
}

/// One byte into the prefixes' incremental hash (FNV-1a's step).
#[inline(always)]
fn step(h: u64, byte: u8) -> u64 {
    (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
}

/// The incremental hash at one length, mixed so that every bit of it
/// depends on every byte (a folded multiply).
#[inline(always)]
fn finish(h: u64) -> u64 {
    let m = u128::from(h) * 0x9e37_79b9_7f4a_7c15;
    (m as u64) ^ ((m >> 64) as u64)
}

impl Table {
    /// The override of `key`, unless it has ended by `now_ms` (read only
    /// when a match has an end): an exact one, else the longest prefix.
    #[inline]
    pub(super) fn lookup(&self, key: &[u8], now_ms: impl Fn() -> u64) -> Option<&Arc<Entry>> {
        let live = |e: &&Arc<Entry>| e.over.expires_at().is_none_or(|at| at > now_ms());
        if !self.exact.is_empty() {
            let h = self.state.hash_one(key);
            if self.filter.has(h)
                && let Some(e) = self
                    .exact
                    .find(h, |e| e.selector.bytes() == key)
                    .filter(live)
            {
                return Some(e);
            }
        }
        let mut hits = [(0usize, 0u64); HITS];
        let mut n = 0;
        let mut h = self.seed;
        let mut done = 0;
        for &len in &self.lens {
            let Some(more) = key.get(done..len) else {
                break;
            };
            h = more.iter().fold(h, |h, &b| step(h, b));
            done = len;
            let f = finish(h);
            if self.filter.has(f) {
                if n == HITS {
                    return self.longest_prefix_slow(key, live);
                }
                hits[n] = (len, f);
                n += 1;
            }
        }
        hits[..n].iter().rev().find_map(|&(len, f)| {
            self.prefixes
                .find(f, |e| e.selector.bytes() == &key[..len])
                .filter(live)
        })
    }

    /// The longest live prefix of `key`, every length probed.
    #[cold]
    fn longest_prefix_slow(
        &self,
        key: &[u8],
        live: impl Fn(&&Arc<Entry>) -> bool,
    ) -> Option<&Arc<Entry>> {
        self.lens.iter().rev().find_map(|&len| {
            let prefix = key.get(..len)?;
            self.prefixes
                .find(self.prefix_hash(prefix), |e| e.selector.bytes() == prefix)
                .filter(&live)
        })
    }

    fn prefix_hash(&self, prefix: &[u8]) -> u64 {
        finish(prefix.iter().fold(self.seed, |h, &b| step(h, b)))
    }

    /// The hash `selector` is stored under.
    fn hash(&self, selector: &Selector) -> u64 {
        if selector.is_prefix() {
            self.prefix_hash(selector.bytes())
        } else {
            self.state.hash_one(selector.bytes())
        }
    }

    pub(super) fn get(&self, selector: &Selector) -> Option<&Arc<Entry>> {
        self.map(selector.is_prefix())
            .find(self.hash(selector), |e| e.selector == *selector)
    }

    fn map(&self, prefix: bool) -> &HashTable<Arc<Entry>> {
        if prefix { &self.prefixes } else { &self.exact }
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let h = self.hash(&entry.selector);
        let entry = Arc::new(entry);
        let selector = &entry.selector;
        if selector.is_prefix() {
            let len = selector.bytes().len();
            if let Err(at) = self.lens.binary_search(&len) {
                self.lens.insert(at, len);
            }
        }
        let (seed, state) = (self.seed, self.state.clone());
        let rehash = |e: &Arc<Entry>| {
            let b = e.selector.bytes();
            if e.selector.is_prefix() {
                finish(b.iter().fold(seed, |h, &b| step(h, b)))
            } else {
                state.hash_one(b)
            }
        };
        let map = if selector.is_prefix() {
            &mut self.prefixes
        } else {
            &mut self.exact
        };
        match map.find_mut(h, |e| e.selector == entry.selector) {
            Some(old) => *old = entry,
            None => {
                map.insert_unique(h, entry, rehash);
            }
        }
        if self.len() > self.filter.capacity() {
            self.refilter();
        } else {
            self.filter.set(h);
        }
    }

    pub(super) fn remove(&mut self, selector: &Selector) -> Option<Arc<Entry>> {
        let h = self.hash(selector);
        let map = if selector.is_prefix() {
            &mut self.prefixes
        } else {
            &mut self.exact
        };
        let (removed, _) = map
            .find_entry(h, |e| e.selector == *selector)
            .ok()?
            .remove();
        self.relens();
        self.refilter();
        Some(removed)
    }

    pub(super) fn len(&self) -> usize {
        self.exact.len() + self.prefixes.len()
    }

    pub(super) fn entries(&self) -> impl Iterator<Item = &Arc<Entry>> {
        self.exact.iter().chain(self.prefixes.iter())
    }

    /// Drops the overrides that ended by `now_ms`: whether any did.
    pub(super) fn purge(&mut self, now_ms: u64) -> bool {
        let before = self.len();
        self.exact.retain(|e| !e.over.expired_at(now_ms));
        self.prefixes.retain(|e| !e.over.expired_at(now_ms));
        self.relens();
        self.refilter();
        self.len() != before
    }

    /// `lens` made again from `prefixes`.
    fn relens(&mut self) {
        let prefixes = &self.prefixes;
        self.lens
            .retain(|&l| prefixes.iter().any(|e| e.selector.bytes().len() == l));
    }

    /// The filter made again from every selector (sized for them).
    fn refilter(&mut self) {
        let mut filter = Filter::with_capacity(self.len() * 2);
        for e in self.entries() {
            filter.set(self.hash(&e.selector));
        }
        self.filter = filter;
    }
}
