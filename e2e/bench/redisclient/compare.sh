#!/usr/bin/env bash
# compare.sh BIN [ROUNDS] [SECONDS] [CALLERS]: the Redis client transports
# side by side against one redis-server started here (loopback, a free
# port), in alternating order, ROUNDS times each; one JSON line per run,
# with redis-server's CPU per call added.
set -euo pipefail
bin=$1 rounds=${2:-2} seconds=${3:-5} callers=${4:-32}
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" --daemonize no >"$dir/redis.log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null; wait $rpid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
ticks() { awk '{print $14 + $15}' "/proc/$rpid/stat"; }
hz=$(getconf CLK_TCK)
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  for t in go-redis go-redis-pipeline rueidis rueidis-flush-delay; do
    r0=$(ticks)
    line=$("$bin" --redis "127.0.0.1:$port" --transport "$t" --callers "$callers" --seconds "$seconds")
    r1=$(ticks)
    calls=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["calls"])' "$line")
    python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["round"] = int(sys.argv[2]); d["redis_cpu_us"] = round((int(sys.argv[3]) / int(sys.argv[4])) * 1e6 / max(int(sys.argv[5]), 1), 2); print(json.dumps(d))' \
      "$line" "$round" "$((r1 - r0))" "$hz" "$calls"
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
