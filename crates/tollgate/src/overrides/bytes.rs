//! The bytes of keys and selectors as lookups read them: the filters'
//! hashes ([`sketch`]), cheap at every length of a key's start, and a
//! comparison of short keys a word at a time ([`same`]).
//!
//! A sketch of a key's first `len` bytes folds, up to 8, those bytes with
//! `len` and a kind once; longer, its first 8 bytes and the 8 ending at
//! `len` twice (bytes in between are left out, which only makes a
//! filter's false positives likelier for selectors that differ only
//! there: a false positive costs a map probe, never a wrong answer). Up
//! to 16 bytes it reads every byte: the maps (`map.rs`) hash by it.

/// The 8 bytes of `b` at `at` (`at + 8 <= b.len()`), little-endian.
#[inline(always)]
pub(super) fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The first `len` (< 8) bytes of `b` in a word that only they decide
/// (two 4-byte loads that may overlap, or three single bytes): no copy of
/// a length known only at run time.
#[inline(always)]
pub(super) fn short(b: &[u8], len: usize) -> u64 {
    let b = &b[..len];
    match len {
        0 => 0,
        1..=3 => u64::from(b[0]) | u64::from(b[len / 2]) << 8 | u64::from(b[len - 1]) << 16,
        _ => u64::from(half(b, 0)) | u64::from(half(b, len - 4)) << 32,
    }
}

/// The 4 bytes of `b` at `at` (`at + 4 <= b.len()`), little-endian.
#[inline(always)]
pub(super) fn half(b: &[u8], at: usize) -> u32 {
    let mut w = [0; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

/// Whether `a` and `b` are the same bytes: short ones (up to 16, most
/// keys) compared a word or two at a time, with no call.
#[inline(always)]
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    n == b.len()
        && match n {
            4..8 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
            8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
            _ => a == b,
        }
}

/// Folds `a` and `b`: their 128-bit product's halves xored.
#[inline(always)]
pub(super) fn fold(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

pub(super) const PREFIX: u64 = 0xc2b2_ae3d_27d4_eb4f;
pub(super) const EXACT: u64 = 0x1656_67b1_9e37_79f9;

/// The filter's hash of `key`'s first `len` bytes (`len <= key.len()`),
/// `kind` telling a prefix from an exact key: up to 8 bytes folded with
/// `kind` and `len` once; longer, the first 8 and the 8 ending at `len`,
/// folded twice.
#[inline(always)]
pub(super) fn sketch(seed: u64, key: &[u8], len: usize, kind: u64) -> u64 {
    let tag = kind ^ (len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    match len {
        0..8 => fold(short(key, len) ^ seed, tag),
        8 => fold(word(key, 0) ^ seed, tag),
        _ => fold(word(key, 0) ^ seed, fold(word(key, len - 8) ^ tag, tag)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_differing_anywhere_are_not_the_same_and_sketch_apart() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same(&a, &a.clone()), "{n}");
            assert!(!same(&a, &a[..n.saturating_sub(1)]) || n == 0, "{n}");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x20;
                assert!(!same(&a, &b), "{n} at {i}");
                if n < 8 {
                    // A short sketch reads every byte of its first `n`
                    // up to 3 (and for 4 to 7, all of them).
                    let reads_it = n >= 4 || i == 0 || i == n / 2 || i == n - 1;
                    assert_eq!(short(&a, n) != short(&b, n), reads_it, "{n} at {i}");
                }
            }
            // A sketch depends on the first `n` bytes only.
            let mut longer = a.clone();
            longer.extend_from_slice(b"tail");
            assert_eq!(sketch(7, &a, n, EXACT), sketch(7, &longer, n, EXACT), "{n}");
        }
    }
}
