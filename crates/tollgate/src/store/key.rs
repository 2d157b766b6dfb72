//! A (policy, key) pair as a map key: borrowed for lookups, so a lookup
//! allocates nothing, and owned once stored: inline when short (most keys),
//! else in one allocation. Every store takes it: the memory store, the
//! resilient store's deny cache and the leasing store key their maps by
//! it, and validation compares an atomic batch's pairs with it.
//!
//! A short pair is held as [`INLINE`] bytes: the key from the start, the
//! policy name ending at [`NAME_END`] followed by its length, zero bytes in
//! between, and the key's length last; so two inline keys are equal exactly
//! when their bytes are, and an inline key never equals a boxed one. A
//! lookup builds those bytes as three words in registers (the key read with
//! a few fixed-size loads, the name's part made once per policy as an
//! [`InlineName`]): it assembles nothing in memory, so nothing is read back
//! before the write has settled (a store-forwarding stall), and finding the
//! key compares three words. A longer pair is one byte string (the name's
//! length, the name, the key) in one allocation.

use std::hash::{Hash, Hasher};

use hashbrown::Equivalent;

use crate::Policy;

/// The size of an inline key, in bytes: with its tag a stored key is then
/// 24 bytes, a boxed slice and its tag, and a memory store entry fits one
/// cache line.
const INLINE: usize = 23;

/// Where the policy name ends in an inline key; its length is the byte at
/// `NAME_END` and the key's length the one after. So a name and a key
/// together of at most 21 bytes are held inline.
const NAME_END: usize = INLINE - 2;

/// An inline key's bytes as little-endian words: bytes 0..8, 8..16 and
/// 16..23 (the last word's top byte is always zero).
type Words = [u64; 3];

/// A policy name's part of an inline key: the name's bytes ending at
/// [`NAME_END`] and its length at `NAME_END`, made once per policy. All zero
/// for a name too long to be held inline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct InlineName(Words);

impl InlineName {
    pub(crate) fn new(name: &[u8]) -> InlineName {
        let mut bytes = [0; 24];
        if name.len() <= NAME_END {
            bytes[NAME_END - name.len()..NAME_END].copy_from_slice(name);
            bytes[NAME_END] = name.len() as u8;
        }
        InlineName(Inline::words_of(&bytes))
    }
}

/// A short pair as stored (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inline([u8; INLINE]);

impl Inline {
    fn from_words(words: Words) -> Inline {
        let mut bytes = [0; 24];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        let mut inline = [0; INLINE];
        inline.copy_from_slice(&bytes[..INLINE]);
        Inline(inline)
    }

    /// The words of 23 bytes (or of 24 whose last is zero).
    #[inline]
    fn words_of(bytes: &[u8]) -> Words {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        // The last word is read one byte early, to stay within 23 bytes.
        [word(0), word(8), word(INLINE - 8) >> 8]
    }

    #[inline]
    fn words(&self) -> Words {
        Inline::words_of(&self.0)
    }

    /// The (policy, key) parts.
    fn parts(&self) -> (&[u8], &[u8]) {
        let name_len = self.0[NAME_END] as usize;
        let key_len = self.0[NAME_END + 1] as usize;
        (&self.0[NAME_END - name_len..NAME_END], &self.0[..key_len])
    }
}

/// The words of a key of at most [`NAME_END`] bytes placed at the start of
/// an inline key, zero after it: read with fixed-size loads, two of them
/// overlapping when the key is shorter than they are (as hashers read), so
/// nothing is copied byte by byte.
#[inline]
fn key_words(key: &[u8]) -> Words {
    let len = key.len();
    debug_assert!(len <= NAME_END);
    let word = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    let half = |at: usize| {
        let bytes: [u8; 4] = key[at..at + 4].try_into().expect("4 bytes");
        u64::from(u32::from_le_bytes(bytes))
    };
    let byte = |at: usize| u64::from(key[at]) << (8 * at);
    match len {
        // The last word is read ending at the key's end and shifted down
        // onto the bytes that follow the ones read before it.
        17.. => [word(0), word(8), word(len - 8) >> (8 * (24 - len))],
        9..=16 => [word(0), word(len - 8) >> (8 * (16 - len)), 0],
        4..=8 => [half(0) | half(len - 4) << (8 * (len - 4)), 0, 0],
        1..=3 => [byte(0) | byte(len / 2) | byte(len - 1), 0, 0],
        0 => [0; 3],
    }
}

