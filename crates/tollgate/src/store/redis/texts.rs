//! The scripts' texts, assembled at compile time from the files of `lua/`:
//! the prologue (time source, exact division) first, each algorithm's file,
//! and a one-line entry point last. `scripts.rs` runs them.

macro_rules! script {
    ($($file:tt),+ ; $main:expr) => {
        concat!(include_str!("lua/prologue.lua"), $(lua!($file),)+ $main)
    };
}

/// The server-clock fixed window's body after the line that names its key,
/// its cost (times 16, as text) and its deadline (nil turns its peek and
/// deadline branch off): `$entry` is `ARGV[1], ARGV[2]`, or a constant;
/// then its ending, the check's or a usage operation's.
macro_rules! fixed_window_server {
    ($entry:literal) => {
        fixed_window_server!($entry, "fixed_window_server_check.lua")
    };
    ($entry:literal, $ending:literal) => {
        concat!(
            "local key, cost, deadline = KEYS[1], ",
            $entry,
            "\n",
            include_str!("lua/fixed_window_server.lua"),
            include_str!(concat!("lua/", $ending))
        )
    };
}

/// The server-clock window's refund after the line that names its key,
/// its cost·16 (`$cost`: `ARGV[1]`, or a constant), the limit·16 (or nil
/// for a limit·16 of 10^6 or more, read from the key's name) and the
/// deadline.
macro_rules! fixed_window_server_refund {
    ($cost:literal, $full:literal, $deadline:literal) => {
        concat!(
            include_str!("lua/prologue.lua"),
            "local key, cost, full, deadline = KEYS[1], ",
            $cost,
            ", ",
            $full,
            ", ",
            $deadline,
            "\n",
            include_str!("lua/late.lua"),
            include_str!("lua/fixed_window_server_refund.lua")
        )
    };
}

/// The buckets' server-clock body after the line that names its key and
/// its two numbers (see the script's contract).
macro_rules! bucket_expiry {
    () => {
        concat!(
            "local key, need, room = KEYS[1], ARGV[1], ARGV[2]\n",
            include_str!("lua/bucket_expiry.lua"),
            include_str!("lua/bucket_expiry_add.lua")
        )
    };
}

/// A usage script on the buckets' server-clock form: the line naming its
/// key and arguments, the deadline's rule, its body, and for those that
/// consume the admission's write.
macro_rules! bucket_expiry_usage {
    ($names:literal, $file:literal $(, $end:literal)?) => {
        concat!(
            include_str!("lua/prologue.lua"),
            "local key, ",
            $names,
            "\n",
            include_str!("lua/late.lua"),
            include_str!(concat!("lua/", $file)),
            $(include_str!(concat!("lua/", $end)),)?
        )
    };
}

