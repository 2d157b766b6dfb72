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
//! Accepted URL form, the one several clients share (Python's
//! `redis+sentinel` URLs, Prefect, RedisVL):
//!
//! ```text
//! redis+sentinel://[[user]:password@]host[:port][,host[:port]...]/master_name[/db][?sentinel_username=..&sentinel_password=..]
//! rediss+sentinel://...            (TLS to the sentinels and the master; `#insecure` skips certificate checks)
//! ```
//!
//! The user and password are the master's (and its replicas'), the port
//! defaults to 26379, and the sentinels' own credentials, when they have
//! any, go in the query.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::RwLock;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo, RedisError,
    RedisResult, TlsMode, Value,
};
use tokio::sync::Notify;

use super::coalesce::{Coalescer, WindowCheck};
use super::error::{kind_of, store_error};
use crate::{Error, Result, StoreErrorKind};

/// How often the sentinels are asked where the master is when nothing
/// failed.
pub(crate) const POLL: Duration = Duration::from_secs(1);

/// The least time between two lookups: while the sentinels still name a
/// master that is gone, failing calls ask at most ten times a second.
const RETRY: Duration = Duration::from_millis(100);

/// Sentinels listen on 26379 unless told otherwise.
const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// The sentinels, the master's name, and how to reach the master.
#[derive(Debug, Clone)]
pub(crate) struct SentinelTarget {
    sentinels: Vec<ConnectionInfo>,
    master_name: String,
    node: SentinelNodeConnectionInfo,
}

/// The master's credentials (from [`RedisStoreBuilder::master_auth`]).
///
/// [`RedisStoreBuilder::master_auth`]: super::RedisStoreBuilder::master_auth
#[derive(Clone, Default)]
pub(crate) struct MasterAuth {
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
}

impl std::fmt::Debug for MasterAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterAuth")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .finish()
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::argument("urls", message.into())
}

/// Whether `url` is in the `redis+sentinel://` form.
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    let lower = url.get(..18).unwrap_or(url).to_ascii_lowercase();
    lower.starts_with("redis+sentinel://") || lower.starts_with("rediss+sentinel://")
}

impl SentinelTarget {
    /// The sentinels at `urls` (`redis://` or `rediss://`, each with the
    /// sentinel's own credentials, if any), watching `master_name`; the
    /// master is reached with `auth`, over TLS when the sentinels are (in
    /// the same mode).
    pub(crate) fn new(urls: &[String], master_name: &str, auth: MasterAuth) -> Result<Self> {
        if urls.is_empty() {
            return Err(bad("Redis Sentinel needs at least one sentinel URL"));
        }
        if master_name.is_empty() {
            return Err(Error::argument("master_name", "must not be empty"));
        }
        let sentinels = urls
            .iter()
            .map(|u| {
                u.as_str().into_connection_info().map_err(|e| {
                    bad(format!(
                        "invalid sentinel URL: {}",
                        e.detail().unwrap_or("unparsable")
                    ))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let tls = sentinels.iter().find_map(|s| match s.addr() {
            ConnectionAddr::TcpTls { insecure, .. } => Some(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            }),
            _ => None,
        });
        Ok(SentinelTarget {
            sentinels,
            master_name: master_name.to_owned(),
            node: node_info(tls, &auth),
        })
    }

    /// Parses the `redis+sentinel://` form (see the module's docs).
    pub(crate) fn parse(url: &str) -> Result<Self> {
        let (tls, rest) = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("redis+sentinel") => (false, rest),
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("rediss+sentinel") => (true, rest),
            _ => return Err(bad("not a redis+sentinel:// URL")),
        };
        let (rest, insecure) = match rest.strip_suffix("#insecure") {
            Some(rest) => (rest, true),
            None => (rest, false),
        };
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let Some((authority, path)) = rest.split_once('/') else {
            return Err(bad(
                "a redis+sentinel:// URL names the master after the hosts: redis+sentinel://host:26379/mymaster",
            ));
        };
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let mut auth = MasterAuth::default();
        if let Some(userinfo) = userinfo {
            let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
            auth.username = Some(decode(user, "user")?).filter(|u| !u.is_empty());
            auth.password = Some(decode(password, "password")?).filter(|p| !p.is_empty());
        }
        let mut parts = path.split('/');
        let master_name = decode(parts.next().unwrap_or(""), "master name")?;
        if master_name.is_empty() {
            return Err(bad(
                "a redis+sentinel:// URL needs the master name after the hosts",
            ));
        }
        if let Some(db) = parts.next().filter(|d| !d.is_empty()) {
            auth.db = db.parse().map_err(|_| {
                bad(format!(
                    "a redis+sentinel:// URL's database must be a number, got {db:?}"
                ))
            })?;
        }
        if parts.next().is_some() {
            return Err(bad("a redis+sentinel:// URL's path is /master_name[/db]"));
        }
        let (mut sentinel_user, mut sentinel_password) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            match key {
                "sentinel_username" => sentinel_user = Some(decode(value, key)?),
                "sentinel_password" => sentinel_password = Some(decode(value, key)?),
                other => {
                    return Err(bad(format!(
                        "unknown redis+sentinel:// option {other:?} (known: sentinel_username, sentinel_password)"
                    )));
                }
            }
        }
        let scheme = if tls { "rediss" } else { "redis" };
        let fragment = if insecure { "#insecure" } else { "" };
        let mut sentinel_auth = RedisConnectionInfo::default();
        if let Some(user) = &sentinel_user {
            sentinel_auth = sentinel_auth.set_username(user);
        }
        if let Some(password) = &sentinel_password {
            sentinel_auth = sentinel_auth.set_password(password);
        }
        let mut sentinels = Vec::new();
        for host in hosts.split(',') {
            let has_port = host
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && !p.contains(']'));
            let address = if has_port {
                host.to_owned()
            } else {
                format!("{host}:{DEFAULT_SENTINEL_PORT}")
            };
            if host.is_empty() || host.starts_with(':') {
                return Err(bad("a redis+sentinel:// URL has an empty host"));
            }
            let info = format!("{scheme}://{address}/{fragment}")
                .into_connection_info()
                .map_err(|e| {
                    bad(format!(
                        "invalid sentinel address {address:?}: {}",
                        e.detail().unwrap_or("unparsable")
                    ))
                })?
                .set_redis_settings(sentinel_auth.clone());
            sentinels.push(info);
        }
        let mode = tls.then_some(if insecure {
            TlsMode::Insecure
        } else {
            TlsMode::Secure
        });
        Ok(SentinelTarget {
            sentinels,
            master_name,
            node: node_info(mode, &auth),
        })
    }
}

