-- sliding_log_usage.lua: charge, refund and check_at_most on the log of
-- sliding_log.lua (see usage_prologue.lua for the contract and the form),
-- with its check's calls: ZRANGE of the newest entry, the trim, ZRANGE of
-- the log; then ZREM/ZADD and PEXPIRE as below.
--
-- ARGV[1]  time, deadline, op, limit, window (µs), cost
-- Rule     a charge records an entry at the log's time whatever is left
--          (the log counts past its limit by at most 2^48); one at the
--          newest entry's instant, or on a log that already holds `limit`
--          entries, adds to the newest entry and moves it to that time, so
--          the set never holds more than `limit` members and debt never
--          ages out early. A refund takes from the newest entries first.
-- Writes   trims entries that aged out; ZADD/ZREM as above; PEXPIRE =
--          until the newest entry ages out.
-- Body     this file reads the log: `entries` (member, score, oldest
--          first), `n` of them, their total `count`, and `at`, the log's
--          time; count_op.lua and sliding_log_usage_end.lua follow.

local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
local at = now
if newest[2] and tonumber(newest[2]) > now then
  at = tonumber(newest[2])
end
redis.call('ZREMRANGEBYSCORE', key, '-inf', int(at - window))
local entries = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
local count = 0
for i = 1, #entries, 2 do
  count = count + tonumber(string.match(entries[i], ':(%d+)$'))
end
local n = #entries / 2
