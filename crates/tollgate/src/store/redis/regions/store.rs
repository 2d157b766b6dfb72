//! [`RegionalStore`]: the local Redis store, deciding its global policies'
//! windows as one region's share of a G-counter.
//!
//! Over 400 lines on purpose: each `Store` method's regional path beside its
//! local one.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::super::RedisStore;
use super::super::algorithm;
use super::super::error::{store_error, unexpected_reply};
use super::super::pack::Arg;
use super::super::scripts::Script;
use super::keys::window_key;
use super::link::{Link, LinkStats};
use super::pending::Pending;
use super::settings::Regions;
use crate::algorithm::Usage;
use crate::store::forward::{Forward, forward};
use crate::store::{BoxFuture, HeldGrant, Request, Stamp, Store, Valid, validate};
use crate::{Clock, Decision, Error, Policy, Result, SystemClock};

const WINDOW: &str = include_str!("lua/region_window.lua");

/// A [`Store`] for one region of several: policies named global are
/// decided on this region's Redis as its component of a G-counter that a
/// [`Replicator`](super::Replicator) keeps in step with the other
/// regions'; every other policy goes to the Redis store as it is. See the
/// [module docs](super).
///
/// Global policies answer `check` (and non-atomic `check_many`); every
/// other operation on them answers `unsupported` (a component never
/// shrinks, so neither a refund nor a reset can be replicated).
#[derive(Debug, Clone)]
pub struct RegionalStore {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) local: RedisStore,
    pub(super) regions: Regions,
    global: HashSet<String>,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) pending: Pending,
    /// Whether any link is partitioned: decisions are capped at the share.
    pub(super) partitioned: AtomicBool,
    /// One per remote region, in the order of [`Regions::remotes`].
    pub(super) links: Vec<Link>,
    window: Script,
}

/// One key's global window as this region sees it (see
/// [`RegionalStore::view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegionView {
    /// When the current window started, since the Unix epoch.
    pub window_start: Duration,
    /// The window's length.
    pub window: Duration,
    /// The policy's limit.
    pub limit: u64,
    /// Every region's component here, this region's first, then the
    /// others in their configured order (0 for a region not heard from).
    pub components: Vec<(String, u64)>,
    /// Their sum.
    pub total: u64,
}

impl RegionalStore {
    /// Decides the policies named in `global` across `regions` on `local`,
    /// the window's clock the system's. A name need not be a policy yet;
    /// a policy named global that cannot be (see [`Regions::supports`])
    /// answers `unsupported` when checked.
    pub fn new<I, S>(local: RedisStore, regions: Regions, global: I) -> RegionalStore
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RegionalStore::with_clock(local, regions, global, Arc::new(SystemClock))
    }

    /// [`new`](Self::new), the windows named by `clock` (every region's
    /// clocks must agree on it; a test's manual clock).
    pub fn with_clock<I, S>(
        local: RedisStore,
        regions: Regions,
        global: I,
        clock: Arc<dyn Clock>,
    ) -> RegionalStore
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let links = regions
            .remotes()
            .iter()
            .map(|r| Link::new(r.clone()))
            .collect();
        RegionalStore {
            inner: Arc::new(Inner {
                pending: Pending::new(regions.pending_capacity(), regions.remotes().len()),
                local,
                regions,
                global: global.into_iter().map(Into::into).collect(),
                clock,
                partitioned: AtomicBool::new(false),
                links,
                window: Script::new("region_window", WINDOW),
            }),
        }
    }

    /// The regions' settings.
    pub fn regions(&self) -> &Regions {
        &self.inner.regions
    }

    /// The local Redis store.
    pub fn local(&self) -> &RedisStore {
        &self.inner.local
    }

    /// Whether `policy` is decided across regions.
    pub fn is_global(&self, policy: &Policy) -> bool {
        self.inner.global.contains(policy.name())
    }

    /// Whether this region decides as partitioned (from any remote).
    pub fn is_partitioned(&self) -> bool {
        self.inner.partitioned.load(Ordering::Relaxed)
    }

    /// Every remote region's link, in the configured order.
    pub fn links(&self) -> Vec<LinkStats> {
        self.inner.links.iter().map(Link::stats).collect()
    }

    /// Starts measuring every link's [`LinkStats::max_staleness`] afresh:
    /// the gaps that ended before now are forgotten, the one open now is
    /// still counted (a benchmark's or a test's phase).
    pub fn reset_max_staleness(&self) {
        self.inner.links.iter().for_each(Link::reset_staleness);
    }

    /// How many keys wait for replication.
    pub fn pending(&self) -> usize {
        self.inner.pending.len()
    }

    /// `key`'s current window under the global `policy`, every region's
    /// component as this region's Redis holds it: one `HGETALL`, for a
    /// debug or stats endpoint, never on the decision path.
    pub async fn view(&self, policy: &Policy, key: &[u8]) -> Result<RegionView> {
        validate::reset(key)?;
        let (window, limit) = self.window_of(policy)?;
        let index = self.inner.clock.now_micros() / window;
        let rkey = window_key(self.inner.local.prefix(), policy, key, window, index);
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&rkey);
        let value = self
            .inner
            .local
            .inner
            .conn
            .query(&cmd)
            .await
            .map_err(|e| store_error(&e))?;
        let held: Vec<(String, u64)> = redis::from_redis_value(value).map_err(unexpected_reply)?;
        let regions = &self.inner.regions;
        let components: Vec<(String, u64)> = std::iter::once(regions.name())
            .chain(regions.remotes().iter().map(String::as_str))
            .map(|r| {
                let n = held.iter().find(|(f, _)| f == r).map_or(0, |(_, n)| *n);
                (r.to_owned(), n)
            })
            .collect();
        Ok(RegionView {
            window_start: Duration::from_micros(index * window),
            window: Duration::from_micros(window),
            limit,
            total: components.iter().map(|(_, n)| n).sum(),
            components,
        })
    }

    /// The Redis key of `key`'s current window under `policy` (global or
    /// not), as the decision names it.
    pub fn window_key_of(&self, policy: &Policy, key: &[u8]) -> Vec<u8> {
        // A fixed window's time span is its length (never 0).
        let window = policy.time_span().as_micros().max(1) as u64;
        let index = self.inner.clock.now_micros() / window;
        window_key(self.inner.local.prefix(), policy, key, window, index)
    }

    /// The window (µs) and limit of a global policy, or why it cannot be.
    fn window_of(&self, policy: &Policy) -> Result<(u64, u64)> {
        Regions::supports(policy)?;
        algorithm::global(policy).map_err(|_| unsupported("global check", policy))
    }

    /// One decision of the global `policy`: one script on the local Redis.
    async fn decide(&self, policy: &Policy, key: &[u8], cost: u64) -> Result<Decision> {
        let inner = &self.inner;
        let (window, limit) = self.window_of(policy)?;
        let now = inner.clock.now_micros();
        let index = now / window;
        let end = (index + 1) * window;
        // Kept one window past its end, as a fixed window's own key is, so
        // that a late merge finds it.
        let expires = end + window;
        let rkey = window_key(inner.local.prefix(), policy, key, window, index);
        // Queued before the script so that a full queue is known first;
        // queued again after an admission (below), so that a round that
        // took the key in between still carries the admission next time.
        let queued = cost == 0 || inner.pending.mark(&rkey, expires);
        let cap = if queued && !self.is_partitioned() {
            limit
        } else {
            inner.regions.share(limit)
        };
        let (limit_s, cost_s, cap_s) = (limit.to_string(), cost.to_string(), cap.to_string());
        let ttl = (expires - now).div_ceil(1000).max(1).to_string();
        let reply: Vec<i64> = inner
            .window
            .run(
                &inner.local.inner.conn,
                &[&rkey],
                &[
                    Arg::Str(inner.regions.name()),
                    Arg::Str(&limit_s),
                    Arg::Str(&cost_s),
                    Arg::Str(&cap_s),
                    Arg::Str(&ttl),
                ],
            )
            .await
            .map_err(|e| store_error(&e))?;
        let [allowed, total, _own] = reply[..] else {
            return Err(unexpected_reply(format!(
                "region_window.lua answered {} numbers, not 3",
                reply.len()
            )));
        };
        let allowed = allowed == 1;
        if allowed && cost > 0 {
            inner.pending.remark(&rkey, expires);
        }
        let total = u64::try_from(total).unwrap_or(0);
        let until_end = end - now;
        Ok(Decision::from_micros(
            allowed,
            limit,
            limit.saturating_sub(total),
            if total == 0 { 0 } else { until_end },
            if allowed { 0 } else { until_end },
            0,
        ))
    }
}

