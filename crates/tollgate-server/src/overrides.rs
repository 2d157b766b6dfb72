//! The service's overrides: one [`Overrides`] set that decisions read
//! (`decide.rs`), changed through `PUT/DELETE /v1/overrides/...`
//! (`http/overrides.rs`). On the memory store it lives in the process; on
//! Redis every change is written there first and every instance loads
//! the policies whose version moved every 250 ms ([`RedisOverrides`]), so
//! a change reaches them all within about that and survives restarts,
//! and no decision asks Redis about overrides.
//!
//! The config file's `[[override]]` tables are a base set beneath them
//! (`base`, replaced at start and on each reload): a key's runtime
//! override, exact or prefix, wins over any config one; a key with no
//! runtime override is looked up in the base set.

use std::sync::OnceLock;

use tollgate::Policy;
use tollgate::overrides::{Override, Overrides, Resolved, Selector};
use tollgate::store::redis::{RedisOverrides, RedisStore};

use crate::error::{Code, ServiceError};

/// The overrides in force, and where they are shared.
#[derive(Debug, Default)]
pub(crate) struct SharedOverrides {
    /// Those set at runtime (the API; loaded from Redis).
    pub(crate) local: Overrides,
    /// Those of the config file.
    base: Overrides,
    /// On Redis: set once its own connection is made.
    redis: OnceLock<RedisOverrides>,
    /// Whether the store is Redis (so a change needs it).
    shared: bool,
}

impl SharedOverrides {
    /// In-process overrides (the memory store).
    pub(crate) fn local() -> SharedOverrides {
        SharedOverrides::default()
    }

    /// Overrides shared through the Redis `builder` connects to.
    pub(crate) fn shared() -> SharedOverrides {
        SharedOverrides {
            shared: true,
            ..SharedOverrides::default()
        }
    }

    /// Replaces the config file's overrides by `set`'s (at start, on each
    /// reload); an override its policy no longer takes is logged and
    /// dropped (the file was checked, so only a race can cause it). The
    /// runtime overrides are rebased on the new policies (see
    /// [`Overrides::rebase`]).
    pub(crate) fn set_base(&self, set: &crate::config::PolicySet) {
        for name in self.base.policies() {
            if set.get(&name).is_none() {
                self.base.clear(&name);
            }
        }
        for policy in &set.policies {
            let entries = set
                .overrides
                .iter()
                .filter(|o| o.policy == policy.name())
                .map(|o| (o.selector.clone(), o.over.clone()));
            if let Err(e) = self.base.replace(policy, entries) {
                tracing::error!(policy = policy.name(), error = %e, "the config's overrides");
            }
            self.local.rebase(policy);
        }
    }

    /// What decides `key` under `policy` in `tier`: its runtime override,
    /// else its config one, else the tier or the policy.
    pub(crate) fn resolve<'p>(
        &self,
        policy: &'p Policy,
        key: &[u8],
        tier: Option<&str>,
    ) -> tollgate::Result<Resolved<'p>> {
        match self.local.resolve(policy, key, tier)? {
            Resolved::Decide { by: None, .. } => self.base.resolve(policy, key, tier),
            other => Ok(other),
        }
    }

    /// The override of `selector` in force, and whether the config file
    /// set it (one set at runtime wins).
    pub(crate) fn get(&self, policy: &str, selector: &Selector) -> Option<(Override, bool)> {
        match self.local.get(policy, selector) {
            Some(o) => Some((o, false)),
            None => self.base.get(policy, selector).map(|o| (o, true)),
        }
    }

    /// Every override of `policy` in force, in selector order, each with
    /// whether the config file set it.
    pub(crate) fn list(&self, policy: &str) -> Vec<(Selector, Override, bool)> {
        let runtime = self.local.list(policy);
        let mut all: Vec<_> = self
            .base
            .list(policy)
            .into_iter()
            .filter(|(s, _)| !runtime.iter().any(|(r, _)| r == s))
            .map(|(s, o)| (s, o, true))
            .collect();
        all.extend(runtime.into_iter().map(|(s, o)| (s, o, false)));
        all.sort_by_key(|(s, _, _)| s.to_bytes());
        all
    }

    /// How many overrides `policy` has in force, by kind (`limits`,
    /// `block`, `allow`, `tier`): the `tollgate_overrides` gauge and the
    /// status page's counts.
    pub(crate) fn counts(&self, policy: &str) -> [(&'static str, usize); 4] {
        let mut counts = [("limits", 0), ("block", 0), ("allow", 0), ("tier", 0)];
        for (_, over, _) in self.list(policy) {
            if let Some(c) = counts.iter_mut().find(|(k, _)| *k == over.action().kind()) {
                c.1 += 1;
            }
        }
        counts
    }

    fn redis(&self) -> Result<Option<&RedisOverrides>, ServiceError> {
        match (self.shared, self.redis.get()) {
            (false, _) => Ok(None),
            (true, Some(r)) => Ok(Some(r)),
            (true, None) => Err(ServiceError::new(
                Code::StoreUnavailable,
                "overrides are kept in Redis, which is not connected yet",
            )),
        }
    }

    /// Sets an override on every instance.
    pub(crate) async fn set(
        &self,
        policy: &Policy,
        selector: Selector,
        over: Override,
    ) -> Result<(), ServiceError> {
        match self.redis()? {
            Some(r) => r.set(policy, selector, over).await?,
            None => self.local.set(policy, selector, over)?,
        }
        Ok(())
    }

    /// Removes an override on every instance: whether there was one.
    pub(crate) async fn remove(
        &self,
        policy: &str,
        selector: &Selector,
    ) -> Result<bool, ServiceError> {
        Ok(match self.redis()? {
            Some(r) => r.remove(policy, selector).await?,
            None => self.local.remove(policy, selector),
        })
    }

    /// On Redis: the overrides' own connection, made once (`serve/sync.rs`
    /// keeps it loading); changes are written through it from then on.
    pub(crate) fn connect(&self, store: RedisStore) -> RedisOverrides {
        self.redis
            .get_or_init(|| RedisOverrides::new(store, self.local.clone()))
            .clone()
    }
}
