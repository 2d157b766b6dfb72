#!/bin/bash
# The fixed window's deadline cost under redis-benchmark -c 50 -P 16, beside
# go-zero's periodlimit (its published script: two tonumber, INCRBY, EXPIRE
# on a window's first count) and its leaner cousin (INCRBY + PEXPIRE on the
# first count), in interleaved rounds on one redis-server of its own: the
# server-clock window with a deadline sent alone as a standalone server
# gets it (fixed_window_server_deadline.lua: a clock key that exists proves
# the deadline and stands for it, no TIME), sent alone as a cluster gets it (one TIME per
# check), and as the group script (16 checks per call, one TIME per call).
# Per row the decisions/s and the server's CPU time per decision (all of
# it: the command read, the script, the reply), each as a share of
# periodlimit's in the same round.
# The script texts are put together as texts.rs does. Usage (from the
# repository root):
#   crates/tollgate/benches/deadline_redis_benchmark.sh [calls per round] [rounds]
set -euo pipefail
N=${1:-200000}
LUA=crates/tollgate/src/store/redis/lua
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$DIR/pid" --logfile "$DIR/log" --dir "$DIR"
until redis-cli -p "$PORT" PING >/dev/null 2>&1; do sleep 0.1; done
{ cat $LUA/prologue.lua; printf 'local key, cost, deadline = KEYS[1], ARGV[1], ARGV[2]\n'; cat $LUA/fixed_window_server.lua $LUA/fixed_window_server_check.lua; } >"$DIR/time.lua"
{ cat $LUA/prologue.lua; printf "local key, cost, deadline = KEYS[1], ARGV[1] or '16'\n"
  cat $LUA/fixed_window_server_deadline.lua $LUA/fixed_window_server.lua $LUA/fixed_window_server_check.lua; } >"$DIR/clock.lua"
{ cat $LUA/prologue.lua; printf 'local function window(key, cost)\nlocal deadline\n'
  cat $LUA/fixed_window_server.lua $LUA/fixed_window_server_check.lua; printf 'end\n'; cat $LUA/fixed_window_server_group.lua; } >"$DIR/group.lua"
load() { redis-cli -p "$PORT" SCRIPT LOAD "$1"; }
GOZERO=$(load "local limit, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local n = redis.call('INCRBY', KEYS[1], 1)
if n == 1 then redis.call('EXPIRE', KEYS[1], window) end
if n < limit then return 1 elseif n == limit then return 2 end
return 0")
PERIODLIMIT=$(load "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return n")
TIMED=$(load "$(cat "$DIR/time.lua")")
CLOCK=$(load "$(cat "$DIR/clock.lua")")
GROUP=$(load "$(cat "$DIR/group.lua")")
DEADLINE=9000000000000000 # far ahead: the check runs, its cost is the same
# A clock key an hour ahead: the first call makes it, the others find it,
# as under steady traffic (where a new one is made every few ms).
CLOCK_KEY="clock:$(( $(date +%s) * 1000 + 3600000 ))"
KEYS=()
for i in $(seq 1 16); do KEYS+=("fw:__rand_int__:$i:3600000:1099511627776"); done
# One row: redis-benchmark's rate, and the server's CPU time (user +
# system, in clock ticks, from /proc) over the row: the load beside the run
# moves a rate a lot and the CPU a call takes far less.
ticks() { awk '{ print $14 + $15 }' "/proc/$(cat "$DIR/pid")/stat"; }
rate() {
  local before r
  before=$(ticks)
  r=$(redis-benchmark -p "$PORT" -c 50 -P 16 -r 1000 -q "$@" | grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
  echo "$r $(( $(ticks) - before ))"
}
for round in $(seq 1 "${2:-3}"); do
  gz=($(rate -n "$N" EVALSHA "$GOZERO" 1 gz:__rand_int__ 1000000000 3600))
  pl=($(rate -n "$N" EVALSHA "$PERIODLIMIT" 1 pl:__rand_int__ 1 3600000))
  clock=($(rate -n "$N" EVALSHA "$CLOCK" 2 fw:__rand_int__:3600000:1099511627776 "$CLOCK_KEY"))
  timed=($(rate -n "$N" EVALSHA "$TIMED" 1 fwt:__rand_int__:3600000:1099511627776 16 "$DEADLINE"))
  group=($(rate -n $((N / 16)) EVALSHA "$GROUP" 16 "${KEYS[@]}" "$DEADLINE"))
  python3 -c "
# Decisions per row: N, or N / 16 calls of 16 for the group.
rows = [('INCRBY+PEXPIRE', ${pl[0]}, ${pl[1]}), ('window with a deadline alone, clock key', ${clock[0]}, ${clock[1]}),
        ('alone, TIME', ${timed[0]}, ${timed[1]}), ('in groups of 16', ${group[0]} * 16, ${group[1]})]
gz, gz_cpu = ${gz[0]}, ${gz[1]}
print(f'round $round: periodlimit (go-zero) {gz:.0f}/s, {gz_cpu * 1e4 / $N:.2f} server CPU us/decision', end='')
for name, r, cpu in rows:
    print(f'; {name} rate {r / gz:.2f}, CPU {cpu / gz_cpu:.2f}', end='')
print()"
done
