//! The Redis store: every decision is one atomic Lua script on the key's
//! own Redis key, on a standalone server or a Redis Cluster.
//!
//! ```no_run
//! use std::time::Duration;
//! use tollgate::{Policy, Store};
//! use tollgate::store::redis::RedisStore;
//!
//! # async fn run() -> tollgate::Result<()> {
//! let store = RedisStore::connect("redis://127.0.0.1:6379/").await?;
//! let books = Policy::fixed_window("books", 120, Duration::from_secs(60))?;
//! let decision = store.check(&books, b"user-42", 1).await?;
//! println!("allowed: {}, remaining: {}", decision.allowed, decision.remaining);
//! # Ok(()) }
//! ```
//!
//! See [`keys`] for the key layout and `lua/` for the scripts' contracts.

mod coalesce;
mod connection;
mod error;
pub mod keys;
mod scripts;
mod server_bucket;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;

use self::coalesce::Coalescer;
use self::connection::Connection;
use self::error::store_error;
use self::keys::{DEFAULT_PREFIX, SERVER_WINDOW_TAG, decimal, redis_key, tag, validate_prefix};
use self::scripts::{Arg, Script, Scripts, pack, unpack};
use self::server_bucket::ServerBucket;
use super::{BoxFuture, Lease, Request, Store};
use crate::algorithm::{Algorithm, LeaseId, MAX_EXACT};
use crate::{Clock, Decision, Error, MonotonicClock, Policy, Result, StoreErrorKind, validate_key};

/// Where the scripts read the time.
#[derive(Debug, Clone, Default)]
pub enum TimeSource {
    /// The server's clock (`TIME` in the script; for a fixed window of
    /// whole ms, and for a token bucket, GCRA or leaky bucket whose
    /// interval is whole ms, the expiry of its key, see [`keys`]):
    /// application servers with skewed clocks still agree. The default.
    #[default]
    Server,
    /// The caller's clock, passed as an argument: for Redis-compatible
    /// services that refuse `TIME` in scripts, and for the simulator. The
    /// stored time never moves backwards, so a late request cannot refill
    /// a bucket.
    Client(Arc<dyn Clock>),
}

/// A [`Store`] on Redis or Redis Cluster.
///
/// One multiplexed connection is shared by every clone and every caller, so
/// concurrent decisions pipeline on one socket. Each decision is one
/// EVALSHA of its algorithm's script on the one Redis key that holds the
/// whole state of that (policy, key) pair; every key written gets its expiry
/// in the same script.
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: Connection,
    prefix: String,
    time: TimeSource,
    scripts: Scripts,
    /// Per decision, in µs; with server time, scripts that run later than
    /// this after the call write nothing.
    deadline: Option<u64>,
    /// Our clock, against which the server's is measured: the wall clock
    /// advanced by the CPU's counter, a few ns a read (twice a call for a
    /// server-clock fixed window) where the system's costs tens; its drift
    /// from the wall clock is measured away with the offset, every 30 s.
    clock: MonotonicClock,
    /// The server's clock minus ours, in µs, as last measured (with server
    /// time only).
    offset: AtomicI64,
    /// How far that measurement can be off: half its round trip, in µs.
    offset_error: AtomicU64,
    /// When (our clock, µs) the offset was last measured or a measurement
    /// started, so that only one runs at a time.
    offset_at: AtomicU64,
    /// Whether buckets take their server-clock form: asked for (the
    /// default), and the server has `PEXPIRETIME` (Redis 7.0), probed at
    /// connect.
    bucket_form: bool,
}

/// How often the offset between our clock and the server's is measured
/// again (clocks drift apart by some parts per million).
const OFFSET_REFRESH_MICROS: u64 = 30_000_000;

/// What a store's pipelining has sent (see [`RedisStore::pipelined`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pipelined {
    /// Pipelines sent.
    pub pipelines: u64,
    /// Script calls they carried in all (calls sent alone are not counted).
    pub calls: u64,
}