/// A file of `lua/`; `fixed_window_server_fn.lua` and
/// `bucket_expiry_fn.lua` are those scripts' bodies wrapped in a function
/// of its own KEYS and ARGV, for the batch; `sliding_window.lua` is its
/// function, opened with `sliding_window_roll.lua` (which its usage script
/// shares).
macro_rules! lua {
    ("fixed_window_server_fn.lua") => {
        concat!(
            "local function fixed_window_server(KEYS, ARGV)\n",
            fixed_window_server!("ARGV[1], ARGV[2]"),
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
    ("sliding_window.lua") => {
        concat!(
            "local function sliding_window(key, now, limit, window, cost, dry)\n",
            include_str!("lua/sliding_window_roll.lua"),
            include_str!("lua/sliding_window.lua")
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

/// The start of a usage script (see `lua/usage_prologue.lua`): the
/// prologues, then the time, the deadline, the operation and the
/// algorithm's numbers, `$count` in all, packed as `$format` (or as text
/// from tools), unpacked into `$names`; the clock read; `key` and `now`.
/// The algorithm's files follow, ending with the reply.
macro_rules! usage_entry {
    ($format:literal, $count:literal, $names:literal) => {
        concat!(
            include_str!("lua/prologue.lua"),
            include_str!("lua/usage_prologue.lua"),
            "
local time, deadline, op, ",
            $names,
            "
if #ARGV[1] == 8 * ",
            $count,
            " then
  time, deadline, op, ",
            $names,
            " = struct.unpack('<",
            $format,
            "', ARGV[1])
else
  time, deadline, op, ",
            $names,
            " = tonumber(ARGV[1]), tonumber(ARGV[2]),
    tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]),
    tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
end
",
            server_time!(),
            "local key, now = KEYS[1], time
"
        )
    };
}

/// A usage script: its entry, then its files (a body, see
/// `lua/usage_prologue.lua`).
macro_rules! usage_script {
    ($entry:expr; $($file:literal),+) => {
        concat!($entry, $(include_str!(concat!("lua/", $file))),+)
    };
}

pub(crate) const FIXED_WINDOW_USAGE: &str = usage_script!(
    usage_entry!("dddddd", "6", "limit, window, cost"); "fixed_window_usage.lua");
pub(crate) const FIXED_WINDOW_CALENDAR_USAGE: &str = usage_script!(
    usage_entry!("ddddddddd", "9", "limit, window, cost, s0, e0, e1"); "fixed_window_usage.lua");
pub(crate) const SLIDING_WINDOW_USAGE: &str = usage_script!(
    usage_entry!("dddddd", "6", "limit, window, cost");
    "sliding_window_roll.lua", "sliding_window_usage.lua");
pub(crate) const SLIDING_LOG_USAGE: &str = usage_script!(
    usage_entry!("dddddd", "6", "limit, window, cost");
    "decimal.lua", "sliding_log_usage.lua", "count_op.lua", "sliding_log_usage_end.lua");
pub(crate) const TOKEN_BUCKET_USAGE: &str = usage_script!(
    usage_entry!("dddddddd", "8", "drip, unit, capacity, cost, hold");
    "token_bucket_usage.lua", "debt_op.lua", "token_bucket_usage_end.lua");
// GCRA's numbers end with its max_wait, 0; the leaky bucket's with the
// cost, after which the caller puts 1: the shaper, whose admissions wait
// their backlog. Then the hold (0 but for a held check_at_most).
pub(crate) const TAT_USAGE: &str = usage_script!(
    usage_entry!("ddddddddd", "9", "drip, unit, capacity, cost, shaper, hold");
    "tat_usage.lua", "debt_op.lua", "tat_usage_end.lua");
// A held take's exact refund (refund_held): the usage script's body
// with the stamp's comparison after the state is read, as a refund.
pub(crate) const TOKEN_BUCKET_REFUND_HELD: &str = usage_script!(
    usage_entry!("dddddddd", "8", "drip, unit, capacity, cost, hold");
    "token_bucket_usage.lua", "token_bucket_refund_held.lua", "debt_op.lua",
    "token_bucket_usage_end.lua");
pub(crate) const TAT_REFUND_HELD: &str = usage_script!(
    usage_entry!("ddddddddd", "9", "drip, unit, capacity, cost, shaper, hold");
    "tat_usage.lua", "tat_refund_held.lua", "debt_op.lua", "tat_usage_end.lua");
pub(crate) const BUCKET_EXPIRY_CHARGE: &str = bucket_expiry_usage!(
    "need, room, deadline = KEYS[1], ARGV[1], ARGV[2], ARGV[3]",
    "bucket_expiry_charge.lua",
    "bucket_expiry_add.lua"
);
pub(crate) const BUCKET_EXPIRY_REFUND: &str = bucket_expiry_usage!(
    "need, deadline = KEYS[1], ARGV[1], ARGV[2]",
    "bucket_expiry_refund.lua"
);
pub(crate) const BUCKET_EXPIRY_AT_MOST: &str = bucket_expiry_usage!(
    "need, room, deadline, hold = KEYS[1], ARGV[1], ARGV[2], ARGV[4] ~= '0' and ARGV[4], ARGV[5]",
    "bucket_expiry_at_most.lua",
    "bucket_expiry_add.lua"
);
// A held check_at_most on the buckets' server-clock form, replying the
// TAT it wrote too; and the refund that compares it.
pub(crate) const BUCKET_EXPIRY_AT_MOST_HELD: &str = bucket_expiry_usage!(
    "need, room, deadline, hold = KEYS[1], ARGV[1], ARGV[2], ARGV[4] ~= '0' and ARGV[4], ARGV[5]",
    "bucket_expiry_at_most.lua",
    "bucket_expiry_held_add.lua"
);
pub(crate) const BUCKET_EXPIRY_REFUND_HELD: &str = concat!(
    include_str!("lua/prologue.lua"),
    "local key, tat0, need = KEYS[1], ARGV[1], ARGV[2]\n",
    include_str!("lua/bucket_expiry_refund_held.lua")
);
// Charge, check_at_most and refund on the server-clock window, each in
// the form of a check (see fixed_window_server.lua): the general one and
// the one for a cost of 1.
pub(crate) const FIXED_WINDOW_SERVER_CHARGE: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("ARGV[1], ARGV[2]", "fixed_window_server_charge.lua")
);
pub(crate) const FIXED_WINDOW_SERVER_CHARGE_ONE: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("'16'", "fixed_window_server_charge.lua")
);
pub(crate) const FIXED_WINDOW_SERVER_AT_MOST: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("ARGV[1], ARGV[2]", "fixed_window_server_at_most.lua")
);
pub(crate) const FIXED_WINDOW_SERVER_AT_MOST_ONE: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("'16'", "fixed_window_server_at_most.lua")
);
pub(crate) const FIXED_WINDOW_SERVER_REFUND: &str =
    fixed_window_server_refund!("ARGV[1]", "ARGV[2]", "ARGV[3]");
