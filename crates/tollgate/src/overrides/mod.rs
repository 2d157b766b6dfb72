//! Per-key limits changed at runtime: overrides of a policy's parameters
//! for one key or a prefix of keys, block and allow lists, and a key's
//! tier.
//!
//! [`Overrides`] is the set a caller holds (cheap to clone, shared by
//! every clone) and asks before each decision with
//! [`Overrides::resolve`]: an exact key's override wins over the longest
//! matching prefix's, which wins over the policy itself. The lookup
//! allocates nothing and takes no lock (the set is an immutable snapshot
//! swapped whole on each change, per policy). A bit filter of every
//! selector's leading bytes is asked first, so that a key no override
//! matches is turned away by one test and probes no hash table; one that
//! passes probes the exact keys' table (one slot read on a miss), then
//! is tested at each distinct prefix length, and probes the prefixes'
//! table only where that filter lets it. An override's
//! policy is made once, when it is set, and shared
//! ([`ResolvedPolicy::Shared`]), or, resolved in a [`Snapshot`] by a
//! caller that decides at once, lent with its selector, counting no
//! reference. Neither cost depends on how many overrides there are (the
//! figures, beside a policy with none, are in `benches/README.md`).
//!
//! ```
//! use std::time::Duration;
//! use tollgate::overrides::{Limits, Override, Overrides, Resolved, Selector};
//! use tollgate::{MemoryStore, Policy, Store};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let store = MemoryStore::new();
//! let api = Policy::fixed_window("api", 100, Duration::from_secs(60))?;
//! let overrides = Overrides::new();
//! overrides.set(&api, Selector::parse(b"acme")?, Override::limits(Limits {
//!     limit: Some(5_000),
//!     ..Limits::default()
//! }))?;
//! overrides.set(&api, Selector::parse(b"bad_*")?, Override::block())?;
//!
//! match overrides.resolve(&api, b"acme", None)? {
//!     Resolved::Decide { policy, by } => {
//!         assert_eq!(by.unwrap().to_string(), "acme");
//!         let d = store.check(&policy, b"acme", 1).await?;
//!         assert_eq!((d.limit, d.remaining), (5_000, 4_999));
//!     }
//!     other => panic!("{other:?}"),
//! }
//! assert!(matches!(overrides.resolve(&api, b"bad_bot", None)?, Resolved::Block { .. }));
//!
//! // Deciding at once (the memory store's synchronous check), a snapshot
//! // lends the override's policy and selector instead of sharing them.
//! let now = overrides.snapshot();
//! match now.resolve(&api, b"acme", None)? {
//!     Resolved::Decide { policy, by: Some(by) } => {
//!         assert_eq!(*by, Selector::parse(b"acme")?);
//!         assert_eq!(store.check_sync(&policy, b"acme", 1)?.remaining, 4_998);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), tollgate::Error>(())
//! # }).unwrap();
//! ```
//!
//! The state of a key is the same whatever parameters decide it (a policy
//! and its overrides share its name, and every store keys state by the
//! name and the key), so the count carries over when they change: a
//! window raised from 100 to 1,000 after 100 requests has 900 left.
//!
//! With the `redis` feature, `store::redis::RedisOverrides`
//! keeps a set in Redis, shared by every instance.
//!
//! This file is over 400 lines for one concept, [`Overrides`] and its
//! methods, with the runnable example above; every part it uses has its
//! own file below.

mod bytes;
mod entry;
mod filter;
mod lead;
mod limits;
mod map;
mod resolved;
mod selector;
mod snapshot;
mod stored;
mod table;
mod text;

use std::borrow::Cow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use arc_swap::ArcSwap;
use hashbrown::{Equivalent, HashMap};
use parking_lot::Mutex;

pub(crate) use self::entry::now_ms;
pub use self::entry::{Action, MAX_OVERRIDE_TTL, Override};
pub use self::limits::{Limits, takes};
pub use self::resolved::ResolvedPolicy;
pub use self::selector::Selector;
pub use self::snapshot::Snapshot;
use self::snapshot::{Found, Tables, find, unmatched};
use self::stored::Entry;
use self::table::Table;
use crate::{Error, Policy, Result};

