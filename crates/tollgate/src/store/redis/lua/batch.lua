-- batch.lua: several limits for one request, all or nothing.
--
-- KEYS[i]  the state of request i (each as its algorithm's script says);
--          on Redis Cluster all keys must be in one slot
-- ARGV[1], ARGV[2]  time source and deadline (see prologue.lua)
-- ARGV[3]  n, the number of requests; then 7 values per request i
--          starting at ARGV[4 + 7·(i-1)]: the algorithm ("fw", "sw", "sl",
--          "tb", "gcra", "lb") and its parameters as in its own script
--          (unused ones are 0)
-- Reply    a flat array of 5 integers per request, as the algorithms reply,
--          or {-1} when the deadline passed
-- Rule     first every request is decided without writing; only if all are
--          allowed are they decided again, in order, writing. A key may
--          appear only once (checked in Rust), so both passes agree.
--          Otherwise nothing is written and each request is answered as a
--          peek of its key (remaining, reset_after), denied, with the
--          retry_after of those over their own limit and 0 for the others.

-- With `peek`, the cost is 0: what the key's state is, unchanged.
local function decide(i, now, peek)
  local b = 4 + 7 * (i - 1)
  local alg = ARGV[b]
  local a = {}
  for j = 1, 6 do
    a[j] = tonumber(ARGV[b + j])
  end
  if peek then
    if alg == 'fw' or alg == 'sw' or alg == 'sl' then
      a[3] = 0
    else
      a[5] = 0
    end
  end
  local key = KEYS[i]
  if alg == 'fw' then
    return fixed_window(key, now, a[1], a[2], a[3])
  elseif alg == 'sw' then
    return sliding_window(key, now, a[1], a[2], a[3])
  elseif alg == 'sl' then
    return sliding_log(key, now, a[1], a[2], a[3])
  elseif alg == 'tb' then
    return token_bucket(key, now, a[1], a[2], a[3], a[4], a[5], a[6])
  elseif alg == 'gcra' then
    return gcra(key, now, a[1], a[2], a[3], a[4], a[5], a[6])
  end
  return leaky_bucket(key, now, a[1], a[2], a[3], a[4], a[5])
end

local function batch()
  local now = clock()
  if not now then
    return {-1}
  end
  local n = tonumber(ARGV[3])
  local replies = {}
  local all = true
  dry = true
  for i = 1, n do
    replies[i] = decide(i, now, false)
    if replies[i][1] ~= 1 then
      all = false
    end
  end
  if all then
    dry = false
    for i = 1, n do
      replies[i] = decide(i, now, false)
    end
  else
    -- Nothing consumed: report every key's unchanged state, denied, with
    -- the retry of those over their own limit.
    for i = 1, n do
      local peek = decide(i, now, true)
      local retry = 0
      if replies[i][1] ~= 1 then
        retry = replies[i][4]
      end
      replies[i] = {0, peek[2], peek[3], retry, 0}
    end
    dry = false
  end
  local out = {}
  for i = 1, n do
    for j = 1, 5 do
      out[#out + 1] = replies[i][j]
    end
  end
  return out
end
