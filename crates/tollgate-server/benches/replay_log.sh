#!/usr/bin/env bash
# Times `tollgate simulate` replaying an access log of N lines (default
# 1,000,000) on the memory store, in both formats: a combined log and the
# same requests as Envoy JSON lines. The logs are made here, the same on
# every run: 5,000 clients, a few of them very busy, over one hour.
#
#   crates/tollgate-server/benches/replay_log.sh [N]
set -euo pipefail
cd "$(dirname "$0")/../../.."
n="${1:-1000000}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

awk -v n="$n" -v dir="$dir" 'BEGIN {
    srand(26)
    split("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec", month, " ")
    start = 1772442000  # 2026-03-02T09:00:00Z
    for (i = 0; i < n; i++) {
        t = start + int(i * 3600 / n)
        ms = int(i * 3600000 / n) % 1000
        s = t % 60; m = int(t / 60) % 60; h = int(t / 3600) % 24
        # a few clients send most requests (a power law), the rest a little
        c = int(5000 * rand() ^ 4)
        client = sprintf("10.%d.%d.%d", int(c / 65536) % 256, int(c / 256) % 256, c % 256)
        path = sprintf("/api/books/%d", int(200 * rand()))
        printf "%s - - [02/Mar/2026:%02d:%02d:%02d +0000] \"GET %s HTTP/1.1\" 200 %d \"-\" \"curl/8.5.0\"\n", \
            client, h, m, s, path, 100 + int(9000 * rand()) > (dir "/access.log")
        printf "{\"start_time\":\"2026-03-02T%02d:%02d:%02d.%03dZ\",\"method\":\"GET\",\"path\":\"%s\",\"response_code\":200,\"downstream_remote_address\":\"%s:%d\",\"user_agent\":\"curl/8.5.0\"}\n", \
            h, m, s, ms, path, client, 30000 + int(30000 * rand()) > (dir "/access.jsonl")
    }
}'

cargo build --release -q -p tollgate-server
for log in access.log access.jsonl; do
    for round in 1 2 3; do
        /usr/bin/time -f "$log ($n lines), round $round: %e s wall, %U s user, %S s system, %M KB peak" \
            target/release/tollgate simulate --config examples/books.toml \
            --trace "$dir/$log" --policy books-log --top 20 >/dev/null
    done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
