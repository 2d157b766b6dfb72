-- fixed_window_server_usage.lua: charge, refund and check_at_most on the
-- state of fixed_window_server.lua (the fixed window on the server's
-- clock, remaining·16 + tag, expiring with its window).
--
-- KEYS[1]  the state, as fixed_window_server.lua keeps it (its name ends
--          in `:<window ms>:<limit>`); remaining may be negative: a
--          window in debt, whose tag (the value modulo 16, Lua's modulo
--          being floored) still names the window
-- ARGV     as text: [1] the operation (1 charge, 2 refund, 3
--          check_at_most); [2] the cost (check_at_most's max_cost); [3]
--          the deadline in server µs (see prologue.lua), '0' for none
-- Reply    six doubles packed as the usage scripts reply (see
--          usage_prologue.lua): allowed, remaining, reset_after,
--          retry_after, 0, granted; or the single double -1 when the
--          deadline passed
-- Time     `TIME`, always: a usage call needs the window's end.
-- Rule     as fixed_window_usage.lua: a charge counts whatever is left
--          (up to 2^48 past the limit), a refund down to 0.
-- Writes   INCRBY on a live window; a window begun by a usage call is
--          SET and PEXPIREAT as fixed_window_server.lua begins one; a
--          window back to its whole limit is deleted.

local key, op = KEYS[1], ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
if ARGV[3] ~= '0' and now - ARGV[3] > 0 then
  return struct.pack('<d', -1)
end
local cost = tonumber(ARGV[2])
local window, limit = string.match(key, ':(%d+):(%d+)$')
window, limit = tonumber(window), tonumber(limit)
local k = math.floor(now / (window * 1000))
local v = tonumber(redis.call('GET', key)) or 0
local remaining = limit
-- A key whose tag names another window (one that outlives its window by
-- a ms or two) counts as none.
if v ~= 0 and (v % 16 - 1) % 4 == k % 4 then
  remaining = (v - v % 16) / 16
else
  v = 0
end
local count = limit - remaining
local after, allowed, granted, ask = count_op(tonumber(op), count, limit, cost)
if after ~= count then
  if after == 0 then
    redis.call('DEL', key)
  elseif v ~= 0 then
    redis.call('INCRBY', key, string.format('%d', (count - after) * 16))
  else
    local last = (k + 1) * window - 1
    local tag = k % 4 + 1
    local now_ms = math.floor(now / 1000)
    if last - now_ms <= 1 then
      tag, last = tag + 4, now_ms + 2
    end
    redis.call('SET', key, string.format('%d', (limit - after) * 16 + tag))
    redis.call('PEXPIREAT', key, string.format('%d', last))
  end
end
local until_end = (k + 1) * window * 1000 - now
local reset, retry, left = 0, 0, 0
if after > 0 then
  reset = until_end
end
if after < limit then
  left = limit - after
end
if ask >= 0 and after + ask > limit then
  retry = until_end
end
return struct.pack('<dddddd', allowed and 1 or 0, left, reset, retry, 0, granted)
