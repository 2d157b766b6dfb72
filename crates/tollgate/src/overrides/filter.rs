//! A bit filter of one policy's selectors, asked before its hash tables so
//! that a key no override matches (most traffic) costs a pass over the
//! key's bytes and a few bit tests, not a probe per prefix length.
//!
//! Two bits per selector, from one 64-bit hash; about 16 bits per
//! selector, so that about one key in seventy that matches nothing still
//! probes a table (a false positive costs a probe, never a wrong answer).

/// The bits of every selector's hash; never misses one that was set.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    words: Box<[u64]>,
    /// The number of bits, less one (a power of two, less one).
    mask: u64,
}

/// Bits per selector the filter is sized for.
const BITS_PER_SELECTOR: usize = 16;

impl Filter {
    /// A filter sized for `selectors` of them.
    pub(super) fn with_capacity(selectors: usize) -> Filter {
        let bits = (selectors.max(4) * BITS_PER_SELECTOR).next_power_of_two();
        Filter {
            words: vec![0; bits / 64].into_boxed_slice(),
            mask: bits as u64 - 1,
        }
    }

    /// How many selectors it was sized for.
    pub(super) fn capacity(&self) -> usize {
        (self.mask as usize + 1) / BITS_PER_SELECTOR
    }

    pub(super) fn set(&mut self, hash: u64) {
        for bit in self.bits(hash) {
            self.words[(bit / 64) as usize] |= 1 << (bit % 64);
        }
    }

    /// Whether `hash` may have been set (it was, unless a false positive).
    #[inline]
    pub(super) fn has(&self, hash: u64) -> bool {
        self.bits(hash)
            .iter()
            .all(|&bit| self.words[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
    }

    #[inline]
    fn bits(&self, hash: u64) -> [u64; 2] {
        [hash & self.mask, (hash >> 40) & self.mask]
    }
}
