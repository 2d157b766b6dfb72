-- token_bucket_usage.lua: charge, refund and check_at_most on the state of
-- token_bucket.lua (see usage_prologue.lua for the contract and the
-- form), with its check's calls: GET, then SET or DEL.
--
-- ARGV[1]  time, deadline, op, drip, unit, capacity (burst·unit), cost,
--          hold (scaled units: a held check_at_most's, else 0; in the
--          place of the check's max_wait)
-- Rule     after the refill (a stored time ahead of now is kept, as in
--          token_bucket.lua), a charge adds cost·unit to the deficit (up
--          to 2^52) whatever the capacity; a refund takes it off, down to
--          a full bucket.
-- Writes   SET with PX = until full again, or DEL when full.
-- Body     this file reads the state into `debt`; debt_op.lua and
--          token_bucket_usage_end.lua follow.

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
local debt = deficit
