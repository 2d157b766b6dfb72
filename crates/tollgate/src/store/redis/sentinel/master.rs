//! [`SentinelMaster`]: the connection [`RedisStore`] keeps to the master
//! Redis Sentinel names, offered for commands of the caller's own.
//!
//! [`RedisStore`]: crate::store::redis::RedisStore

use std::sync::Arc;
use std::time::Duration;

use redis::FromRedisValue;

use super::super::builder::manager_config;
use super::super::error::store_error;
use super::{MasterAuth, SentinelConnection, SentinelTarget};
use crate::Result;

/// A connection to whichever node Redis Sentinel names master, followed
/// to its successor after a failover, exactly as a
/// [`RedisStore`](crate::store::redis::RedisStore) built with
/// [`sentinel`](crate::store::redis::RedisStoreBuilder::sentinel) follows
/// it, for pipelines of the caller's own commands (plain counters kept the
/// way another limiter keeps them, say). No script is loaded. Clones
/// share the connection; the task that follows the master ends when the
/// last clone is dropped.
///
/// ```no_run
/// # async fn run() -> tollgate::Result<()> {
/// use std::time::Duration;
/// use tollgate::store::redis::SentinelMaster;
///
/// let master = SentinelMaster::connect_url(
///     "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster",
///     Duration::from_secs(2),
/// )
/// .await?;
/// let mut pipe = redis::pipe();
/// pipe.cmd("INCRBY").arg("hits").arg(1).cmd("EXPIRE").arg("hits").arg(60).ignore();
/// let (hits,): (u64,) = master.query(&pipe).await?;
/// # let _ = hits;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct SentinelMaster {
    conn: Arc<SentinelConnection>,
}

impl SentinelMaster {
    /// Asks the sentinels at `sentinel_urls` (`redis://` or `rediss://`,
    /// each with that sentinel's own credentials, if any) for the master
    /// they know as `master_name`, and connects to it with `username` and
    /// `password` (none: no `AUTH`), over TLS when the sentinels are.
    /// `timeout` bounds each lookup and connection attempt.
    pub async fn connect(
        sentinel_urls: &[String],
        master_name: &str,
        username: Option<&str>,
        password: Option<&str>,
        timeout: Duration,
    ) -> Result<SentinelMaster> {
        let auth = MasterAuth {
            username: username.map(str::to_owned),
            password: password.map(str::to_owned),
            db: 0,
        };
        let target = SentinelTarget::new(sentinel_urls, master_name, auth)?;
        Self::open(target, timeout).await
    }

    /// The same from one
    /// `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/master_name[/db]`
    /// URL (the form [`RedisStoreBuilder::sentinel`] describes).
    ///
    /// [`RedisStoreBuilder::sentinel`]: crate::store::redis::RedisStoreBuilder::sentinel
    pub async fn connect_url(url: &str, timeout: Duration) -> Result<SentinelMaster> {
        Self::open(SentinelTarget::parse(url)?, timeout).await
    }

    async fn open(target: SentinelTarget, timeout: Duration) -> Result<SentinelMaster> {
        let conn = SentinelConnection::connect(
            target,
            manager_config(timeout),
            false,
            timeout,
            Vec::new(),
        )
        .await?;
        Ok(SentinelMaster { conn })
    }

    /// Sends `pipe` to the master and reads its replies as `T`. A failure
    /// of the kind a moved master causes (the connection lost or refused,
    /// `READONLY`, `MASTERDOWN`, a timeout) makes the sentinels be asked
    /// again at once; the call itself is not retried, since its commands
    /// may have run.
    pub async fn query<T: FromRedisValue>(&self, pipe: &redis::Pipeline) -> Result<T> {
        let value = self
            .conn
            .query_pipeline(pipe)
            .await
            .map_err(|e| store_error(&e))?;
        redis::from_redis_value(value).map_err(|e| store_error(&e.into()))
    }

    /// How many times the connection moved to a new master.
    pub fn master_switches(&self) -> u64 {
        self.conn.switches()
    }
}
