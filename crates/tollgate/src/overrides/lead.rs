//! The first test of a lookup: every key an override matches starts
//! with that selector's first `len` bytes, `len` being the shortest
//! selector's length, so a filter of those leads turns away most keys
//! that match nothing (most traffic) with one test, however many prefix
//! lengths there are. Up to 8 bytes, a lead is one masked load of the
//! key (a copy for a key under 8 bytes) folded once.

use super::bytes::{fold, sketch, word};
use super::filter::Filter;

const LEAD: u64 = 0x27d4_eb2f_1656_67c5;

/// The leads of one table's selectors.
#[derive(Debug, Clone)]
pub(super) struct Lead {
    /// The shortest selector's length (`usize::MAX` for none).
    len: usize,
    /// For `len <= 8`, the mask of a word's first `len` bytes.
    mask: u64,
    /// What a lead is folded with (its length's).
    tag: u64,
    filter: Filter,
}

impl Lead {
    /// Leads of `len` bytes, for `selectors` of them.
    pub(super) fn new(len: usize, selectors: usize) -> Lead {
        Lead {
            len,
            mask: match len {
                1..8 => u64::MAX >> (64 - 8 * len),
                _ => u64::MAX,
            },
            tag: LEAD ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            filter: Filter::with_capacity(selectors),
        }
    }

    /// The leads' length.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The sketch of `key`'s lead (`key` at least `len` long).
    #[inline(always)]
    fn sketch(&self, seed: u64, key: &[u8]) -> u64 {
        if self.len > 8 {
            return sketch(seed, key, self.len, LEAD);
        }
        let first = if key.len() >= 8 {
            word(key, 0) & self.mask
        } else {
            let mut w = [0; 8];
            w[..self.len].copy_from_slice(&key[..self.len]);
            u64::from_le_bytes(w)
        };
        fold(first ^ seed, self.tag)
    }

    /// Adds `selector`'s lead (`selector` at least `len` long).
    pub(super) fn set(&mut self, seed: u64, selector: &[u8]) {
        let h = self.sketch(seed, selector);
        self.filter.set(h);
    }

    /// Whether a selector may match `key` (never false when one does).
    #[inline(always)]
    pub(super) fn admits(&self, seed: u64, key: &[u8]) -> bool {
        key.len() >= self.len && self.filter.has(self.sketch(seed, key))
    }
}
