-- token_bucket_refund_held.lua: refund_held on the state of
-- token_bucket.lua: a held check_at_most's unused units go back only
-- while the key is still the bucket that take wrote, and then the state
-- is exactly what a held take of fewer units would have written (see
-- Store::refund_held and docs/leases.md).
--
-- KEYS[1]  the state, as token_bucket.lua keeps it
-- ARGV[1]  as token_bucket_usage.lua's (see usage_prologue.lua): time,
--          deadline 0 (a refund that applies is exact whenever it runs),
--          op 2 (refund), drip, unit, capacity, the units, hold 0
-- ARGV[2]  the stamp: two doubles, the deficit and its time that the held
--          take wrote (the last two numbers of its reply)
-- Rule     the key is the stamped bucket when it is full again at the
--          same instant, at + deficit / drip, compared as (at - at0) ·
--          drip == deficit0 - deficit (exact wherever the two can be
--          equal): the memory store's rule, whose denials and peeks write
--          their refill; and when it is not full now. Then the units go
--          back as a refund.
-- Reply    the refund's six doubles (see usage_prologue.lua); or the
--          single double 0 when the key is not the stamped bucket, and
--          nothing is written
-- Writes   as a refund: SET with PX = until full again, or DEL when full.
-- Body     after token_bucket_usage.lua (which read `stored` and refilled
--          it into `debt`), before debt_op.lua and
--          token_bucket_usage_end.lua.

if not stored or debt == 0 then
  return struct.pack('<d', 0)
end
local deficit0, at0 = struct.unpack('<dd', ARGV[2])
local deficit1, at1 = struct.unpack('<dd', stored)
if (at1 - at0) * drip ~= deficit0 - deficit1 then
  return struct.pack('<d', 0)
end
