-- fixed_window_usage.lua: charge, refund and check_at_most on the state
-- of fixed_window.lua (see usage_prologue.lua for the contract), with the
-- calls of its check: one HINCRBY on a window that has a count.
--
-- ARGV[1]  time, deadline, op, limit, window (µs), cost, and for a
--          calendar window (window 0) the bounds s0, e0, e1 (see
--          fixed_window.lua)
-- ARGV[2]  the count's change as decimal text (HINCRBY takes it as it
--          is): the cost, or for a refund minus the cost
-- Rule     the window is max(k_now, k_stored), as in fixed_window.lua.
--          The HINCRBY applies the whole change; then a charge past 2^48
--          over the limit, a refund below 0, and a check_at_most past the
--          limit are brought back with one more call (a refund to 0
--          deletes the key: fresh). A cost of 0 only reads.
-- Writes   as fixed_window.lua's admission: the first count of a window
--          drops the previous window's field and sets PEXPIRE = until one
--          window after its end (see fixed_window.lua for why).
-- Body     a body, not a function (see usage_prologue.lua).

local change = ARGV[#ARGV]
local k, span
if window > 0 then
  k, span = math.floor(now / window), window
elseif now < e0 then
  k, span = s0, e0 - s0
else
  k, span = e0, e1 - e0
end
local count, granted, signed = 0, 0, cost
if op == 2 then
  signed = -cost
end
if cost == 0 then
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local f = struct.unpack('<d', fields[i])
    if f >= k then
      k, count = f, tonumber(fields[i + 1])
    end
  end
else
  local field = struct.pack('<d', k)
  count = redis.call('HINCRBY', key, field, change)
  if count == signed then
    -- A new field: a new window, unless a later one is stored (a late
    -- client-time call), which takes the change instead.
    local fields = redis.call('HGETALL', key)
    local latest = k
    for i = 1, #fields, 2 do
      local f = struct.unpack('<d', fields[i])
      if f > latest then
        latest = f
      end
    end
    if latest == k then
      for i = 1, #fields, 2 do
        if fields[i] ~= field then
          redis.call('HDEL', key, fields[i])
        end
      end
      redis.call('PEXPIRE', key, string.format('%d', math.ceil(((window > 0 and (k + 1) * window or k + span) + span - now) / 1000)))
    else
      redis.call('HDEL', key, field)
      k = latest
      count = redis.call('HINCRBY', key, struct.pack('<d', k), change)
    end
  end
end
local before = count - signed
local allowed, ask = before + cost <= limit, 1
if op == 1 then
  if count > limit + 281474976710656 then
    count = redis.call('HINCRBY', key, struct.pack('<d', k), limit + 281474976710656 - count)
  end
elseif op == 2 then
  allowed = true
  if count <= 0 and cost > 0 then
    redis.call('DEL', key)
  end
  if count < 0 then
    count = 0
  end
else
  granted = cost
  if count > limit then
    -- Not all of it: what was left, possibly none, and the rest back.
    granted = math.max(0, limit - before)
    if cost > 0 then
      redis.call('HINCRBY', key, struct.pack('<d', k), granted - cost)
    end
    count = before + granted
  end
  ask = granted
  if ask == 0 then
    ask = math.min(cost, 1)
  end
  allowed = before + ask <= limit
  if granted > 0 then
    ask = -1
  end
end
local until_end = (window > 0 and (k + 1) * window or k + span) - now
local remaining, reset, retry = 0, 0, 0
if count < limit then
  remaining = limit - count
end
if count > 0 then
  reset = until_end
end
if ask >= 0 and count + ask > limit then
  retry = until_end
end
return struct.pack('<dddddd', allowed and 1 or 0, remaining, reset, retry, 0, granted)
