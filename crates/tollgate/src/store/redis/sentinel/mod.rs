//! Redis Sentinel: the master the sentinels name, followed to its
//! successor after a failover.
//!
//! redis-rs finds the master ([`Sentinel::async_master_for`] asks the
//! sentinels in turn and checks the node's `ROLE`); here we keep one
//! multiplexed connection to it and replace that connection when the
//! master moves. We look again at once when a call fails the way a moved
//! master makes calls fail (the connection lost or refused, `READONLY`
//! from a demoted master, `MASTERDOWN`, a timeout), and every [`POLL`] in
//! any case: a master that is frozen or cut off only makes calls hang,
//! and callers that give up at their deadline never see an error. A new
//! master gets every script loaded before the first call reaches it.
//!
//! Where the sentinels are, and the URL form naming them, is [`target`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::Sentinel;
use redis::{Cmd, ConnectionAddr, RedisError, RedisResult, Value};
use tokio::sync::Notify;

use super::coalesce::{Coalescer, WindowCheck};
use super::error::{kind_of, store_error};
use crate::{Result, StoreErrorKind};

mod master;
mod target;

pub use self::master::SentinelMaster;
use self::target::bad;
pub(crate) use self::target::{MasterAuth, SentinelTarget, is_sentinel_url};

/// How often the sentinels are asked where the master is when nothing
/// failed.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The least time between two lookups: while the sentinels still name a
/// master that is gone, failing calls ask at most ten times a second.
const RETRY: Duration = Duration::from_millis(100);

/// The master we talk to now.
pub(crate) struct Master {
    addr: ConnectionAddr,
    pub(crate) manager: ConnectionManager,
    pub(crate) queue: Option<Arc<Coalescer>>,
}

/// A connection to whichever node the sentinels name master.
pub(crate) struct SentinelConnection {
    sentinel: tokio::sync::Mutex<Sentinel>,
    target: SentinelTarget,
    config: ConnectionManagerConfig,
    pipelining: bool,
    timeout: Duration,
    /// Every script's text, loaded on a new master before it is used.
    scripts: Vec<&'static str>,
    current: RwLock<Arc<Master>>,
    wake: Arc<Notify>,
    switches: AtomicU64,
}

