-- usage_ops.lua: the arithmetic of charge, refund and check_at_most on one
-- number, shared by the usage scripts (see usage_prologue.lua for the
-- rules). `op` is 1 charge, 2 refund, 3 check_at_most. Each returns the
-- number after the operation, whether it fitted, what check_at_most
-- granted, and the cost whose retry_after the reply gives: 1 after a
-- charge or refund, what check_at_most asked when it was denied (1, or 0
-- for a max_cost of 0), -1 when an admission has no retry to give.

-- A count against its limit (a fixed window, a sliding log): a charge
-- counts up to 2^48 past the limit; a refund stops at 0.
local function count_op(op, count, limit, cost)
  local after, allowed, granted, ask = count, true, 0, 1
  if op == 1 then
    allowed = count + cost <= limit
    after = math.min(count + cost, limit + 281474976710656)
  elseif op == 2 then
    after = count - math.min(cost, count)
  else
    if count < limit then
      granted = math.min(cost, limit - count)
    end
    ask = granted
    if ask == 0 then
      ask = math.min(cost, 1)
    end
    allowed = count + ask <= limit
    if allowed then
      after, ask = count + ask, -1
    end
  end
  return after, allowed, granted, ask
end

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
