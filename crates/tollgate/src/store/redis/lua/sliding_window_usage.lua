-- sliding_window_usage.lua: charge, refund and check_at_most on the state
-- of sliding_window.lua (see usage_prologue.lua for the contract).
--
-- ARGV[1]  time, deadline, op, limit, window (µs), cost
-- Rule     a charge counts in the current window (a count saturates at
--          2^52 / window, which keeps count·window exact); a refund takes
--          from the current window, then from the previous one.
-- Writes   SET with PX = until both counts have aged out, or DEL.
-- Body     a body, not a function (see usage_prologue.lua), after
--          sliding_window_roll.lua, which reads the state as the check
--          does.

local lw = limit * window
local p, c = prev, curr
local allowed, granted, ask = true, 0, 1
-- (No math.min or math.floor where a comparison does: each is a call.)
local room = lw - prev * (window - e) - curr * window
if op == 1 then
  allowed = curr + cost <= limit and cost * window <= room
  c = curr + cost
  if c * window > 4503599627370496 then
    c = math.floor(4503599627370496 / window)
  end
elseif op == 2 then
  if cost < curr then
    c = curr - cost
  else
    c = 0
    p = prev - cost + curr
    if p < 0 then
      p = 0
    end
  end
elseif cost * window <= room then
  -- All of it, as a check of the cost admits.
  granted, c = cost, curr + cost
else
  if room > 0 then
    granted = math.floor(room / window)
  end
  ask = granted
  if ask == 0 and cost > 0 then
    ask = 1
  end
  allowed = ask * window <= room
  if allowed then
    c = curr + ask
  end
end
local reset_at = now
if c > 0 then
  reset_at = start + 2 * window
elseif p > 0 then
  reset_at = start + window
end
if p ~= prev or c ~= curr then
  if p == 0 and c == 0 then
    redis.call('DEL', key)
  else
    redis.call('SET', key, struct.pack('<ddd', k, p, c), 'PX', string.format('%d', math.max(1, math.ceil((reset_at - now) / 1000))))
  end
end
local weighted = p * (window - e)
local remaining = lw - weighted - c * window
if remaining < 0 then
  remaining = 0
end
remaining = math.floor(remaining / window)
-- When a request of `ask` would fit, as sliding_window.lua finds it.
local retry_at = now
if op == 3 and allowed then
  ask = -1
end
if ask >= 0 and weighted + (c + ask) * window > lw then
  if c + ask <= limit then
    retry_at = start + window - math.floor((limit - c - ask) * window / p)
  else
    local wait = window - math.floor((limit - ask) * window / c)
    if wait < 0 then
      wait = 0
    end
    retry_at = start + window + wait
  end
end
local reset = reset_at - now
if reset < 0 then
  reset = 0
end
local retry = retry_at - now
if retry < 0 then
  retry = 0
end
return struct.pack('<dddddd', allowed and 1 or 0, remaining, reset, retry, 0, granted)
