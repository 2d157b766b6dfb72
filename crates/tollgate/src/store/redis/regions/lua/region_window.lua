-- region_window.lua: one region's decision on a global fixed window (see
-- docs/regions.md). The window's count is a G-counter, one component per
-- region; this region writes only its own component and compares the sum
-- of every component with the limit. One script on the local Redis, no
-- remote call: the other regions' components are what their replicators
-- last merged here (region_merge.lua), a lower bound of their true counts.
--
-- KEYS[1]  the window's counter: a hash, region name -> what that region
--          admitted in this window;
--          `<prefix>{<policy>:<key>}:rfw:<window ms>:<window index>`, so a
--          late merge for an old window never lands in a newer one
-- ARGV[1]  this region's name (its field)
-- ARGV[2]  the limit
-- ARGV[3]  the cost, decimal (0 peeks: reads, writes nothing)
-- ARGV[4]  the cap on this region's own component: the limit while every
--          remote region is fresh, floor(limit / regions) under a
--          partition (or when the key could not be queued for replication)
-- ARGV[5]  the key's TTL in ms (until one window past the window's end),
--          set on every admission
-- Reply    {allowed (1|0), total (after the request), own (after)}
-- Time     none: the window's index is in the key's name, from the
--          caller's clock, so every region names a window alike
-- Writes   an admission is HINCRBY of its own field and PEXPIRE; a denial
--          and a peek write nothing. Counts stay below 2^53 (a region's
--          own component never passes the limit).

local key, region = KEYS[1], ARGV[1]
local limit, cost, cap = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local fields = redis.call('HGETALL', key)
local total, own = 0, 0
for i = 1, #fields, 2 do
  local n = tonumber(fields[i + 1])
  total = total + n
  if fields[i] == region then
    own = n
  end
end
if cost == 0 then
  return {total <= limit and 1 or 0, total, own}
end
if total + cost > limit or own + cost > cap then
  return {0, total, own}
end
own = redis.call('HINCRBY', key, region, ARGV[3])
redis.call('PEXPIRE', key, ARGV[5])
return {1, total + cost, own}
