-- token_bucket.lua: a bucket of `burst` tokens refilled at rate per `per`.
--
-- Tokens are exact integers in scaled units: one token is `unit` units and
-- `drip` units flow in per µs (rate/per reduced to lowest terms in Rust).
-- KEYS[1]  the state: two doubles (deficit: units missing from a full
--          bucket; at: when that was measured, µs); no key = a full bucket
-- ARGV[1]  time, deadline (see prologue.lua), drip, unit,
--          capacity (burst·unit), cost, max_wait µs (0 = plain check; more
--          reserves: the deficit may exceed the capacity, borrowing)
-- Reply    allowed, remaining, reset_after, retry_after, delay (the
--          reservation's wait)
-- Writes   only when admitting a cost > 0: SET with PX = until full again.
--          A stored time ahead of now (late client-time request) is kept,
--          so a late request never refills the bucket: it is decided, and
--          waits, at the stored time, while reset_after, retry_after and
--          the PX count from its own now (a key expiring sooner would hand
--          late callers a full bucket early).

local function token_bucket(key, now, drip, unit, capacity, cost, max_wait, dry)
  local deficit, at = 0, now
  local stored = redis.call('GET', key)
  if stored then
    deficit, at = struct.unpack('<dd', stored)
  end
  if now > at then
    -- elapsed·drip may be huge after a long idle time; the comparison with
    -- deficit (< 2^51) stays right even where the product is inexact.
    local refill = (now - at) * drip
    if refill >= deficit then
      deficit = 0
    else
      deficit = deficit - refill
    end
    at = now
  end
  local need = cost * unit
  local wait = 0
  if deficit + need > capacity then
    wait = math.ceil((deficit + need - capacity) / drip)
  end
  local allowed = wait <= max_wait
  -- Times count from now; the refill left at >= now (at - now is how late
  -- the request is).
  local reset = 0
  if allowed and cost > 0 and not dry then
    deficit = deficit + need
    -- deficit >= need > 0, so reset is at least 1 µs and PX at least 1 ms.
    reset = math.ceil(deficit / drip) + at - now
    redis.call('SET', key, struct.pack('<dd', deficit, at), 'PX', string.format('%d', math.ceil(reset / 1000)))
  elseif deficit > 0 then
    reset = math.ceil(deficit / drip) + at - now
  end
  local remaining = 0
  if deficit < capacity then
    remaining = math.floor((capacity - deficit) / unit)
  end
  if allowed then
    return 1, remaining, reset, 0, wait
  end
  return 0, remaining, reset, wait - max_wait + at - now, 0
end
