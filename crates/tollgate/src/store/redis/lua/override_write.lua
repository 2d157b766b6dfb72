-- override_write.lua: sets or removes one override of a policy, and
-- counts the change, in one step, so that an instance that sees the new
-- version also sees the change.
--
-- KEYS[1]  the policy's overrides: a hash, selector -> the override as
--          text (`Override::to_text`); `{overrides:<policy>}` is its hash
--          tag, so on a Cluster both keys live in one slot.
-- KEYS[2]  the policy's version: an integer counting every change, which
--          instances poll (one GET per policy every 250 ms, never one per
--          decision).
-- ARGV[1]  the selector (never empty: selectors are not).
-- ARGV[2]  the override as text; empty removes it.
-- Reply    { the new version, 1 when the field existed before, else 0 }.
-- Expiry   none: an override's end is in its text, which every instance
--          applies by its own clock; the instance that loads a set with
--          ended overrides removes them with this script.

local existed = redis.call('HEXISTS', KEYS[1], ARGV[1])
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return { redis.call('INCR', KEYS[2]), existed }
