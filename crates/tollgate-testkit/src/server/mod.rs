//! One real `redis-server` process owned by a test: the handle, its
//! accessors and `redis-cli`. Starting, freezing, killing and restarting
//! the process are in `process.rs`; the key scan in `scan.rs`.

use std::fmt;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::resp::{Conn, Reply};
use crate::util;

/// How long [`RedisServer::start`] and [`RedisServer::restart`] wait for the
/// new process to answer `PING`.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long [`RedisServer::cli`] lets `redis-cli` run before giving up.
pub const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// Name of the server's log file (stdout and stderr) inside its directory.
const LOG_FILE: &str = "redis.log";

mod process;
mod scan;

use self::process::Process;
pub use self::scan::scan_keys_without_ttl;

/// Lifecycle state of a [`RedisServer`] process, as driven by the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerState {
    /// The process runs and serves requests.
    Running,
    /// The process was frozen with SIGSTOP ([`RedisServer::stop`]); it keeps
    /// its port, accepts TCP connections into the backlog but answers nothing.
    Stopped,
    /// The process was killed with SIGKILL ([`RedisServer::kill9`]) and reaped;
    /// the port is closed until [`RedisServer::restart`].
    Killed,
}

/// A `redis-server` process owned by the current test, listening only on
/// `127.0.0.1` on a port of its own, with its own temporary directory and no
/// persistence (`--save "" --appendonly no`).
///
/// Dropping it kills the process (SIGCONT, then SIGKILL) and removes the
/// directory, also when the test panics. If the test process itself is killed
/// without unwinding, a small watchdog shell still kills the server.
///
/// All methods take `&self`, so a server can be shared between threads
/// (e.g. `Arc<RedisServer>`), for instance to freeze it from a fault-injection
/// task while the code under test talks to it.
///
/// ```no_run
/// use std::time::Duration;
/// use tollgate_testkit::RedisServer;
///
/// let redis = RedisServer::start();
/// assert_eq!(redis.cli(&["SET", "k", "v"]), "OK");
/// redis.stop(); // SIGSTOP: requests now time out
/// assert!(!redis.ping(Duration::from_millis(200)));
/// redis.cont();
/// redis.kill9();
/// redis.restart(); // same port, empty dataset
/// assert!(redis.ping(Duration::from_secs(1)));
/// ```
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    /// Arguments after the fixed ones, kept for [`RedisServer::restart`].
    args: Vec<String>,
    program: Program,
    /// The `--requirepass` among the arguments: the harness's own
    /// connections and `cli` authenticate with it.
    password: Option<String>,
    inner: Mutex<Inner>,
}

/// What a [`RedisServer`] process runs.
#[derive(Debug, Clone)]
pub(crate) enum Program {
    /// `redis-server`.
    Server,
    /// `redis-sentinel` with a config file of this text, written into the
    /// process's directory before its first start (Sentinel rewrites it as
    /// it learns the topology, and reads it back on a restart).
    Sentinel(String),
}

/// Name of a sentinel's config file inside its directory.
const SENTINEL_CONFIG: &str = "sentinel.conf";

struct Inner {
    state: ServerState,
    pid: u32,
    process: Option<Process>,
}

