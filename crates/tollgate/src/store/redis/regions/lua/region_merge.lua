-- region_merge.lua: a replicator's merge of one region's component into
-- another region's Redis (see docs/regions.md): the component is a
-- maximum, so merging a value that is not larger changes nothing, and a
-- replayed or reordered merge never double counts.
--
-- KEYS[1]  a window's counter (see region_window.lua)
-- ARGV[1]  the sending region's name (its field)
-- ARGV[2]  its component, decimal: what it had admitted in that window
--          when its replicator read it
-- ARGV[3]  TTL in ms (until one window past the window's end, on the
--          sender's clock), set only when this merge creates the key, so a
--          merge never shortens or prolongs a window the region already has
-- Reply    1 when the component grew, 0 when the key held as much already
-- Writes   HSET of the field and, on a new key, PEXPIRE; nothing else. A
--          merge never touches the receiving region's own field.

local key, region, value = KEYS[1], ARGV[1], tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', key, region) or '0')
if value <= held then
  return 0
end
redis.call('HSET', key, region, ARGV[2])
if redis.call('PTTL', key) < 0 then
  redis.call('PEXPIRE', key, ARGV[3])
end
return 1
