-- fixed_window.lua: at most `limit` per window [k·window, (k+1)·window).
-- (With client time, and on the server's clock for windows that are not
-- whole ms or limits of 2^49 and more; otherwise the server's clock has
-- fixed_window_server.lua, whose hot path reads no clock.)
--
-- KEYS[1]  the state: a hash with one field, the latest window's index k
--          (one packed double) -> the count admitted in it (for an instant
--          inside a call, the previous window's field too; see Writes)
-- ARGV[1]  time, deadline (see prologue.lua), limit, window (µs),
--          cost (0 peeks); for a calendar window (day, week, month, year
--          in a time zone, whose windows are not of one length) window is
--          0 and three numbers follow, computed in Rust: s0, e0, e1, the
--          bounds of the window [s0, e0) and of the next [e0, e1) around
--          the caller's estimate of now; the script takes the one its now
--          falls in, and a window is named by its first instant in µs
-- ARGV[2]  the cost again, as decimal text (HINCRBY takes it as it is)
-- Reply    allowed, remaining, reset_after, retry_after, 0
-- Rule     a request counts in window max(k_now, k_stored), so a late
--          client-time request (or a server clock that stepped back)
--          counts in the latest window, as in memory.
-- Writes   an admission is one HINCRBY on field k_now; when that creates
--          the field (the first admission of a window), the script looks
--          at the hash: a new window drops the previous field and sets
--          PEXPIRE = until one window after the window's end; a later
--          stored window takes the request instead. A denial undoes its
--          HINCRBY. Peeks and the batch's dry run read with HGETALL and
--          write nothing.
-- Ends     window k ends at (k + 1)·window, or for a calendar window at
--          k + span (a later stored window, from a caller whose clock is
--          ahead, is taken to have the same length: a near enough bound
--          for its expiry and its reset).
-- Expiry   the state is fresh at the window's end, but the TTL runs on the
--          server's clock: in client time a caller whose clock is behind
--          is still in the window after it ended on the server's clock
--          (and the simulator's or a test's clock may step back while the
--          server's runs on). The extra window keeps the count for such
--          a late request, which then counts in the latest window as in
--          memory, instead of finding no key and starting the window over.

local function fixed_window(key, now, limit, window, cost, cost_text, dry, s0, e0, e1)
  -- k names the window, span is its length (µs).
  local k, span
  if window > 0 then
    k, span = math.floor(now / window), window
  elseif now < e0 then
    k, span = s0, e0 - s0
  else
    k, span = e0, e1 - e0
  end
  local field = struct.pack('<d', k)
  local count
  local allowed = true
  if cost > 0 and not dry then
    count = redis.call('HINCRBY', key, field, cost_text or cost)
    if count == cost then
      local fields = redis.call('HGETALL', key)
      local latest, stored = k, 0
      for i = 1, #fields, 2 do
        local f = struct.unpack('<d', fields[i])
        if f > latest then
          latest, stored = f, tonumber(fields[i + 1])
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
        if stored + cost <= limit then
          count = redis.call('HINCRBY', key, struct.pack('<d', k), cost)
        else
          count, allowed = stored, false
        end
      end
    elseif count > limit then
      redis.call('HINCRBY', key, field, -cost)
      count, allowed = count - cost, false
    end
  else
    count = 0
    local fields = redis.call('HGETALL', key)
    for i = 1, #fields, 2 do
      local f = struct.unpack('<d', fields[i])
      if f >= k then
        k, count = f, tonumber(fields[i + 1])
      end
    end
    allowed = count + cost <= limit
    if allowed then
      count = count + cost
    end
  end
  local until_end = (window > 0 and (k + 1) * window or k + span) - now
  local reset = until_end
  if count == 0 then
    reset = 0
  end
  -- A window charged past its limit (fixed_window_usage.lua) has nothing
  -- left.
  local remaining = 0
  if count < limit then
    remaining = limit - count
  end
  if allowed then
    return 1, remaining, reset, 0, 0
  end
  return 0, remaining, reset, until_end, 0
end
