-- tat_refund_held.lua: refund_held on the state of gcra.lua: a held
-- check_at_most's unused units go back only while the key is still the
-- TAT that take wrote, and then the TAT is exactly where a held take of
-- fewer units would have put it (see Store::refund_held and
-- docs/leases.md).
--
-- KEYS[1]  the state, as gcra.lua keeps it
-- ARGV[1]  as tat_usage.lua's (see usage_prologue.lua): time, deadline 0
--          (a refund that applies is exact whenever it runs), op 2
--          (refund), drip, unit, capacity, the units, shaper 0, hold 0
-- ARGV[2]  the stamp: two doubles, the TAT's whole µs and fraction that
--          the held take wrote (the last two numbers of its reply)
-- Rule     the key is the stamped TAT when it holds those two numbers and
--          the TAT is after now. Then the units go back as a refund.
-- Reply    the refund's six doubles (see usage_prologue.lua); or the
--          single double 0 when the key is not the stamped TAT, and
--          nothing is written
-- Writes   as a refund: SET with PX = until the TAT, or DEL when it is now.
-- Body     after tat_usage.lua (which read `stored` and its `debt`),
--          before debt_op.lua and tat_usage_end.lua.

if not stored or debt == 0 then
  return struct.pack('<d', 0)
end
local t0, f0 = struct.unpack('<dd', ARGV[2])
local t1, f1 = struct.unpack('<dd', stored)
if t1 ~= t0 or f1 ~= f0 then
  return struct.pack('<d', 0)
end
