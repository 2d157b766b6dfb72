-- fixed_window_server.lua: at most `limit` per window [k·window,
-- (k+1)·window), on the server's clock, with the key's expiry as the end
-- of the window, so that the hot path reads no clock: one INCRBY.
--
-- KEYS[1]  the state: a string, tag·2^50 + count, where count is what the
--          window admitted and tag = k mod 4 + 1 names the window (so a
--          live key is at least 2^50 and a new one is below it). The key
--          expires (PEXPIREAT) at the last ms of its window, end_ms - 1:
--          Redis drops a key once its ms clock passes the expiry, so the
--          key lives exactly while the server's time is inside the window.
-- ARGV     as text: [1] cost (0 peeks), [2] limit (below 2^50), [3] window
--          in whole ms (read only to create a key, where Lua's arithmetic
--          turns the text into a number), [4] the deadline in server µs
--          (see prologue.lua), absent for none; [5] present for a dry run
--          (decide without writing, for the batch).
-- Reply    one integer: the key's value after the decision (0 when there
--          is none), negated when denied; false (nil) when the deadline
--          passed. The caller reads count and tag from it; it knows the
--          window's length and, within a round trip, the server's time,
--          which with the tag gives the window's end exactly.
-- Time     the window is the one of the server's time at the command (the
--          snapshot Redis takes for expiry, in ms, exact for windows of
--          whole ms); `TIME` is read only when a window's first admission
--          creates the key, to find k and the expiry, or for a deadline.
-- Writes   an admission is one INCRBY; when it creates the key, a SET of
--          the tagged value and its PEXPIREAT (not SET's PXAT, which needs
--          Redis 6.2). A denial undoes its INCRBY.
--          Peeks and dry runs read with GET and write nothing.
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
  if now > tonumber(ARGV[4]) then
    return false
  end
end
local v
if cost == '0' or ARGV[5] then
  v = tonumber(redis.call('GET', key)) or 0
  if v % 1125899906842624 + cost > tonumber(ARGV[2]) then
    return -v
  end
  return v
end
v = redis.call('INCRBY', key, cost)
if v < 1125899906842624 then
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
  end
  local window = ARGV[3]
  local k = math.floor(now / (window * 1000))
  v = (k % 4 + 1) * 1125899906842624 + v
  redis.call('SET', key, string.format('%d', v))
  redis.call('PEXPIREAT', key, string.format('%d', (k + 1) * window - 1))
end
if v % 1125899906842624 > tonumber(ARGV[2]) then
  return -redis.call('INCRBY', key, '-' .. cost)
end
return v
