//! One policy's overrides, as lookups read them: exact keys in one hash
//! map (`map.rs`), prefixes in another with the lengths present, and bit
//! filters (`filter.rs`, `lead.rs`) asked before the maps are probed.
//!
//! A lookup tests the key's lead first (`lead.rs`: one test turns away
//! most keys that match nothing), then, if an exact selector has the
//! key's length (one bit test), probes the exact map at once (a miss
//! there reads one slot, as a filter's test would; a key past 16 bytes,
//! hashed whole for its probe, asks the filter first), then tests each
//! prefix length present (a few, in practice: prefixes such as `trial_`
//! or `org-42:` come in a handful of lengths however many there are) and
//! probes the prefix map only where the prefixes' filter lets it through,
//! longest prefix first (the filters' hashes are `bytes.rs`'s sketches).
//! A key that no override matches, most traffic, costs one test, or a few
//! per length, and no probe; nothing is allocated.

use std::hash::BuildHasher;
use std::sync::Arc;

use super::Selector;
use super::bytes::{EXACT, PREFIX, sketch};
use super::filter::Filter;
use super::lead::Lead;
use super::map::{Map, SKETCHED};
use super::stored::Entry;

/// One policy's overrides.
#[derive(Debug, Clone)]
pub(super) struct Table {
    exact: Map,
    prefixes: Map,
    /// The distinct lengths in `prefixes`, longest first.
    lens: Vec<usize>,
    /// The [`sketch`] of every prefix and of every exact key longer than
    /// [`SKETCHED`], so that most prefix lengths and long keys probe no
    /// map (a shorter key probes the exact map at once: see
    /// [`Table::lookup`]).
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
            lead: Lead::new(usize::MAX),
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
        // A key of up to 16 bytes probes the exact map at once, with its
        // sketch: a probe that misses reads one slot, no more than the
        // filter's test would, and a hit is spared that test (and its
        // cache line). A longer one is hashed whole for its probe, so the
        // filter (which holds the longer selectors' sketches) is asked
        // first.
        if self.exact.may_hold_len(key.len()) {
            let h = sketch(self.seed, key, key.len(), EXACT);
            if (key.len() <= SKETCHED || self.filter.has(h))
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

    fn map_mut(&mut self, prefix: bool) -> &mut Map {
        if prefix {
            &mut self.prefixes
        } else {
            &mut self.exact
        }
    }

    pub(super) fn insert(&mut self, entry: Entry) {
        let bytes = entry.selector.shared_bytes().clone();
        let len = bytes.len();
        if entry.selector.is_prefix() && !self.lens.contains(&len) {
            self.lens.push(len);
            self.lens.sort_unstable_by(|a, b| b.cmp(a));
        }
        let prefix = entry.selector.is_prefix();
        let h = self.sketch(&entry.selector);
        // A selector shorter than the lead changes every selector's lead.
        let fits = len >= self.lead.len();
        self.map_mut(prefix).insert(Arc::new(entry));
        if fits && self.len() <= self.filter.capacity() {
            if filtered(prefix, len) {
                self.filter.set(h);
            }
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
        let mut lead = Lead::new(shortest.unwrap_or(usize::MAX));
        for e in self.entries() {
            let selector = &e.selector;
            if filtered(selector.is_prefix(), selector.bytes().len()) {
                filter.set(self.sketch(selector));
            }
            lead.set(self.seed, selector.bytes());
        }
        (self.filter, self.lead) = (filter, lead);
    }
}

/// Whether a selector's sketch goes in the table's filter: a prefix's, or
/// an exact key's that is too long to be probed by its sketch.
fn filtered(prefix: bool, len: usize) -> bool {
    prefix || len > SKETCHED
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::Policy;
    use crate::overrides::{Override, checked};

    fn add(table: &mut Table, policy: &Policy, selector: &str) {
        let selector = Selector::parse(selector.as_bytes()).unwrap();
        table.insert(checked(policy, selector, Override::block()).unwrap());
    }

    fn found(table: &Table, key: &str) -> Option<String> {
        table
            .lookup(key.as_bytes(), || 0)
            .map(|e| e.selector.to_string())
    }

    #[test]
    fn the_lead_filter_is_sized_by_distinct_leads_and_misses_no_selector() {
        let p = Policy::fixed_window("api", 10, Duration::from_secs(1)).unwrap();
        let mut t = Table::default();
        // 10,000 selectors of two shapes, the shortest 6 bytes
        // (`cust-0`): 11 leads, `cust-0` to `cust-9` and `tenant`.
        for i in 0..5_000 {
            add(&mut t, &p, &format!("cust-{i}"));
            add(&mut t, &p, &format!("tenant{i}_*"));
        }
        assert_eq!(t.lead.len(), 6);
        assert!(t.lead.bits() <= 1_024, "{} bits", t.lead.bits());
        for i in (0..5_000).step_by(7) {
            assert_eq!(found(&t, &format!("cust-{i}")), Some(format!("cust-{i}")));
            let key = format!("tenant{i}_x");
            assert_eq!(found(&t, &key), Some(format!("tenant{i}_*")));
        }
        assert_eq!(found(&t, "user-1"), None);

        // Many distinct leads grow the filter as they come, and keep the
        // keys that match nothing mostly turned away by it.
        for i in 0..500 {
            add(
                &mut t,
                &p,
                &format!("{:08x}-k", i * 2_654_435_761_u64 % (1 << 32)),
            );
        }
        assert!(t.lead.bits() >= 500 * 32, "{} bits", t.lead.bits());
        for i in (0..500).step_by(11) {
            let s = format!("{:08x}-k", i * 2_654_435_761_u64 % (1 << 32));
            assert_eq!(found(&t, &s), Some(s.clone()));
        }
        // 10,000 keys of 10,000 distinct leads (their first 6 bytes): the
        // share turned away is then measured over independent tests (with
        // `zz` first, the keys had 1,000 leads, each counted ten times, and
        // the share swung with the table's random seed: 7% once).
        let admitted = (0..10_000)
            .filter(|i| t.lead.admits(t.seed, format!("{i:06}zz").as_bytes()))
            .count();
        assert!(admitted < 10_000 / 16, "{admitted} of 10,000 admitted");

        // Removing every selector of many leads shrinks it again, and the
        // others are still found.
        for i in 0..500 {
            let s = format!("{:08x}-k", i * 2_654_435_761_u64 % (1 << 32));
            assert!(t.remove(&Selector::parse(s.as_bytes()).unwrap()).is_some());
        }
        assert!(t.lead.bits() <= 1_024, "{} bits", t.lead.bits());
        assert_eq!(found(&t, "cust-4999"), Some("cust-4999".into()));
        assert_eq!(found(&t, "tenant17_"), Some("tenant17_*".into()));
    }
}
