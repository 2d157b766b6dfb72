-- prologue.lua: what every tollgate script starts with.
--
-- Calling convention shared by every script (the algorithm files list
-- their parameters; the entry point, written in scripts.rs, unpacks them,
-- reads the clock and packs the reply, inline because every function
-- defined costs each call a closure):
--   ARGV[1]  numbers packed as little-endian doubles (struct.pack '<d...';
--            tools that cannot send NUL bytes, such as redis-benchmark, may
--            send the same numbers as decimal text in ARGV[1], ARGV[2], ...):
--            first the time source, -1 = read the server's clock with TIME
--            (µs); otherwise the caller's now in µs since the Unix epoch
--            (client-time mode: each algorithm keeps its stored time from
--            moving backwards); then the deadline in server µs (0 = none:
--            in server-time mode a command that runs after it is answered
--            "late" and writes nothing, so a command delayed by a stalled
--            server is never applied late); then the algorithm's numbers.
--   Reply    the decision as five little-endian doubles in one string:
--            allowed (1|0), remaining, reset_after µs, retry_after µs,
--            delay µs; or the single double -1 when the deadline passed.
-- Every number is an integer below 2^53 (checked in Rust before the call,
-- and on every reply), so doubles carry it exactly and nothing is ever
-- truncated. Binary because it is what the server does fastest: each
-- argument costs about 0.1 µs and each tonumber 0.2, a table reply 1.1,
-- while one struct.unpack or struct.pack costs about 0.4; and a number
-- passed to redis.call is printed to text each time with '%.17g' (about
-- 2.4k instructions), so hot paths pass text or packed bytes, and
-- expiries (whole ms, below 2^53) as string.format('%d', ms) (1.8k).
-- Each call runs the whole text again, so the scripts define no shared
-- locals and few functions: a function costs a closure on every call and
-- each upvalue it captures more, while math.floor or struct.pack read as
-- globals cost next to nothing. The batch's dry run ("decide without
-- writing") is therefore an argument, `dry`, of every algorithm.
-- Division: for integers 0 <= a < 2^53 and b >= 1, math.floor(a / b) and
-- math.ceil(a / b) are exact (the rounding error of a / b is below 1/b).

if not redis.REDIS_VERSION_NUM and redis.replicate_commands then
  -- Before Redis 5, scripts that call TIME must replicate effects. Redis 7
  -- (which has REDIS_VERSION_NUM) replicates effects only.
  redis.replicate_commands()
end
