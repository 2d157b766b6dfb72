-- fixed_window_server_offset.lua: a check of a fixed window on the
-- server's clock by a policy derived from the one whose limit names the
-- key (an override or a tier with another limit, the same window): the
-- key, its value and its expiry are the base's (fixed_window_server.lua,
-- whose encoding this shares), so both count in one state; only where
-- admissions stop differs, by the offset.
--
-- KEYS[1]  the base's state, its name ending in `:<window ms>:<base limit>`:
--          remaining·16 + tag of the base's limit (negative once more was
--          admitted than the base allows: the base then denies, as for a
--          window in debt).
-- ARGV     as text: [1] the cost·16 (0 peeks); [2] the deadline in server
--          µs ('0' for none); [3] the offset·16, (limit - base limit)·16,
--          signed.
-- Reply    the value as the derived policy sees it, value + offset·16:
--          after the admission; when denied, -1 minus it (nothing
--          written); a table of it when it is negative (in debt for this
--          limit); 0 for a peek that finds no window; false (nil) when the
--          deadline passed. The caller decodes it as fixed_window_server's
--          reply, with the derived limit.
-- Time     reads `TIME` always (this form is for overridden keys only;
--          the base's hot path stays fixed_window_server.lua's DECRBY).
-- Writes   an admission DECRBYs the cost, or starts the window as the base
--          would (SET of the base's full value less the cost, PEXPIREAT
--          its last ms, a key made in the last 2 ms tagged + 4 as there).
--          A denial or a peek writes nothing.

local key, cost, deadline = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local offset = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
if deadline > 0 and now - deadline > 0 then
  return false
end
local window, limit = string.match(key, ':(%d+):(%d+)$')
local k = math.floor(now / (window * 1000))
local v = tonumber(redis.call('GET', key)) or 0
local tag = v % 16
if v ~= 0 and tag > 4 and tag - 5 ~= k % 4 then
  -- A key that outlives its window: the window has ended.
  v = 0
end
local fresh = v == 0
local last
if fresh then
  if cost == 0 then
    return 0
  end
  tag = k % 4 + 1
  last = (k + 1) * window - 1
  local now_ms = math.floor(now / 1000)
  if last - now_ms <= 1 then
    tag, last = tag + 4, now_ms + 2
  end
  v = limit * 16 + tag
end
local seen = v + offset
if seen < 0 then
  return {seen}
end
if seen - cost < 0 then
  return -1 - seen
end
if cost == 0 then
  return seen
end
if fresh then
  redis.call('SET', key, string.format('%d', v - cost))
  redis.call('PEXPIREAT', key, string.format('%d', last))
else
  redis.call('DECRBY', key, string.format('%d', cost))
end
return seen - cost
