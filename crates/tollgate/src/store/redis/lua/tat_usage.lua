-- tat_usage.lua: charge, refund and check_at_most on the state of gcra.lua
-- and leaky_bucket.lua, which keep the same number, a time (GCRA's TAT,
-- the leaky bucket's virtual finish time) as whole µs and a fraction in
-- 1/drip steps (see usage_prologue.lua for the contract and the form),
-- with their check's calls: GET, then SET or DEL.
--
-- ARGV[1]  time, deadline, op, drip, unit, capacity (scaled), cost, then
--          `shaper`: GCRA's max_wait, 0, or for the leaky bucket 1 (whose
--          admissions wait their backlog as `delay`), then `hold` (scaled
--          units: a held check_at_most's, else 0)
-- Rule     on the debt d = max(time - now, 0): a charge adds cost·unit
--          (up to 2^52) whatever the capacity; a refund takes it off,
--          never moving the time before now.
-- Writes   SET with PX = until the time, or DEL when it is now.
-- Body     this file reads the state into `debt`; debt_op.lua and
--          tat_usage_end.lua follow.

local debt = 0
local stored = redis.call('GET', key)
if stored then
  local t_us, frac = struct.unpack('<dd', stored)
  if t_us >= now then
    debt = (t_us - now) * drip + frac
  end
end
