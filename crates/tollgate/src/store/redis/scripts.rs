//! The Lua scripts, and running them with EVALSHA.
//!
//! Each algorithm's script is its own file in `lua/`, headed by its
//! contract; the prologue (time source, exact division) comes first and a
//! one-line entry point last. Scripts are sent as EVALSHA; after NOSCRIPT
//! (a restart, a failover, `SCRIPT FLUSH`) one caller loads the script again
//! while concurrent callers wait for that load instead of starting their
//! own, and then everyone retries once.

use std::sync::atomic::{AtomicU64, Ordering};

use redis::{Cmd, RedisResult, Value};

use super::coalesce::WindowCheck;
use super::connection::Connection;
use super::error::is_noscript;
use super::pack::Arg;

macro_rules! script {
    ($($file:tt),+ ; $main:expr) => {
        concat!(include_str!("lua/prologue.lua"), $(lua!($file),)+ $main)
    };
}

/// The server-clock fixed window's body after the line that names its key
/// and its cost (times 16, as text): `$cost` is `ARGV[1]`, or a constant.
macro_rules! fixed_window_server {
    ($cost:literal) => {
        concat!(
            "local key, cost = KEYS[1], ",
            $cost,
            "\n",
            include_str!("lua/fixed_window_server.lua")
        )
    };
}

/// The buckets' server-clock body after the line that names its key and
/// its two numbers (see the script's contract).
macro_rules! bucket_expiry {
    () => {
        concat!(
            "local key, need, room = KEYS[1], ARGV[1], ARGV[2]\n",
            include_str!("lua/bucket_expiry.lua")
        )
    };
}

/// A file of `lua/`; `fixed_window_server_fn.lua` and
/// `bucket_expiry_fn.lua` are those scripts' bodies wrapped in a function
/// of its own KEYS and ARGV, for the batch.
macro_rules! lua {
    ("fixed_window_server_fn.lua") => {
        concat!(
            "local function fixed_window_server(KEYS, ARGV)\n",
            fixed_window_server!("ARGV[1]"),
            "end\n"
        )
    };
    ("bucket_expiry_fn.lua") => {
        concat!(
            "local function bucket_expiry(KEYS, ARGV)\n",
            bucket_expiry!(),
            "end\n"
        )
    };
    ($file:literal) => {
        include_str!(concat!("lua/", $file))
    };
}

/// Reads the server's clock when `time` is -1, and answers "late" when a
/// deadline has passed: the one text of that rule, for every entry point.
macro_rules! server_time {
    () => {
        "if time < 0 then
  local t = redis.call('TIME')
  time = t[1] * 1000000 + t[2]
  if deadline > 0 and time > deadline then
    return struct.pack('<d', -1)
  end
end
"
    };
}

/// The entry point of a one-algorithm script, inline (a function would
/// cost each call a closure): take the time, the deadline and the
/// algorithm's numbers from ARGV (packed, or as text from tools), read the
/// clock, decide, pack the reply. `$format` unpacks `$count` numbers.
macro_rules! entry {
    ($function:literal, $format:literal, $count:literal, $args:literal) => {
        concat!(
            "
local time, deadline, a1, a2, a3, a4, a5, a6
if #ARGV[1] == 8 * ",
            $count,
            " then
  time, deadline, a1, a2, a3, a4, a5, a6 = struct.unpack('<",
            $format,
            "', ARGV[1])
else
  time, deadline, a1, a2, a3, a4, a5, a6 = tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8])
end
",
            server_time!(),
            "return struct.pack('<ddddd', ",
            $function,
            "(KEYS[1], time, ",
            $args,
            "))
"
        )
    };
}

