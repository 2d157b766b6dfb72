-- debt_op.lua: charge, refund and check_at_most on a bucket's debt, inline
-- in token_bucket_usage.lua's and tat_usage.lua's bodies (a function would
-- cost each call a closure): from `op`, `debt` (scaled units), `capacity`,
-- `unit` (one token), `cost` and `hold` (scaled units), the locals
-- `after`, `allowed`, `granted` and `ask` (see usage_prologue.lua). A charge adds up to 2^52 units of
-- debt (cost·unit may pass 2^53 inexactly, and is then above the cap
-- too); a refund stops at a full bucket.

if debt < hold then
  -- A held check_at_most decides on, and records its grant on, a debt of
  -- at least the hold (0 for every other operation); granting nothing,
  -- it writes nothing (after == debt).
  debt = hold
end
local after, allowed, granted, ask = debt, true, 0, 1
local need = cost * unit
if op == 1 then
  allowed = debt + need <= capacity
  after = debt + need
  if after > 4503599627370496 then
    after = 4503599627370496
  end
elseif op == 2 then
  after = 0
  if debt > need then
    after = debt - need
  end
elseif debt + need <= capacity then
  -- All of it, as a check of the cost admits.
  after, granted, ask = debt + need, cost, -1
else
  if debt < capacity then
    granted = math.floor((capacity - debt) / unit)
  end
  ask = granted
  if ask == 0 and cost > 0 then
    ask = 1
  end
  allowed = debt + ask * unit <= capacity
  if allowed then
    after, ask = debt + ask * unit, -1
  end
end
