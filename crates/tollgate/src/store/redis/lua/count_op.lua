-- count_op.lua: charge, refund and check_at_most on a count against its
-- limit, inline in sliding_log_usage.lua's body (a function would cost
-- each call a closure) and in fixed_window_server_usage.lua's function:
-- from `op`, `count`, `limit` and `cost`, the locals `after`, `allowed`,
-- `granted` and `ask` (see usage_prologue.lua). A charge counts up to
-- 2^48 past the limit; a refund stops at 0.

local after, allowed, granted, ask = count, true, 0, 1
if op == 1 then
  allowed = count + cost <= limit
  after = count + cost
  if after > limit + 281474976710656 then
    after = limit + 281474976710656
  end
elseif op == 2 then
  after = 0
  if count > cost then
    after = count - cost
  end
elseif count + cost <= limit then
  -- All of it, as a check of the cost admits.
  after, granted, ask = count + cost, cost, -1
else
  if count < limit then
    granted = limit - count
  end
  ask = granted
  if ask == 0 and cost > 0 then
    ask = 1
  end
  allowed = count + ask <= limit
  if allowed then
    after, ask = count + ask, -1
  end
end