/// A (policy, key) pair as looked up: borrowed, so that a lookup allocates
/// nothing, with its inline words made once when it has them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRef<'a> {
    policy: &'a [u8],
    key: &'a [u8],
    inline: Option<Words>,
}

impl<'a> KeyRef<'a> {
    #[inline]
    pub(crate) fn new(policy: &'a Policy, key: &'a [u8]) -> KeyRef<'a> {
        KeyRef::with_name(policy.name().as_bytes(), policy.inline_name(), key)
    }

    #[inline]
    fn with_name(policy: &'a [u8], name: &InlineName, key: &'a [u8]) -> KeyRef<'a> {
        let inline = (policy.len() + key.len() <= NAME_END).then(|| {
            let [a, b, c] = key_words(key);
            let [x, y, z] = name.0;
            // The key's length is byte 22, the seventh of the last word.
            [a | x, b | y, c | z | (key.len() as u64) << 48]
        });
        KeyRef {
            policy,
            key,
            inline,
        }
    }

    #[cfg(test)]
    fn from_parts(policy: &'a [u8], key: &'a [u8]) -> KeyRef<'a> {
        KeyRef::with_name(policy, &InlineName::new(policy), key)
    }

    /// The key's bytes.
    pub(crate) fn key_bytes(&self) -> &'a [u8] {
        self.key
    }

    /// Whether `stored` is this pair.
    #[inline]
    pub(crate) fn matches(&self, stored: &StoredKey) -> bool {
        match (&self.inline, stored) {
            (Some(words), StoredKey::Inline(b)) => *words == b.words(),
            (None, StoredKey::Boxed(b)) => {
                let (policy, key) = split(b);
                self.policy == policy && self.key == key
            }
            _ => false,
        }
    }
}

/// An inline pair's hash: its three words.
#[inline]
fn hash_words<H: Hasher>(words: &Words, state: &mut H) {
    state.write_u128(u128::from(words[0]) | u128::from(words[1]) << 64);
    state.write_u64(words[2]);
}

/// A longer pair's hash, part by part.
fn hash_parts<H: Hasher>(policy: &[u8], key: &[u8], state: &mut H) {
    state.write_usize(policy.len());
    state.write(policy);
    state.write(key);
}

/// Both key types hash the same form the same way, so a `KeyRef` finds the
/// `StoredKey` it equals (an inline pair never equals a boxed one).
impl Hash for KeyRef<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.inline {
            Some(words) => hash_words(words, state),
            None => hash_parts(self.policy, self.key, state),
        }
    }
}

/// A (policy, key) pair as stored: inline when it fits, else boxed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredKey {
    Inline(Inline),
    Boxed(Box<[u8]>),
}

impl StoredKey {
    pub(crate) fn new(k: KeyRef<'_>) -> StoredKey {
        if let Some(words) = k.inline {
            return StoredKey::Inline(Inline::from_words(words));
        }
        let mut bytes = Vec::with_capacity(1 + k.policy.len() + k.key.len());
        bytes.push(k.policy.len() as u8);
        bytes.extend_from_slice(k.policy);
        bytes.extend_from_slice(k.key);
        StoredKey::Boxed(bytes.into_boxed_slice())
    }