/// Configures a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    urls: Vec<String>,
    prefix: String,
    time: TimeSource,
    connect_timeout: Duration,
    deadline: Option<Duration>,
    bucket_form: bool,
    pipelining: bool,
}

impl RedisStoreBuilder {
    /// Whether a token bucket, GCRA or leaky bucket on the server's clock
    /// whose interval is whole ms keeps its theoretical arrival time as
    /// its key's expiry (default `true`; see `lua/bucket_server.lua`):
    /// about 60% of the server's work of the form that reads `TIME`, at
    /// the server clock's ms resolution. `false` keeps that other form,
    /// exact to the µs, under the keys tollgate used for every bucket
    /// before this form existed: for a rolling upgrade from such a version
    /// (switch it on once no old instance shares the limits; the two forms
    /// keep separate state), or for µs exactness.
    pub fn bucket_expiry_form(mut self, enabled: bool) -> Self {
        self.bucket_form = enabled;
        self
    }

    /// Whether concurrent decisions on a standalone server leave together
    /// as pipelines when many callers are busy (default `true`): once 32
    /// calls are in flight, the callers ready at that moment share one
    /// write to the socket instead of one each, the largest part of the
    /// client's work under load; with fewer in flight a call leaves at
    /// once, as it would alone. `false` sends each script call by itself
    /// on the shared connection. A cluster's calls always leave by
    /// themselves (a cluster pipeline must stay within one slot).
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
    /// does).
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
    /// nodes of a cluster.
    pub async fn connect(self) -> Result<RedisStore> {
        validate_prefix(&self.prefix)?;
        #[cfg(feature = "redis-tls")]
        {
            // redis-rs brings rustls without a crypto provider; `rediss://`
            // needs one. An application that installed its own keeps it.
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let conn = match self.urls.as_slice() {
            [] => return Err(Error::argument("urls", "at least one Redis URL is needed")),
            [url] if !cluster_enabled(url, self.connect_timeout).await? => {
                let client = redis::Client::open(url.as_str()).map_err(|e| bad_url(&e))?;
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_number_of_retries(1);
                let manager = ConnectionManager::new_with_config(client, config)
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
                Connection::Cluster(
                    client
                        .get_async_connection()
                        .await
                        .map_err(|e| store_error(&e))?,
                )
            }
        };
        let bucket_form = self.bucket_form && has_expire_time(&conn, &self.prefix).await?;
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
                bucket_form,
            }),
        };
        store.load_scripts().await?;
        if let TimeSource::Server = store.inner.time {
            store.measure_offset().await?;
        }
        Ok(store)
    }
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
            bucket_form: true,
            pipelining: true,
        }
    }

    /// Connects to one server (or a cluster, through one of its nodes) with
    /// the default prefix and server time.
    pub async fn connect(url: &str) -> Result<RedisStore> {
        RedisStore::builder([url]).connect().await
    }

    /// Whether this store talks to a Redis Cluster.
    pub fn is_cluster(&self) -> bool {
        self.inner.conn.is_cluster()
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The Redis key holding `key`'s state under `policy`.
    pub fn key_of(&self, policy: &Policy, key: &[u8]) -> Vec<u8> {
        self.key_in_form(policy, key, &self.form(policy))
    }

    /// [`key_of`](Self::key_of), the policy's [`form`](Self::form) already
    /// known.
    fn key_in_form(&self, policy: &Policy, key: &[u8], form: &Form) -> Vec<u8> {
        let prefix = &self.inner.prefix;
        match form {
            Form::Window(w) => {
                // The form, the window in ms and the limit, which the
                // script reads when it starts a window.
                let (mut window, mut limit) = ([0; 20], [0; 20]);
                let suffix = [
                    SERVER_WINDOW_TAG.as_bytes(),
                    b":",
                    decimal(w.window / 1000, &mut window),
                    b":",
                    decimal(w.limit, &mut limit),
                ];
                redis_key(prefix, policy, key, &suffix)
            }
            Form::Bucket(b) => redis_key(prefix, policy, key, &[b.tag().as_bytes()]),
            Form::Script => redis_key(prefix, policy, key, &[tag(policy.algorithm()).as_bytes()]),
        }
    }

    /// How many times scripts were (re)loaded, connect included.
    pub fn script_loads(&self) -> u64 {
        self.inner.scripts.all().iter().map(|s| s.loads()).sum()
    }

    /// What the queue that pipelines concurrent calls (see
    /// [`RedisStoreBuilder::pipelining`]) has sent; zeros on a cluster or
    /// with pipelining off.
    pub fn pipelined(&self) -> Pipelined {
        match &self.inner.conn {
            Connection::Single(_, Some(queue)) => queue.sent(),
            _ => Pipelined::default(),
        }
    }

    /// Loads every script (on every node of a cluster). Done on connect;
    /// after a restart or a failover scripts reload themselves on NOSCRIPT.
    pub async fn load_scripts(&self) -> Result<()> {
        for script in self.inner.scripts.all() {
            script
                .load(&self.inner.conn)
                .await
                .map_err(|e| store_error(&e))?;
        }
        Ok(())
    }

    /// Measures the server's clock against ours with `TIME`, taking the
    /// middle of the round trip as the moment the server read it.
    async fn measure_offset(&self) -> Result<()> {
        let before = self.inner.clock.now_micros();
        let time: (u64, u64) = redis::from_redis_value(
            self.inner
                .conn
                .query(&redis::cmd("TIME"))
                .await
                .map_err(|e| store_error(&e))?,
        )
        .map_err(|e| store_error(&redis::RedisError::from(e)))?;
        let after = self.inner.clock.now_micros();
        let server = time.0 * 1_000_000 + time.1;
        let local = before + (after - before) / 2;
        self.inner
            .offset
            .store(server as i64 - local as i64, Ordering::Relaxed);
        self.inner
            .offset_error
            .store((after - before).div_ceil(2), Ordering::Relaxed);
        self.inner.offset_at.store(after, Ordering::Relaxed);
        Ok(())
    }

    /// The deadline argument: 0 (none), or when, on the server's clock, a
    /// call made now must have run.
    fn server_deadline(&self) -> u64 {
        match self.inner.deadline {
            Some(deadline) => self.server_now() + deadline,
            None => 0,
        }
    }

    /// Our estimate of the server's clock now, in µs (within the offset's
    /// error), measuring the offset again when it is older than 30 s.
    fn server_now(&self) -> u64 {
        let now = self.inner.clock.now_micros();
        let at = self.inner.offset_at.load(Ordering::Relaxed);
        if now.saturating_sub(at) > OFFSET_REFRESH_MICROS
            && self
                .inner
                .offset_at
                .compare_exchange(at, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let store = self.clone();
            // A failed measurement keeps the last offset; the next call
            // after the refresh interval tries again.
            runtime.spawn(async move { store.measure_offset().await });
        }
        let offset = self.inner.offset.load(Ordering::Relaxed);
        (now as i64 + offset) as u64
    }

    /// How `policy`'s state is kept here. With server time, a fixed window
    /// of whole ms and a limit below 2^49 has its server-clock form (see
    /// `lua/fixed_window_server.lua`), and so does a token bucket, GCRA or
    /// leaky bucket whose interval is whole ms, on Redis 7.0 or later (see
    /// `lua/bucket_server.lua`); everything else its algorithm's script.
    fn form(&self, policy: &Policy) -> Form {
        if !matches!(self.inner.time, TimeSource::Server) {
            return Form::Script;
        }
        match policy.algorithm() {
            Algorithm::FixedWindow(a)
                if a.window_micros().is_multiple_of(1000)
                    && a.limit() < SERVER_WINDOW_MAX_LIMIT =>
            {
                Form::Window(ServerWindow {
                    limit: a.limit(),
                    window: a.window_micros(),
                })
            }
            algorithm if self.inner.bucket_form => {
                ServerBucket::of(algorithm).map_or(Form::Script, Form::Bucket)
            }
            _ => Form::Script,
        }
    }

    /// The first two numbers of every call: the time source (-1 = the
    /// server's clock, else the client's now) and the deadline.
    fn time_args(&self) -> Result<[f64; 2]> {
        match &self.inner.time {
            TimeSource::Server => Ok([-1.0, self.server_deadline() as f64]),
            TimeSource::Client(clock) => {
                let now = clock.now_micros();
                if now >= MAX_EXACT {
                    return Err(Error::argument(
                        "now",
                        format!("the client clock reads {now}µs, beyond 2^53"),
                    ));
                }
                Ok([now as f64, 0.0])
            }
        }
    }

    /// The server-clock window's script for these arguments: the form
    /// without any for a cost of 1 (see [`ServerWindow::args`]).
    fn server_window_script(&self, args: &[String]) -> &Script {
        let s = &self.inner.scripts;
        if args.is_empty() {
            &s.fixed_window_server_one
        } else {
            &s.fixed_window_server
        }
    }

    fn script_for(&self, algorithm: &Algorithm) -> &Script {
        let s = &self.inner.scripts;
        match algorithm {
            Algorithm::FixedWindow(_) => &s.fixed_window,
            Algorithm::SlidingWindow(_) => &s.sliding_window,
            Algorithm::SlidingLog(_) => &s.sliding_log,
            Algorithm::TokenBucket(_) => &s.token_bucket,
            Algorithm::Gcra(_) => &s.gcra,
            Algorithm::LeakyBucket(_) => &s.leaky_bucket,
            Algorithm::Concurrency(_) => &s.concurrency,
        }
    }

    /// Runs a script; its reply as numbers, checked to be whole.
    async fn run(&self, script: &Script, keys: &[&[u8]], args: &[Arg<'_>]) -> Result<Vec<f64>> {
        let bytes: Vec<u8> = script
            .run(&self.inner.conn, keys, args)
            .await
            .map_err(|e| store_error(&e))?;
        let reply = unpack(&bytes)
            .filter(|r| {
                r.iter()
                    .all(|v| v.fract() == 0.0 && v.abs() < MAX_EXACT as f64)
            })
            .ok_or_else(|| Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "{} replied {} bytes that are not whole numbers below 2^53",
                    script.name(),
                    bytes.len()
                ),
            })?;
        if reply.first() == Some(&-1.0) {
            return Err(late(script));
        }
        Ok(reply)
    }

    /// Runs a server-clock form's script: text arguments, one integer
    /// back (nil when the script ran past its deadline: an error).
    async fn run_integer(&self, script: &Script, key: &[u8], args: &[String]) -> Result<i64> {
        let args: Vec<Arg<'_>> = args.iter().map(|a| Arg::Str(a)).collect();
        let reply: Option<i64> = script
            .run(&self.inner.conn, &[key], &args)
            .await
            .map_err(|e| store_error(&e))?;
        reply.ok_or_else(|| late(script))
    }

    /// The call a check of `cost` on `key` makes, for tools that drive a
    /// script without this client (`redis-benchmark`, `redis-cli`): the
    /// script's SHA1, the Redis key, and the arguments after it. Not for
    /// concurrency policies. Not a stable interface.
    #[doc(hidden)]
    pub fn evalsha_call(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
    ) -> Result<(String, Vec<u8>, Vec<String>)> {
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        match form {
            Form::Window(w) => {
                let args = w.args(cost, 0);
                let sha = self.server_window_script(&args).sha().to_string();
                return Ok((sha, redis_key, args));
            }
            Form::Bucket(b) => {
                let sha = self.inner.scripts.bucket_server.sha().to_string();
                return Ok((sha, redis_key, b.args(cost, 0, 0)));
            }
            Form::Script => {}
        }
        let [time, _] = self.time_args()?;
        let mut args = vec![time.to_string(), "0".to_string()];
        args.extend(
            params(policy.algorithm(), cost, 0)
                .iter()
                .map(f64::to_string),
        );
        let sha = self.script_for(policy.algorithm()).sha().to_string();
        Ok((sha, redis_key, args))
    }

    async fn decide(
        &self,
        policy: &Policy,
        key: &[u8],
        cost: u64,
        max_wait: u64,
    ) -> Result<Decision> {
        let form = self.form(policy);
        let redis_key = self.key_in_form(policy, key, &form);
        if let Form::Bucket(b) = form {
            let args = b.args(cost, max_wait, self.server_deadline());
            let script = &self.inner.scripts.bucket_server;
            let reply = self.run_integer(script, &redis_key, &args).await?;
            return b.decision(policy.algorithm(), reply, cost, max_wait);
        }
        if let Form::Window(w) = form {
            let sent = self.server_now();
            // As `server_deadline`, from the clock already read.
            let deadline = self.inner.deadline.map_or(0, |d| sent + d);
            let args = w.args(cost, deadline);
            let script = self.server_window_script(&args);
            let reply = self.run_integer(script, &redis_key, &args).await?;
            let error = self.inner.offset_error.load(Ordering::Relaxed);
            return w.decision(reply, sent.saturating_sub(error), self.server_now() + error);
        }
        let [time, deadline] = self.time_args()?;
        let mut numbers = vec![time, deadline];
        numbers.extend(params(policy.algorithm(), cost, max_wait));
        let cost_text;
        let mut args = vec![Arg::Bin(pack(&numbers))];
        if let Algorithm::FixedWindow(_) = policy.algorithm() {
            cost_text = cost.to_string();
            args.push(Arg::Str(&cost_text));
        }
        let reply = self
            .run(self.script_for(policy.algorithm()), &[&redis_key], &args)
            .await?;
        decision(policy, &reply)
    }

    async fn lease(
        &self,
        policy: &Policy,
        key: &[u8],
        op: &str,
        id: LeaseId,
    ) -> Result<(Decision, bool)> {
        // The same order of checks as every store: key, operation, cost.
        validate_key(key)?;
        let c = policy.require_concurrency(if op == "acquire" {
            "acquire_lease"
        } else {
            "release_lease"
        })?;
        let redis_key = self.key_of(policy, key);
        let id = id.to_string();
        let [time, deadline] = self.time_args()?;
        let numbers = [time, deadline, c.limit() as f64, c.lease_micros() as f64];
        let args = [Arg::Bin(pack(&numbers)), Arg::Str(op), Arg::Str(&id)];
        let reply = self
            .run(&self.inner.scripts.concurrency, &[&redis_key], &args)
            .await?;
        Ok((decision(policy, &reply)?, reply[0] == 1.0))
    }

    async fn batch(&self, requests: &[Request<'_>]) -> Result<Vec<Decision>> {
        let forms: Vec<Form> = requests.iter().map(|r| self.form(r.policy)).collect();
        let keys: Vec<Vec<u8>> = requests
            .iter()
            .zip(&forms)
            .map(|(r, form)| self.key_in_form(r.policy, r.key, form))
            .collect();
        for (i, k) in keys.iter().enumerate() {
            if keys[..i].contains(k) {
                return Err(super::duplicate_in_batch(requests[i].policy));
            }
        }
        if self.is_cluster() {
            let first = keys::slot(&keys[0]);
            if keys.iter().any(|k| keys::slot(k) != first) {
                return Err(Error::argument(
                    "atomic",
                    "on Redis Cluster an atomic batch needs all its keys in one slot; these are in several",
                ));
            }
        }
        let mut args = vec![Arg::Bin(pack(&self.time_args()?))];
        for (r, form) in requests.iter().zip(&forms) {
            args.push(Arg::Str(match form {
                Form::Window(_) => SERVER_WINDOW_TAG,
                Form::Bucket(b) => b.tag(),
                Form::Script => tag(r.policy.algorithm()),
            }));
            let numbers = match form {
                Form::Window(w) => vec![w.limit as f64, (w.window / 1000) as f64, r.cost as f64],
                Form::Bucket(b) => b.batch_numbers(r.cost),
                Form::Script => params(r.policy.algorithm(), r.cost, 0),
            };
            args.push(Arg::Bin(pack(&numbers)));
        }
        let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let reply = self
            .run(&self.inner.scripts.batch, &key_refs, &args)
            .await?;
        requests
            .iter()
            .zip(reply.chunks(5))
            .map(|(r, chunk)| {
                let d = decision(r.policy, chunk)?;
                // Denied as a whole, batch.lua has already reported each key
                // as a peek, denied, with the retry of those over their limit.
                Ok(d)
            })
            .collect()
    }

    fn validate(policy: &Policy, key: &[u8], cost: u64) -> Result<()> {
        validate_key(key)?;
        policy.require_rate("check")?;
        policy.validate_cost(cost)
    }
}

