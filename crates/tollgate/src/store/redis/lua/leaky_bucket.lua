-- leaky_bucket.lua: a shaper; admitted requests leave at a constant rate.
--
-- The virtual finish time V of the queue is kept exactly as whole µs plus
-- a fraction in 1/drip steps (as in gcra.lua).
-- KEYS[1]  the state: a string "<µs>:<frac>"; no key = an empty queue
-- ARGV[1], ARGV[2]  time source and deadline (see prologue.lua)
-- ARGV[3]  drip    ARGV[4]  unit    ARGV[5]  capacity (capacity·unit)
-- ARGV[6]  capacity in requests     ARGV[7]  cost
-- Reply    {allowed, remaining, reset_after µs, retry_after µs, delay µs}
--          or {-1}; delay = the backlog ahead, rounded up
-- Rule     backlog = max(0, V - now); allowed iff backlog + cost·T <=
--          capacity·T; then V = max(V, now) + cost·T.
-- Writes   only when admitting a cost > 0: SET with PX = until V.

local function leaky_bucket(key, now, drip, unit, capacity, size, cost)
  local v_us, frac = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    local su, sf = string.match(stored, '^(%d+):(%d+)$')
    if su then
      v_us, frac = tonumber(su), tonumber(sf)
    end
  end
  local backlog = 0
  if v_us >= now then
    backlog = (v_us - now) * drip + frac
  end
  local need = cost * unit
  local allowed = backlog + need <= capacity
  local after = backlog
  if allowed and cost > 0 and not dry then
    local base_us, base_frac = now, 0
    if backlog > 0 then
      base_us, base_frac = v_us, frac
    end
    local carry = floor_div(base_frac + need, drip)
    v_us = base_us + carry
    frac = base_frac + need - carry * drip
    after = (v_us - now) * drip + frac
    redis.call('SET', key, int(v_us) .. ':' .. int(frac), 'PX', ttl_ms(ceil_div(after, drip)))
  end
  local remaining = floor_div(capacity - after, unit)
  if allowed then
    return {1, remaining, ceil_div(after, drip), 0, ceil_div(backlog, drip)}
  end
  return {0, remaining, ceil_div(after, drip), ceil_div(backlog + need - capacity, drip), 0}
end
