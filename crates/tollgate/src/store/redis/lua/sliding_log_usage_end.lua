-- sliding_log_usage_end.lua: the end of sliding_log_usage.lua's body,
-- after count_op.lua: moves the log from `count` to `after` and replies.
-- `entries` is kept as the log is (its first `n` pairs), for the retry.

local used = count
-- Costs at the log's instant share its newest entry; so does a charge on
-- a log already holding `limit` entries.
local merge = n > 0 and (tonumber(entries[2 * n]) == at or (op == 1 and n >= limit))
-- A refund takes from the newest entries first.
local left = used - after
if left > 0 then
  used = after
  while left > 0 do
    local member = entries[2 * n - 1]
    local c = tonumber(string.match(member, ':(%d+)$'))
    redis.call('ZREM', key, member)
    if c <= left then
      left = left - c
      n = n - 1
    else
      local t = int(entries[2 * n])
      entries[2 * n - 1] = t .. ':' .. int(c - left)
      left = 0
      redis.call('ZADD', key, t, entries[2 * n - 1])
    end
  end
  if n > 0 then
    redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil((entries[2 * n] + window - now) / 1000))))
  end
end
if after > used then
  local add = after - used
  if merge then
    local member = entries[2 * n - 1]
    redis.call('ZREM', key, member)
    add = add + tonumber(string.match(member, ':(%d+)$'))
  else
    n = n + 1
  end
  entries[2 * n - 1], entries[2 * n] = int(at) .. ':' .. int(add), at
  redis.call('ZADD', key, int(at), entries[2 * n - 1])
  redis.call('PEXPIRE', key, string.format('%d', math.max(1, math.ceil((at + window - now) / 1000))))
  used = after
end
-- When a request of `ask` would fit: once enough of the oldest entries
-- have aged out.
local retry_at = now
if ask >= 0 and used + ask > limit then
  left = used
  retry_at = at
  for i = 1, n do
    left = left - tonumber(string.match(entries[2 * i - 1], ':(%d+)$'))
    if left + ask <= limit then
      retry_at = entries[2 * i] + window
      break
    end
  end
end
local reset, remaining = 0, 0
if n > 0 then
  reset = entries[2 * n] + window - now
end
if used < limit then
  remaining = limit - used
end
local retry = retry_at - now
if retry < 0 then
  retry = 0
end
return struct.pack('<dddddd', allowed and 1 or 0, remaining, reset, retry, 0, granted)