/// The most overrides one policy may have, so that what clients can make
/// a service remember is bounded.
pub const MAX_OVERRIDES_PER_POLICY: usize = 100_000;

/// What decides a request under its policy, its key's overrides and its
/// tier (see [`Overrides::resolve`]).
// The common variant is the large one: boxing it would allocate on every
// decision under an override.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Resolved<'p> {
    /// Decide with `policy`: the policy itself, its tier, or its
    /// parameters as the override `by` replaced them.
    Decide {
        /// The policy to decide with (same name, so the same state).
        policy: ResolvedPolicy<'p>,
        /// The override that applies, if one does (borrowed from a
        /// [`Snapshot`], owned from [`Overrides::resolve`]).
        by: Option<Cow<'p, Selector>>,
    },
    /// Denied by the override `by`.
    Block {
        /// The override's selector.
        by: Cow<'p, Selector>,
    },
    /// Admitted, consuming nothing, by the override `by`.
    Allow {
        /// The override's selector.
        by: Cow<'p, Selector>,
    },
}

/// Overrides of many policies, shared by every clone (see the module).
#[derive(Clone, Default)]
pub struct Overrides {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Policy name -> its overrides; every change swaps in a new map whose
    /// tables are shared but for the one changed.
    tables: ArcSwap<Tables>,
    /// Writers one at a time (readers never wait).
    write: Mutex<()>,
}

impl std::fmt::Debug for Overrides {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let tables = self.inner.tables.load();
        let mut d = f.debug_map();
        for (name, table) in tables.iter() {
            d.entry(name, &table.len());
        }
        d.finish()
    }
}

impl Overrides {
    /// An empty set.
    pub fn new() -> Overrides {
        Overrides::default()
    }

    /// Sets (or replaces) the override of `selector` under `policy`, after
    /// checking it: its parameters must fit the policy's algorithm (as a
    /// policy's constructor checks them), its tier must be one of the
    /// policy's, and the policy may have at most
    /// [`MAX_OVERRIDES_PER_POLICY`]. An error changes nothing.
    pub fn set(&self, policy: &Policy, selector: Selector, over: Override) -> Result<()> {
        let entry = checked(policy, selector, over)?;
        self.change(policy.shared_name(), |table| {
            if table.get(&entry.selector).is_none() && table.len() >= MAX_OVERRIDES_PER_POLICY {
                return Err(Error::argument(
                    "selector",
                    format!(
                        "policy `{}` already has {MAX_OVERRIDES_PER_POLICY} overrides, the most it may have",
                        policy.name()
                    ),
                ));
            }
            table.insert(entry);
            Ok(())
        })
    }

    /// Replaces every override of `policy` by `entries`, all checked
    /// first: on an error, nothing changes.
    pub fn replace(
        &self,
        policy: &Policy,
        entries: impl IntoIterator<Item = (Selector, Override)>,
    ) -> Result<()> {
        let mut table = Table::default();
        for (selector, over) in entries {
            if table.len() >= MAX_OVERRIDES_PER_POLICY {
                return Err(Error::argument(
                    "selector",
                    format!("more than {MAX_OVERRIDES_PER_POLICY} overrides for one policy"),
                ));
            }
            table.insert(checked(policy, selector, over)?);
        }
        self.change(policy.shared_name(), |t| {
            *t = table;
            Ok(())
        })
    }

    /// Removes the override of `selector` under the policy named `policy`:
    /// whether there was one.
    pub fn remove(&self, policy: &str, selector: &Selector) -> bool {
        let mut removed = false;
        let _ = self.change(&Arc::from(policy), |t| {
            removed = t.remove(selector).is_some();
            Ok(())
        });
        removed
    }

