-- prologue.lua: helpers every tollgate script starts with.
--
-- Calling convention shared by every script (the algorithm files say which
-- ARGV follow):
--   ARGV[1]  time source: "s" = read the server's clock with TIME (µs);
--            otherwise the caller's now, in µs since the Unix epoch
--            (client-time mode; each algorithm keeps its stored time from
--            moving backwards).
--   ARGV[2]  deadline in server µs (0 = none): in server-time mode a
--            command that arrives after it is answered {-1} and writes
--            nothing, so a command delayed by a stalled server is never
--            applied late.
-- Replies are arrays of integers only. Every number handled here is an
-- integer below 2^53 (checked in Rust before the call), so double
-- arithmetic is exact; divisions are made exact by the helpers below.

if redis.replicate_commands then
  -- Before Redis 5, scripts that call TIME must replicate effects. A no-op
  -- since Redis 7, where effects replication is the only mode.
  redis.replicate_commands()
end

-- Set by batch.lua while it decides without writing (all-or-nothing).
local dry = false

local function floor_div(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function ceil_div(a, b)
  local q = floor_div(a, b)
  if q * b < a then
    q = q + 1
  end
  return q
end

-- Milliseconds for PEXPIRE / SET PX: rounded up, at least 1.
local function ttl_ms(us)
  local ms = ceil_div(us, 1000)
  if ms < 1 then
    ms = 1
  end
  return ms
end

-- Integers as decimal text without exponent (tostring would print 1e+15).
local function int(n)
  return string.format('%d', n)
end

-- The time of this call, or nil when the deadline has passed.
local function clock()
  if ARGV[1] == 's' then
    local t = redis.call('TIME')
    local now = t[1] * 1000000 + t[2]
    local deadline = tonumber(ARGV[2])
    if deadline > 0 and now > deadline then
      return nil
    end
    return now
  end
  return tonumber(ARGV[1])
end
