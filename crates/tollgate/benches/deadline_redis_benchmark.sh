#!/bin/bash
# The fixed window's deadline cost under redis-benchmark -c 50 -P 16, beside
# go-zero's periodlimit (INCRBY + PEXPIRE on a window's first count), in
# interleaved rounds on one redis-server of its own: the server-clock window
# with a deadline sent alone (one TIME per check), and as the group script
# (16 checks per call, one TIME per call). The script texts are put together
# as scripts.rs does. Usage (from the repository root):
#   crates/tollgate/benches/deadline_redis_benchmark.sh [calls per round]
set -euo pipefail
N=${1:-200000}
LUA=crates/tollgate/src/store/redis/lua
DIR=$(mktemp -d)
trap 'redis-cli -p "$PORT" SHUTDOWN NOSAVE >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
  --pidfile "$DIR/pid" --logfile "$DIR/log" --dir "$DIR"
until redis-cli -p "$PORT" PING >/dev/null 2>&1; do sleep 0.1; done
{ cat $LUA/prologue.lua; printf 'local key, cost = KEYS[1], ARGV[1]\n'; cat $LUA/fixed_window_server.lua; } >"$DIR/alone.lua"
{ cat $LUA/prologue.lua; printf 'local none = {}\nlocal function window(key, cost)\nlocal ARGV = none\n'
  cat $LUA/fixed_window_server.lua; printf 'end\n'; cat $LUA/fixed_window_server_group.lua; } >"$DIR/group.lua"
load() { redis-cli -p "$PORT" SCRIPT LOAD "$1"; }
PERIODLIMIT=$(load "local n = redis.call('INCRBY', KEYS[1], ARGV[1]) if n == tonumber(ARGV[1]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return n")
ALONE=$(load "$(cat "$DIR/alone.lua")")
GROUP=$(load "$(cat "$DIR/group.lua")")
DEADLINE=9000000000000000 # far ahead: the check runs, its cost is the same
KEYS=()
for i in $(seq 1 16); do KEYS+=("fw:__rand_int__:$i:3600000:1099511627776"); done
rate() { redis-benchmark -p "$PORT" -c 50 -P 16 -r 1000 -q "$@" | grep -o '[0-9.]* requests per second' | cut -d' ' -f1; }
for round in 1 2 3; do
  pl=$(rate -n "$N" EVALSHA "$PERIODLIMIT" 1 pl:__rand_int__ 1 3600000)
  alone=$(rate -n "$N" EVALSHA "$ALONE" 1 fw:__rand_int__:3600000:1099511627776 16 "$DEADLINE")
  group=$(rate -n $((N / 16)) EVALSHA "$GROUP" 16 "${KEYS[@]}" "$DEADLINE")
  python3 -c "
pl, alone, group = $pl, $alone, $group * 16
print(f'round $round: periodlimit {pl:.0f}/s; window with a deadline alone {alone:.0f}/s ({alone / pl:.2f}); in groups of 16 {group:.0f} decisions/s ({group / pl:.2f})')"
done