    /// Makes the overrides of `policy`'s name fit this build of it (a
    /// reload's): each is checked against it again and its policy made
    /// from it, so that keys under them are decided with no policy made
    /// per request (before, they are decided right, only slower). One that
    /// no longer fits is left as it was (and lapses: see
    /// [`resolve`](Overrides::resolve)).
    pub fn rebase(&self, policy: &Policy) {
        let stale = self
            .inner
            .tables
            .load()
            .get(policy.name())
            .is_some_and(|t| t.entries().any(|e| e.build != policy.build()));
        if stale {
            let _ = self.change(policy.shared_name(), |t| {
                t.rebuild(|e| {
                    (e.build != policy.build())
                        .then(|| checked(policy, e.selector.clone(), e.over.clone()).ok())
                        .flatten()
                });
                Ok(())
            });
        }
    }

    /// Removes every override of the policy named `policy`.
    pub fn clear(&self, policy: &str) {
        let _guard = self.inner.write.lock();
        let mut tables = HashMap::clone(&self.inner.tables.load());
        if tables.remove(policy).is_some() {
            self.inner.tables.store(Arc::new(tables));
        }
    }

    /// The override of `selector` under `policy`, unless it has ended.
    pub fn get(&self, policy: &str, selector: &Selector) -> Option<Override> {
        let tables = self.inner.tables.load();
        let e = tables.get(policy)?.get(selector)?;
        (!e.over.expired_at(now_ms())).then(|| e.over.clone())
    }

    /// Every live override of `policy`, in selector order.
    pub fn list(&self, policy: &str) -> Vec<(Selector, Override)> {
        let tables = self.inner.tables.load();
        let now = now_ms();
        let mut out: Vec<_> = tables
            .get(policy)
            .into_iter()
            .flat_map(|t| t.entries())
            .filter(|e| !e.over.expired_at(now))
            .map(|e| (e.selector.clone(), e.over.clone()))
            .collect();
        out.sort_by_key(|(s, _)| s.to_bytes());
        out
    }

    /// How many live overrides `policy` has, by [`Action::kind`].
    pub fn counts(&self, policy: &str) -> [(&'static str, usize); 4] {
        let mut counts = [("limits", 0), ("block", 0), ("allow", 0), ("tier", 0)];
        let tables = self.inner.tables.load();
        let now = now_ms();
        for e in tables.get(policy).into_iter().flat_map(|t| t.entries()) {
            if !e.over.expired_at(now)
                && let Some(c) = counts
                    .iter_mut()
                    .find(|(k, _)| *k == e.over.action().kind())
            {
                c.1 += 1;
            }
        }
        counts
    }

    /// The names of the policies that have overrides.
    pub fn policies(&self) -> Vec<String> {
        let tables = self.inner.tables.load();
        tables.keys().map(|k| k.to_string()).collect()
    }

    /// Drops the overrides that have ended (lookups already ignore them):
    /// whether any were.
    pub fn purge_expired(&self) -> bool {
        let now = now_ms();
        let _guard = self.inner.write.lock();
        let current = self.inner.tables.load_full();
        let mut any = false;
        let mut tables = HashMap::clone(&current);
        for table in tables.values_mut() {
            if table.entries().any(|e| e.over.expired_at(now)) {
                any |= Arc::make_mut(table).purge(now);
            }
        }
        tables.retain(|_, t| t.len() > 0);
        if any {
            self.inner.tables.store(Arc::new(tables));
        }
        any
    }

    /// What decides a request for `key` under `policy`, naming `tier` (a
    /// request's tier, if it names one): the key's override (exact, then
    /// the longest prefix), else the tier, else the policy. An unknown
    /// tier is an error naming `tier`; so is a tier on a policy without
    /// tiers. What it answers owns (shares) the override's policy and
    /// selector, so that it may be held across an `.await`; a caller that
    /// decides at once borrows them from a [`snapshot`](Self::snapshot)
    /// instead, for less.
    ///
    /// An override made for another version of the policy (a reload
    /// changed its parameters) is applied to this one; if it no longer
    /// fits (the algorithm changed), the key is decided as if it had none.
    pub fn resolve<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        tier: Option<&str>,
    ) -> Result<Resolved<'p>> {
        let tables = self.inner.tables.load();
        match find(&tables, policy, key) {
            Found::Own(p, by) => Ok(Resolved::Decide {
                policy: ResolvedPolicy::Shared(p.clone()),
                by: Some(Cow::Owned(by.clone())),
            }),
            Found::Make(e) => match Found::made(e, policy) {
                Some(p) => Ok(Resolved::Decide {
                    policy: ResolvedPolicy::Owned(p),
                    by: Some(Cow::Owned(e.selector.clone())),
                }),
                None => unmatched(policy, tier),
            },
            Found::Block(by) => Ok(Resolved::Block {
                by: Cow::Owned(by.clone()),
            }),
            Found::Allow(by) => Ok(Resolved::Allow {
                by: Cow::Owned(by.clone()),
            }),
            Found::Nothing => unmatched(policy, tier),
        }
    }

    /// The overrides as they are now, to resolve keys against with no
    /// reference count (see [`Snapshot`]).
    #[inline]
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            tables: self.inner.tables.load(),
        }
    }

    /// Applies `f` to a copy of `policy`'s table and swaps it in.
    fn change(&self, policy: &Arc<str>, f: impl FnOnce(&mut Table) -> Result<()>) -> Result<()> {
        let _guard = self.inner.write.lock();
        let current = self.inner.tables.load_full();
        let mut table = current
            .get(&**policy)
            .map_or_else(Table::default, |t| Table::clone(t));
        f(&mut table)?;
        let mut tables = HashMap::clone(&current);
        let had = tables.remove(&**policy).is_some();
        if table.len() != 0 {
            // Keyed by this name's `Arc`, the one the policy's clones share.
            tables.insert(policy.clone(), Arc::new(table));
        } else if !had {
            return Ok(());
        }
        self.inner.tables.store(Arc::new(tables));
        Ok(())
    }
}

