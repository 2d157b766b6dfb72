-- fixed_window_server_at_most.lua: check_at_most's ending, after
-- fixed_window_server.lua's DECRBY of max_cost (whose contract, entry and
-- arguments this shares; max_cost is at most the limit, and its ·16 at
-- most 2^52, so every value here is exact): a grant of less than
-- max_cost, g = max(0, what was left), gives the rest back with one
-- INCRBY, as a check's denial gives back its DECRBY.
--
-- Reply    the key's value when all of max_cost was granted; else
--          -1 - (g·16 + tag), the window having nothing left (or its debt,
--          untouched, when g = 0); false (nil) when the deadline passed.

if v < 0 then
  local tag = v % 16
  local granted = (v - tag) / 16 + cost / 16
  if granted < 0 then
    granted = 0
  end
  redis.call('INCRBY', key, string.format('%d', cost - granted * 16))
  return -1 - granted * 16 - tag
end
return v
