-- tat_usage_end.lua: the end of tat_usage.lua's body, after debt_op.lua:
-- writes the time `after` units past now and replies; a held
-- check_at_most (op 4) that granted replies the time it wrote too (whole
-- µs, fraction), its stamp for tat_refund_held.lua.

local delay = 0
if op == 3 and allowed and shaper == 1 then
  -- A shaper's admission waits the backlog ahead of it.
  delay = math.ceil(debt / drip)
end
local reset = math.ceil(after / drip)
if after ~= debt then
  if after == 0 then
    redis.call('DEL', key)
  else
    local f = after % drip
    local ms = math.ceil(reset / 1000)
    if ms < 1 then
      ms = 1
    end
    redis.call('SET', key, struct.pack('<dd', now + (after - f) / drip, f), 'PX', string.format('%d', ms))
  end
end
local remaining, retry = 0, 0
if after < capacity then
  remaining = math.floor((capacity - after) / unit)
end
if ask >= 0 and after + ask * unit > capacity then
  retry = math.ceil((after + ask * unit - capacity) / drip)
end
if op == 4 and granted > 0 then
  local f = after % drip
  return struct.pack('<dddddddd', allowed and 1 or 0, remaining, reset, retry, delay, granted, now + (after - f) / drip, f)
end
return struct.pack('<dddddd', allowed and 1 or 0, remaining, reset, retry, delay, granted)
