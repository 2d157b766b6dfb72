//! [`Replicator`]: carries this region's components to the other regions'
//! Redis, and judges from their heartbeats here whether we are
//! partitioned from them.

use std::time::Instant;

use futures_util::future::join_all;
use parking_lot::Mutex;

use super::super::error::{store_error, unexpected_reply};
use super::super::pack::Arg;
use super::super::scripts::Script;
use super::super::{RedisStore, RedisStoreBuilder};
use super::keys::heartbeat_key;
use super::link::wall_ms;
use super::pending::Taken;
use super::store::RegionalStore;
use crate::{Error, Result};

const MERGE: &str = include_str!("lua/region_merge.lua");
const HEARTBEAT: &str = include_str!("lua/region_heartbeat.lua");

/// How many commands of a round are in flight at once (the store's
/// pipelining sends them as pipelines).
const CHUNK: usize = 512;

/// How long connecting to a remote region may take.
const CONNECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a heartbeat outlives its last write.
const HEARTBEAT_TTL_MS: &str = "86400000";

/// What one [`Replicator::round`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Round {
    /// Components merged that grew, over every remote region.
    pub merged: u64,
    /// The remote regions whose round failed, with why.
    pub failed: Vec<(String, String)>,
}

/// Carries a [`RegionalStore`]'s components to the other regions' Redis:
/// every `sync_interval`, for each remote region, the keys this instance
/// admitted on since its last round there are read on the local Redis
/// (`HGET` of this region's field) and merged there as maxima
/// (`lua/region_merge.lua`), then a heartbeat says when they were read
/// (`lua/region_heartbeat.lua`). A round that fails gives its keys back
/// for the next. Its links to other regions are ordinary Redis
/// connections (TLS, auth, Cluster as [`RedisStoreBuilder`] takes them),
/// made when first needed and again after a failure.
#[derive(Debug)]
pub struct Replicator {
    store: RegionalStore,
    remotes: Vec<Remote>,
    merge: Script,
    heartbeat: Script,
    /// Commands sent, local and remote (see [`Replicator::calls`]).
    calls: std::sync::atomic::AtomicU64,
    /// Of which script calls on remote regions (merges, heartbeats).
    scripts: std::sync::atomic::AtomicU64,
}

#[derive(Debug)]
struct Remote {
    builder: RedisStoreBuilder,
    conn: Mutex<Option<RedisStore>>,
}

