-- bucket_expiry.lua: the token bucket, GCRA and the leaky bucket on the
-- server's clock, for rates whose interval (per / rate) is a whole number
-- of ms: the key's expiry is the theoretical arrival time (TAT; for the
-- leaky bucket, the virtual finish time), so the hot path reads no clock
-- and converts no big number: PTTL, PEXPIRETIME, PEXPIREAT.
--
-- The three algorithms keep one number, max(TAT, now), and decide on the
-- backlog b = TAT - now: a request costing `need` (cost · interval) waits
-- max(0, b + need - capacity), is admitted when that wait is within what
-- it may wait, and then moves the TAT to max(TAT, now) + need. With the
-- interval, the capacity and now in whole ms, every TAT is a whole ms, an
-- instant Redis can keep as an expiry; and the key expires exactly when
-- the state is fresh again (a full bucket, an empty queue), as the TTL rule
-- asks of every key.
--
-- KEYS[1]  the state: its expiry is the TAT in Unix ms; its value is empty.
--          No key is a TAT in the past (b = 0).
-- Entry    scripts.rs puts one line before this body: `local key, need,
--          room = KEYS[1], ARGV[1], ARGV[2]`, and bucket_expiry_add.lua
--          after it (the admission's write, which the usage scripts share).
--          The batch wraps the same body in a function of its own KEYS and
--          ARGV.
-- ARGV     as text: [1] need, the cost times the interval, in ms (0
--          peeks); [2] room, the most backlog that admits: capacity +
--          max_wait - need, in ms (capacity = burst or capacity times the
--          interval; max_wait, whole ms of a reservation's, else 0); then,
--          only when needed, [3] the deadline in server µs (see
--          prologue.lua), '0' for none, and [4] present for a dry run
--          (decide without writing, for the batch).
-- Reply    one integer: the backlog b in ms before the decision, or, when
--          denied, -1 - b; false (nil) when the deadline passed. The caller
--          knows the policy, so b is all it needs to rebuild the whole
--          decision with the algorithm's own Rust code.
-- Time     the server's clock in ms, as PTTL reads it. PTTL and the writes
--          may read it a ms apart (Redis 7.0 reads the clock per command):
--          so an admission on a backlog moves the expiry from its absolute
--          value (PEXPIRETIME), never from a second reading of the clock,
--          and one on no backlog (a fresh state at any later instant too)
--          sets it relative to the write. `TIME` is read only for a
--          deadline.
-- Writes   only an admission of need > 0: PEXPIREAT the TAT + need, or for
--          a key without backlog SET '' PX need (at least 1 ms: need is a
--          positive number of whole ms). A denial, a peek or a dry run
--          writes nothing. A key without an expiry (-1, not ours) counts as
--          fresh and is replaced by the first admission.
-- Numbers  the TAT is a Unix time in ms (13 digits) and need and room are
--          below 2^51 (the capacity in scaled units is below 2^50, and so
--          is a reservation's longest wait, which the policy's validation
--          sees to), so every sum is exact.
-- Needs    Redis 7.0 (PEXPIRETIME); the store checks the version at
--          connect and keeps token_bucket.lua, gcra.lua and
--          leaky_bucket.lua for older servers, for client time, and for
--          intervals that are not whole ms.

if ARGV[3] and ARGV[3] ~= '0' then
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - ARGV[3] > 0 then
    return false
  end
end
local b = redis.call('PTTL', key)
if b < 0 then
  b = 0
end
if b - room > 0 then
  return -1 - b
end
if need == '0' or ARGV[4] then
  return b
end
