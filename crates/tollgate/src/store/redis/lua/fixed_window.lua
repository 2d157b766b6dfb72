-- fixed_window.lua: at most `limit` per window [k·window, (k+1)·window).
--
-- KEYS[1]  the state: a string "<k>:<count>" (window index, admitted in it)
-- ARGV[1], ARGV[2]  time source and deadline (see prologue.lua)
-- ARGV[3]  limit    ARGV[4]  window (µs)    ARGV[5]  cost (0 peeks)
-- Reply    {allowed (1|0), remaining, reset_after µs, retry_after µs, 0}
--          or {-1} when the deadline passed (nothing written)
-- Writes   only when admitting a cost > 0: SET with PX = until the end of
--          the window, when the state is fresh again.

local function fixed_window(key, now, limit, window, cost)
  local current = floor_div(now, window)
  local w, count = current, 0
  local stored = redis.call('GET', key)
  if stored then
    local sw, sc = string.match(stored, '^(%d+):(%d+)$')
    sw = tonumber(sw)
    -- A stored window ahead of now (a late client-time request) stays current.
    if sw and sw >= current then
      w, count = sw, tonumber(sc)
    end
  end
  local until_end = (w + 1) * window - now
  local allowed = count + cost <= limit
  if allowed then
    count = count + cost
    if cost > 0 and not dry then
      redis.call('SET', key, int(w) .. ':' .. int(count), 'PX', ttl_ms(until_end))
    end
  end
  local reset = until_end
  if count == 0 then
    reset = 0
  end
  if allowed then
    return {1, limit - count, reset, 0, 0}
  end
  return {0, limit - count, reset, until_end, 0}
end
