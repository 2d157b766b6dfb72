-- bucket_expiry_charge.lua: charge on the state of bucket_expiry.lua (the
-- token bucket, GCRA and the leaky bucket on the server's clock, their
-- TAT the key's expiry), with the same calls as a check that admits.
--
-- KEYS[1]  the state, as bucket_expiry.lua keeps it
-- ARGV     as text: [1] need, the cost times the interval, in ms (at
--          least 1, at most the most backlog a charge leaves: 2^52 scaled
--          units); [2] room, that most backlog less need; then, only when
--          needed, [3] the deadline in server µs (see prologue.lua)
-- Reply    one integer: the backlog b in ms before the charge; false
--          (nil) when the deadline passed. The caller rebuilds the
--          decision with the algorithm's own Rust code, as for a check.
-- Rule     the charge adds need to the backlog whatever the capacity, up
--          to the most a charge leaves.
-- Writes   as bucket_expiry.lua's admission: PEXPIREAT from PEXPIRETIME,
--          or SET '' PX for a key without backlog. The key expires exactly
--          when its debt is repaid.
-- Entry    scripts.rs puts before this body a line naming `key`, `need`, `room` and
--          `deadline` (KEYS[1] and ARGV in order) and late.lua;
--          after it, bucket_expiry_add.lua, which writes and replies.

local b = redis.call('PTTL', key)
if b < 0 then
  b = 0
end
if b - room > 0 then
  -- At the most backlog a charge leaves, or nearly.
  need = room + need - b
  if need <= 0 then
    return b
  end
end