/// The error of a script that ran after its deadline (and wrote nothing).
fn late(script: &Script) -> Error {
    Error::Store {
        kind: StoreErrorKind::Timeout,
        message: format!(
            "the server ran {} after the decision's deadline; nothing was written",
            script.name()
        ),
    }
}

/// 2^49: the server-clock fixed window takes limits below this, so that
/// its value, remaining·16 + tag, stays below 2^53.
const SERVER_WINDOW_MAX_LIMIT: u64 = 1 << 49;

/// How a policy's state is kept on a store: its algorithm's script, or a
/// server-clock form whose key's expiry does the clock's work.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// The algorithm's own script (`lua/<algorithm>.lua`).
    Script,
    /// A fixed window whose key expires with its window.
    Window(ServerWindow),
    /// A bucket whose key expires at its theoretical arrival time.
    Bucket(ServerBucket),
}

/// A fixed window in its server-clock form (`lua/fixed_window_server.lua`).
#[derive(Debug, Clone, Copy)]
struct ServerWindow {
    limit: u64,
    /// µs, a whole number of ms.
    window: u64,
}

impl ServerWindow {
    /// The script's arguments, as text: none for a cost of 1 without a
    /// deadline (the script's form for that); else the cost times 16, and
    /// for a peek or a deadline the deadline ('0' for none).
    fn args(&self, cost: u64, deadline: u64) -> Vec<String> {
        match (cost, deadline) {
            (1, 0) => Vec::new(),
            (1.., 0) => vec![(cost * 16).to_string()],
            _ => vec![(cost * 16).to_string(), deadline.to_string()],
        }
    }

