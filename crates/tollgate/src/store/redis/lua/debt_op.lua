-- debt_op.lua: charge, refund and check_at_most on a bucket's debt, for
-- token_bucket_usage.lua and tat_usage.lua (usage_prologue.lua says what it
-- returns); a file of its own, so that a script defines only the function
-- it calls.

-- A bucket's debt in scaled units against its capacity, one token being
-- `unit` units: a charge adds up to 2^52 units of debt (cost·unit may
-- pass 2^53 inexactly, and is then above the cap too); a refund stops at
-- a full bucket.
local function debt_op(op, debt, capacity, unit, cost)
  local after, allowed, granted, ask = debt, true, 0, 1
  if op == 1 then
    allowed = debt + cost * unit <= capacity
    after = math.min(debt + cost * unit, 4503599627370496)
  elseif op == 2 then
    after = debt - math.min(cost * unit, debt)
  else
    if debt < capacity then
      granted = math.min(cost, math.floor((capacity - debt) / unit))
    end
    ask = granted
    if ask == 0 then
      ask = math.min(cost, 1)
    end
    allowed = debt + ask * unit <= capacity
    if allowed then
      after, ask = debt + ask * unit, -1
    end
  end
  return after, allowed, granted, ask
end
