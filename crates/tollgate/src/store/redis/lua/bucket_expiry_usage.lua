-- bucket_expiry_usage.lua: charge, refund and check_at_most on the state
-- of bucket_expiry.lua (the token bucket, GCRA and the leaky bucket on the
-- server's clock, their TAT the key's expiry).
--
-- KEYS[1]  the state, as bucket_expiry.lua keeps it
-- ARGV     as text: [1] the operation (1 charge, 2 refund, 3
--          check_at_most); [2] the cost (check_at_most's max_cost); [3]
--          the interval (per / rate) in ms; [4] the capacity (burst or
--          capacity times the interval) in ms; [5] the most backlog a
--          charge leaves, in ms (2^52 scaled units); [6] the deadline in
--          server µs (see prologue.lua), '0' for none
-- Reply    one integer: the backlog b in ms before the operation; false
--          (nil) when the deadline passed. The caller rebuilds the whole
--          decision, and what check_at_most granted, with the algorithm's
--          own Rust code on a state b ahead, as bucket_expiry.lua's does.
-- Rule     on the backlog b: a charge adds cost·interval (up to [5])
--          whatever the capacity; a refund takes it off, down to 0;
--          check_at_most adds g·interval, g = min(cost, what fits).
-- Writes   only when the backlog changes: PEXPIREAT from PEXPIRETIME (the
--          absolute expiry, as bucket_expiry.lua moves it), SET '' PX for
--          a key without backlog, DEL for a backlog back to 0. The key
--          expires exactly when its debt is repaid.

local key, op = KEYS[1], ARGV[1]
if ARGV[6] ~= '0' then
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - ARGV[6] > 0 then
    return false
  end
end
local cost, interval, capacity = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local b = redis.call('PTTL', key)
if b < 0 then
  b = 0
end
local after = b
if op == '1' then
  after = math.min(b + cost * interval, tonumber(ARGV[5]))
elseif op == '2' then
  after = b - math.min(cost * interval, b)
elseif b < capacity then
  after = b + math.min(cost, math.floor((capacity - b) / interval)) * interval
end
if after ~= b then
  if after == 0 then
    redis.call('DEL', key)
  elseif b > 0 then
    redis.call('PEXPIREAT', key, string.format('%d', redis.call('PEXPIRETIME', key) + after - b))
  else
    redis.call('SET', key, '', 'PX', string.format('%d', after))
  end
end
return b
