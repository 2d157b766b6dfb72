//! One policy's overrides, as lookups read them: exact keys in one hash
//! map, prefixes in another with the lengths present, and bit filters
//! (`filter.rs`) asked before either map is probed.
//!
//! Every key an override matches starts with that selector's first
//! `lead` bytes, `lead` being the shortest selector's length; a first
//! filter of those leads turns away most keys that match nothing (most
//! traffic) with one test, whatever the number of prefix lengths.
//!
//! The filter's hash of a key's first `len` bytes is cheap at every
//! length: it folds the key's first 8 bytes, the 8 ending at `len`, and
//! `len` (bytes in between are left out, which only makes false positives
//! likelier for selectors that differ only there). A lookup tests the
//! exact key, then each prefix length present (a few, in practice:
//! prefixes such as `trial_` or `org-42:` come in a handful of lengths
//! however many there are), and probes a map (foldhash, the whole
//! selector) only where the filter lets it through, longest prefix
//! first. A key that no override matches, most traffic, costs a few
//! instructions per length and no probe; nothing is allocated.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashMap;

use super::filter::Filter;
use super::{Override, Selector};
use crate::Policy;
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
    /// The build of the policy it was checked against
    /// ([`Policy::build`]).
    pub(super) build: u64,
    /// The policy that decides under it (for `Action::Limits` and
    /// `Action::Tier`), made from that build once, so that a request under
    /// it clones no policy.
    pub(super) decides: Option<Arc<Policy>>,
}

type Map = HashMap<Arc<[u8]>, Arc<Entry>, foldhash::fast::RandomState>;

/// One policy's overrides.
#[derive(Debug, Clone)]
pub(super) struct Table {
    exact: Map,
    prefixes: Map,
    /// The distinct lengths in `prefixes`, longest first.
    lens: Vec<usize>,
    /// Every selector's [`sketch`], so that most keys probe no map.
    filter: Filter,
    /// The shortest selector's length (`usize::MAX` for none).
    lead: usize,
    /// The sketch of every selector's first `lead` bytes: a key whose
    /// first `lead` bytes are not there matches nothing.
    leads: Filter,
    /// Where every sketch starts (random, per table).
    seed: u64,
}

impl Default for Table {
    fn default() -> Table {
        Table {
            exact: Map::default(),
            prefixes: Map::default(),
            lens: Vec::new(),
            filter: Filter::with_capacity(0),
            lead: usize::MAX,
            leads: Filter::with_capacity(0),
            seed: foldhash::fast::RandomState::default().hash_one(0x7011_6a7e_u64),
        }
    }
}

/// The 8 bytes of `b` at `at` (`at + 8 <= b.len()`), little-endian.
#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The first `len` (< 8) bytes of `b`, little-endian, zero-extended.
#[inline(always)]
fn short(b: &[u8], len: usize) -> u64 {
    if b.len() >= 8 {
        word(b, 0) & (u64::MAX >> (64 - 8 * len))
    } else {
        let mut w = [0; 8];
        w[..len].copy_from_slice(&b[..len]);
        u64::from_le_bytes(w)
    }
}

/// Folds `a` and `b`: their 128-bit product's halves xored.
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

const PREFIX: u64 = 0xc2b2_ae3d_27d4_eb4f;
const EXACT: u64 = 0x1656_67b1_9e37_79f9;
const LEAD: u64 = 0x27d4_eb2f_1656_67c5;

/// The filter's hash of `key`'s first `len` bytes (`len <= key.len()`),
/// `kind` telling a prefix from an exact key: its first 8 bytes, the 8
/// ending at `len`, and `len`, folded.
#[inline(always)]
fn sketch(seed: u64, key: &[u8], len: usize, kind: u64) -> u64 {
    let (first, last) = if len >= 8 {
        (word(key, 0), word(key, len - 8))
    } else {
        (short(key, len), 0)
    };
    fold(
        first ^ seed,
        fold(last ^ kind, len as u64 ^ 0x9e37_79b9_7f4a_7c15),
    )
}