fn node_info(tls: Option<TlsMode>, auth: &MasterAuth) -> SentinelNodeConnectionInfo {
    let mut redis = RedisConnectionInfo::default().set_db(auth.db);
    if let Some(user) = &auth.username {
        redis = redis.set_username(user);
    }
    if let Some(password) = &auth.password {
        redis = redis.set_password(password);
    }
    let node = SentinelNodeConnectionInfo::default().set_redis_connection_info(redis);
    match tls {
        Some(mode) => node.set_tls_mode(mode),
        None => node,
    }
}

/// Percent-decoding of one URL part; `what` names it in the error.
fn decode(part: &str, what: &str) -> Result<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| {
                    bad(format!(
                        "a bad %-escape in the redis+sentinel:// URL's {what}"
                    ))
                })?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| bad(format!("the redis+sentinel:// URL's {what} is not UTF-8")))
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(t: &SentinelTarget) -> Vec<String> {
        t.sentinels.iter().map(|s| s.addr().to_string()).collect()
    }

    #[test]
    fn parses_the_sentinel_url_form() {
        let t =
            SentinelTarget::parse("redis+sentinel://:p%40ss@10.0.0.1,10.0.0.2:26380/mymaster/2")
                .unwrap();
        assert_eq!(hosts(&t), ["10.0.0.1:26379", "10.0.0.2:26380"]);
        assert_eq!(t.master_name, "mymaster");
        let debug = format!("{:?}", t.node);
        assert!(debug.contains("db: 2"), "{debug}");
        let t = SentinelTarget::parse(
            "REDIS+SENTINEL://u:p@[::1]:26379/m?sentinel_username=s&sentinel_password=x",
        )
        .unwrap();
        assert_eq!(t.master_name, "m");
        assert_eq!(t.sentinels.len(), 1);
        assert!(is_sentinel_url("rediss+sentinel://h/m"));
        assert!(!is_sentinel_url("redis://h/"));
    }

    #[test]
    fn bad_sentinel_urls_say_what_is_wrong() {
        for (url, says) in [
            ("redis+sentinel://h1,h2", "names the master"),
            ("redis+sentinel://h1/", "needs the master name"),
            ("redis+sentinel://h1/m/x", "must be a number"),
            ("redis+sentinel://h1/m/1/2", "path is"),
            ("redis+sentinel://h1,/m", "empty host"),
            (
                "redis+sentinel://h1/m?timeout=1",
                "unknown redis+sentinel:// option \"timeout\"",
            ),
            ("redis+sentinel://:%zz@h1/m", "%-escape"),
        ] {
            let e = SentinelTarget::parse(url).unwrap_err().to_string();
            assert!(e.contains(says), "{url}: {e}");
            assert!(!e.contains("zz"), "no secret echoed: {e}");
        }
    }
}
