//! What a store call takes beyond a policy and a key, and what a lease
//! request answers: a batch's [`Request`], a [`Lease`].

use crate::algorithm::LeaseId;
use crate::{Decision, Policy};

/// One request of a batch: which policy, which key, what cost.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The policy to check.
    pub policy: &'a Policy,
    /// The limited key.
    pub key: &'a [u8],
    /// The cost (0 peeks).
    pub cost: u64,
}

/// The answer to a lease request on a concurrency policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Lease {
    /// The decision; `reset_after` is when the last lease held expires.
    pub decision: Decision,
    /// The lease taken, when allowed. Give it back with
    /// [`Store::release_lease`](super::Store::release_lease).
    pub id: Option<LeaseId>,
}