/// The entry point of a usage script (see `lua/usage_prologue.lua`): the
/// time, the deadline, the operation and up to five of the algorithm's
/// numbers, packed (or as text from tools); six doubles back.
macro_rules! usage_entry {
    ($function:literal, $args:literal) => {
        concat!(
            "
local time, deadline, op, a1, a2, a3, a4, a5, a6
if #ARGV[1] % 8 == 0 and #ARGV == 1 then
  time, deadline, op, a1, a2, a3, a4, a5, a6 = struct.unpack('<' .. string.rep('d', #ARGV[1] / 8), ARGV[1])
else
  time, deadline, op, a1, a2, a3, a4, a5, a6 = tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
end
",
            server_time!(),
            "return struct.pack('<dddddd', ",
            $function,
            "(KEYS[1], time, op, ",
            $args,
            "))
"
        )
    };
}

/// A usage script: the prologues, the algorithm's usage file, its entry.
macro_rules! usage_script {
    ($($file:literal),+ ; $function:literal, $args:literal) => {
        concat!(
            include_str!("lua/prologue.lua"),
            include_str!("lua/usage_prologue.lua"),
            $(include_str!(concat!("lua/", $file)),)+
            usage_entry!($function, $args)
        )
    };
}

pub(crate) const FIXED_WINDOW_USAGE: &str = usage_script!("usage_ops.lua", "fixed_window_usage.lua"; "fixed_window_usage", "a1, a2, a3, a4, a5, a6");
pub(crate) const SLIDING_WINDOW_USAGE: &str =
    usage_script!("sliding_window_usage.lua"; "sliding_window_usage", "a1, a2, a3");
pub(crate) const SLIDING_LOG_USAGE: &str = usage_script!("decimal.lua", "usage_ops.lua", "sliding_log_usage.lua"; "sliding_log_usage", "a1, a2, a3");
pub(crate) const TOKEN_BUCKET_USAGE: &str = usage_script!("usage_ops.lua", "token_bucket_usage.lua"; "token_bucket_usage", "a1, a2, a3, a4");
// GCRA's numbers end with its max_wait, 0; the leaky bucket's with the
// cost, after which the caller puts 1: the shaper, whose admissions wait
// their backlog.
pub(crate) const TAT_USAGE: &str =
    usage_script!("usage_ops.lua", "tat_usage.lua"; "tat_usage", "a1, a2, a3, a4, a5");
pub(crate) const BUCKET_EXPIRY_USAGE: &str = concat!(
    include_str!("lua/prologue.lua"),
    include_str!("lua/bucket_expiry_usage.lua")
);
pub(crate) const FIXED_WINDOW_SERVER_USAGE: &str = concat!(
    include_str!("lua/prologue.lua"),
    include_str!("lua/usage_ops.lua"),
    include_str!("lua/fixed_window_server_usage.lua")
);

// Fixed window's last argument is the cost as text too (the last ARGV in
// both forms), so its HINCRBY need not print the number.
pub(crate) const FIXED_WINDOW: &str = script!("fixed_window.lua";
    entry!("fixed_window", "ddddd", "5", "a1, a2, a3, ARGV[#ARGV]"));
// A calendar window: the window 0, then the bounds of two windows.
pub(crate) const FIXED_WINDOW_CALENDAR: &str = script!("fixed_window.lua";
    entry!("fixed_window", "dddddddd", "8", "a1, a2, a3, ARGV[#ARGV], nil, a4, a5, a6"));
// The fixed window on the server's clock is a body, not a function (its
// contract says why), after a line that names its key and its cost (times
// 16, as text): ARGV[1] in general, a constant in the form for a cost of 1,
// which takes no arguments.
pub(crate) const FIXED_WINDOW_SERVER: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("ARGV[1]")
);
pub(crate) const FIXED_WINDOW_SERVER_ONE: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("'16'")
);
// Many server-clock window checks with a deadline in one call (see the
// file's contract): the body as `window(key, cost)`, its peek and dry-run
// branch off (an empty ARGV), then the loop.
pub(crate) const FIXED_WINDOW_SERVER_GROUP: &str = concat!(
    include_str!("lua/prologue.lua"),
    "local none = {}\nlocal function window(key, cost)\nlocal ARGV = none\n",
    include_str!("lua/fixed_window_server.lua"),
    "end\n",
    include_str!("lua/fixed_window_server_group.lua")
);
// The token bucket, GCRA and the leaky bucket on the server's clock, with
// an interval of whole ms: one body for the three, no clock read.
pub(crate) const BUCKET_EXPIRY: &str = concat!(include_str!("lua/prologue.lua"), bucket_expiry!());
pub(crate) const SLIDING_WINDOW: &str =
    script!("sliding_window.lua"; entry!("sliding_window", "ddddd", "5", "a1, a2, a3"));
pub(crate) const SLIDING_LOG: &str =
    script!("decimal.lua", "sliding_log.lua"; entry!("sliding_log", "ddddd", "5", "a1, a2, a3"));
pub(crate) const TOKEN_BUCKET: &str =
    script!("token_bucket.lua"; entry!("token_bucket", "ddddddd", "7", "a1, a2, a3, a4, a5"));
pub(crate) const GCRA: &str =
    script!("gcra.lua"; entry!("gcra", "ddddddd", "7", "a1, a2, a3, a4, a5"));
pub(crate) const LEAKY_BUCKET: &str =
    script!("leaky_bucket.lua"; entry!("leaky_bucket", "dddddd", "6", "a1, a2, a3, a4"));
pub(crate) const CONCURRENCY: &str = script!("decimal.lua", "concurrency.lua";
    entry!("concurrency", "dddd", "4", "a1, a2, ARGV[#ARGV - 1], ARGV[#ARGV]"));
