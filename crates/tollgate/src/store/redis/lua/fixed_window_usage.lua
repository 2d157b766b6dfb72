-- fixed_window_usage.lua: charge, refund and check_at_most on the state
-- of fixed_window.lua (see usage_prologue.lua for the contract).
--
-- ARGV[1]  time, deadline, op, limit, window (µs), cost, and for a
--          calendar window (window 0) the bounds s0, e0, e1 (see
--          fixed_window.lua)
-- Rule     the window is max(k_now, k_stored), as in fixed_window.lua.
-- Writes   the hash becomes the one field of that window, with PEXPIRE =
--          until one window after its end (see fixed_window.lua for why).

local function fixed_window_usage(key, now, op, limit, window, cost, s0, e0, e1)
  local k, span
  if window > 0 then
    k, span = math.floor(now / window), window
  elseif now < e0 then
    k, span = s0, e0 - s0
  else
    k, span = e0, e1 - e0
  end
  local count = 0
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local f = struct.unpack('<d', fields[i])
    if f >= k then
      k, count = f, tonumber(fields[i + 1])
    end
  end
  local after, allowed, granted, ask = count_op(op, count, limit, cost)
  if after ~= count then
    redis.call('DEL', key)
    if after > 0 then
      redis.call('HSET', key, struct.pack('<d', k), string.format('%d', after))
      redis.call('PEXPIRE', key, string.format('%d', math.ceil(((window > 0 and (k + 1) * window or k + span) + span - now) / 1000)))
    end
  end
  local until_end = (window > 0 and (k + 1) * window or k + span) - now
  local remaining, reset, retry = 0, 0, 0
  if after < limit then
    remaining = limit - after
  end
  if after > 0 then
    reset = until_end
  end
  if ask >= 0 and after + ask > limit then
    retry = until_end
  end
  return allowed and 1 or 0, remaining, reset, retry, 0, granted
end
