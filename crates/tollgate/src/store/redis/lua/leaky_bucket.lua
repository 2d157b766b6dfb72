-- leaky_bucket.lua: a shaper; admitted requests leave at a constant rate.
--
-- The virtual finish time V of the queue is kept exactly as whole µs plus
-- a fraction in 1/drip steps (as in gcra.lua).
-- KEYS[1]  the state: two doubles (V in whole µs, and its fraction);
--          no key = an empty queue
-- ARGV[1]  time, deadline (see prologue.lua), drip, unit,
--          capacity (capacity·unit), cost
-- Reply    allowed, remaining, reset_after, retry_after, delay (the
--          backlog ahead, rounded up)
-- Rule     backlog = max(0, V - now); allowed iff backlog + cost·T <=
--          capacity·T; then V = max(V, now) + cost·T.
-- Writes   only when admitting a cost > 0: SET with PX = until V.

local function leaky_bucket(key, now, drip, unit, capacity, cost, dry)
  local v_us, frac = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    v_us, frac = struct.unpack('<dd', stored)
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
    local carry = math.floor((base_frac + need) / drip)
    v_us = base_us + carry
    frac = base_frac + need - carry * drip
    after = (v_us - now) * drip + frac
    redis.call('SET', key, struct.pack('<dd', v_us, frac), 'PX', string.format('%d', math.max(1, math.ceil(math.ceil(after / drip) / 1000))))
  end
  -- A late client-time request can see more backlog than the capacity.
  local remaining = 0
  if after < capacity then
    remaining = math.floor((capacity - after) / unit)
  end
  if allowed then
    return 1, remaining, math.ceil(after / drip), 0, math.ceil(backlog / drip)
  end
  return 0, remaining, math.ceil(after / drip), math.ceil((backlog + need - capacity) / drip), 0
end
