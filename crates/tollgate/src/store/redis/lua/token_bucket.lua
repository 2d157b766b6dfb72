-- token_bucket.lua: a bucket of `burst` tokens refilled at rate per `per`.
--
-- Tokens are exact integers in scaled units: one token is `unit` units and
-- `drip` units flow in per µs (rate/per reduced to lowest terms in Rust).
-- KEYS[1]  the state: a string "<deficit>:<at>" (units missing from a full
--          bucket, and when that was measured); no key = a full bucket
-- ARGV[1], ARGV[2]  time source and deadline (see prologue.lua)
-- ARGV[3]  drip    ARGV[4]  unit    ARGV[5]  capacity (burst·unit)
-- ARGV[6]  burst   ARGV[7]  cost    ARGV[8]  max_wait µs (0 = plain check;
--          more reserves: the deficit may exceed the capacity, borrowing)
-- Reply    {allowed, remaining, reset_after µs, retry_after µs, delay µs}
--          or {-1}; delay is the reservation's wait
-- Writes   only when admitting a cost > 0: SET with PX = until full again.
--          A stored time ahead of now (late client-time request) is kept,
--          so a late request never refills the bucket.

local function token_bucket(key, now, drip, unit, capacity, burst, cost, max_wait)
  local deficit, at = 0, now
  local stored = redis.call('GET', key)
  if stored then
    local sd, sa = string.match(stored, '^(%d+):(%d+)$')
    if sd then
      deficit, at = tonumber(sd), tonumber(sa)
    end
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
    wait = ceil_div(deficit + need - capacity, drip)
  end
  local allowed = wait <= max_wait
  if allowed and cost > 0 and not dry then
    deficit = deficit + need
    redis.call('SET', key, int(deficit) .. ':' .. int(at), 'PX', ttl_ms(ceil_div(deficit, drip)))
  end
  local remaining = 0
  if deficit < capacity then
    remaining = floor_div(capacity - deficit, unit)
  end
  if allowed then
    return {1, remaining, ceil_div(deficit, drip), 0, wait}
  end
  return {0, remaining, ceil_div(deficit, drip), wait - max_wait, 0}
end
