-- sliding_window_roll.lua: the state of sliding_window.lua as of `now`,
-- read with one GET: the window `k` that counts now (a stored one ahead
-- of now stays current), its start, `e` µs into it, and the counts `prev`
-- (window k - 1) and `curr` (window k). The start of sliding_window.lua's
-- function and of sliding_window_usage.lua's body.

local current = math.floor(now / window)
local k, prev, curr = current, 0, 0
local stored = redis.call('GET', key)
if stored then
  local sk, sp, sc = struct.unpack('<ddd', stored)
  if sk >= current then
    k, prev, curr = sk, sp, sc
  elseif sk + 1 == current then
    prev = sc
  end
end
local start = k * window
local e = now - start
if e < 0 then
  e = 0
end
