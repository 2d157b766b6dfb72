-- sliding_log_usage.lua: charge, refund and check_at_most on the log of
-- sliding_log.lua (see usage_prologue.lua for the contract).
--
-- ARGV[1]  time, deadline, op, limit, window (µs), cost
-- Rule     a charge records an entry at the log's time whatever is left
--          (the log counts past its limit by at most 2^48); one at the
--          newest entry's instant, or on a log that already holds `limit`
--          entries, adds to the newest entry and moves it to that time, so
--          the set never holds more than `limit` members and debt never
--          ages out early. A refund takes from the newest entries first.
-- Writes   trims entries that aged out; ZADD/ZREM as above; PEXPIRE =
--          until the newest entry ages out.

local function sliding_log_usage(key, now, op, limit, window, cost)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = now
  if newest[2] and tonumber(newest[2]) > now then
    at = tonumber(newest[2])
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', int(at - window))
  local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local costs, times = {}, {}
  local used = 0
  for i = 1, #entries, 2 do
    local c = tonumber(string.match(entries[i], ':(%d+)$'))
    costs[#costs + 1] = c
    times[#times + 1] = tonumber(entries[i + 1])
    used = used + c
  end
  local n = #costs
  local after, allowed, granted, ask = count_op(op, used, limit, cost)
  -- Costs at the log's instant share its newest entry; so does a charge
  -- on a log already holding `limit` entries.
  local merge = n > 0 and (times[n] == at or (op == 1 and n >= limit))
  local add = 0
  if after > used then
    add = after - used
  end
  -- A refund takes from the newest entries first.
  local left = used - after
  if left > 0 then
    used = after
    while left > 0 do
      redis.call('ZREM', key, int(times[n]) .. ':' .. int(costs[n]))
      if costs[n] <= left then
        left = left - costs[n]
        costs[n], times[n] = nil, nil
        n = n - 1
      else
        costs[n] = costs[n] - left
        left = 0
        redis.call('ZADD', key, int(times[n]), int(times[n]) .. ':' .. int(costs[n]))
      end
    end
    if n > 0 then
      redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil((times[n] + window - now) / 1000))))
    end
  end
  if add > 0 then
    if merge then
      redis.call('ZREM', key, int(times[n]) .. ':' .. int(costs[n]))
      costs[n], times[n] = costs[n] + add, at
    else
      n = n + 1
      costs[n], times[n] = add, at
    end
    redis.call('ZADD', key, int(at), int(at) .. ':' .. int(costs[n]))
    redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil((at + window - now) / 1000))))
    used = used + add
  end
  -- When a request of `ask` would fit: once enough of the oldest entries
  -- have aged out.
  local retry_at = now
  if ask >= 0 and used + ask > limit then
    local left = used
    retry_at = at
    for i = 1, n do
      left = left - costs[i]
      if left + ask <= limit then
        retry_at = times[i] + window
        break
      end
    end
  end
  local reset, remaining = 0, 0
  if n > 0 then
    reset = times[n] + window - now
  end
  if used < limit then
    remaining = limit - used
  end
  local retry = retry_at - now
  if retry < 0 then
    retry = 0
  end
  return allowed and 1 or 0, remaining, reset, retry, 0, granted
end
