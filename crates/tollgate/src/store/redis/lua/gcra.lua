-- gcra.lua: the generic cell rate algorithm on a theoretical arrival time.
--
-- The TAT is kept exactly as whole µs plus a fraction in 1/drip steps, so
-- that no product of a timestamp and the rate is ever formed (it would pass
-- 2^53); debts are bounded by the capacity and the longest reservation.
-- KEYS[1]  the state: a string "<µs>:<frac>"; no key = TAT in the past
-- ARGV[1], ARGV[2]  time source and deadline (see prologue.lua)
-- ARGV[3]  drip    ARGV[4]  unit    ARGV[5]  capacity (burst·unit)
-- ARGV[6]  burst   ARGV[7]  cost    ARGV[8]  max_wait µs (0 = plain check)
-- Reply    {allowed, remaining, reset_after µs, retry_after µs, delay µs}
--          or {-1}; identical to token_bucket.lua on every sequence
-- Writes   only when admitting a cost > 0: SET with PX = until the TAT.

local function gcra(key, now, drip, unit, capacity, burst, cost, max_wait)
  local tat_us, frac = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local su, sf = string.match(stored, '^(%d+):(%d+)$')
    if su then
      tat_us, frac = tonumber(su), tonumber(sf)
    end
  end
  -- debt = max(0, TAT - now), in units.
  local debt = 0
  if tat_us >= now then
    debt = (tat_us - now) * drip + frac
  end
  local need = cost * unit
  local wait = 0
  if debt + need > capacity then
    wait = ceil_div(debt + need - capacity, drip)
  end
  local allowed = wait <= max_wait
  if allowed and cost > 0 and not dry then
    -- TAT' = max(TAT, now) + need, carried into whole µs.
    local base_us, base_frac = now, 0
    if debt > 0 then
      base_us, base_frac = tat_us, frac
    end
    local carry = floor_div(base_frac + need, drip)
    tat_us = base_us + carry
    frac = base_frac + need - carry * drip
    debt = (tat_us - now) * drip + frac
    redis.call('SET', key, int(tat_us) .. ':' .. int(frac), 'PX', ttl_ms(ceil_div(debt, drip)))
  end
  local remaining = 0
  if debt < capacity then
    remaining = floor_div(capacity - debt, unit)
  end
  if allowed then
    return {1, remaining, ceil_div(debt, drip), 0, wait}
  end
  return {0, remaining, ceil_div(debt, drip), wait - max_wait, 0}
end
