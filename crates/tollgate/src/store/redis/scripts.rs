//! The Lua scripts, and running them with EVALSHA.
//!
//! Each algorithm's script is its own file in `lua/`, headed by its
//! contract; the prologue (time source, exact division) comes first and a
//! one-line entry point last. Scripts are sent as EVALSHA; after NOSCRIPT
//! (a restart, a failover, `SCRIPT FLUSH`) one caller loads the script again
//! while concurrent callers wait for that load instead of starting their
//! own, and then everyone retries once.

use std::sync::atomic::{AtomicU64, Ordering};

use redis::{Cmd, RedisResult};

use super::connection::Connection;
use super::error::is_noscript;

macro_rules! script {
    ($($file:literal),+ ; $main:literal) => {
        concat!(include_str!("lua/prologue.lua"), $(include_str!(concat!("lua/", $file)),)+ $main)
    };
}

pub(crate) const FIXED_WINDOW: &str = script!("fixed_window.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn fixed_window(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))\n");
pub(crate) const SLIDING_WINDOW: &str = script!("sliding_window.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn sliding_window(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))\n");
pub(crate) const SLIDING_LOG: &str = script!("sliding_log.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn sliding_log(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]))\n");
pub(crate) const TOKEN_BUCKET: &str = script!("token_bucket.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn token_bucket(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))\n");
pub(crate) const GCRA: &str = script!("gcra.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn gcra(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]))\n");
pub(crate) const LEAKY_BUCKET: &str = script!("leaky_bucket.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn leaky_bucket(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))\n");
pub(crate) const CONCURRENCY: &str = script!("concurrency.lua";
    "\nlocal now = clock()\nif not now then\n  return {-1}\nend\nreturn concurrency(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5], ARGV[6])\n");
pub(crate) const BATCH: &str = script!("fixed_window.lua", "sliding_window.lua", "sliding_log.lua",
    "token_bucket.lua", "gcra.lua", "leaky_bucket.lua", "batch.lua"; "\nreturn batch()\n");

/// One script: its text, its SHA1, and the single-flight reload.
/// How many times one call reloads its script before giving up.
const MAX_RELOADS: u32 = 3;

#[derive(Debug)]
pub(crate) struct Script {
    name: &'static str,
    text: &'static str,
    script: redis::Script,
    /// Bumped after every successful SCRIPT LOAD.
    loads: AtomicU64,
    load_lock: tokio::sync::Mutex<()>,
}

impl Script {
    pub(crate) fn new(name: &'static str, text: &'static str) -> Script {
        Script {
            name,
            text,
            script: redis::Script::new(text),
            loads: AtomicU64::new(0),
            load_lock: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn name(&self) -> &'static str {
        self.name
    }

    pub(crate) fn sha(&self) -> &str {
        self.script.get_hash()
    }

    /// How many times this script was loaded (connect included).
    pub(crate) fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// Loads the script (on every primary of a cluster).
    pub(crate) async fn load(&self, conn: &Connection) -> RedisResult<()> {
        let mut cmd = redis::cmd("SCRIPT");
        cmd.arg("LOAD").arg(self.text);
        conn.query(&cmd).await?;
        self.loads.fetch_add(1, Ordering::Relaxed);
        crate::metrics::record_script_load();
        Ok(())
    }

    /// Reloads after NOSCRIPT, unless another caller did so since `seen`.
    async fn reload(&self, conn: &Connection, seen: u64) -> RedisResult<()> {
        let _guard = self.load_lock.lock().await;
        if self.loads.load(Ordering::Acquire) != seen {
            return Ok(());
        }
        self.load(conn).await
    }

    fn evalsha(&self, keys: &[&[u8]], args: &[Arg<'_>]) -> Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash()).arg(keys.len());
        for key in keys {
            cmd.arg(*key);
        }
        for arg in args {
            match arg {
                Arg::Int(n) => cmd.arg(*n),
                Arg::Str(s) => cmd.arg(*s),
            };
        }
        cmd
    }

    /// Runs the script; NOSCRIPT is handled here and never reaches callers.
    pub(crate) async fn run(
        &self,
        conn: &Connection,
        keys: &[&[u8]],
        args: &[Arg<'_>],
    ) -> RedisResult<Vec<i64>> {
        let cmd = self.evalsha(keys, args);
        let mut reloads = 0;
        loop {
            // Read before sending: if another caller loads the script after
            // this point, our NOSCRIPT may predate its load and a retry
            // suffices; if not, we load. Each round trip that still sees
            // NOSCRIPT met a newer flush (or a node that never had the
            // script, after a failover), so a few rounds are enough.
            let seen = self.loads.load(Ordering::Acquire);
            match conn.query(&cmd).await {
                Err(e) if is_noscript(&e) && reloads < MAX_RELOADS => {
                    self.reload(conn, seen).await?;
                    reloads += 1;
                }
                other => return Ok(redis::from_redis_value(other?)?),
            }
        }
    }
}

/// A script argument: a number or a text.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Int(u64),
    Str(&'a str),
}

/// Every script of the store.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) fixed_window: Script,
    pub(crate) sliding_window: Script,
    pub(crate) sliding_log: Script,
    pub(crate) token_bucket: Script,
    pub(crate) gcra: Script,
    pub(crate) leaky_bucket: Script,
    pub(crate) concurrency: Script,
    pub(crate) batch: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            fixed_window: Script::new("fixed_window", FIXED_WINDOW),
            sliding_window: Script::new("sliding_window", SLIDING_WINDOW),
            sliding_log: Script::new("sliding_log", SLIDING_LOG),
            token_bucket: Script::new("token_bucket", TOKEN_BUCKET),
            gcra: Script::new("gcra", GCRA),
            leaky_bucket: Script::new("leaky_bucket", LEAKY_BUCKET),
            concurrency: Script::new("concurrency", CONCURRENCY),
            batch: Script::new("batch", BATCH),
        }
    }

    pub(crate) fn all(&self) -> [&Script; 8] {
        [
            &self.fixed_window,
            &self.sliding_window,
            &self.sliding_log,
            &self.token_bucket,
            &self.gcra,
            &self.leaky_bucket,
            &self.concurrency,
            &self.batch,
        ]
    }
}