    /// The decision from the script's reply (the key's value, which is
    /// remaining·16 + tag, or -1 minus it when denied), the script having
    /// run, on the server's clock, at some time in `[earliest, latest]` µs.
    /// The tag names the window modulo 4 (tags 5 to 8 mark a key that
    /// outlives its window by a ms or two, see the script), which is exact
    /// as long as our estimate of the server's clock is within a window or
    /// so; `reset_after` is counted from `earliest`, so that a caller who
    /// waits it from the answer never comes back before the window ended.
    fn decision(&self, reply: i64, earliest: u64, latest: u64) -> Result<Decision> {
        let allowed = reply >= 0;
        let value = if allowed { reply } else { -1 - reply } as u64;
        let (remaining, tag) = (value / 16, value % 16);
        if value == 0 && allowed {
            // A peek that found no window (never denied: a denial's value
            // has a tag, which the check below asks of it).
            return Ok(Decision::from_micros(
                allowed, self.limit, self.limit, 0, 0, 0,
            ));
        }
        if !(1..=8).contains(&tag) || remaining > self.limit {
            return Err(Error::Store {
                kind: StoreErrorKind::Protocol,
                message: format!(
                    "fixed_window_server replied {reply}, which names no window of a limit of {}",
                    self.limit
                ),
            });
        }
        // The window whose index is tag - 1 modulo 4 nearest to the middle
        // of the interval the script ran in.
        let middle = earliest / 2 + latest / 2;
        let guess = middle / self.window;
        let k = match ((tag - 1) % 4 + 4 - guess % 4) % 4 {
            0 => guess,
            1 => guess + 1,
            d => guess.saturating_sub(4 - d),
        };
        let until_end = ((k + 1) * self.window)
            .saturating_sub(earliest)
            .clamp(1, self.window);
        let retry = if allowed { 0 } else { until_end };
        Ok(Decision::from_micros(
            allowed, self.limit, remaining, until_end, retry, 0,
        ))
    }
}

