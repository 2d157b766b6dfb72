-- bucket_expiry_held_add.lua: the end of a held check_at_most on the
-- state of bucket_expiry.lua (bucket_expiry_at_most.lua's body, in place
-- of bucket_expiry_add.lua): moves the TAT `need` ms later as
-- bucket_expiry_add.lua does, and replies the backlog b before with the
-- TAT written, the key's expiry in Unix ms: the stamp that
-- bucket_expiry_refund_held.lua compares.
--
-- Reply    a table of two integers, b and the TAT (a grant of none
--          replied b alone, in bucket_expiry_at_most.lua)

if b > 0 then
  local tat = redis.call('PEXPIRETIME', key) + need
  redis.call('PEXPIREAT', key, string.format('%d', tat))
  return {b, tat}
end
redis.call('SET', key, '', 'PX', need)
return {b, redis.call('PEXPIRETIME', key)}
