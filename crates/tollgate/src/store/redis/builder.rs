//! Configuring a [`RedisStore`] and connecting it: a standalone server, a
//! cluster, or the master Redis Sentinel names, the probe for the buckets' server-clock form, the scripts
//! loaded and the server's clock measured before the first decision.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;

use super::coalesce::Coalescer;
use super::connection::Connection;
use super::error::store_error;
use super::keys::{DEFAULT_PREFIX, validate_prefix};
use super::nodes::NodePipelines;
use super::scripts::Scripts;
use super::sentinel::{MasterAuth, SentinelConnection, SentinelTarget, is_sentinel_url};
use super::{Inner, RedisStore, TimeSource};
use crate::algorithm::MAX_EXACT;
use crate::{Error, MonotonicClock, Result};

/// Configures a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    urls: Vec<String>,
    prefix: String,
    time: TimeSource,
    connect_timeout: Duration,
    deadline: Option<Duration>,
    bucket_expiry_form: bool,
    pipelining: bool,
    master_name: Option<String>,
    master_auth: MasterAuth,
}

impl RedisStoreBuilder {
    /// Makes the URLs those of Redis Sentinel's sentinels (`redis://` or
    /// `rediss://`, each with that sentinel's own credentials, if any),
    /// and the store's server the master they name `master_name`. The
    /// store follows the master to its successor after a failover (the
    /// sentinels are asked again when a call fails as it does against a
    /// moved master, and every second), loading the scripts there first.
    /// The master is reached with [`master_auth`](Self::master_auth), over
    /// TLS when the sentinels are.
    ///
    /// One URL of the form `redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/master_name[/db]`
    /// (or `rediss+sentinel://`, TLS to all; `?sentinel_username=…&sentinel_password=…`
    /// for the sentinels' own credentials) says the same without this call.
    pub fn sentinel(mut self, master_name: impl Into<String>) -> Self {
        self.master_name = Some(master_name.into());
        self
    }

    /// The user (`None`: the default user) and password of the master
    /// (and its replicas) that [`sentinel`](Self::sentinel) finds. Plain
    /// URLs carry their credentials themselves.
    pub fn master_auth(mut self, username: Option<&str>, password: &str) -> Self {
        self.master_auth.username = username.map(str::to_owned);
        self.master_auth.password = Some(password.to_owned());
        self
    }

    /// Whether a token bucket, GCRA or leaky bucket on the server's clock
    /// whose interval is whole ms keeps its theoretical arrival time as
    /// its key's expiry (default `true`; see `lua/bucket_expiry.lua`):
    /// less work for the server than the form that reads `TIME` (measured
    /// in `benches/README.md`), at the server clock's ms resolution. `false` keeps that other form,
    /// exact to the µs, under the keys tollgate used for every bucket
    /// before this form existed: for a rolling upgrade from such a version
    /// (switch it on once no old instance shares the limits; the two forms
    /// keep separate state), or for µs exactness.
    pub fn bucket_expiry_form(mut self, enabled: bool) -> Self {
        self.bucket_expiry_form = enabled;
        self
    }

    /// Whether concurrent decisions leave together as pipelines when many
    /// callers are busy (default `true`): once 32 calls are in flight (per
    /// primary, on a cluster, whose calls are grouped by the primary that
    /// holds their key's slot), the callers ready at that moment share one
    /// write to the socket instead of one each, the largest part of the
    /// client's work under load; with fewer in flight a call leaves at
    /// once, as it would alone. `false` sends each script call by itself
    /// on the shared connection.
    pub fn pipelining(mut self, enabled: bool) -> Self {
        self.pipelining = enabled;
        self
    }

    /// Gives every decision a deadline (none by default). With server time,
    /// each script call carries the moment, on the server's clock, after
    /// which it must not run: a command that sat in the socket of a stalled
    /// server (SIGSTOP, `CLIENT PAUSE`, a long script) and runs after its
    /// caller gave up answers an error and writes nothing, so no decision
    /// is ever applied late. The server's clock is estimated from `TIME`
    /// at connect and every 30 s. The caller should stop waiting at the same
    /// deadline (as [`ResilientStore`](crate::store::resilient::ResilientStore)
    /// does). A server-clock fixed window's check sent alone to a standalone
    /// server, with a deadline of 16 ms or more, is held to a slightly
    /// earlier one (by at most a sixteenth of it and a ms), which lets most
    /// such checks skip reading the server's clock (see `docs/redis.md`).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Prefixes every key with `prefix` (default `tollgate:`; no braces).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Reads time from the server (default) or from the caller's clock.
    pub fn time_source(mut self, time: TimeSource) -> Self {
        self.time = time;
        self
    }

    /// How long to wait for a connection (default 2 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Connects and loads every script. One URL is a standalone server
    /// (unless that server has cluster mode enabled); several are the seed
    /// nodes of a cluster; with [`sentinel`](Self::sentinel), or one
    /// `redis+sentinel://` URL, they are sentinels.
    pub async fn connect(self) -> Result<RedisStore> {
        let store = self.open().await?;
        store.load_scripts().await?;
        if let TimeSource::Server = store.inner.time {
            store.measure_offset().await?;
        }
        Ok(store)
    }

