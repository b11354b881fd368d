"""make bench-idle-rss: how much memory an idle sluice-server holds, and
how that changes while it stays idle.

make bench-server reads VmRSS one second after start. That is a moment, not
a level: package initialisation's garbage is still on the heap (the first
collection comes only when the heap reaches 4 MB, or after the runtime's
two-minute forced collection), and the kernel maps the executable's pages
as they are first touched. This starts each given binary on its own
redis-server, with no traffic, and reads VmRSS, RssAnon and RssFile from
/proc/PID/status at each of --at seconds after start (past 120 s the
runtime has collected at least once). The binaries run side by side, so
each sample is taken at the same moment of each one's life. The last row is
what each idle server asked of its redis-server: commands per second over
the whole run (INFO stats, less this script's own INFO call).

    idle_rss.py --server build/bin/sluice-server [--server OTHER] --at 1,60,130
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))

from bench_profile import RedisCLI  # noqa: E402
from harness import RedisServer, SluiceServer, rss_kib  # noqa: E402

FIELDS = ("VmRSS", "RssAnon", "RssFile")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", action="append", required=True, type=Path,
                    help="a sluice-server binary (repeat to compare several)")
    ap.add_argument("--at", default="1,30,60,130",
                    help="comma-separated seconds after start to sample (default 1,30,60,130)")
    args = ap.parse_args()
    args.server = [b.resolve() for b in args.server]  # the servers run in their own directories
    at = sorted(float(s) for s in args.at.split(","))
    if not at or at[0] <= 0 or at[-1] > 600:
        ap.error("--at takes seconds in (0, 600]")

    with tempfile.TemporaryDirectory(prefix="idle-rss-") as tmp:
        started, servers, redises = [], [], []  # started: everything to stop, in start order
        try:
            for i, binary in enumerate(args.server):
                work = Path(tmp) / str(i)
                redis = RedisServer(work / "redis")
                redis.start()
                started.append(redis)
                redises.append(RedisCLI(redis.port))
                server = SluiceServer(work / "server", redis.url(), binary=binary)
                server.start()
                started.append(server)
                servers.append(server)
            t0 = time.monotonic()
            before = [int(r.info("stats")["total_commands_processed"]) for r in redises]
            rows = []
            for t in at:
                time.sleep(max(0.0, t - (time.monotonic() - t0)))
                rows.append((t, [[rss_kib(s.pid, f) for f in FIELDS] for s in servers]))
            elapsed = time.monotonic() - t0
            # Each INFO call counts itself: the one in before, not this one.
            rates = [(int(r.info("stats")["total_commands_processed"]) - b - 1) / elapsed
                     for r, b in zip(redises, before)]
        finally:
            for p in reversed(started):
                p.stop()

    print("| seconds after start | " + " | ".join(f"{b} ({'/'.join(FIELDS)}, MB)" for b in args.server) + " |")
    print("|---:|" + "---:|" * len(args.server))
    for t, per_server in rows:
        cells = [" / ".join(f"{kib / 1024:.2f}" for kib in vals) for vals in per_server]
        print(f"| {t:g} | " + " | ".join(cells) + " |")
    print("| Redis commands per second, idle | " + " | ".join(f"{r:.2f}" for r in rates) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