pub(crate) const FIXED_WINDOW_SERVER_REFUND_ONE: &str =
    fixed_window_server_refund!("'16'", "ARGV[1]", "nil");
// The same for a limit·16 of 10^6 or more, without it (the script reads
// it from the key's name when the value reaches 10^6): a check's
// arguments.
pub(crate) const FIXED_WINDOW_SERVER_REFUND_LARGE: &str =
    fixed_window_server_refund!("ARGV[1]", "nil", "ARGV[2]");
pub(crate) const FIXED_WINDOW_SERVER_REFUND_ONE_LARGE: &str =
    fixed_window_server_refund!("'16'", "nil", "nil");
// Sets or removes one override, and counts the change.
pub(crate) const OVERRIDE_WRITE: &str = include_str!("lua/override_write.lua");
// A check by a policy derived from the one naming the key, another limit.
pub(crate) const FIXED_WINDOW_SERVER_OFFSET: &str =
    include_str!("lua/fixed_window_server_offset.lua");
// Usage on the server-clock window whose cost·16 could pass 2^53: reads
// the state, `TIME`, and writes.
pub(crate) const FIXED_WINDOW_SERVER_USAGE: &str = concat!(
    include_str!("lua/prologue.lua"),
    "local function count_op(op, count, limit, cost)\n",
    include_str!("lua/count_op.lua"),
    "return after, allowed, granted, ask\nend\n",
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
    fixed_window_server!("ARGV[1], ARGV[2]")
);
pub(crate) const FIXED_WINDOW_SERVER_ONE: &str = concat!(
    include_str!("lua/prologue.lua"),
    fixed_window_server!("'16'")
);
// A check with a deadline sent alone, which proves it is on time by a
// clock key's existence (see the file's contract), then the body, its peek
// and deadline branch off.
pub(crate) const FIXED_WINDOW_SERVER_DEADLINE: &str = concat!(
    include_str!("lua/prologue.lua"),
    "local key, cost, deadline = KEYS[1], ARGV[1] or '16'\n",
    include_str!("lua/fixed_window_server_deadline.lua"),
    include_str!("lua/fixed_window_server.lua"),
    include_str!("lua/fixed_window_server_check.lua")
);
// Many server-clock window checks with a deadline in one call (see the
// file's contract): the body as `window(key, cost)`, its peek and deadline
// branch off (`deadline` nil), then the loop.
pub(crate) const FIXED_WINDOW_SERVER_GROUP: &str = concat!(
    include_str!("lua/prologue.lua"),
    "local function window(key, cost)\nlocal deadline\n",
    include_str!("lua/fixed_window_server.lua"),
    include_str!("lua/fixed_window_server_check.lua"),
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