    /// The pair, borrowed (to hash it again when a table grows).
    pub(crate) fn borrowed(&self) -> KeyRef<'_> {
        match self {
            StoredKey::Inline(inline) => {
                let (policy, key) = inline.parts();
                KeyRef {
                    policy,
                    key,
                    inline: Some(inline.words()),
                }
            }
            StoredKey::Boxed(bytes) => {
                let (policy, key) = split(bytes);
                KeyRef {
                    policy,
                    key,
                    inline: None,
                }
            }
        }
    }
}

/// The (policy, key) parts of a boxed pair.
fn split(encoded: &[u8]) -> (&[u8], &[u8]) {
    let (len, rest) = encoded
        .split_first()
        .expect("a stored key has a length byte");
    rest.split_at(*len as usize)
}

impl Hash for StoredKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            StoredKey::Inline(inline) => hash_words(&inline.words(), state),
            StoredKey::Boxed(bytes) => {
                let (policy, key) = split(bytes);
                hash_parts(policy, key, state);
            }
        }
    }
}

impl Equivalent<StoredKey> for KeyRef<'_> {
    #[inline]
    fn equivalent(&self, stored: &StoredKey) -> bool {
        self.matches(stored)
    }
}

#[cfg(test)]
mod tests {
    use std::hash::BuildHasher;

    use super::*;

    #[test]
    fn a_stored_key_is_as_small_as_a_boxed_slice_with_a_tag() {
        assert_eq!(size_of::<StoredKey>(), 24);
    }

    /// Around the inline limit, and across the policy/key boundary: a pair
    /// equals, and hashes like, its stored form and no other.
    #[test]
    fn borrowed_and_stored_keys_agree() {
        let hasher = foldhash::fast::FixedState::with_seed(1);
        let name = [b'p'; 40];
        let data = [0u8; 40];
        let mut pairs = vec![];
        for p in [1, 2, 3, 15, 20, 21, 22, 40] {
            for k in [1, 2, 3, 10, 18, 19, 20, 21, 22, 40] {
                pairs.push((&name[..p], &data[..k]));
            }
        }
        pairs.push((b"ab", b"c"));
        pairs.push((b"a", b"bc"));
        for (i, &(p, k)) in pairs.iter().enumerate() {
            let r = KeyRef::from_parts(p, k);
            let stored = StoredKey::new(r);
            assert_eq!(
                matches!(stored, StoredKey::Inline(_)),
                p.len() + k.len() <= NAME_END
            );
            assert_eq!(stored.borrowed(), r);
            assert_eq!(hasher.hash_one(r), hasher.hash_one(&stored));
            assert_eq!(hasher.hash_one(r), hasher.hash_one(stored.borrowed()));
            for (j, &(p2, k2)) in pairs.iter().enumerate() {
                let same = (p, k) == (p2, k2);
                assert_eq!(KeyRef::from_parts(p2, k2).matches(&stored), same);
                assert_eq!(i == j, same);
            }
        }
    }

    /// The words built in registers are the bytes laid out one by one, for
    /// every name and key length held inline.
    #[test]
    fn inline_words_are_the_layout() {
        let mut rng = fastrand::Rng::with_seed(7);
        for p in 1..NAME_END {
            for k in 1..=NAME_END - p {
                let name: Vec<u8> = (0..p).map(|_| rng.u8(1..)).collect();
                let key: Vec<u8> = (0..k).map(|_| rng.u8(..)).collect();
                let mut bytes = [0; 24];
                bytes[..k].copy_from_slice(&key);
                bytes[NAME_END - p..NAME_END].copy_from_slice(&name);
                bytes[NAME_END] = p as u8;
                bytes[NAME_END + 1] = k as u8;
                let r = KeyRef::from_parts(&name, &key);
                assert_eq!(r.inline, Some(Inline::words_of(&bytes)), "{p}+{k}");
                let stored = StoredKey::new(r);
                let laid_out = Inline(bytes[..INLINE].try_into().unwrap());
                assert_eq!(stored, StoredKey::Inline(laid_out));
                assert_eq!(stored.borrowed(), r);
            }
        }
    }
}
