-- fixed_window_server.lua: at most `limit` per window [k·window,
-- (k+1)·window), on the server's clock, with the key's expiry as the end
-- of the window, so that the hot path reads no clock and takes no
-- argument but the cost: one DECRBY.
--
-- KEYS[1]  the state, its name ending in `:<window ms>:<limit>` (read only
--          to start a window, so a policy whose window or limit changes
--          starts over under a key of its own): a string, remaining·16 +
--          tag, where remaining is what the window has left and the tag
--          names the window: k mod 4 + 1, or k mod 4 + 5 for a key that
--          outlives its window (below). A live key's tag is 1 to 8; a key
--          that a DECRBY has just made is a multiple of 16 (tag 0).
-- Expiry   PEXPIREAT the last ms of the window, end_ms - 1: Redis drops a
--          key once its ms clock is past the expiry, so the key lives
--          exactly while the server's time is inside the window. But Redis
--          also deletes at once a key given an expiry that is not in the
--          future, and the clock may pass a ms within the call: so a key
--          created in the window's last 2 ms gets now_ms + 2 instead, one or
--          two ms too long, and the tag says so: a call that finds such a
--          key reads `TIME`, and if the window has ended starts the next.
--          (Two ms are under 3 windows of 1 ms, so the tag still tells.)
-- Entry    texts.rs puts one line before this body: `local key, cost,
--          deadline = KEYS[1], ARGV[1], ARGV[2]`, or `KEYS[1], '16'` for a
--          form that admits a cost of 1 and takes no ARGV at all (each
--          argument costs a call about 0.9k instructions: the ARGV table
--          grows, the string is interned). `cost` is text, the cost times
--          16; `deadline` is nil in the forms that never peek and check
--          their deadline before this body (fixed_window_server_deadline.lua,
--          the group), which turns the branch below off.
-- ARGV     as text: [1] the cost·16 (0 peeks); then, only when needed,
--          [2] the deadline in server µs (see prologue.lua), '0' for none,
--          and [3] present for a dry run (decide without writing, for the
--          batch). A peek always sends [2]. (The form for a check with a
--          deadline sent alone has its own, fixed_window_server_deadline.lua.)
-- Reply    one integer: the key's value after the decision (0 for a peek
--          or dry run that finds no window), or, when denied, -1 minus the
--          value (which the denial left as it was); false (nil) when the
--          deadline passed. A window charged past its limit
--          (fixed_window_server_usage.lua) has a negative value, whose tag
--          is still its value modulo 16 (Lua's modulo is floored): every
--          request is denied, and the reply is a table of that one value.
--          The caller reads remaining and tag from it; it knows the
--          window's length and, within a round trip, the server's time,
--          which with the tag gives the window's end exactly.
-- Time     the window is the one of the server's time at the command (the
--          snapshot Redis takes for expiry, in ms, exact for windows of
--          whole ms); `TIME` is read only to create a key, for a key that
--          outlives its window, and for a deadline.
-- Writes   an admission is one DECRBY; a new window is a SET of the tagged
--          value and its PEXPIREAT (not SET's PXAT, which needs Redis 6.2).
--          A denial undoes its DECRBY. Peeks and dry runs read with GET
--          and write nothing.
-- Numbers  the hot path turns no text into a number: DECRBY takes the text,
--          and its reply is compared with constants. The values stay below
--          2^53 because the limit is below 2^49.
-- Form     this file is the script's body, not a function: a function
--          would cost the hot path a closure on every call. The batch wraps
--          it in one (see scripts.rs), passing its own KEYS and ARGV. It
--          stops after the DECRBY (and the start of a new window), with
--          `v` the value that left: the check ends with
--          fixed_window_server_check.lua, and charge and check_at_most
--          with their own endings (fixed_window_server_charge.lua,
--          fixed_window_server_at_most.lua), so that a usage call costs
--          what a check does.
--          Client time cannot use this form (the key's expiry runs on the
--          server's clock); it has fixed_window.lua, under another key.

if deadline then
  local now
  if deadline ~= '0' then
    local t = redis.call('TIME')
    now = t[1] * 1000000 + t[2]
    if now - deadline > 0 then
      return false
    end
  end
  if cost == '0' or ARGV[3] then
    local v = tonumber(redis.call('GET', key)) or 0
    if v % 16 > 4 then
      -- A key that outlives its window: once the window ended, nothing counts.
      if not now then
        local t = redis.call('TIME')
        now = t[1] * 1000000 + t[2]
      end
      local window = string.match(key, ':(%d+):%d+$')
      if v % 16 - 5 ~= math.floor(now / (window * 1000)) % 4 then
        v = 0
      end
    end
    if v < 0 then
      return {v}
    end
    if v > 0 and v - cost < 0 then
      return -1 - v
    end
    return v
  end
end
local v = redis.call('DECRBY', key, cost)
local tag = v % 16
if tag == 0 or tag > 4 then
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  local window, limit = string.match(key, ':(%d+):(%d+)$')
  local k = math.floor(now / (window * 1000))
  if tag == 0 or tag - 5 ~= k % 4 then
    -- A new window: what it has left is the limit less this cost.
    local last = (k + 1) * window - 1
    tag = k % 4 + 1
    local now_ms = math.floor(now / 1000)
    if last - now_ms <= 1 then
      tag, last = tag + 4, now_ms + 2
    end
    v = limit * 16 - cost + tag
    redis.call('SET', key, string.format('%d', v))
    redis.call('PEXPIREAT', key, string.format('%d', last))
  end
end
