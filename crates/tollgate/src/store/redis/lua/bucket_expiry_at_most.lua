-- bucket_expiry_at_most.lua: check_at_most on the state of
-- bucket_expiry.lua (the token bucket, GCRA and the leaky bucket on the
-- server's clock, their TAT the key's expiry), with the same calls as a
-- check.
--
-- KEYS[1]  the state, as bucket_expiry.lua keeps it
-- ARGV     as text: [1] need, max_cost times the interval, in ms (max_cost
--          at least 1 and at most the burst, which grants the same); [2]
--          room, the capacity less need, as a check's; then, only when
--          needed, [3] the interval in ms (1 when not sent), [4] the
--          deadline in server µs (see prologue.lua; '0' for none), [5] a
--          held check_at_most's hold in ms (see usage_prologue.lua)
-- Reply    one integer: the backlog b in ms before the grant; false (nil)
--          when the deadline passed. The caller rebuilds the decision, and
--          what was granted, with the algorithm's own Rust code.
-- Rule     a backlog within room admits all of max_cost, as a check
--          admits; past it, the whole intervals that still fit in the
--          capacity, possibly none. Held, on a backlog of at least the
--          hold, and a grant moves the TAT to max(TAT, now + hold) + the
--          grant (the reply is still the backlog before).
-- Writes   as bucket_expiry.lua's admission: PEXPIREAT from PEXPIRETIME,
--          or SET '' PX for a key without backlog; nothing for a grant of
--          none.
-- Entry    scripts.rs puts before this body a line naming `key`, `need`,
--          `room`, `deadline` and `hold` (KEYS[1], ARGV[1], [2], [4] unless
--          '0', and [5]) and late.lua;
--          after it, bucket_expiry_add.lua, which writes and replies.

local b = redis.call('PTTL', key)
if b < 0 then
  b = 0
end
local h = b
if hold and b - hold < 0 then
  h = hold + 0
end
if h - room > 0 then
  local free = room + need - h
  need = free - free % (ARGV[3] or 1)
  if need <= 0 then
    return b
  end
end
if h > b then
  -- bucket_expiry_add.lua moves the TAT by need from max(TAT, now).
  need = need + h - b
end
