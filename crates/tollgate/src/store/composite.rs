//! A (policy, key) pair as a map key: borrowed for lookups, so a lookup
//! allocates nothing, and owned once stored: inline when short (most keys),
//! else in one allocation. The memory store and the resilient store's deny
//! cache key their maps by it.
//!
//! Both forms encode the pair as one byte string: the policy name's length
//! (names are at most 64 bytes), the name, then the user key. A pair whose
//! encoding fits in [`INLINE`] bytes is always held inline, zero-padded, so
//! that two inline keys are equal exactly when their fixed-size arrays are,
//! and an inline key never equals a boxed one.

use std::hash::{Hash, Hasher};

use hashbrown::Equivalent;

use crate::Policy;

/// The longest encoding held inline, in bytes (a policy name and a key of
/// 21 bytes together): a stored key is then 24 bytes, a boxed slice and its
/// tag, and a memory store entry fits one cache line.
const INLINE: usize = 22;

/// An encoding of at most [`INLINE`] bytes, zero-padded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inline {
    len: u8,
    bytes: [u8; INLINE],
}

impl Inline {
    fn new(policy: &[u8], key: &[u8]) -> Option<Inline> {
        let len = 1 + policy.len() + key.len();
        if len > INLINE {
            return None;
        }
        let mut bytes = [0; INLINE];
        bytes[0] = policy.len() as u8;
        bytes[1..1 + policy.len()].copy_from_slice(policy);
        bytes[1 + policy.len()..len].copy_from_slice(key);
        Some(Inline {
            len: len as u8,
            bytes,
        })
    }

    fn encoded(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// A (policy, key) pair as looked up: borrowed, so that a lookup allocates
/// nothing, with its inline encoding made once when it has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRef<'a> {
    policy: &'a [u8],
    key: &'a [u8],
    inline: Option<Inline>,
}

impl<'a> KeyRef<'a> {
    pub(crate) fn new(policy: &'a Policy, key: &'a [u8]) -> KeyRef<'a> {
        KeyRef::from_parts(policy.name().as_bytes(), key)
    }

    fn from_parts(policy: &'a [u8], key: &'a [u8]) -> KeyRef<'a> {
        KeyRef {
            policy,
            key,
            inline: Inline::new(policy, key),
        }
    }

    /// Whether `stored` is this pair.
    #[inline]
    pub(crate) fn matches(&self, stored: &StoredKey) -> bool {
        match (&self.inline, stored) {
            (Some(a), StoredKey::Inline(b)) => a == b,
            (None, StoredKey::Boxed(b)) => {
                let (policy, key) = split(b);
                self.policy == policy && self.key == key
            }
            _ => false,
        }
    }
}

/// Both key types hash the same parts the same way, so a `KeyRef` finds the
/// `StoredKey` it equals: an inline encoding in one write, a longer pair
/// part by part.
fn hash_parts<H: Hasher>(policy: &[u8], key: &[u8], state: &mut H) {
    state.write_usize(policy.len());
    state.write(policy);
    state.write(key);
}

impl Hash for KeyRef<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        match &self.inline {
            Some(inline) => state.write(inline.encoded()),
            None => hash_parts(self.policy, self.key, state),
        }
    }
}

/// A (policy, key) pair as stored: its encoding inline when it fits,
/// else boxed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StoredKey {
    Inline(Inline),
    Boxed(Box<[u8]>),
}

impl StoredKey {
    pub(crate) fn new(k: KeyRef<'_>) -> StoredKey {
        if let Some(inline) = k.inline {
            return StoredKey::Inline(inline);
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
            StoredKey::Inline(inline) => KeyRef {
                inline: Some(*inline),
                ..split_ref(inline.encoded())
            },
            StoredKey::Boxed(bytes) => split_ref(bytes),
        }
    }
}

/// The (policy, key) parts of an encoding.
fn split(encoded: &[u8]) -> (&[u8], &[u8]) {
    let (len, rest) = encoded
        .split_first()
        .expect("a stored key has a length byte");
    rest.split_at(*len as usize)
}

fn split_ref(encoded: &[u8]) -> KeyRef<'_> {
    let (policy, key) = split(encoded);
    KeyRef {
        policy,
        key,
        inline: None,
    }
}

impl Hash for StoredKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        match self {
            StoredKey::Inline(inline) => state.write(inline.encoded()),
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
                1 + p.len() + k.len() <= INLINE
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
}