pub(crate) const BATCH: &str = script!("decimal.lua", "fixed_window.lua", "fixed_window_server_fn.lua",
"bucket_expiry_fn.lua", "sliding_window.lua",
"sliding_log.lua", "token_bucket.lua", "gcra.lua", "leaky_bucket.lua", "batch.lua";
concat!(
    "\nlocal time, deadline = struct.unpack('<dd', ARGV[1])\n",
    server_time!(),
    "return batch(time)\n"
));

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
    /// `args`. Its reply as the window's script gives it.
    pub(crate) async fn run_window(
        &self,
        alone: &Script,
        conn: &Connection,
        check: WindowCheck,
        args: &[Arg<'_>],
    ) -> RedisResult<Value> {
        let mut reloads = 0;
        loop {
            let seen = self.loads.load(Ordering::Acquire);
            match conn.query_window(check.clone()).await {
                None => return alone.run(conn, &[&check.key], args).await,
                Some(Err(e)) if is_noscript(&e) && reloads < MAX_RELOADS => {
                    self.reload(conn, seen).await?;
                    reloads += 1;
                }
                Some(other) => return other,
            }
        }
    }
}

/// Every script of the store.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) fixed_window: Script,
    /// The same for calendar windows, whose bounds come as arguments.
    pub(crate) fixed_window_calendar: Script,
    pub(crate) fixed_window_server: Script,
    /// The same, for a cost of 1 without a deadline: no arguments.
    pub(crate) fixed_window_server_one: Script,
    /// Many window checks with a deadline in one call.
    pub(crate) fixed_window_server_group: Script,
    /// The token bucket, GCRA and the leaky bucket on the server's clock.
    pub(crate) bucket_expiry: Script,
    pub(crate) sliding_window: Script,
    pub(crate) sliding_log: Script,
    pub(crate) token_bucket: Script,
    pub(crate) gcra: Script,
    pub(crate) leaky_bucket: Script,
    pub(crate) concurrency: Script,
    pub(crate) batch: Script,
    /// Charge, refund and check_at_most (`lua/*_usage.lua`).
    pub(crate) fixed_window_usage: Script,
    pub(crate) sliding_window_usage: Script,
    pub(crate) sliding_log_usage: Script,
    pub(crate) token_bucket_usage: Script,
    /// GCRA's and the leaky bucket's.
    pub(crate) tat_usage: Script,
    pub(crate) bucket_expiry_usage: Script,
    pub(crate) fixed_window_server_usage: Script,
}

impl Scripts {
    pub(crate) fn new() -> Scripts {
        Scripts {
            fixed_window: Script::new("fixed_window", FIXED_WINDOW),
            fixed_window_calendar: Script::new("fixed_window_calendar", FIXED_WINDOW_CALENDAR),
            fixed_window_server: Script::new("fixed_window_server", FIXED_WINDOW_SERVER),
            fixed_window_server_one: Script::new(
                "fixed_window_server_one",
                FIXED_WINDOW_SERVER_ONE,
            ),
            fixed_window_server_group: Script::new(
                "fixed_window_server_group",
                FIXED_WINDOW_SERVER_GROUP,
            ),
            bucket_expiry: Script::new("bucket_expiry", BUCKET_EXPIRY),
            sliding_window: Script::new("sliding_window", SLIDING_WINDOW),
            sliding_log: Script::new("sliding_log", SLIDING_LOG),
            token_bucket: Script::new("token_bucket", TOKEN_BUCKET),
            gcra: Script::new("gcra", GCRA),
            leaky_bucket: Script::new("leaky_bucket", LEAKY_BUCKET),
            concurrency: Script::new("concurrency", CONCURRENCY),
            batch: Script::new("batch", BATCH),
            fixed_window_usage: Script::new("fixed_window_usage", FIXED_WINDOW_USAGE),
            sliding_window_usage: Script::new("sliding_window_usage", SLIDING_WINDOW_USAGE),
            sliding_log_usage: Script::new("sliding_log_usage", SLIDING_LOG_USAGE),
            token_bucket_usage: Script::new("token_bucket_usage", TOKEN_BUCKET_USAGE),
            tat_usage: Script::new("tat_usage", TAT_USAGE),
            bucket_expiry_usage: Script::new("bucket_expiry_usage", BUCKET_EXPIRY_USAGE),
            fixed_window_server_usage: Script::new(
                "fixed_window_server_usage",
                FIXED_WINDOW_SERVER_USAGE,
            ),
        }
    }

    pub(crate) fn all(&self) -> [&Script; 20] {
        [
            &self.fixed_window,
            &self.fixed_window_calendar,
            &self.fixed_window_server,
            &self.fixed_window_server_one,
            &self.fixed_window_server_group,
            &self.bucket_expiry,
            &self.sliding_window,
            &self.sliding_log,
            &self.token_bucket,
            &self.gcra,
            &self.leaky_bucket,
            &self.concurrency,
            &self.batch,
            &self.fixed_window_usage,
            &self.sliding_window_usage,
            &self.sliding_log_usage,
            &self.token_bucket_usage,
            &self.tat_usage,
            &self.bucket_expiry_usage,
            &self.fixed_window_server_usage,
        ]
    }
}