/// The algorithm's numbers as its script reads them (after the time and
/// the deadline). All are below 2^53 (the policy's validation sees to it),
/// so each is exact as a double.
fn params(algorithm: &Algorithm, cost: u64, max_wait: u64) -> Vec<f64> {
    let numbers = match algorithm {
        Algorithm::FixedWindow(a) => vec![a.limit(), a.window_micros(), cost],
        Algorithm::SlidingWindow(a) => vec![a.limit(), a.window_micros(), cost],
        Algorithm::SlidingLog(a) => vec![a.limit(), a.window_micros(), cost],
        Algorithm::TokenBucket(a) => {
            let r = a.rate();
            vec![
                r.units_per_micro,
                r.units_per_token,
                a.burst() * r.units_per_token,
                cost,
                max_wait,
            ]
        }
        Algorithm::Gcra(a) => {
            let r = a.rate();
            vec![
                r.units_per_micro,
                r.units_per_token,
                a.burst() * r.units_per_token,
                cost,
                max_wait,
            ]
        }
        Algorithm::LeakyBucket(a) => {
            let r = a.rate();
            vec![
                r.units_per_micro,
                r.units_per_token,
                a.capacity() * r.units_per_token,
                cost,
            ]
        }
        Algorithm::Concurrency(a) => vec![a.limit(), a.lease_micros()],
    };
    numbers.into_iter().map(|n| n as f64).collect()
}

