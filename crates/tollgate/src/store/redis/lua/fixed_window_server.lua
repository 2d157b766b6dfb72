-- fixed_window_server.lua: at most `limit` per window [k·window,
-- (k+1)·window), on the server's clock, with the key's expiry as the end
-- of the window, so that the hot path reads no clock: one INCRBY.
--
-- KEYS[1]  the state: a string, tag·2^49 + count, where count is what the
--          window admitted and the tag names the window: k mod 4 + 1, or
--          k mod 4 + 5 for a key that outlives its window (below).
--          A live key is at least 2^49 and a new one is below it.
-- Expiry   PEXPIREAT the last ms of the window, end_ms - 1: Redis drops a
--          key once its ms clock is past the expiry, so the key lives
--          exactly while the server's time is inside the window. But Redis
--          also deletes at once a key given an expiry that is not in the
--          future, and the clock may pass a ms within the call: so a key
--          created in the window's last 2 ms gets now_ms + 2 instead, one or
--          two ms too long, and the tag says so: a call that finds such a
--          key reads `TIME`, and if the window has ended starts the next.
--          (Two ms are under 3 windows of 1 ms, so the tag still tells.)
-- ARGV     as text: [1] cost (0 peeks), [2] limit (below 2^49), [3] window
--          in whole ms, [4] the deadline in server µs (see prologue.lua),
--          absent for none; [5] present for a dry run (decide without
--          writing, for the batch).
-- Reply    one integer: the key's value after the decision (0 when there
--          is none), negated when denied; false (nil) when the deadline
--          passed. The caller reads count and tag from it; it knows the
--          window's length and, within a round trip, the server's time,
--          which with the tag gives the window's end exactly.
-- Time     the window is the one of the server's time at the command (the
--          snapshot Redis takes for expiry, in ms, exact for windows of
--          whole ms); `TIME` is read only to create a key, for a key that
--          outlives its window, and for a deadline.
-- Writes   an admission is one INCRBY; a new window is a SET of the tagged
--          value and its PEXPIREAT (not SET's PXAT, which needs Redis 6.2).
--          A denial undoes its INCRBY. Peeks and dry runs read with GET
--          and write nothing.
-- Numbers  the text arguments meet numbers in arithmetic (`v - ARGV[2]`),
--          where Lua turns them into numbers itself: about 1k instructions
--          less than `tonumber`, a global looked up and a C function called.
-- Form     this file is the script's body, not a function: a function
--          would cost the hot path a closure on every call. The batch wraps
--          it in one (see scripts.rs), passing its own KEYS and ARGV.
--          Client time cannot use this form (the key's expiry runs on the
--          server's clock); it has fixed_window.lua, under another key.

local key, cost = KEYS[1], ARGV[1]
local now
if ARGV[4] then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
  if now - ARGV[4] > 0 then
    return false
  end
end
local v
if cost == '0' or ARGV[5] then
  v = tonumber(redis.call('GET', key)) or 0
  if v >= 2814749767106560 then
    -- A key that outlives its window: once the window ended, nothing counts.
    if not now then
      local t = redis.call('TIME')
      now = t[1] * 1000000 + t[2]
    end
    if math.floor(v / 562949953421312) - 5 ~= math.floor(now / (ARGV[3] * 1000)) % 4 then
      v = 0
    end
  end
  if v % 562949953421312 + cost - ARGV[2] > 0 then
    return -v
  end
  return v
end
v = redis.call('INCRBY', key, cost)
if v < 562949953421312 or v >= 2814749767106560 then
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local window = ARGV[3]
  local k = math.floor(now / (window * 1000))
  if v < 562949953421312 or math.floor(v / 562949953421312) - 5 ~= k % 4 then
    -- A new window: its count is this cost alone.
    local last = (k + 1) * window - 1
    local tag = k % 4 + 1
    local now_ms = math.floor(now / 1000)
    if last - now_ms <= 1 then
      tag, last = tag + 4, now_ms + 2
    end
    v = tag * 562949953421312 + cost
    redis.call('SET', key, string.format('%d', v))
    redis.call('PEXPIREAT', key, string.format('%d', last))
  end
end
if v % 562949953421312 - ARGV[2] > 0 then
  return -redis.call('INCRBY', key, '-' .. cost)
end
return v
