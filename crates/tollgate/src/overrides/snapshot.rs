//! The overrides of every policy as they are at one moment, and the one
//! lookup [`Overrides::resolve`](super::Overrides::resolve) and
//! [`Snapshot::resolve`] share ([`find`]): the key's override, applied to
//! the policy asked about.
//!
//! A [`Snapshot`] is what a caller that decides at once (synchronously)
//! holds: what it resolves borrows the override's policy and selector
//! from it, so a key under an override costs no reference count (where
//! `Overrides::resolve` shares both: four atomic read-modify-writes, two
//! to take them and two to drop them).

use std::borrow::Cow;
use std::sync::Arc;

use arc_swap::Guard;
use hashbrown::HashMap;

use super::stored::Entry;
use super::table::Table;
use super::{Action, NameOf, Resolved, ResolvedPolicy, Selector, now_ms, unknown_tier};
use crate::{Policy, Result};

/// Every policy's table, by name.
pub(super) type Tables = HashMap<Arc<str>, Arc<Table>>;

/// The overrides as they were when [`Overrides::snapshot`] took it
/// (later changes are not seen): hold one for a decision made at once,
/// not across an `.await` or for long (it keeps that set alive, and a
/// thread holding several makes its next ones take a reference count).
///
/// [`Overrides::snapshot`]: super::Overrides::snapshot
pub struct Snapshot {
    pub(super) tables: Guard<Arc<Tables>>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("policies", &self.tables.len())
            .finish()
    }
}

impl Snapshot {
    /// [`Overrides::resolve`](super::Overrides::resolve), with the
    /// override's policy and selector borrowed from the snapshot
    /// ([`ResolvedPolicy::Borrowed`], [`Cow::Borrowed`]): the same
    /// answer, without a reference count.
    pub fn resolve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &[u8],
        tier: Option<&str>,
    ) -> Result<Resolved<'a>> {
        match find(&self.tables, policy, key) {
            Found::Own(p, by) => Ok(Resolved::Decide {
                policy: ResolvedPolicy::Borrowed(p),
                by: Some(Cow::Borrowed(by)),
            }),
            Found::Make(e) => match Found::made(e, policy) {
                Some(p) => Ok(Resolved::Decide {
                    policy: ResolvedPolicy::Owned(p),
                    by: Some(Cow::Borrowed(&e.selector)),
                }),
                None => unmatched(policy, tier),
            },
            Found::Block(by) => Ok(Resolved::Block {
                by: Cow::Borrowed(by),
            }),
            Found::Allow(by) => Ok(Resolved::Allow {
                by: Cow::Borrowed(by),
            }),
            Found::Nothing => unmatched(policy, tier),
        }
    }
}

/// What the key's override does under the policy asked about (small:
/// what it answers is moved, not copied, into a [`Resolved`]).
pub(super) enum Found<'s> {
    /// Decide with the override's own policy, made when it was set.
    Own(&'s Arc<Policy>, &'s Selector),
    /// Decide with a policy made now (see [`Found::made`]): an override
    /// set against another build of the policy (a reload that
    /// [`Overrides::rebase`](super::Overrides::rebase) has not caught up
    /// with yet).
    Make(&'s Entry),
    Block(&'s Selector),
    Allow(&'s Selector),
    /// No override matches.
    Nothing,
}

impl Found<'_> {
    /// The policy a [`Found::Make`] entry decides with under `policy`, if
    /// it still fits it (if not, the key is decided as if it had none).
    #[cold]
    pub(super) fn made(e: &Entry, policy: &Policy) -> Option<Policy> {
        match e.over.action() {
            Action::Limits(limits) => {
                let algorithm = if e.base == *policy.algorithm() {
                    e.derived
                } else {
                    limits.apply(policy.algorithm()).ok()
                };
                algorithm.map(|a| policy.derive(a))
            }
            Action::Tier(name) => policy.tier(name),
            Action::Block | Action::Allow => None,
        }
    }
}

/// The override of `key` under `policy` in `tables` (see
/// [`Overrides::resolve`](super::Overrides::resolve)).
#[inline(always)]
pub(super) fn find<'s>(tables: &'s Tables, policy: &Policy, key: &[u8]) -> Found<'s> {
    let Some(e) = tables
        .get(&NameOf(policy.shared_name()))
        .and_then(|t| t.lookup(key, now_ms))
    else {
        return Found::Nothing;
    };
    let by = &e.selector;
    // The policy the override was set against, as it still is: its own
    // policy, made then, decides.
    if e.build == policy.build()
        && e.build != 0
        && let Some(p) = &e.decides
    {
        return Found::Own(p, by);
    }
    match e.over.action() {
        Action::Block => Found::Block(by),
        Action::Allow => Found::Allow(by),
        Action::Limits(_) | Action::Tier(_) => Found::Make(e),
    }
}

/// What decides a key no override applies to: `tier`'s policy, or the
/// policy itself. (Each answer is made where it is returned, with no `?`:
/// a [`Resolved`] is some 200 bytes, and each move of it a copy.)
#[inline(always)]
pub(super) fn unmatched<'p>(policy: &'p Policy, tier: Option<&str>) -> Result<Resolved<'p>> {
    match tier {
        None => Ok(Resolved::Decide {
            policy: ResolvedPolicy::Borrowed(policy),
            by: None,
        }),
        Some(t) => match policy.tier(t) {
            Some(p) => Ok(Resolved::Decide {
                policy: ResolvedPolicy::Owned(p),
                by: None,
            }),
            None => Err(unknown_tier(policy, t)),
        },
    }
}
