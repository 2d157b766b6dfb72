-- sliding_log.lua: every admitted request in a sorted set.
--
-- KEYS[1]  the log: a sorted set, one member per instant, scored by the
--          time in µs, named "<time>:<cost>" (costs at one instant merged)
-- ARGV[1]  time, deadline (see prologue.lua), limit (<= 10,000, so the
--          set stays small), window (µs), cost (0 peeks)
-- Reply    allowed, remaining, reset_after, retry_after, 0
-- Rule     an entry at s counts at t iff t - s < window. A late client-time
--          request is taken at the newest entry's time.
-- Writes   always trims entries that aged out (bounded by the limit);
--          when admitting a cost > 0, ZADD and PEXPIRE = until the newest
--          entry ages out.

local function sliding_log(key, now, limit, window, cost, dry)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = now
  if newest[2] and tonumber(newest[2]) > now then
    at = tonumber(newest[2])
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(at - window))
  local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local used = 0
  for i = 1, #entries, 2 do
    used = used + tonumber(string.match(entries[i], ':(%d+)$'))
  end
  local allowed = used + cost <= limit
  local retry_at = now
  if not allowed then
    local left = used
    retry_at = at
    for i = 1, #entries, 2 do
      left = left - tonumber(string.match(entries[i], ':(%d+)$'))
      if left + cost <= limit then
        retry_at = tonumber(entries[i + 1]) + window
        break
      end
    end
  end
  local newest_at = nil
  if #entries > 0 then
    newest_at = tonumber(entries[#entries])
  end
  if allowed and cost > 0 and not dry then
    local merged = cost
    if newest_at == at then
      local last = entries[#entries - 1]
      merged = merged + tonumber(string.match(last, ':(%d+)$'))
      redis.call('ZREM', key, last)
    end
    redis.call('ZADD', key, int(at), int(at) .. ':' .. int(merged))
    newest_at = at
    redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil((at + window - now) / 1000))))
    used = used + cost
  end
  local reset = 0
  if newest_at then
    reset = newest_at + window - now
  end
  local retry = retry_at - now
  if retry < 0 then
    retry = 0
  end
  -- A log charged past its limit (sliding_log_usage.lua) has nothing left.
  local remaining = 0
  if used < limit then
    remaining = limit - used
  end
  return allowed and 1 or 0, remaining, reset, retry, 0
end
