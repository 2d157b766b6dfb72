-- count_op.lua: charge, refund and check_at_most on a count against its limit, for
-- sliding_log_usage.lua (usage_prologue.lua says what it
-- returns); a file of its own, so that a script defines only the function
-- it calls.

-- A charge counts up to 2^48 past the limit; a refund stops at 0.
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
