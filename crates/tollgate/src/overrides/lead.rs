//! The first test of a lookup: every key an override matches starts
//! with that selector's first `len` bytes, `len` being the shortest
//! selector's length (8 at most), so a filter of those leads turns away
//! most keys that match nothing (most traffic) with one test, however
//! many prefix lengths there are. A lead is one masked load of the key
//! (two that may overlap, for a key under 8 bytes), folded once.
//!
//! The filter is sized by the number of distinct leads, not of
//! selectors: selectors an operator writes share their first bytes
//! (`cust-42`, `tenant7_*`), so 10,000 of them may have a dozen leads, a
//! filter of a cache line or two that stays in L1, where one sized for
//! every selector (64 KB for 10,000) costs every key a load from beyond
//! it.

use hashbrown::HashSet;

use super::bytes::{fold, half, word};
use super::filter::Filter;

const LEAD: u64 = 0x27d4_eb2f_1656_67c5;

/// Bits of filter per distinct lead, at least: one is set, so at most 1
/// in 32 keys that match nothing passes (as the table's other filter).
const BITS_PER_LEAD: usize = 32;

/// The leads of one table's selectors.
#[derive(Debug, Clone)]
pub(super) struct Lead {
    /// The shortest selector's length, 8 at most (`usize::MAX` for no
    /// selector).
    len: usize,
    /// The mask of a word's first `len` bytes.
    mask: u64,
    /// What a lead is folded with (its length's).
    tag: u64,
    filter: Filter,
    /// The distinct leads (masked, unhashed), which size `filter`.
    leads: HashSet<u64>,
}

impl Lead {
    /// Leads of `shortest` bytes (8 at most), none yet.
    pub(super) fn new(shortest: usize) -> Lead {
        let len = if shortest == usize::MAX {
            shortest
        } else {
            shortest.min(8)
        };
        Lead {
            len,
            mask: match len {
                1..8 => u64::MAX >> (64 - 8 * len),
                _ => u64::MAX,
            },
            tag: LEAD ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            filter: Filter::with_bits(BITS_PER_LEAD),
            leads: HashSet::new(),
        }
    }

    /// The leads' length.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The sketch of `key`'s lead (`key` at least `len` long).
    #[inline(always)]
    fn sketch(&self, seed: u64, key: &[u8]) -> u64 {
        fold((first_bytes(key) & self.mask) ^ seed, self.tag)
    }

    /// Adds `selector`'s lead (`selector` at least `len` long); the filter
    /// is made again, twice the size, when the leads outgrow it.
    pub(super) fn set(&mut self, seed: u64, selector: &[u8]) {
        if !self.leads.insert(first_bytes(selector) & self.mask) {
            return;
        }
        if self.leads.len() * BITS_PER_LEAD > self.filter.bits() {
            // Twice what they need, so that growing costs each lead a
            // few sets in all.
            self.filter = Filter::with_bits(self.leads.len() * BITS_PER_LEAD * 2);
            for &lead in &self.leads {
                self.filter.set_bit(fold(lead ^ seed, self.tag));
            }
        } else {
            self.filter.set_bit(self.sketch(seed, selector));
        }
    }

    /// How many bits the filter has (what a lookup's test may touch).
    #[cfg(test)]
    pub(super) fn bits(&self) -> usize {
        self.filter.bits()
    }

    /// Whether a selector may match `key` (never false when one does).
    #[inline(always)]
    pub(super) fn admits(&self, seed: u64, key: &[u8]) -> bool {
        key.len() >= self.len && self.filter.has_bit(self.sketch(seed, key))
    }
}

/// `key`'s first 8 bytes, little-endian, zero-extended if it is shorter:
/// one load, two that may overlap, or up to three bytes, and no call.
#[inline(always)]
fn first_bytes(key: &[u8]) -> u64 {
    let k = key.len();
    match k {
        8.. => word(key, 0),
        4..8 => u64::from(half(key, 0)) | u64::from(half(key, k - 4)) << (8 * (k - 4)),
        1..4 => {
            u64::from(key[0])
                | u64::from(key[k / 2]) << (8 * (k / 2))
                | u64::from(key[k - 1]) << (8 * (k - 1))
        }
        0 => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_shorter_than_a_word_reads_as_its_bytes_zero_extended() {
        let key = b"abcdefghij";
        for k in 0..=10 {
            let mut w = [0; 8];
            let n = k.min(8);
            w[..n].copy_from_slice(&key[..n]);
            assert_eq!(first_bytes(&key[..k]), u64::from_le_bytes(w), "{k}");
        }
    }
}
