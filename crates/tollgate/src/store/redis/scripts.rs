//! The Lua scripts, and running them with EVALSHA.
//!
//! Each algorithm's script is its own file in `lua/`, headed by its
//! contract, and assembled in `texts.rs`. Scripts are sent as EVALSHA; after NOSCRIPT
//! (a restart, a failover, `SCRIPT FLUSH`) one caller loads the script again
//! while concurrent callers wait for that load instead of starting their
//! own, and then everyone retries once.

use std::sync::atomic::{AtomicU64, Ordering};

use redis::{Cmd, RedisResult, Value};

use super::coalesce::WindowCheck;
use super::connection::Connection;
use super::error::is_noscript;
use super::pack::Arg;
use super::texts::*;

/// How many times one call reloads its script before giving up.
const MAX_RELOADS: u32 = 3;

/// One script: its text, its SHA1, and the single-flight reload.
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

    pub(crate) fn text(&self) -> &'static str {
        self.text
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
                Arg::Bin(b) => cmd.arg(&b[..]),
                Arg::Str(s) => cmd.arg(*s),
            };
        }
        cmd
    }

    /// Runs the script; NOSCRIPT is handled here and never reaches callers.
    pub(crate) async fn run<T: redis::FromRedisValue>(
        &self,
        conn: &Connection,
        keys: &[&[u8]],
        args: &[Arg<'_>],
    ) -> RedisResult<T> {
        let mut reloads = 0;
        let mut alone = false;
        loop {
            let cmd = self.evalsha(keys, args);
            // Read before sending: if another caller loads the script after
            // this point, our NOSCRIPT may predate its load and a retry
            // suffices; if not, we load. Each round trip that still sees
            // NOSCRIPT met a newer flush (or a node that never had the
            // script, after a failover), so a few rounds are enough.
            let seen = self.loads.load(Ordering::Acquire);
            let reply = if alone {
                conn.query(&cmd).await
            } else {
                conn.query_pipelined(keys.first().copied(), cmd).await
            };
            match reply {
                Err(e) if is_noscript(&e) && reloads < MAX_RELOADS => {
                    self.reload(conn, seen).await?;
                    reloads += 1;
                }
                // Redirected or lost on a cluster primary's own connection:
                // once more through the cluster connection, which follows
                // redirects (see nodes.rs).
                Err(e) if !alone && conn.reroutes(&e) => alone = true,
                other => return Ok(redis::from_redis_value(other?)?),
            }
        }
    }

    /// Runs a server-clock window check with a deadline: in the next call
    /// of this script, the group (`lua/fixed_window_server_group.lua`),
    /// when the server is busy enough that calls queue, else `alone` with
    /// the check's key, then `clock` when given (the clock key of
    /// `lua/fixed_window_server_deadline.lua`), and `args`. Its reply as
    /// the window's script gives it.
    pub(crate) async fn run_window(
        &self,
        alone: &Script,
        conn: &Connection,
        check: WindowCheck,
        clock: Option<&[u8]>,
        args: &[Arg<'_>],
    ) -> RedisResult<Value> {
        let mut reloads = 0;
        loop {
            let seen = self.loads.load(Ordering::Acquire);
            match conn.query_window(check.clone()).await {
                None => {
                    return match clock {
                        Some(clock) => alone.run(conn, &[&check.key, clock], args).await,
                        None => alone.run(conn, &[&check.key], args).await,
                    };
                }
                Some(Err(e)) if is_noscript(&e) && reloads < MAX_RELOADS => {
                    self.reload(conn, seen).await?;
                    reloads += 1;
                }
                Some(other) => return other,
            }
        }
    }
}

/// Registers every script of the store, one line each (its field, named
/// as it is known in errors and metrics, and its text from `texts.rs`):
/// the struct [`Scripts`], its constructor and [`Scripts::all`].
macro_rules! scripts {
    ($($(#[$doc:meta])* $field:ident: $text:ident,)+) => {
        /// Every script of the store.
        #[derive(Debug)]
        pub(crate) struct Scripts {
            $($(#[$doc])* pub(crate) $field: Script,)+
        }

        /// How many scripts the store has.
        const SCRIPTS: usize = [$(stringify!($field)),+].len();

        impl Scripts {
            pub(crate) fn new() -> Scripts {
                Scripts {
                    $($field: Script::new(stringify!($field), $text),)+
                }
            }

            pub(crate) fn all(&self) -> [&Script; SCRIPTS] {
                [$(&self.$field),+]
            }
        }
    };
}

scripts! {
    fixed_window: FIXED_WINDOW,
    /// The same for calendar windows, whose bounds come as arguments.
    fixed_window_calendar: FIXED_WINDOW_CALENDAR,
    fixed_window_server: FIXED_WINDOW_SERVER,
    /// The same, for a cost of 1 without a deadline: no arguments.
    fixed_window_server_one: FIXED_WINDOW_SERVER_ONE,
    /// A window check with a deadline sent alone, on time by a clock key.
    fixed_window_server_deadline: FIXED_WINDOW_SERVER_DEADLINE,
    /// Many window checks with a deadline in one call.
    fixed_window_server_group: FIXED_WINDOW_SERVER_GROUP,
    /// The token bucket, GCRA and the leaky bucket on the server's clock.
    bucket_expiry: BUCKET_EXPIRY,
    sliding_window: SLIDING_WINDOW,
    sliding_log: SLIDING_LOG,
    token_bucket: TOKEN_BUCKET,
    gcra: GCRA,
    leaky_bucket: LEAKY_BUCKET,
    concurrency: CONCURRENCY,
    batch: BATCH,
    /// Charge, refund and check_at_most (`lua/*_usage.lua`).
    fixed_window_usage: FIXED_WINDOW_USAGE,
    fixed_window_calendar_usage: FIXED_WINDOW_CALENDAR_USAGE,
    sliding_window_usage: SLIDING_WINDOW_USAGE,
    sliding_log_usage: SLIDING_LOG_USAGE,
    token_bucket_usage: TOKEN_BUCKET_USAGE,
    /// GCRA's and the leaky bucket's.
    tat_usage: TAT_USAGE,
    /// Charge, refund and check_at_most on the buckets' server-clock form.
    bucket_expiry_charge: BUCKET_EXPIRY_CHARGE,
    bucket_expiry_refund: BUCKET_EXPIRY_REFUND,
    bucket_expiry_at_most: BUCKET_EXPIRY_AT_MOST,
    /// A held check_at_most's stamp and exact refund (`refund_held`).
    bucket_expiry_at_most_held: BUCKET_EXPIRY_AT_MOST_HELD,
    bucket_expiry_refund_held: BUCKET_EXPIRY_REFUND_HELD,
    token_bucket_refund_held: TOKEN_BUCKET_REFUND_HELD,
    tat_refund_held: TAT_REFUND_HELD,
    fixed_window_server_usage: FIXED_WINDOW_SERVER_USAGE,
    /// A check under an override or tier with another limit.
    fixed_window_server_offset: FIXED_WINDOW_SERVER_OFFSET,
    /// Sets or removes one shared override.
    override_write: OVERRIDE_WRITE,
    /// Charge, check_at_most and refund on the server-clock window at a
    /// check's cost, each also in the form for a cost of 1.
    fixed_window_server_charge: FIXED_WINDOW_SERVER_CHARGE,
    fixed_window_server_charge_one: FIXED_WINDOW_SERVER_CHARGE_ONE,
    fixed_window_server_at_most: FIXED_WINDOW_SERVER_AT_MOST,
    fixed_window_server_at_most_one: FIXED_WINDOW_SERVER_AT_MOST_ONE,
    fixed_window_server_refund: FIXED_WINDOW_SERVER_REFUND,
    fixed_window_server_refund_one: FIXED_WINDOW_SERVER_REFUND_ONE,
    /// The refund for a limit of 62,500 or more, which reads it from the
    /// key's name only when the cap may matter: the check's arguments.
    fixed_window_server_refund_large: FIXED_WINDOW_SERVER_REFUND_LARGE,
    fixed_window_server_refund_one_large: FIXED_WINDOW_SERVER_REFUND_ONE_LARGE,
}
