-- decimal.lua: integers as decimal text without exponent, for sorted-set
-- scores and members (tostring would print 1.7e+15). Only the scripts
-- that need it include it: each function defined costs every call.

local function int(n)
  return string.format('%d', n)
end
