-- fixed_window_server_check.lua: the check's ending, after
-- fixed_window_server.lua's DECRBY (the contract is that file's): a
-- denial undoes its DECRBY and replies -1 minus the value it left, or a
-- table of it for a window in debt; an admission replies the value.

if v < 0 then
  v = redis.call('INCRBY', key, cost)
  if v < 0 then
    return {v}
  end
  return -1 - v
end
return v
