//! One override as stored in a policy's table (`table.rs`, `map.rs`):
//! the override, and the policy that decides under it, made once.

use std::sync::Arc;

use super::{Override, Selector};
use crate::Policy;
use crate::algorithm::Algorithm;

/// One override as stored: the override, and its parameters applied to
/// the policy they were checked against.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) selector: Selector,
    pub(super) over: Override,
    /// The policy's algorithm `derived` was made from.
    pub(super) base: Algorithm,
    /// The override's parameters applied to `base` (for `Action::Limits`).
    pub(super) derived: Option<Algorithm>,
    /// The build of the policy it was checked against
    /// ([`Policy::build`]).
    pub(super) build: u64,
    /// The policy that decides under it (for `Action::Limits` and
    /// `Action::Tier`), made from that build once, so that a request under
    /// it clones no policy.
    pub(super) decides: Option<Arc<Policy>>,
}
