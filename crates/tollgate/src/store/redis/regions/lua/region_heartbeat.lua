-- region_heartbeat.lua: what a replicator writes into another region's
-- Redis after a round's components are all merged there (see
-- docs/regions.md): "every component I had at this time is in". The
-- receiving region reads it to know how stale its view of the sender is,
-- and so whether it is partitioned from it.
--
-- KEYS[1]  `<prefix>{regions}:seen`, a hash: `<region>` -> the time (ms
--          since the Unix epoch, the sender's clock) at which the sender
--          read the components of its latest merged round; `<region>:n` ->
--          how many components its rounds have merged here in all
-- ARGV[1]  the sending region's name
-- ARGV[2]  the time its round read its components, ms, decimal
-- ARGV[3]  how many components that round merged (that grew), decimal
-- ARGV[4]  TTL in ms, set on every write (a region gone for that long
--          leaves nothing behind)
-- Reply    1 when the time moved forward, 0 for a replay (nothing written
--          but the count and the TTL)
-- Writes   the time is a maximum (a late heartbeat never makes a region
--          look fresher than it is), the count a sum

local key, region, at = KEYS[1], ARGV[1], tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', key, region) or '0')
local moved = 0
if at > held then
  redis.call('HSET', key, region, ARGV[2])
  moved = 1
end
redis.call('HINCRBY', key, region .. ':n', ARGV[3])
redis.call('PEXPIRE', key, ARGV[4])
return moved
