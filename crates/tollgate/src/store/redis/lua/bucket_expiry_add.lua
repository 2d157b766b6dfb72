-- bucket_expiry_add.lua: the end of bucket_expiry.lua and of the usage
-- scripts that consume on its state (bucket_expiry_charge.lua,
-- bucket_expiry_at_most.lua): moves the TAT `need` ms (at least 1) later
-- and replies the backlog b before: PEXPIREAT from the absolute expiry
-- (PEXPIRETIME, see bucket_expiry.lua for why), or for a key without
-- backlog SET '' PX need.

if b > 0 then
  redis.call('PEXPIREAT', key, string.format('%d', redis.call('PEXPIRETIME', key) + need))
else
  redis.call('SET', key, '', 'PX', need)
end
return b
