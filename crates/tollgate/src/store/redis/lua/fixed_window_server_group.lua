-- fixed_window_server_group.lua: many server-clock fixed-window checks
-- that carry a deadline, in one call that reads `TIME` once for all.
--
-- Why: a deadline needs the server's clock, and `TIME` and comparing it
-- (about 9k instructions) add two thirds to what the window's own hot path
-- costs (one DECRBY, 14k with the call itself): read per check, a checked
-- decision costs the server ~1.3x go-zero's periodlimit script. When callers are busy their calls already leave in
-- one pipeline (coalesce.rs); their window checks then travel as one call
-- of this script, which pays the call and the clock once and the DECRBY
-- per check. (A check sent alone proves its deadline with a clock key
-- instead: fixed_window_server_deadline.lua.)
--
-- KEYS     the checks' keys, each a fixed_window_server.lua state (the
--          same key may come more than once: each is its own check, in
--          order).
-- ARGV     as text: [1] the deadline in server µs, the earliest of the
--          checks' own; then, unless every cost is 1, [1 + i] the cost·16
--          of check i (one argument less per check when all are 1).
-- Reply    false (nil) when the deadline has passed: nothing was written.
--          Else an array, element i being check i's reply as
--          fixed_window_server.lua gives it (an integer), or the error of
--          its own command (a key of the wrong type, out of memory): each
--          check is protected on its own, so one bad key neither stops
--          the others nor undoes them.
-- Time     `TIME` once, before any write, against the deadline; then each
--          check runs as fixed_window_server.lua on the server's clock
--          (which reads `TIME` again only to start a window).
-- Writes   as fixed_window_server.lua, for each check.
-- Form     texts.rs wraps that body in `window(key, cost)` before this
--          text (one closure per group, not per check), with `deadline`
--          nil: the body's peek and deadline branch is off.

local t = redis.call('TIME')
if t[1] * 1000000 + t[2] - ARGV[1] > 0 then
  return false
end
local replies = {}
local many = #ARGV > 1
for i = 1, #KEYS do
  local ok, v = pcall(window, KEYS[i], many and ARGV[i + 1] or '16')
  if not ok and type(v) ~= 'table' then
    v = {err = tostring(v)}
  end
  replies[i] = v
end
return replies