impl Replicator {
    /// A replicator for `store`, reaching the remote regions through
    /// `remotes`, one builder per remote region in the order of
    /// [`Regions::remotes`](super::Regions::remotes); each is given the
    /// local store's key prefix.
    pub fn new(store: RegionalStore, remotes: Vec<RedisStoreBuilder>) -> Result<Replicator> {
        let want = store.regions().remotes().len();
        if remotes.len() != want {
            return Err(Error::argument(
                "remotes",
                format!(
                    "one Redis per remote region: {want} regions, {} given",
                    remotes.len()
                ),
            ));
        }
        let prefix = store.local().prefix().to_owned();
        Ok(Replicator {
            remotes: remotes
                .into_iter()
                .map(|b| Remote {
                    builder: b.prefix(prefix.clone()),
                    conn: Mutex::new(None),
                })
                .collect(),
            store,
            merge: Script::new("region_merge", MERGE),
            heartbeat: Script::new("region_heartbeat", HEARTBEAT),
            calls: std::sync::atomic::AtomicU64::new(0),
            scripts: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// How many commands it has sent in all, to the local Redis (reads of
    /// components and heartbeats) and to the remote regions' (merges,
    /// heartbeats); connecting and script loads are not counted.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Of [`calls`](Self::calls), the scripts run on remote regions
    /// (merges and heartbeats).
    pub fn script_calls(&self) -> u64 {
        self.scripts.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count_scripts(&self, n: usize) {
        self.count(n);
        self.scripts
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    fn count(&self, n: usize) {
        self.calls
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// The store it replicates.
    pub fn store(&self) -> &RegionalStore {
        &self.store
    }

    /// Runs for ever: each remote region's rounds every `sync_interval`
    /// (a slow region delays only its own), and the heartbeats read and
    /// partitions judged as often. Drop the future (or abort its task) to
    /// stop.
    pub async fn run(&self) {
        let every = self.store.regions().interval();
        let links = (0..self.remotes.len()).map(|link| async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                self.round_into(link).await.ok();
            }
        });
        let watch = async {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                self.watch().await;
            }
        };
        futures_util::future::join(join_all(links), watch).await;
    }

    /// One round into every remote region, one after the other, then the
    /// heartbeats read here and the partitions judged: what
    /// [`run`](Self::run) does every `sync_interval`, for tests and tools
    /// that step replication themselves.
    pub async fn round(&self) -> Round {
        let mut round = Round::default();
        for link in 0..self.remotes.len() {
            match self.round_into(link).await {
                Ok(merged) => round.merged += merged,
                Err(why) => round
                    .failed
                    .push((self.store.inner.links[link].region.clone(), why)),
            }
        }
        self.watch().await;
        round
    }

    /// Reads the heartbeats the other regions left here, and judges each
    /// link (one `HGETALL` on the local Redis). Without an answer, the
    /// heartbeats known before are judged again, so a region cut off from
    /// its own Redis still comes to decide as partitioned.
    pub async fn watch(&self) {
        let inner = &self.store.inner;
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(heartbeat_key(inner.local.prefix()));
        self.count(1);
        if let Ok(value) = inner.local.inner.conn.query(&cmd).await
            && let Ok(fields) = redis::from_redis_value::<Vec<(String, u64)>>(value)
        {
            for link in &inner.links {
                let at = fields.iter().find(|(f, _)| *f == link.region);
                let count = format!("{}:n", link.region);
                let n = fields.iter().find(|(f, _)| *f == count).map_or(0, |x| x.1);
                if let Some((_, at)) = at {
                    link.heard(*at, n);
                }
            }
        }
        let after = inner.regions.partition_threshold();
        let mut any = false;
        for link in &inner.links {
            any |= link.judge(after);
        }
        inner
            .partitioned
            .store(any, std::sync::atomic::Ordering::Relaxed);
        metrics::gauge!(crate::metrics::REGION_PENDING).set(inner.pending.len() as f64);
    }

    /// One round into remote `link`, bounded by `partition_after`: the
    /// components that grew there, or why it failed.
    async fn round_into(&self, link: usize) -> std::result::Result<u64, String> {
        let inner = &self.store.inner;
        let after = inner.regions.partition_threshold();
        let remote = match self.connect(link).await {
            Ok(remote) => remote,
            Err(e) => {
                inner.links[link].failed(e.to_string());
                return Err(e.to_string());
            }
        };
        // Read before the keys are taken: every admission queued by then
        // is in this round, which the heartbeat's time claims.
        let (read, read_ms) = (Instant::now(), wall_ms());
        let now = inner.clock.now_micros();
        let taken = inner.pending.take(link, now);
        let carried = self.carry(&remote, &taken, now, read_ms);
        let result = match tokio::time::timeout(after, carried).await {
            Ok(Ok(merged)) => Ok(merged),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {after:?}")),
        };
        match result {
            Ok(merged) => {
                inner.links[link].delivered(read, merged);
                Ok(merged)
            }
            Err(why) => {
                inner.pending.give_back(link, taken);
                inner.links[link].failed(why.clone());
                Err(why)
            }
        }
    }

    /// Reads `taken`'s components here and merges them into remote
    /// `link`, then its heartbeat.
    async fn carry(
        &self,
        remote: &RedisStore,
        taken: &[Taken],
        now: u64,
        read_ms: u64,
    ) -> Result<u64> {
        let inner = &self.store.inner;
        let remote = &remote.inner.conn;
        let region = inner.regions.name();
        let local = &inner.local.inner.conn;
        let mut merged = 0;
        let read_ms = read_ms.to_string();
        for chunk in taken.chunks(CHUNK) {
            self.count(chunk.len());
            let values = join_all(chunk.iter().map(|(key, _)| async move {
                let mut cmd = redis::cmd("HGET");
                cmd.arg(key).arg(region);
                local.query_pipelined(Some(key), cmd).await
            }))
            .await;
            let mut merges: Vec<(&[u8], String, String)> = Vec::with_capacity(chunk.len());
            for ((key, expires), value) in chunk.iter().zip(values) {
                let value = value.map_err(|e| store_error(&e))?;
                let n: Option<u64> = redis::from_redis_value(value).map_err(unexpected_reply)?;
                if let Some(n) = n
                    && *expires > now
                {
                    let ttl = (expires - now).div_ceil(1000).max(1);
                    merges.push((key, n.to_string(), ttl.to_string()));
                }
            }
            self.count_scripts(merges.len());
            let replies = join_all(merges.iter().map(|(key, n, ttl)| async move {
                self.merge
                    .run::<i64>(
                        remote,
                        &[key],
                        &[Arg::Str(region), Arg::Str(n), Arg::Str(ttl)],
                    )
                    .await
            }))
            .await;
            for reply in replies {
                merged += u64::from(reply.map_err(|e| store_error(&e))? == 1);
            }
        }
        let hb = heartbeat_key(inner.local.prefix());
        let merged_s = merged.to_string();
        self.count_scripts(1);
        self.heartbeat
            .run::<i64>(
                remote,
                &[&hb],
                &[
                    Arg::Str(region),
                    Arg::Str(&read_ms),
                    Arg::Str(&merged_s),
                    Arg::Str(HEARTBEAT_TTL_MS),
                ],
            )
            .await
            .map_err(|e| store_error(&e))?;
        Ok(merged)
    }

    /// The connection to remote `link`, made now if there is none (with
    /// our two scripts loaded, so that the first round needs no reload),
    /// within [`CONNECT_WITHIN`]: apart from the rounds' own time limit,
    /// so that a long link that takes many round trips to connect still
    /// comes to carry rounds.
    async fn connect(&self, link: usize) -> Result<RedisStore> {
        let remote = &self.remotes[link];
        if let Some(conn) = remote.conn.lock().clone() {
            return Ok(conn);
        }
        let open = async {
            let conn = remote.builder.clone().open().await?;
            let (m, h) = futures_util::future::join(
                self.merge.load(&conn.inner.conn),
                self.heartbeat.load(&conn.inner.conn),
            )
            .await;
            m.and(h).map_err(|e| store_error(&e))?;
            Ok::<_, Error>(conn)
        };
        let conn = tokio::time::timeout(CONNECT_WITHIN, open)
            .await
            .map_err(|_| Error::Store {
                kind: crate::StoreErrorKind::Timeout,
                message: format!("no connection within {CONNECT_WITHIN:?}"),
            })??;
        *remote.conn.lock() = Some(conn.clone());
        Ok(conn)
    }
}