impl Table {
    /// The override of `key`, unless it has ended by `now_ms` (read only
    /// when a match has an end): an exact one, else the longest prefix.
    #[inline(always)]
    pub(super) fn lookup(&self, key: &[u8], now_ms: impl Fn() -> u64) -> Option<&Arc<Entry>> {
        if key.len() < self.lead || !self.leads.has(sketch(self.seed, key, self.lead, LEAD)) {
            return None;
        }
        let live = |e: &&Arc<Entry>| e.over.expires_at().is_none_or(|at| at > now_ms());
        if !self.exact.is_empty()
            && self.filter.has(sketch(self.seed, key, key.len(), EXACT))
            && let Some(e) = self.exact.get(key).filter(live)
        {
            return Some(e);
        }
        for &len in &self.lens {
            if len <= key.len()
                && self.filter.has(sketch(self.seed, key, len, PREFIX))
                && let Some(e) = self.prefixes.get(&key[..len]).filter(live)
            {
                return Some(e);
            }
        }
        None
    }

    /// The sketch `selector` is filtered under.
    fn sketch(&self, selector: &Selector) -> u64 {
        let (b, kind) = (
            selector.bytes(),
            if selector.is_prefix() { PREFIX } else { EXACT },
        );
        sketch(self.seed, b, b.len(), kind)
    }

    pub(super) fn get(&self, selector: &Selector) -> Option<&Arc<Entry>> {
        self.map(selector.is_prefix()).get(selector.bytes())
    }

    fn map(&self, prefix: bool) -> &Map {
        if prefix { &self.prefixes } else { &self.exact }
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let key = entry.selector.shared_bytes().clone();
        let len = key.len();
        if entry.selector.is_prefix() && !self.lens.contains(&len) {
            self.lens.push(len);
            self.lens.sort_unstable_by(|a, b| b.cmp(a));
        }
        let h = self.sketch(&entry.selector);
        // A selector shorter than the lead changes every selector's lead.
        let lead = (len >= self.lead).then(|| sketch(self.seed, &key, self.lead, LEAD));
        let map = if entry.selector.is_prefix() {
            &mut self.prefixes
        } else {
            &mut self.exact
        };
        map.insert(key, Arc::new(entry));
        match lead {
            Some(lead) if self.len() <= self.filter.capacity() => {
                self.filter.set(h);
                self.leads.set(lead);
            }
            _ => self.refilter(),
        }
    }

    pub(super) fn remove(&mut self, selector: &Selector) -> Option<Arc<Entry>> {
        let removed = if selector.is_prefix() {
            let removed = self.prefixes.remove(selector.bytes())?;
            let len = selector.bytes().len();
            if !self.prefixes.keys().any(|k| k.len() == len) {
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
        self.exact.values().chain(self.prefixes.values())
    }

    /// Drops the overrides that ended by `now_ms`: whether any did.
    pub(super) fn purge(&mut self, now_ms: u64) -> bool {
        let before = self.len();
        self.exact.retain(|_, e| !e.over.expired_at(now_ms));
        self.prefixes.retain(|_, e| !e.over.expired_at(now_ms));
        let prefixes = &self.prefixes;
        self.lens.retain(|&l| prefixes.keys().any(|k| k.len() == l));
        self.refilter();
        self.len() != before
    }

    /// The filters made again from every selector (sized for them).
    fn refilter(&mut self) {
        let mut filter = Filter::with_capacity(self.len() * 2);
        let mut leads = Filter::with_capacity(self.len() * 2);
        let lead = self.entries().map(|e| e.selector.bytes().len()).min();
        let lead = lead.unwrap_or(usize::MAX);
        for e in self.entries() {
            filter.set(self.sketch(&e.selector));
            leads.set(sketch(self.seed, e.selector.bytes(), lead, LEAD));
        }
        (self.filter, self.leads, self.lead) = (filter, leads, lead);
    }
}
