//! One override as stored in a policy's table (`table.rs`, `map.rs`):
//! the override, and the policy that decides under it, made once.

use std::sync::Arc;

use super::bytes::same;
use super::{Override, Selector};
use crate::Policy;
use crate::algorithm::Algorithm;

/// One override as stored: the override, and its parameters applied to
/// the policy they were checked against.
///
/// In declaration order (`repr(C)`): what a lookup that finds it reads
/// first, together (the compiler would put `head` last, some 300 bytes
/// from `selector`, a cache line of its own).
#[derive(Debug)]
#[repr(C)]
pub(super) struct Entry {
    pub(super) selector: Selector,
    /// The selector's bytes, zero-padded, when it has 16 or fewer (most):
    /// what a lookup compares a key with, so that it does not load the
    /// selector's own allocation (a cache miss, after the entry's, on
    /// every lookup that finds one).
    pub(super) head: [u8; HEAD],
    /// The build of the policy it was checked against
    /// ([`Policy::build`]).
    pub(super) build: u64,
    /// The policy that decides under it (for `Action::Limits` and
    /// `Action::Tier`), made from that build once, so that a request under
    /// it clones no policy.
    pub(super) decides: Option<Arc<Policy>>,
    pub(super) over: Override,
    /// The policy's algorithm `derived` was made from.
    pub(super) base: Algorithm,
    /// The override's parameters applied to `base` (for `Action::Limits`).
    pub(super) derived: Option<Algorithm>,
}

/// The longest selector an entry holds a copy of ([`Entry::head`]).
const HEAD: usize = 16;

impl Entry {
    /// [`Entry::head`] for `selector`.
    pub(super) fn head(selector: &Selector) -> [u8; HEAD] {
        let mut head = [0; HEAD];
        if let Some(h) = head.get_mut(..selector.bytes().len()) {
            h.copy_from_slice(selector.bytes());
        }
        head
    }

    /// Whether its selector's bytes are `bytes` (its length is read from
    /// the selector, its bytes from [`Entry::head`] where it holds them).
    #[inline(always)]
    pub(super) fn is(&self, bytes: &[u8]) -> bool {
        let own = self.selector.bytes();
        match own.len() {
            n @ ..=HEAD => same(&self.head[..n], bytes),
            _ => same(own, bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_entry_is_its_selectors_bytes_at_every_length() {
        let p = Policy::fixed_window("api", 10, Duration::from_secs(1)).unwrap();
        for n in 1..40usize {
            let bytes: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            let selector = Selector::exact(&bytes).unwrap();
            let e = crate::overrides::checked(&p, selector, Override::block()).unwrap();
            assert!(e.is(&bytes), "{n}");
            assert!(!e.is(&bytes[..n - 1]), "{n}");
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(!e.is(&longer), "{n}");
            for i in 0..n {
                let mut other = bytes.clone();
                other[i] ^= 0x20;
                assert!(!e.is(&other), "{n} at {i}");
            }
        }
    }
}
