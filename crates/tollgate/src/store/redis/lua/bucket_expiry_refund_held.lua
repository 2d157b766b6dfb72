-- bucket_expiry_refund_held.lua: refund_held on the state of
-- bucket_expiry.lua (the token bucket and GCRA on the server's clock,
-- their TAT the key's expiry): a held check_at_most's unused units go
-- back only while the key's expiry is still the TAT that take wrote, and
-- then the TAT is exactly where a held take of fewer units would have put
-- it (see Store::refund_held and docs/leases.md).
--
-- KEYS[1]  the state, as bucket_expiry.lua keeps it
-- ARGV     as text: [1] the stamp, the TAT in Unix ms that the held take
--          wrote (bucket_expiry_held_add.lua's reply); [2] need, the
--          units times the interval, in ms
-- Rule     the key is the stamped bucket while it exists (not full) and
--          its expiry is that TAT. Then the TAT moves need ms earlier.
-- Reply    one integer: the backlog b in ms before the refund; or -1 when
--          the key is not the stamped bucket, and nothing is written.
--          The caller rebuilds the decision as for a refund.
-- Writes   PEXPIREAT the stamp less need (absolute, as bucket_expiry.lua
--          moves it), or DEL when that is not after now.
-- Time     no deadline: a refund that applies is exact whenever it runs.
-- Entry    scripts.rs puts before this body a line naming `key`, `tat0`
--          and `need` (KEYS[1], ARGV[1], ARGV[2]).

local b = redis.call('PTTL', key)
if b <= 0 or redis.call('PEXPIRETIME', key) ~= tonumber(tat0) then
  return -1
end
if b - need > 0 then
  redis.call('PEXPIREAT', key, string.format('%d', tat0 - need))
else
  redis.call('DEL', key)
end
return b
