//! Overrides shared through Redis: each policy's in one hash under the
//! store's prefix, with a version counted by every change
//! (`lua/override_write.lua`), and [`RedisOverrides`], an
//! [`Overrides`] set that every instance keeps in step by polling the
//! versions. Decisions read the local set only: learning overrides never
//! costs a Redis call per decision.
//!
//! ```text
//! <prefix>{overrides:<policy>}          hash: selector -> Override::to_text
//! <prefix>{overrides:<policy>}:version  integer
//! ```
//!
//! The hash tag puts both in one Cluster slot, so the script that writes
//! them runs on one node.

use std::sync::Arc;
use std::time::Duration;

use super::RedisStore;
use super::error::store_error;
use super::pack::Arg;
use crate::overrides::{Override, Overrides, Selector, now_ms};
use crate::{Error, Policy, Result, StoreErrorKind};

impl RedisStore {
    /// The keys of `policy`'s shared overrides: the hash and its version.
    fn override_keys(&self, policy: &str) -> [Vec<u8>; 2] {
        let hash = format!("{}{{overrides:{policy}}}", self.inner.prefix).into_bytes();
        let mut version = hash.clone();
        version.extend_from_slice(b":version");
        [hash, version]
    }

    /// Writes (or with `None` removes) one override of `policy`: the new
    /// version, and whether the selector had one before.
    async fn write_override(
        &self,
        policy: &str,
        selector: &Selector,
        over: Option<&Override>,
    ) -> Result<(u64, bool)> {
        let [hash, version] = self.override_keys(policy);
        let text = over.map(Override::to_text).unwrap_or_default();
        let args = [Arg::Bin(selector.to_bytes()), Arg::Str(&text)];
        let reply: (u64, u64) = self
            .inner
            .scripts
            .override_write
            .run(&self.inner.conn, &[&hash, &version], &args)
            .await
            .map_err(|e| store_error(&e))?;
        Ok((reply.0, reply.1 == 1))
    }

    /// The version of `policy`'s shared overrides (0 before the first).
    async fn override_version(&self, policy: &str) -> Result<u64> {
        let [_, version] = self.override_keys(policy);
        let value = self
            .inner
            .conn
            .query(redis::cmd("GET").arg(&version))
            .await
            .map_err(|e| store_error(&e))?;
        let v: Option<u64> = redis::from_redis_value(value).map_err(|e| protocol(policy, e))?;
        Ok(v.unwrap_or(0))
    }

    /// Every stored override of `policy`, each as the store holds it.
    async fn read_overrides(&self, policy: &str) -> Result<Vec<(Vec<u8>, String)>> {
        let [hash, _] = self.override_keys(policy);
        let value = self
            .inner
            .conn
            .query(redis::cmd("HGETALL").arg(&hash))
            .await
            .map_err(|e| store_error(&e))?;
        redis::from_redis_value(value).map_err(|e| protocol(policy, e))
    }
}

/// A reply about `policy`'s overrides that is not what was asked.
fn protocol(policy: &str, e: impl std::fmt::Display) -> Error {
    Error::Store {
        kind: StoreErrorKind::Protocol,
        message: format!("the overrides of policy `{policy}`: {e}"),
    }
}

/// An [`Overrides`] set shared by every instance on one Redis: a change
/// made here is written to Redis first (nothing is applied locally if the
/// write fails), and [`sync`](RedisOverrides::sync), called every 250 ms
/// or so, loads the policies whose version moved, so that every instance
/// sees it within about that. Stored overrides survive restarts; an
/// ended one stops applying on every instance by its own clock, and is
/// removed from Redis by the first instance that loads it.
#[derive(Clone, Debug)]
pub struct RedisOverrides {
    store: RedisStore,
    overrides: Overrides,
    /// The version of each policy's set last loaded.
    seen: Arc<parking_lot::Mutex<hashbrown::HashMap<String, u64>>>,
}

impl RedisOverrides {
    /// A set kept in `store`'s Redis, read into `overrides` (which
    /// decisions consult).
    pub fn new(store: RedisStore, overrides: Overrides) -> RedisOverrides {
        RedisOverrides {
            store,
            overrides,
            seen: Default::default(),
        }
    }

    /// The local set decisions read.
    pub fn overrides(&self) -> &Overrides {
        &self.overrides
    }

    /// Sets the override of `selector` under `policy`, checked as
    /// [`Overrides::set`] checks it, on every instance.
    pub async fn set(&self, policy: &Policy, selector: Selector, over: Override) -> Result<()> {
        // Checked before anything is written: the scratch set is dropped.
        Overrides::new().set(policy, selector.clone(), over.clone())?;
        self.store
            .write_override(policy.name(), &selector, Some(&over))
            .await?;
        self.overrides.set(policy, selector, over)
    }

    /// Removes the override of `selector` under `policy`, on every
    /// instance: whether there was one (live) anywhere.
    pub async fn remove(&self, policy: &str, selector: &Selector) -> Result<bool> {
        let live = self.overrides.get(policy, selector).is_some();
        let (_, existed) = self.store.write_override(policy, selector, None).await?;
        self.overrides.remove(policy, selector);
        Ok(live || existed)
    }

    /// Loads the overrides of each of `policies` whose version moved since
    /// the last call (one `GET` per policy; one `HGETALL` per change).
    /// A stored override that no longer fits its policy (a reload changed
    /// the algorithm) is left out, and named in the error returned after
    /// the rest is loaded.
    pub async fn sync(&self, policies: &[Policy]) -> Result<()> {
        let mut unfit = Vec::new();
        for policy in policies {
            let version = self.store.override_version(policy.name()).await?;
            if self.seen.lock().get(policy.name()) == Some(&version) {
                continue;
            }
            let now = now_ms();
            let mut entries = Vec::new();
            for (field, text) in self.store.read_overrides(policy.name()).await? {
                let parsed =
                    Selector::parse(&field).and_then(|s| Ok((s, Override::from_text(&text)?)));
                match parsed {
                    Ok((s, o)) if o.expired_at(now) => {
                        self.store.write_override(policy.name(), &s, None).await?;
                    }
                    Ok((s, o)) if Overrides::new().set(policy, s.clone(), o.clone()).is_ok() => {
                        entries.push((s, o))
                    }
                    _ => unfit.push(format!(
                        "{}/{}",
                        policy.name(),
                        String::from_utf8_lossy(&field)
                    )),
                }
            }
            self.overrides.replace(policy, entries)?;
            self.seen.lock().insert(policy.name().to_string(), version);
        }
        if unfit.is_empty() {
            return Ok(());
        }
        Err(Error::argument(
            "override",
            format!(
                "stored overrides that no longer fit their policy were left out: {}",
                unfit.join(", ")
            ),
        ))
    }

    /// Calls [`sync`](Self::sync) every `every` with the policies
    /// `policies` gives, until the task is aborted; errors go to `on_error`.
    pub fn spawn_sync(
        &self,
        every: Duration,
        policies: impl Fn() -> Vec<Policy> + Send + 'static,
        on_error: impl Fn(Error) + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = this.sync(&policies()).await {
                    on_error(e);
                }
            }
        })
    }
}