impl std::fmt::Debug for SentinelConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelConnection")
            .field("master_name", &self.target.master_name)
            .field("master", &self.current.read().addr)
            .field("switches", &self.switches.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl SentinelConnection {
    /// Finds the master and connects to it, and starts the task that
    /// follows it (which ends when the connection is dropped).
    pub(crate) async fn connect(
        target: SentinelTarget,
        config: ConnectionManagerConfig,
        pipelining: bool,
        timeout: Duration,
        scripts: Vec<&'static str>,
    ) -> Result<Arc<Self>> {
        let mut sentinel = Sentinel::build(target.sentinels.clone()).map_err(|e| {
            bad(format!(
                "invalid sentinel URL: {}",
                e.detail().unwrap_or("unparsable")
            ))
        })?;
        let master = find_master(&mut sentinel, &target, &config, pipelining, timeout)
            .await
            .map_err(|e| store_error(&e))?;
        let wake = Arc::new(Notify::new());
        let conn = Arc::new(SentinelConnection {
            sentinel: tokio::sync::Mutex::new(sentinel),
            target,
            config,
            pipelining,
            timeout,
            scripts,
            current: RwLock::new(Arc::new(master)),
            wake: wake.clone(),
            switches: AtomicU64::new(0),
        });
        tokio::spawn(follow(Arc::downgrade(&conn), wake));
        Ok(conn)
    }

    /// The master's connection now.
    pub(crate) fn master(&self) -> Arc<Master> {
        self.current.read().clone()
    }

    /// How many times the connection moved to a new master.
    pub(crate) fn switches(&self) -> u64 {
        self.switches.load(Ordering::Relaxed)
    }

    /// Sends one command to the master (in its pipeline queue when
    /// `pipelined`), and asks the sentinels again when it fails as a call
    /// to a moved master does.
    pub(crate) async fn query(&self, cmd: Cmd, pipelined: bool) -> RedisResult<Value> {
        let master = self.master();
        let result = match &master.queue {
            Some(queue) if pipelined => queue.query(cmd).await,
            _ => cmd.query_async(&mut master.manager.clone()).await,
        };
        if let Err(e) = &result {
            self.after_error(e);
        }
        result
    }

    /// Sends a pipeline of the caller's own commands to the master, and
    /// asks the sentinels again when it fails as a call to a moved master
    /// does.
    pub(crate) async fn query_pipeline(&self, pipe: &redis::Pipeline) -> RedisResult<Value> {
        let master = self.master();
        let result = pipe.query_async(&mut master.manager.clone()).await;
        if let Err(e) = &result {
            self.after_error(e);
        }
        result
    }

    /// A fixed window check in the master's next group of such checks
    /// (see [`Coalescer::query_window`]); `None` when it should leave as
    /// its own call.
    pub(crate) async fn query_window(&self, check: WindowCheck) -> Option<RedisResult<Value>> {
        let master = self.master();
        let result = master.queue.as_ref()?.query_window(check).await;
        if let Some(Err(e)) = &result {
            self.after_error(e);
        }
        result
    }

    /// Asks the sentinels again when a call failed as calls to a moved
    /// master fail.
    fn after_error(&self, e: &RedisError) {
        if matches!(
            kind_of(e),
            StoreErrorKind::Io | StoreErrorKind::Timeout | StoreErrorKind::Cluster
        ) {
            self.wake.notify_one();
        }
    }

    /// Asks the sentinels where the master is, and moves there (scripts
    /// loaded first) if it is not where we are.
    async fn refresh(&self) -> RedisResult<()> {
        let client = {
            let mut sentinel = self.sentinel.lock().await;
            master_client(&mut sentinel, &self.target, self.timeout).await?
        };
        let addr = client.get_connection_info().addr().clone();
        if same_addr(&addr, &self.master().addr) {
            return Ok(());
        }
        let master = open(client, &self.config, self.pipelining).await?;
        for text in &self.scripts {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(*text);
            load.query_async::<Value>(&mut master.manager.clone())
                .await?;
            crate::metrics::record_script_load();
        }
        *self.current.write() = Arc::new(master);
        self.switches.fetch_add(1, Ordering::Relaxed);
        crate::metrics::record_master_switch();
        tracing::warn!(
            master_name = %self.target.master_name,
            master = %addr,
            "Redis Sentinel: the master moved; now connected to the new master"
        );
        Ok(())
    }
}

fn same_addr(a: &ConnectionAddr, b: &ConnectionAddr) -> bool {
    a.to_string() == b.to_string()
}

/// Follows the master: waits for a failed call or the poll interval,
/// asks the sentinels, at most once every [`RETRY`]; after a failed lookup
/// asks again without waiting for either.
async fn follow(conn: Weak<SentinelConnection>, wake: Arc<Notify>) {
    let mut found = true;
    loop {
        if found {
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(POLL) => {}
            }
        }
        let Some(conn) = conn.upgrade() else {
            return;
        };
        found = conn.refresh().await.is_ok();
        drop(conn);
        tokio::time::sleep(RETRY).await;
    }
}

async fn master_client(
    sentinel: &mut Sentinel,
    target: &SentinelTarget,
    timeout: Duration,
) -> RedisResult<redis::Client> {
    // The lookup connects to sentinels and to the master it checks; a
    // frozen one would hold it forever.
    tokio::time::timeout(
        timeout,
        sentinel.async_master_for(&target.master_name, Some(&target.node)),
    )
    .await
    .map_err(|_| {
        RedisError::from((
            redis::ErrorKind::Io,
            "Redis Sentinel: no master found in time",
        ))
    })?
}

async fn find_master(
    sentinel: &mut Sentinel,
    target: &SentinelTarget,
    config: &ConnectionManagerConfig,
    pipelining: bool,
    timeout: Duration,
) -> RedisResult<Master> {
    let client = master_client(sentinel, target, timeout).await?;
    open(client, config, pipelining).await
}

async fn open(
    client: redis::Client,
    config: &ConnectionManagerConfig,
    pipelining: bool,
) -> RedisResult<Master> {
    let addr = client.get_connection_info().addr().clone();
    let manager = ConnectionManager::new_with_config(client, config.clone()).await?;
    let queue = pipelining.then(|| Arc::new(Coalescer::new(manager.clone())));
    Ok(Master {
        addr,
        manager,
        queue,
    })
}
