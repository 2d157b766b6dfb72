-- fixed_window_server_charge.lua: charge's ending, after
-- fixed_window_server.lua's DECRBY of the cost (whose contract, entry and
-- arguments this shares; the cost·16 is at most 2^52, so every value
-- here is exact): the charge stands whatever the window had left, down
-- to 2^48 past the limit (a value of -2^52 + tag), and the window keeps
-- its expiry, its end, which is when its debt is repaid.
--
-- Reply    the key's value after the charge: remaining·16 + tag, negative
--          for a window in debt; false (nil) when the deadline passed.
--          The caller rebuilds the decision (allowed when remaining >= 0)
--          as it does a check's.

if v < -4503599627370496 then
  v = redis.call('INCRBY', key, string.format('%d', -4503599627370496 + v % 16 - v))
end
return v
