//! A bit filter of one policy's selectors, asked before its hash tables so
//! that a key no override matches (most traffic) costs a few bit tests,
//! not a probe per prefix length.
//!
//! Two bits per selector, both in one 64-bit word chosen by the hash (one
//! load per test), about 16 bits per selector: about one key in fifty
//! that matches nothing still probes a table (a false positive costs a
//! probe, never a wrong answer). The leads' filter (`lead.rs`) sets and
//! tests one bit per hash instead: half the work, asked of every key.

/// The bits of every selector's hash; never misses one that was set.
#[derive(Debug, Clone)]
pub(super) struct Filter {
    words: Box<[u64]>,
    /// The number of words, less one (a power of two, less one).
    mask: u64,
}

/// Bits per selector the filter is sized for.
const BITS_PER_SELECTOR: usize = 16;

impl Filter {
    /// A filter sized for `selectors` of them.
    pub(super) fn with_capacity(selectors: usize) -> Filter {
        Filter::with_bits(selectors.max(4) * BITS_PER_SELECTOR)
    }

    /// A filter of at least `bits` bits (a power of two words).
    pub(super) fn with_bits(bits: usize) -> Filter {
        let words = bits.div_ceil(64).max(1).next_power_of_two();
        Filter {
            words: vec![0; words].into_boxed_slice(),
            mask: words as u64 - 1,
        }
    }

    /// How many bits it has.
    pub(super) fn bits(&self) -> usize {
        (self.mask as usize + 1) * 64
    }

    /// How many selectors it was sized for.
    pub(super) fn capacity(&self) -> usize {
        self.bits() / BITS_PER_SELECTOR
    }

    pub(super) fn set(&mut self, hash: u64) {
        let (at, bits) = self.place(hash);
        self.words[at] |= bits;
    }

    /// Whether `hash` may have been set (it was, unless a false positive).
    #[inline]
    pub(super) fn has(&self, hash: u64) -> bool {
        let (at, bits) = self.place(hash);
        self.words.get(at).is_some_and(|w| w & bits == bits)
    }

    /// Sets `hash`'s one bit (in a filter asked with [`Filter::has_bit`]
    /// only): half the work of a test, for twice the false positives at
    /// the same size.
    pub(super) fn set_bit(&mut self, hash: u64) {
        let (at, bit) = self.bit(hash);
        self.words[at] |= bit;
    }

    /// Whether `hash`'s one bit is set (see [`Filter::set_bit`]).
    #[inline]
    pub(super) fn has_bit(&self, hash: u64) -> bool {
        let (at, bit) = self.bit(hash);
        self.words.get(at).is_some_and(|w| w & bit != 0)
    }

    /// The word of `hash` and its one bit there.
    #[inline]
    fn bit(&self, hash: u64) -> (usize, u64) {
        (((hash >> 6) & self.mask) as usize, 1 << (hash & 63))
    }

    /// The word of `hash` and its two bits there (from the hash's low
    /// bits and its top twelve, apart).
    #[inline]
    fn place(&self, hash: u64) -> (usize, u64) {
        let bits = (1 << (hash >> 58)) | (1 << ((hash >> 52) & 63));
        ((hash & self.mask) as usize, bits)
    }
}
