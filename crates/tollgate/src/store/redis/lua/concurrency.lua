-- concurrency.lua: leases on in-flight requests.
--
-- KEYS[1]  the leases: a sorted set of lease ids scored by expiry (µs)
-- ARGV[1]  time, deadline (see prologue.lua), limit, lease (µs)
-- ARGV[2]  operation: "acquire" or "release"
-- ARGV[3]  the lease id (32 hex digits, chosen by the caller)
-- Reply    acquire: allowed, remaining, reset_after, retry_after, 0
--          release: held (1|0), remaining, reset_after, 0, 0
-- Writes   drops expired leases; acquire ZADDs the lease; release ZREMs
--          it; PEXPIRE = until the last lease expires (an empty set is
--          deleted by Redis itself).

local function concurrency(key, now, limit, lease, op, id)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(now))
  local held = redis.call('ZCARD', key)
  local ok = 0
  if op == 'acquire' then
    if held < limit then
      redis.call('ZADD', key, int(now + lease), id)
      held = held + 1
      ok = 1
    end
  else
    ok = redis.call('ZREM', key, id)
    held = held - ok
  end
  local reset, retry = 0, 0
  if held > 0 then
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    reset = tonumber(last[2]) - now
    redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil(reset / 1000))))
    if op == 'acquire' and ok == 0 then
      local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
      retry = tonumber(first[2]) - now
    end
  end
  -- An override that cut the limit below what is held leaves nothing.
  return ok, math.max(0, limit - held), reset, retry, 0
end