impl RedisServer {
    /// Starts a server on a free loopback port and waits until it answers
    /// `PING`.
    ///
    /// # Panics
    ///
    /// If `redis-server` is not installed, or the server does not come up
    /// within [`STARTUP_TIMEOUT`] (the message includes the end of its log).
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }

    /// Like [`RedisServer::start`], with extra `redis-server` command-line
    /// arguments appended after the harness's own (so they win), e.g.
    /// `&["--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"]`.
    ///
    /// # Panics
    ///
    /// As [`RedisServer::start`].
    pub fn start_with(extra_args: &[&str]) -> RedisServer {
        let extra: Vec<String> = extra_args.iter().map(|s| (*s).to_owned()).collect();
        Self::launch("redis", extra, &mut || (util::free_port(), Vec::new()))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The TCP port the server listens on (stays the same across restarts).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:port`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Connection URL, `redis://127.0.0.1:PORT/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Process id of the current process, or of the last one if the server
    /// is [`ServerState::Killed`]. Changes on [`RedisServer::restart`].
    pub fn pid(&self) -> u32 {
        self.lock().pid
    }

    /// The server's own working directory (`--dir`); removed on drop.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of the server log (its stdout and stderr, across restarts).
    pub fn log_path(&self) -> PathBuf {
        self.dir.join(LOG_FILE)
    }

    /// The last `lines` lines of the server log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        util::file_tail(&self.log_path(), lines)
    }

    /// Current lifecycle state.
    pub fn state(&self) -> ServerState {
        self.lock().state
    }

    /// Whether the server answers `PING` with `PONG` within `timeout`
    /// (connect, write and read are each bounded by it). Returns `false` for
    /// a stopped or killed server instead of hanging.
    pub fn ping(&self, timeout: Duration) -> bool {
        self.conn(timeout)
            .and_then(|mut c| c.cmd(&["PING"]))
            .is_ok_and(|r| r == Reply::Status("PONG".into()))
    }

    /// How many times the server has run `command` (lower case, e.g.
    /// `evalsha`), from `INFO commandstats`; 0 before the first.
    ///
    /// # Panics
    ///
    /// As [`cli`](RedisServer::cli).
    pub fn command_calls(&self, command: &str) -> u64 {
        let prefix = format!("cmdstat_{command}:calls=");
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .and_then(|rest| rest.split(',').next())
            .map_or(0, |n| n.parse().expect("a count"))
    }

    /// Calls of every command the server ran but those named in `except`
    /// (lower case, e.g. `info`, `ping`; a name ending in `*` stands for
    /// every command it starts), from `INFO commandstats`: what a client
    /// sent it, less the test's own probes.
    ///
    /// # Panics
    ///
    /// As [`cli`](RedisServer::cli).
    pub fn command_calls_except(&self, except: &[&str]) -> u64 {
        let skip = |name: &str| {
            except.iter().any(|e| match e.strip_suffix('*') {
                Some(start) => name.starts_with(start),
                None => name == *e,
            })
        };
        self.cli(&["INFO", "commandstats"])
            .lines()
            .filter_map(|l| l.strip_prefix("cmdstat_")?.split_once(":calls="))
            .filter(|(name, _)| !skip(name))
            .filter_map(|(_, rest)| rest.split(',').next()?.parse::<u64>().ok())
            .sum()
    }

    /// Runs `redis-cli -h 127.0.0.1 -p PORT ARGS...` against this server and
    /// returns its stdout without trailing whitespace (e.g. `"OK"`, `"PONG"`,
    /// an integer as text, one line per array element). Error replies are
    /// returned as text too (e.g. `"ERR unknown command ..."`).
    ///
    /// Handy for fault injection: `CONFIG SET`, `SCRIPT FLUSH`,
    /// `DEBUG SLEEP 1`, `CLIENT PAUSE 500`, `CLIENT KILL TYPE normal`, ...
    ///
    /// # Panics
    ///
    /// If the server is not running (killed or stopped), `redis-cli` is
    /// missing, fails (e.g. cannot connect) or runs longer than
    /// [`CLI_TIMEOUT`].
    pub fn cli(&self, args: &[&str]) -> String {
        let state = self.state();
        assert!(
            state == ServerState::Running,
            "redis-cli {args:?} against port {}: server is {state:?}",
            self.port
        );
        let mut full = vec![
            "-h".to_owned(),
            "127.0.0.1".to_owned(),
            "-p".to_owned(),
            self.port.to_string(),
        ];
        if let Some(password) = &self.password {
            full.extend([
                "--no-auth-warning".to_owned(),
                "-a".to_owned(),
                password.clone(),
            ]);
        }
        full.extend(args.iter().map(|s| (*s).to_owned()));
        let out = util::run_with_timeout(&util::redis_cli_bin(), &full, CLI_TIMEOUT);
        assert!(
            out.success,
            "redis-cli {args:?} against port {} failed: {}{}",
            self.port, out.stderr, out.stdout
        );
        out.stdout.trim_end().to_owned()
    }

    /// First element of `ROLE`: `master` or `slave`.
    pub(crate) fn role(&self) -> io::Result<String> {
        match self.conn(Duration::from_secs(1))?.cmd(&["ROLE"])? {
            Reply::Array(Some(items)) => items
                .first()
                .and_then(Reply::text)
                .ok_or_else(|| io::Error::other("empty ROLE reply")),
            other => Err(io::Error::other(format!("unexpected ROLE reply {other:?}"))),
        }
    }

    /// A raw connection for harness-internal queries.
    pub(crate) fn conn(&self, timeout: Duration) -> io::Result<Conn> {
        let mut conn = Conn::connect(self.port, timeout)?;
        if let Some(password) = &self.password {
            conn.text(&["AUTH", password])?;
        }
        Ok(conn)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let process = self.lock().process.take();
        if let Some(process) = process {
            process.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl fmt::Debug for RedisServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.lock();
        f.debug_struct("RedisServer")
            .field("port", &self.port)
            .field("pid", &inner.pid)
            .field("state", &inner.state)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}
