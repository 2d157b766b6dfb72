-- late.lua: the start of the server-clock usage scripts that take their
-- deadline as text (`deadline`, nil for none; see prologue.lua): one that
-- runs after it answers false (nil) and writes nothing.

if deadline then
  local t = redis.call('TIME')
  if t[1] * 1000000 + t[2] - deadline > 0 then
    return false
  end
end