    /// Connects without loading the scripts or measuring the clock: for
    /// callers that run scripts of their own (loaded on NOSCRIPT), such as
    /// the regions' replicator across a long link.
    pub(crate) async fn open(self) -> Result<RedisStore> {
        validate_prefix(&self.prefix)?;
        #[cfg(feature = "redis-tls")]
        {
            // redis-rs brings rustls without a crypto provider; `rediss://`
            // needs one. An application that installed its own keeps it.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let sentinel = match (&self.master_name, self.urls.as_slice()) {
            (Some(name), urls) => Some(SentinelTarget::new(urls, name, self.master_auth.clone())?),
            (None, [url]) if is_sentinel_url(url) => Some(SentinelTarget::parse(url)?),
            (None, urls) if urls.iter().any(|u| is_sentinel_url(u)) => {
                return Err(Error::argument(
                    "urls",
                    "a redis+sentinel:// URL names every sentinel itself; give it alone",
                ));
            }
            _ => None,
        };
        let conn = if let Some(target) = sentinel {
            let texts = Scripts::new().all().iter().map(|s| s.text()).collect();
            Connection::Sentinel(
                SentinelConnection::connect(
                    target,
                    self.manager_config(),
                    self.pipelining,
                    self.connect_timeout,
                    texts,
                )
                .await?,
            )
        } else {
            self.connect_plain().await?
        };
        let bucket_expiry_form =
            self.bucket_expiry_form && has_expire_time(&conn, &self.prefix).await?;
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: self.prefix,
                time: self.time,
                scripts: Scripts::new(),
                deadline: self
                    .deadline
                    .map(|d| d.as_micros().min(MAX_EXACT as u128) as u64),
                clock: MonotonicClock::new(),
                offset: AtomicI64::new(0),
                offset_error: AtomicU64::new(0),
                offset_at: AtomicU64::new(0),
                offset_master: AtomicU64::new(0),
                bucket_expiry_form,
                refunds: AtomicU64::new(0),
            }),
        };
        Ok(store)
    }

    /// How a standalone server's (or the master's) connection reconnects.
    fn manager_config(&self) -> ConnectionManagerConfig {
        manager_config(self.connect_timeout)
    }

    /// The connection to one standalone server or to a cluster.
    async fn connect_plain(&self) -> Result<Connection> {
        Ok(match self.urls.as_slice() {
            [] => return Err(Error::argument("urls", "at least one Redis URL is needed")),
            [url] if !cluster_enabled(url, self.connect_timeout).await? => {
                let client = redis::Client::open(url.as_str()).map_err(|e| bad_url(&e))?;
                let manager = ConnectionManager::new_with_config(client, self.manager_config())
                    .await
                    .map_err(|e| store_error(&e))?;
                let queue = self
                    .pipelining
                    .then(|| Arc::new(Coalescer::new(manager.clone())));
                Connection::Single(manager, queue)
            }
            urls => {
                let client = ClusterClientBuilder::new(urls.iter().map(String::as_str))
                    .connection_timeout(self.connect_timeout)
                    .build()
                    .map_err(|e| bad_url(&e))?;
                let cluster = client
                    .get_async_connection()
                    .await
                    .map_err(|e| store_error(&e))?;
                let nodes = if self.pipelining {
                    let nodes =
                        NodePipelines::connect(cluster.clone(), &urls[0], self.manager_config())
                            .await
                            .map_err(|e| store_error(&e))?;
                    Some(Arc::new(nodes))
                } else {
                    None
                };
                Connection::Cluster(cluster, nodes)
            }
        })
    }
}

/// How a connection to one server reconnects: each attempt given
/// `timeout`, one retry.
pub(super) fn manager_config(timeout: Duration) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_number_of_retries(1)
}

fn bad_url(e: &redis::RedisError) -> Error {
    // The client's parse errors do not echo the URL, so no password leaks.
    Error::argument("urls", format!("invalid Redis URL: {}", e.kind_str()))
}

trait KindStr {
    fn kind_str(&self) -> String;
}

impl KindStr for redis::RedisError {
    fn kind_str(&self) -> String {
        self.detail()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{:?}", self.kind()))
    }
}

/// Whether the server lets us use `PEXPIRETIME` (Redis 7.0 and later),
/// asked of the node that holds a key under `prefix` (on a cluster, the
/// nodes are expected to run one version): no when it does not know the
/// command, or when an ACL denies it to our user (a script calling it
/// would fail the same way); any other error fails the connect.
async fn has_expire_time(conn: &Connection, prefix: &str) -> Result<bool> {
    let mut cmd = redis::cmd("PEXPIRETIME");
    cmd.arg(format!("{prefix}{{probe}}"));
    match conn.query(&cmd).await {
        Ok(_) => Ok(true),
        Err(e)
            if e.to_string().contains("unknown command")
                || e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm) =>
        {
            Ok(false)
        }
        Err(e) => Err(store_error(&e)),
    }
}

/// Whether the server at `url` runs in cluster mode.
async fn cluster_enabled(url: &str, timeout: Duration) -> Result<bool> {
    let client = redis::Client::open(url).map_err(|e| bad_url(&e))?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| store_error(&e))?;
    let info: String = redis::cmd("INFO")
        .arg("cluster")
        .query_async(&mut conn)
        .await
        .map_err(|e| store_error(&e))?;
    Ok(info.contains("cluster_enabled:1"))
}

impl RedisStore {
    /// A builder for the servers at `urls`.
    pub fn builder<I, S>(urls: I) -> RedisStoreBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        RedisStoreBuilder {
            urls: urls.into_iter().map(Into::into).collect(),
            prefix: DEFAULT_PREFIX.to_string(),
            time: TimeSource::Server,
            connect_timeout: Duration::from_secs(2),
            deadline: None,
            bucket_expiry_form: true,
            pipelining: true,
            master_name: None,
            master_auth: MasterAuth::default(),
        }
    }

    /// Connects to one server (or a cluster, through one of its nodes) with
    /// the default prefix and server time.
    pub async fn connect(url: &str) -> Result<RedisStore> {
        RedisStore::builder([url]).connect().await
    }
}
