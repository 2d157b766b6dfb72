-- gcra.lua: the generic cell rate algorithm on a theoretical arrival time.
--
-- The TAT is kept exactly as whole µs plus a fraction in 1/drip steps, so
-- that no product of a timestamp and the rate is ever formed (it would pass
-- 2^53); debts are bounded by the capacity and the longest reservation.
-- KEYS[1]  the state: two doubles (TAT in whole µs, and its fraction);
--          no key = a TAT in the past
-- ARGV[1]  time, deadline (see prologue.lua), drip, unit,
--          capacity (burst·unit), cost, max_wait µs (0 = plain check)
-- Reply    allowed, remaining, reset_after, retry_after, delay; identical
--          to token_bucket.lua on every sequence
-- Writes   only when admitting a cost > 0: SET with PX = until the TAT.

local function gcra(key, now, drip, unit, capacity, cost, max_wait, dry)
  local tat_us, frac = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    tat_us, frac = struct.unpack('<dd', stored)
  end
  -- debt = max(0, TAT - now), in units.
  local debt = 0
  if tat_us >= now then
    debt = (tat_us - now) * drip + frac
  end
  local need = cost * unit
  local wait = 0
  if debt + need > capacity then
    wait = math.ceil((debt + need - capacity) / drip)
  end
  local allowed = wait <= max_wait
  local reset
  if allowed and cost > 0 and not dry then
    -- TAT' = max(TAT, now) + need, so the debt grows by need; TAT' is
    -- now + debt / drip µs, kept as whole µs and the remainder.
    debt = debt + need
    frac = debt % drip
    reset = (debt - frac) / drip
    tat_us = now + reset
    if frac > 0 then
      reset = reset + 1
    end
    -- reset = ceil(debt / drip) >= 1 µs, since debt >= need > 0.
    redis.call('SET', key, struct.pack('<dd', tat_us, frac), 'PX', string.format('%d', math.ceil(reset / 1000)))
  else
    reset = math.ceil(debt / drip)
  end
  local remaining = 0
  if debt < capacity then
    remaining = math.floor((capacity - debt) / unit)
  end
  if allowed then
    return 1, remaining, reset, 0, wait
  end
  return 0, remaining, reset, wait - max_wait, 0
end
