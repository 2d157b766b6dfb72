//! A (policy, key) pair as a map key: borrowed for lookups, so a lookup
//! allocates nothing, and owned, in one allocation, once stored. The
//! memory store and the resilient store's deny cache key their maps by it.

use std::hash::{Hash, Hasher};

use hashbrown::Equivalent;

use crate::Policy;

/// A (policy, key) pair as looked up: borrowed, so that a lookup allocates
/// nothing and hashes the parts where they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyRef<'a> {
    policy: &'a [u8],
    key: &'a [u8],
}

impl<'a> KeyRef<'a> {
    pub(crate) fn new(policy: &'a Policy, key: &'a [u8]) -> KeyRef<'a> {
        KeyRef {
            policy: policy.name().as_bytes(),
            key,
        }
    }
}

/// Both key types hash the same parts the same way, so a `KeyRef` finds the
/// `StoredKey` it equals.
fn hash_parts<H: Hasher>(policy: &[u8], key: &[u8], state: &mut H) {
    state.write_usize(policy.len());
    state.write(policy);
    state.write(key);
}

impl Hash for KeyRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        hash_parts(self.policy, self.key, state);
    }
}

/// A (policy, key) pair as stored: the policy name's length (names are at
/// most 64 bytes), the name, then the user key, in one allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredKey(Box<[u8]>);

impl StoredKey {
    pub(crate) fn new(k: KeyRef<'_>) -> StoredKey {
        let mut bytes = Vec::with_capacity(1 + k.policy.len() + k.key.len());
        bytes.push(k.policy.len() as u8);
        bytes.extend_from_slice(k.policy);
        bytes.extend_from_slice(k.key);
        StoredKey(bytes.into_boxed_slice())
    }

    fn parts(&self) -> KeyRef<'_> {
        let (len, rest) = self
            .0
            .split_first()
            .expect("a stored key has a length byte");
        let (policy, key) = rest.split_at(*len as usize);
        KeyRef { policy, key }
    }
}

impl Hash for StoredKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let k = self.parts();
        hash_parts(k.policy, k.key, state);
    }
}

impl Equivalent<StoredKey> for KeyRef<'_> {
    fn equivalent(&self, stored: &StoredKey) -> bool {
        *self == stored.parts()
    }
}