fn unsupported(operation: &'static str, policy: &Policy) -> Error {
    Error::Unsupported {
        operation,
        algorithm: policy.algorithm().name(),
    }
}

impl Forward for RegionalStore {
    fn target(&self) -> Result<&dyn Store> {
        Ok(&self.inner.local)
    }
}

impl Store for RegionalStore {
    forward!(acquire_lease_unchecked, release_lease_unchecked);

    fn check_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self
                    .inner
                    .local
                    .check_unchecked(policy, key, cost, valid)
                    .await;
            }
            Ok(self.decide(policy, key, cost).await?.shadowed(policy))
        })
    }

    fn reserve_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self
                    .inner
                    .local
                    .reserve_unchecked(policy, key, cost, max_wait, valid)
                    .await;
            }
            Err(unsupported("reserve", policy))
        })
    }

    fn check_many_unchecked<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
            if !requests.iter().any(|r| self.is_global(r.policy)) {
                return self
                    .inner
                    .local
                    .check_many_unchecked(requests, atomic, valid)
                    .await;
            }
            if atomic {
                return Err(Error::NotAtomic {
                    reason: "a global policy's window is decided alone in each region".into(),
                });
            }
            let decisions = futures_util::future::join_all(
                requests
                    .iter()
                    .map(|r| self.check_unchecked(r.policy, r.key, r.cost, valid)),
            )
            .await;
            decisions.into_iter().collect()
        })
    }

    fn reset_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        valid: Valid,
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self.inner.local.reset_unchecked(policy, key, valid).await;
            }
            Err(unsupported("reset", policy))
        })
    }

    fn usage_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        op: Usage,
        cost: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self
                    .inner
                    .local
                    .usage_unchecked(policy, key, op, cost, valid)
                    .await;
            }
            Err(unsupported("usage", policy))
        })
    }

    fn take_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        max_cost: u64,
        hold: Duration,
        valid: Valid,
    ) -> BoxFuture<'a, Result<HeldGrant>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self
                    .inner
                    .local
                    .take_held_unchecked(policy, key, max_cost, hold, valid)
                    .await;
            }
            Err(unsupported("take_held", policy))
        })
    }

    fn refund_held_unchecked<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        stamp: Stamp,
        units: u64,
        valid: Valid,
    ) -> BoxFuture<'a, Result<Option<Decision>>> {
        Box::pin(async move {
            if !self.is_global(policy) {
                return self
                    .inner
                    .local
                    .refund_held_unchecked(policy, key, stamp, units, valid)
                    .await;
            }
            Err(unsupported("refund_held", policy))
        })
    }
}