/// A decision from a script's reply: allowed, remaining, reset, retry,
/// delay (whole numbers, checked by `run`).
fn decision(policy: &Policy, reply: &[f64]) -> Result<Decision> {
    let [allowed, remaining, reset, retry, delay] = reply[..] else {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script replied {} values instead of 5", reply.len()),
        });
    };
    if [remaining, reset, retry, delay].iter().any(|&v| v < 0.0) {
        return Err(Error::Store {
            kind: StoreErrorKind::Protocol,
            message: format!("a script replied a negative value: {reply:?}"),
        });
    }
    Ok(Decision::from_micros(
        allowed == 1.0,
        policy.limit(),
        remaining as u64,
        reset as u64,
        retry as u64,
        delay as u64,
    ))
}

impl Store for RedisStore {
    fn check<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            RedisStore::validate(policy, key, cost)?;
            self.decide(policy, key, cost, 0).await
        })
    }

    fn reserve<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        cost: u64,
        max_wait: Duration,
    ) -> BoxFuture<'a, Result<Decision>> {
        Box::pin(async move {
            validate_key(key)?;
            let max_wait = policy.validate_reservation(cost, max_wait)?;
            self.decide(policy, key, cost, max_wait).await
        })
    }

    fn check_many<'a>(
        &'a self,
        requests: &'a [Request<'a>],
        atomic: bool,
    ) -> BoxFuture<'a, Result<Vec<Decision>>> {
        Box::pin(async move {
            for r in requests {
                RedisStore::validate(r.policy, r.key, r.cost)?;
            }
            if requests.is_empty() {
                return Ok(Vec::new());
            }
            if atomic {
                return self.batch(requests).await;
            }
            // Concurrent EVALSHAs on the multiplexed connection go out as
            // one pipeline (one per node on a cluster), each reloading its
            // script on NOSCRIPT by itself.
            let decisions = futures_util::future::join_all(
                requests
                    .iter()
                    .map(|r| self.decide(r.policy, r.key, r.cost, 0)),
            )
            .await;
            decisions.into_iter().collect()
        })
    }

    fn acquire_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
    ) -> BoxFuture<'a, Result<Lease>> {
        Box::pin(async move {
            let id = LeaseId::random();
            let (decision, taken) = self.lease(policy, key, "acquire", id).await?;
            Ok(Lease {
                decision,
                id: taken.then_some(id),
            })
        })
    }

    fn release_lease<'a>(
        &'a self,
        policy: &'a Policy,
        key: &'a [u8],
        lease: LeaseId,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move { Ok(self.lease(policy, key, "release", lease).await?.1) })
    }

    fn reset<'a>(&'a self, policy: &'a Policy, key: &'a [u8]) -> BoxFuture<'a, Result<()>> {
        Box::pin(async move {
            validate_key(key)?;
            let mut cmd = redis::cmd("DEL");
            cmd.arg(self.key_of(policy, key));
            self.inner
                .conn
                .query(&cmd)
                .await
                .map_err(|e| store_error(&e))?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reply of fixed_window_server.lua for `remaining` in window `k`.
    fn reply(k: u64, remaining: u64, allowed: bool) -> i64 {
        // A key created in its window's last ms has the tag + 4: same window.
        let late = if k.is_multiple_of(2) { 4 } else { 0 };
        let value = (remaining * 16 + k % 4 + 1 + late) as i64;
        if allowed { value } else { -1 - value }
    }

    #[test]
    fn a_server_window_reply_names_its_window_despite_a_rough_clock() {
        let w = ServerWindow {
            limit: 5,
            window: 1_000_000,
        };
        let k = 1_700_000_000u64;
        let start = k * w.window;
        // Sent 300 ms into window k, answered 1 ms later.
        let d = w
            .decision(reply(k, 3, true), start + 300_000, start + 301_000)
            .unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 3);
        assert_eq!(d.reset_after, Duration::from_millis(700));
        assert_eq!(d.retry_after, Duration::ZERO);
        // Our estimate of the server's clock is already in window k + 1, or
        // even k + 2: the tag still says k, which has just ended.
        for ahead in [1_000_100, 1_900_000] {
            let d = w
                .decision(reply(k, 0, false), start + ahead, start + ahead + 1000)
                .unwrap();
            assert!(!d.allowed);
            assert_eq!(d.remaining, 0);
            assert_eq!(d.retry_after, Duration::from_micros(1), "{ahead}");
        }
        // Behind by most of a window: the tag says k + 1, a whole window
        // (the most there can be) away.
        let d = w
            .decision(reply(k + 1, 4, true), start + 900_000, start + 901_000)
            .unwrap();
        assert_eq!(d.reset_after, Duration::from_secs(1));
        // No key: nothing to reset.
        let d = w.decision(0, start, start + 1000).unwrap();
        assert_eq!(
            (d.allowed, d.remaining, d.reset_after),
            (true, 5, Duration::ZERO)
        );
        // A value without a tag, or with more left than the limit, is not
        // ours; neither is its denial.
        assert!(w.decision(-1, start, start + 1000).is_err());
        for value in [16, 9, 6 * 16 + 1] {
            assert!(w.decision(value, start, start + 1000).is_err(), "{value}");
            assert!(
                w.decision(-1 - value, start, start + 1000).is_err(),
                "{value}"
            );
        }
    }
}
