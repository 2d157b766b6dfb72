-- token_bucket_usage.lua: charge, refund and check_at_most on the state of
-- token_bucket.lua (see usage_prologue.lua for the contract).
--
-- ARGV[1]  time, deadline, op, drip, unit, capacity (burst·unit), cost,
--          max_wait (ignored)
-- Rule     after the refill (a stored time ahead of now is kept, as in
--          token_bucket.lua), a charge adds cost·unit to the deficit (up
--          to 2^52) whatever the capacity; a refund takes it off, down to
--          a full bucket.
-- Writes   SET with PX = until full again, or DEL when full.

local function token_bucket_usage(key, now, op, drip, unit, capacity, cost)
  local deficit, at = 0, now
  local stored = redis.call('GET', key)
  if stored then
    deficit, at = struct.unpack('<dd', stored)
  end
  if now > at then
    local refill = (now - at) * drip
    if refill >= deficit then
      deficit = 0
    else
      deficit = deficit - refill
    end
    at = now
  end
  local before = deficit
  local allowed, granted, ask
  deficit, allowed, granted, ask = debt_op(op, deficit, capacity, unit, cost)
  local reset = 0
  if deficit > 0 then
    reset = math.ceil(deficit / drip) + at - now
  end
  if deficit ~= before then
    if deficit == 0 then
      redis.call('DEL', key)
    else
      redis.call('SET', key, struct.pack('<dd', deficit, at), 'PX', string.format('%d', math.ceil(reset / 1000)))
    end
  end
  local remaining, retry = 0, 0
  if deficit < capacity then
    remaining = math.floor((capacity - deficit) / unit)
  end
  if ask >= 0 and deficit + ask * unit > capacity then
    retry = math.ceil((deficit + ask * unit - capacity) / drip) + at - now
  end
  return allowed and 1 or 0, remaining, reset, retry, 0, granted
end
