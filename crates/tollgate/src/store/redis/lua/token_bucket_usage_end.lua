-- token_bucket_usage_end.lua: the end of token_bucket_usage.lua's body,
-- after debt_op.lua: writes the deficit `after` (measured at `at`) and
-- replies; a held check_at_most (op 4) that granted replies the state it
-- wrote too, its stamp for token_bucket_refund_held.lua.

local reset = 0
if after > 0 then
  reset = math.ceil(after / drip) + at - now
end
if after ~= debt then
  if after == 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, struct.pack('<dd', after, at), 'PX', string.format('%d', math.ceil(reset / 1000)))
  end
end
local remaining, retry = 0, 0
if after < capacity then
  remaining = math.floor((capacity - after) / unit)
end
if ask >= 0 and after + ask * unit > capacity then
  retry = math.ceil((after + ask * unit - capacity) / drip) + at - now
end
if op == 4 and granted > 0 then
  return struct.pack('<dddddddd', allowed and 1 or 0, remaining, reset, retry, 0, granted, after, at)
end
return struct.pack('<dddddd', allowed and 1 or 0, remaining, reset, retry, 0, granted)
