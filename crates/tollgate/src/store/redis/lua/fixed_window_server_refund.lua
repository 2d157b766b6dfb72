-- fixed_window_server_refund.lua: refund on the state of
-- fixed_window_server.lua (the fixed window on the server's clock,
-- remaining·16 + tag, expiring with its window): one INCRBY, as a check
-- is one DECRBY.
--
-- KEYS[1]  the state, as fixed_window_server.lua keeps it
-- Entry    scripts.rs puts one line before this body: `local key, cost,
--          full = KEYS[1], ARGV[1], ARGV[2]`, or `KEYS[1], '16', ARGV[1]`
--          for the form of a cost of 1, and names `deadline` the argument
--          after those; then late.lua.
-- ARGV     as text: the cost·16 (at most 2^49 - 16·limit - 16, so that
--          every value stays below 2^53; larger refunds go to
--          fixed_window_server_usage.lua), the limit·16; then, only when
--          needed, the deadline in server µs (see prologue.lua)
-- Rule     the refund gives the cost back to the window, down to an empty
--          one, which is deleted (fresh: no key); a key the INCRBY made
--          (no window) or one that outlived its window is fresh too.
-- Reply    the key's value after the refund, remaining·16 + tag, negative
--          for a window still in debt; 0 for a fresh state; false (nil)
--          when the deadline passed.
-- Numbers  the cap turns `full` from text into a number (about 0.9k
--          instructions for 14 digits, strtod) only when it may matter: a
--          value below 10^6 is below any `full` of 7 digits or more, which
--          the length of the text tells for nothing.
-- Time     `TIME` only for a deadline, and for a key that may have
--          outlived its window (tag 5 to 8, see fixed_window_server.lua).

local v = redis.call('INCRBY', key, cost)
local tag = v % 16
if tag > 4 then
  -- Tags 5 to 8: the window may have ended, and with it the state.
  local t = redis.call('TIME')
  local window = string.match(key, ':(%d+):%d+$')
  if tag - 5 ~= math.floor((t[1] * 1000000 + t[2]) / (window * 1000)) % 4 then
    tag = 0
  end
end
if tag == 0 or (v >= 1e6 or #full < 7) and v - full > 0 then
  redis.call('DEL', key)
  return 0
end
return v
