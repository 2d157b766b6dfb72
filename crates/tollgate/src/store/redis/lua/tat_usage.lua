-- tat_usage.lua: charge, refund and check_at_most on the state of gcra.lua
-- and leaky_bucket.lua, which keep the same number, a time (GCRA's TAT,
-- the leaky bucket's virtual finish time) as whole µs and a fraction in
-- 1/drip steps (see usage_prologue.lua for the contract).
--
-- ARGV[1]  time, deadline, op, drip, unit, capacity (scaled), cost, then
--          `shaper`: GCRA's max_wait, 0, or for the leaky bucket 1 (whose
--          admissions wait their backlog as `delay`)
-- Rule     on the debt d = max(time - now, 0): a charge adds cost·unit
--          (up to 2^52) whatever the capacity; a refund takes it off,
--          never moving the time before now.
-- Writes   SET with PX = until the time, or DEL when it is now.

local function tat_usage(key, now, op, drip, unit, capacity, cost, shaper)
  local t_us, frac = 0, 0
  local stored = redis.call('GET', key)
  if stored then
    t_us, frac = struct.unpack('<dd', stored)
  end
  local debt = 0
  if t_us >= now then
    debt = (t_us - now) * drip + frac
  end
  local after, allowed, granted, ask = debt_op(op, debt, capacity, unit, cost)
  local delay = 0
  if op == 3 and allowed and shaper == 1 then
    -- A shaper's admission waits the backlog ahead of it.
    delay = math.ceil(debt / drip)
  end
  if after ~= debt then
    if after == 0 then
      redis.call('DEL', key)
    else
      local f = after % drip
      redis.call('SET', key, struct.pack('<dd', now + (after - f) / drip, f), 'PX', string.format('%d', math.max(1, math.ceil(math.ceil(after / drip) / 1000))))
    end
  end
  local remaining, retry = 0, 0
  if after < capacity then
    remaining = math.floor((capacity - after) / unit)
  end
  if ask >= 0 and after + ask * unit > capacity then
    retry = math.ceil((after + ask * unit - capacity) / drip)
  end
  return allowed and 1 or 0, remaining, math.ceil(after / drip), retry, delay, granted
end
