"""make bench-redis-client: the Redis client transports of redisclient-bench
side by side against one redis-server (the test harness', on loopback), in
alternating order, each round once per transport; one JSON line per run, with
redis-server's CPU per call added."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent))

from harness import RedisServer  # noqa: E402
from bench_profile import cpu_seconds  # noqa: E402

TRANSPORTS = ("go-redis", "go-redis-pipeline", "rueidis", "rueidis-flush-delay")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binary")
    ap.add_argument("rounds", type=int, nargs="?", default=2)
    ap.add_argument("seconds", type=int, nargs="?", default=5)
    ap.add_argument("callers", type=int, nargs="?", default=32)
    args = ap.parse_args()
    print("load average at the start: %.2f %.2f %.2f" % os.getloadavg(), flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-redis-client-") as tmp, RedisServer(Path(tmp) / "redis") as redis:
        for rnd in range(1, args.rounds + 1):
            for transport in TRANSPORTS:
                r0 = cpu_seconds(redis.pid)
                out = subprocess.run([args.binary, "--redis", f"127.0.0.1:{redis.port}", "--transport", transport,
                                      "--callers", str(args.callers), "--seconds", str(args.seconds)],
                                     check=True, capture_output=True, text=True).stdout
                row = json.loads(out)
                row["round"] = rnd
                row["redis_cpu_us"] = round((cpu_seconds(redis.pid) - r0) * 1e6 / max(row["calls"], 1), 2)
                print(json.dumps(row), flush=True)
    print("load average at the end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
