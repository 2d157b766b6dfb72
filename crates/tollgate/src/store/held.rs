//! A held batch and the stamp that gives its unused units back exactly:
//! what [`Store::take_held`](super::Store::take_held) answers and
//! [`Store::refund_held`](super::Store::refund_held) takes.

use crate::Decision;

/// What [`take_held`](super::Store::take_held) answers: the decision of
/// the held `check_at_most`, and the stamp of the state it wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeldGrant {
    /// The decision, as [`check_at_most_held`](super::Store::check_at_most_held)
    /// answers it ([`granted`](Decision::granted) is the batch).
    pub decision: Decision,
    /// The state the take wrote, when it granted units and the store can
    /// give them back exactly; `None` otherwise (the units can then only
    /// lapse).
    pub stamp: Option<Stamp>,
}

impl HeldGrant {
    /// A grant without a stamp: what a store that cannot compare states
    /// answers.
    pub fn unstamped(decision: Decision) -> HeldGrant {
        HeldGrant {
            decision,
            stamp: None,
        }
    }
}

/// The state a held take wrote on a token bucket or GCRA key, and what it
/// granted. Opaque: it is only good for giving units of that grant back
/// with [`refund_held`](super::Store::refund_held), to the store, policy
/// and key it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The state as the store keeps it: GCRA's TAT (whole µs, fraction),
    /// the token bucket's (deficit, time), or on Redis's server-clock form
    /// the key's expiry in ms (and 0).
    state: [u64; 2],
    granted: u64,
}

impl Stamp {
    pub(crate) fn new(state: [u64; 2], granted: u64) -> Stamp {
        Stamp { state, granted }
    }

    pub(crate) fn state(&self) -> [u64; 2] {
        self.state
    }

    /// The units the take granted: the most a refund of them gives back.
    pub fn granted(&self) -> u64 {
        self.granted
    }
}
