-- batch.lua: several limits for one request, all or nothing.
--
-- KEYS[i]  the state of request i (each as its algorithm's script says);
--          on Redis Cluster all keys must be in one slot
-- ARGV[1]  time and deadline, packed (see prologue.lua)
-- ARGV[2i], ARGV[2i+1]  request i: its algorithm ("fw", "fws", "sw", "sl",
--          "tb", "gcra", "lb", "tbs", "gcras", "lbs"), then its numbers,
--          packed: as in its own script after the deadline (tb and gcra
--          with max_wait 0); for "fws" (fixed_window_server.lua, whose key
--          names its window and limit) limit, window in ms, cost; for
--          "tbs", "gcras" and "lbs" (bucket_expiry.lua) interval and
--          capacity in ms, cost
-- Reply    five doubles per request, as the algorithms reply, in one
--          string; or the single double -1 when the deadline passed
-- Rule     first every request is decided without writing; only if all are
--          allowed are they decided again, in order, writing. A key may
--          appear only once (checked in Rust), so both passes agree.
--          Otherwise nothing is written and each request is answered as a
--          peek of its key (remaining, reset_after), denied, with the
--          retry_after of those over their own limit and 0 for the others.

-- Request i's decision as a table of five; with `peek`, at cost 0; with
-- `dry`, without writing.
local function decide(i, now, peek, dry)
  local alg = ARGV[2 * i]
  local a = {struct.unpack('<' .. string.rep('d', #ARGV[2 * i + 1] / 8), ARGV[2 * i + 1])}
  local key = KEYS[i]
  if alg == 'fws' then
    -- limit, window (ms), cost: the reply as the other algorithms', with
    -- the window's end from `now`. The script's value is remaining·16 +
    -- tag, 0 when no window has begun; a dry run leaves its cost out.
    local limit, window, cost = a[1], a[2] * 1000, a[3]
    if peek then
      cost = 0
    end
    local args = {string.format('%d', cost * 16), '0'}
    if dry then
      args[3] = 'dry'
    end
    local v = fixed_window_server({key}, args)
    local until_end = (math.floor(now / window) + 1) * window - now
    if type(v) == 'table' then
      -- A window charged past its limit: denied, nothing left.
      return {0, 0, until_end, until_end, 0}
    end
    local allowed = v >= 0
    if not allowed then
      v = -1 - v
    end
    local remaining, reset = limit, 0
    if v > 0 then
      remaining, reset = math.floor(v / 16), until_end
    end
    if allowed then
      return {1, remaining, reset, 0, 0}
    end
    return {0, remaining, reset, until_end, 0}
  end
  if alg == 'tbs' or alg == 'gcras' or alg == 'lbs' then
    -- The script's reply is the backlog b (ms) before the decision; the
    -- decision follows from it as in the buckets' own scripts, with
    -- max_wait 0 (so the wait of an admission is none, and its delay the
    -- leaky bucket's backlog).
    local interval, capacity, cost = a[1], a[2], a[3]
    if peek then
      cost = 0
    end
    local need = cost * interval
    local args = {string.format('%d', need), string.format('%d', capacity - need), '0'}
    if dry then
      args[4] = 'dry'
    end
    local b = bucket_expiry({key}, args)
    local allowed = b >= 0
    local debt = b + need
    if not allowed then
      b = -1 - b
      debt = b
    end
    local remaining = 0
    if debt < capacity then
      remaining = math.floor((capacity - debt) / interval)
    end
    if allowed then
      local delay = 0
      if alg == 'lbs' then
        delay = b * 1000
      end
      return {1, remaining, debt * 1000, 0, delay}
    end
    return {0, remaining, debt * 1000, (b + need - capacity) * 1000, 0}
  end
  if alg == 'fw' or alg == 'sw' or alg == 'sl' then
    if peek then
      a[3] = 0
    end
    if alg == 'fw' then
      return {fixed_window(key, now, a[1], a[2], a[3], nil, dry, a[4], a[5], a[6])}
    elseif alg == 'sw' then
      return {sliding_window(key, now, a[1], a[2], a[3], dry)}
    end
    return {sliding_log(key, now, a[1], a[2], a[3], dry)}
  end
  if peek then
    a[4] = 0
  end
  if alg == 'tb' then
    return {token_bucket(key, now, a[1], a[2], a[3], a[4], a[5], dry)}
  elseif alg == 'gcra' then
    return {gcra(key, now, a[1], a[2], a[3], a[4], a[5], dry)}
  end
  return {leaky_bucket(key, now, a[1], a[2], a[3], a[4], dry)}
end

-- `now` is read (and the deadline checked) by the entry point, written
-- in scripts.rs as every script's is.
local function batch(now)
  local n = #KEYS
  local replies = {}
  local all = true
  for i = 1, n do
    replies[i] = decide(i, now, false, true)
    if replies[i][1] ~= 1 then
      all = false
    end
  end
  if all then
    for i = 1, n do
      replies[i] = decide(i, now, false, false)
    end
  else
    -- Nothing consumed: report every key's unchanged state, denied, with
    -- the retry of those over their own limit.
    for i = 1, n do
      local peek = decide(i, now, true, true)
      local retry = 0
      if replies[i][1] ~= 1 then
        retry = replies[i][4]
      end
      replies[i] = {0, peek[2], peek[3], retry, 0}
    end
  end
  local out = {}
  for i = 1, n do
    local r = replies[i]
    out[i] = struct.pack('<ddddd', r[1], r[2], r[3], r[4], r[5])
  end
  return table.concat(out)
end