/// A policy's name, as `resolve` looks its table up: the same hash as the
/// name's, and equal to the key that is the same `Arc` before any byte is
/// compared.
struct NameOf<'a>(&'a Arc<str>);

impl Hash for NameOf<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self.0).hash(state);
    }
}

impl Equivalent<Arc<str>> for NameOf<'_> {
    #[inline]
    fn equivalent(&self, key: &Arc<str>) -> bool {
        Arc::ptr_eq(self.0, key) || same_name(self.0, key)
    }
}

/// The bytes' comparison, out of the lookup's way: a policy's clones share
/// its name's `Arc`, so a lookup almost never gets here (inline, the call
/// to compare the bytes made the table's probe save and restore its
/// registers on every hit).
#[cold]
#[inline(never)]
fn same_name(a: &str, b: &str) -> bool {
    a == b
}

/// The error of a tier `policy` does not have.
pub fn unknown_tier(policy: &Policy, tier: &str) -> Error {
    let names = policy.tier_names();
    Error::argument(
        "tier",
        if names.is_empty() {
            format!("policy `{}` has no tiers, got {tier:?}", policy.name())
        } else {
            format!(
                "policy `{}` has no tier {tier:?} (it has {})",
                policy.name(),
                names.join(", ")
            )
        },
    )
}

/// `over` checked against `policy`, as stored.
fn checked(policy: &Policy, selector: Selector, over: Override) -> Result<Entry> {
    if let Action::Tier(name) = over.action()
        && policy.tier(name).is_none()
    {
        return Err(unknown_tier(policy, name));
    }
    let derived = over.derive(policy.algorithm())?;
    let decides = match over.action() {
        Action::Limits(_) => derived.map(|a| Arc::new(policy.derive(a))),
        Action::Tier(name) => policy.tier(name).map(Arc::new),
        Action::Block | Action::Allow => None,
    };
    Ok(Entry {
        head: Entry::head(&selector),
        selector,
        over,
        base: *policy.algorithm(),
        derived,
        build: policy.build(),
        decides,
    })
}

#[cfg(test)]
mod tests;
