-- fixed_window_server_deadline.lua: a server-clock fixed-window check
-- with a deadline, sent alone, that proves it is on time without reading
-- `TIME` while the server is busy: the deadline is proved by a key's
-- existence.
--
-- Why: `TIME` costs a call about 6.4k instructions, its comparison another
-- 2.7k (text to numbers) and the deadline's argument 0.9k, which took a
-- check with a deadline to 1.3x go-zero's periodlimit script. Redis already compares its clock
-- with every key's expiry it reads, and a script reads keys as of the
-- moment it started (in ms). So a key that expires at ms X and is still
-- there says the script started at or before X, which is what the
-- deadline asks when X is before it: one `EXISTS` (about 3.5k, an integer
-- reply) instead of `TIME` and the arithmetic.
--
-- KEYS[1]  the window's state, as fixed_window_server.lua says.
-- KEYS[2]  a clock key, `<prefix>clock:<X>`, X in ms on the server's
--          clock, which stands for the call's deadline: the call is on
--          time if it starts at or before X (the caller names one with
--          (X + 1) ms at or before its own deadline, X on a grid of a
--          sixteenth of it, so that the calls of a few ms share one: see
--          clock.rs). It exists only until X: this script creates it
--          (value '1', PEXPIREAT X; nothing else writes it) and Redis drops
--          it once its clock passes X.
-- ARGV     as text: [1] the cost·16, absent for a cost of 1. No deadline:
--          an argument costs a call about 0.9k instructions, and X says
--          enough.
-- Reply    as fixed_window_server.lua: false (nil) when the script started
--          after X, and then nothing was written.
-- Time     the clock key there: the script started at or before X, and
--          `TIME` is not read (the server's expiry check read the clock).
--          Not there: `TIME`, late from the start of ms X + 1; on time,
--          the clock key is created for the calls that follow when X is
--          still 2 ms or more ahead (an expiry not in the future deletes
--          the key at once, and the clock may pass a ms within the call).
--          (Redis reads every key as of the ms its script started; `TIME`,
--          read a moment later, errs on the early side.)
-- Writes   the clock key, as above, only on time; then the window's check
--          as fixed_window_server.lua (its peek and dry-run branch off).
--          (Reading an expired clock key lets Redis delete it, as any read
--          of an expired key does; its state was gone already.)
-- Entry    texts.rs puts `local key, cost, deadline = KEYS[1], ARGV[1] or
--          '16'` before this text (`deadline` nil: the body's branch off)
--          and fixed_window_server.lua's body after it.

if redis.call('EXISTS', KEYS[2]) == 0 then
  local clock = KEYS[2]
  local x = string.match(clock, ':(%d+)$')
  local t = redis.call('TIME')
  local now = t[1] * 1000000 + t[2]
  if now - (x + 1) * 1000 >= 0 then
    return false
  end
  if x - math.floor(now / 1000) > 1 then
    redis.call('SET', clock, '1')
    redis.call('PEXPIREAT', clock, x)
  end
end
