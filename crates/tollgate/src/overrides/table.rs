//! One policy's overrides, as lookups read them: exact keys in one hash
//! map, prefixes in another with the lengths present, longest first, so a
//! lookup is one probe per distinct prefix length (a few, in practice:
//! prefixes such as `trial_` or `org-42:` come in a handful of lengths
//! however many there are) and allocates nothing.

use std::sync::Arc;

use hashbrown::HashMap;

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

type Map = HashMap<Arc<[u8]>, Arc<Entry>, foldhash::fast::RandomState>;

/// One policy's overrides.
#[derive(Debug, Clone, Default)]
pub(super) struct Table {
    exact: Map,
    prefixes: Map,
    /// The distinct lengths in `prefixes`, longest first.
    lens: Vec<usize>,
}

impl Table {
    /// The override of `key`, unless it has ended by `now_ms` (read only
    /// when a match has an end): an exact one, else the longest prefix.
    #[inline]
    pub(super) fn lookup(&self, key: &[u8], now_ms: impl Fn() -> u64) -> Option<&Arc<Entry>> {
        let live = |e: &&Arc<Entry>| e.over.expires_at().is_none_or(|at| at > now_ms());
        if let Some(e) = self.exact.get(key).filter(live) {
            return Some(e);
        }
        for &len in &self.lens {
            if len <= key.len()
                && let Some(e) = self.prefixes.get(&key[..len]).filter(live)
            {
                return Some(e);
            }
        }
        None
    }

    pub(super) fn get(&self, selector: &Selector) -> Option<&Arc<Entry>> {
        self.map(selector.is_prefix()).get(selector.bytes())
    }

    fn map(&self, prefix: bool) -> &Map {
        if prefix { &self.prefixes } else { &self.exact }
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let key = entry.selector.shared_bytes().clone();
        if entry.selector.is_prefix() {
            let len = key.len();
            if !self.lens.contains(&len) {
                self.lens.push(len);
                self.lens.sort_unstable_by(|a, b| b.cmp(a));
            }
            self.prefixes.insert(key, Arc::new(entry));
        } else {
            self.exact.insert(key, Arc::new(entry));
        }
    }

    pub(super) fn remove(&mut self, selector: &Selector) -> Option<Arc<Entry>> {
        if !selector.is_prefix() {
            return self.exact.remove(selector.bytes());
        }
        let removed = self.prefixes.remove(selector.bytes())?;
        let len = selector.bytes().len();
        if !self.prefixes.keys().any(|k| k.len() == len) {
            self.lens.retain(|&l| l != len);
        }
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
        self.len() != before
    }
}
