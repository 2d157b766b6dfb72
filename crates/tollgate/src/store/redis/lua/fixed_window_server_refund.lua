-- fixed_window_server_refund.lua: refund on the state of
-- fixed_window_server.lua (the fixed window on the server's clock,
-- remaining·16 + tag, expiring with its window): one INCRBY, as a check
-- is one DECRBY.
--
-- KEYS[1]  the state, as fixed_window_server.lua keeps it
-- Entry    texts.rs puts one line before this body: `local key, cost,
--          full = KEYS[1], ARGV[1], ARGV[2]`, or `KEYS[1], '16', ARGV[1]`
--          for the form of a cost of 1, and names `deadline` the argument
--          after those; then late.lua. For a limit·16 of 10^6 or more,
--          `full` is nil instead and the forms take a check's arguments
--          (a cost of 1 none): the limit is read from the key's name.
-- ARGV     as text: the cost·16 (at most 2^49 - 16·limit - 16, so that
--          every value stays below 2^53; larger refunds go to
--          fixed_window_server_usage.lua), the limit·16 when below 10^6;
--          then, only when needed, the deadline in server µs (see
--          prologue.lua)
-- Rule     the refund gives the cost back to the window, down to an empty
--          one, which is deleted (fresh: no key); a key the INCRBY made
--          (no window) or one that outlived its window is fresh too.
-- Reply    the key's value after the refund, remaining·16 + tag, negative
--          for a window still in debt; 0 for a fresh state; false (nil)
--          when the deadline passed.
-- Numbers  a limit·16 of 10^6 or more is not passed (an argument costs a
--          call about 0.9k instructions): a value below 10^6 is below it,
--          so the script reads it from the key's name (string.match,
--          about 6k) only from 10^6 on. A smaller one is passed, and
--          turned from text into a number (about 0.6k) unless the window
--          is in debt.
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
if tag == 0 or (full and v > 0 or v >= 1e6)
    and v - (full or 16 * string.match(key, ':(%d+)$')) > 0 then
  redis.call('DEL', key)
  return 0
end
return v
