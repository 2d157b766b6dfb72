-- bucket_expiry_refund.lua: refund on the state of bucket_expiry.lua (the
-- token bucket, GCRA and the leaky bucket on the server's clock, their
-- TAT the key's expiry), with the same calls as a check that admits.
--
-- KEYS[1]  the state, as bucket_expiry.lua keeps it
-- ARGV     as text: [1] need, the cost times the interval, in ms (at
--          least 1; a larger refund than any backlog is sent as that
--          backlog); then, only when needed, [2] the deadline in server µs
--          (see prologue.lua)
-- Reply    one integer: the backlog b in ms before the refund; false
--          (nil) when the deadline passed. The caller rebuilds the
--          decision with the algorithm's own Rust code.
-- Rule     the refund takes need off the backlog, down to none (a full
--          bucket, an empty queue: no key).
-- Writes   PEXPIREAT from PEXPIRETIME (the absolute expiry, as
--          bucket_expiry.lua moves it), or DEL for a backlog back to 0.
-- Entry    scripts.rs puts before this body a line naming `key`, `need` and
--          `deadline` (KEYS[1] and ARGV in order) and late.lua.

local b = redis.call('PTTL', key)
if b > 0 then
  if b - need > 0 then
    redis.call('PEXPIREAT', key, string.format('%d', redis.call('PEXPIRETIME', key) - need))
  else
    redis.call('DEL', key)
  end
  return b
end
return 0
