-- sliding_window.lua: the weighted two-window counter.
--
-- KEYS[1]  the state: three doubles (current window index k, admitted in
--          window k-1, admitted in window k)
-- ARGV[1]  time, deadline (see prologue.lua), limit, window (µs),
--          cost (0 peeks)
-- Reply    allowed, remaining, reset_after, retry_after, 0
-- Rule     with e = now - k·window: allowed iff
--          prev·(window - e) + (curr + cost)·window <= limit·window
--          (2·limit·window < 2^53 is checked in Rust, so this is exact).
-- Writes   only when admitting a cost > 0: SET with PX = until the end of
--          the next window, when both counts have aged out.
-- Form     texts.rs opens the function `sliding_window(key, now, limit,
--          window, cost, dry)` with sliding_window_roll.lua (the windows
--          as of now, which sliding_window_usage.lua reads the same way);
--          this file is the rest of the function.

  local weighted = prev * (window - e)
  local allowed = weighted + (curr + cost) * window <= limit * window
  local after = curr
  if allowed then
    after = curr + cost
  end
  local remaining = limit * window - weighted - after * window
  if remaining < 0 then
    remaining = 0
  end
  remaining = math.floor(remaining / window)
  local retry_at = now
  if not allowed then
    if curr + cost <= limit then
      retry_at = start + window - math.floor((limit - curr - cost) * window / prev)
    else
      local wait = window - math.floor((limit - cost) * window / curr)
      if wait < 0 then
        wait = 0
      end
      retry_at = start + window + wait
    end
  end
  local reset_at = now
  if after > 0 then
    reset_at = start + 2 * window
  elseif prev > 0 then
    reset_at = start + window
  end
  if allowed and cost > 0 and not dry then
    redis.call('SET', key, struct.pack('<ddd', k, prev, after), 'PX', string.format('%d', math.max(1, math.ceil((reset_at - now) / 1000))))
  end
  local reset = reset_at - now
  if reset < 0 then
    reset = 0
  end
  local retry = retry_at - now
  if retry < 0 then
    retry = 0
  end
  return allowed and 1 or 0, remaining, reset, retry, 0
end
