"""make bench-notifications: what a webhook subscriber costs and how fast its
notifications arrive, for sluice-server on Redis and for the real Zaqar 23.0.1
(Redis message store, `[storage] message_pipeline = zaqar.notification.notifier`)
in the same run, both driven by sluice-bench's notifications scenario.

Per target, everything on 127.0.0.1:
  (a) POST throughput, closed loop (-pw workers, one queue): the same run
      without a subscriber (--subscribe=false) and with sluice-bench's
      webhook receiver subscribed, alternated --repeat times; cost = 1 -
      with/without (goal <= 10 %).
  (b) delivery latency at light load (--light-rate posts/s): post
      acknowledged -> webhook received, p50 and p99 (goals 5 ms / 50 ms),
      with lost and duplicated notifications.
The load average (/proc/loadavg, 1 min) is read before and after each
target: a goal is called met only when it stayed under 1.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent / "zaqar"))

from harness import BIN, ProcessError, RedisServer, SluiceServer  # noqa: E402
from report import write_doc_section  # noqa: E402

SECTION = "## Notifications: webhook subscriber cost and delivery latency"
# sluice-redis-nosend: the same server with its delivery engine off, so posting
# with a subscriber pays only for recording each delivery (the post path's own
# cost), not for sending it from the same two cores.
TARGETS = ("sluice-redis", "sluice-redis-nosend", "zaqar")
SENDS = {"sluice-redis": True, "sluice-redis-nosend": False, "zaqar": True}


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def bench(binary: Path, url: str, *args: str) -> dict:
    """bench runs one sluice-bench notifications run and returns its JSON summary."""
    cmd = [str(binary), "run", "--scenario", "notifications", "-s", url, "--json", "--progress", "never", *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def measure(binary: Path, url: str, a: argparse.Namespace, tag: str, sends: bool = True) -> dict:
    """measure runs (a) and, when the server sends notifications, (b) against one server."""
    load = [loadavg()]
    base, sub = [], []
    common = ["-t", str(a.seconds), "-pw", str(a.workers), "--rate", "0", "--drain", "60s" if sends else "0s"]
    for i in range(a.repeat):
        base.append(bench(binary, url, *common, "--subscribe=false", "-q", f"{tag}-base{i}")["ops"]["post"]["reqs_per_sec"])
        r = bench(binary, url, *common, "-q", f"{tag}-sub{i}")
        sub.append(r["ops"]["post"]["reqs_per_sec"])
        load.append(loadavg())
    light: dict = {"ops": {}}
    if sends:
        light = bench(binary, url, "-t", str(a.light_seconds), "-pw", "4", "--rate", str(a.light_rate),
                      "--drain", "60s", "-q", f"{tag}-light")
        load.append(loadavg())
    n, d = light["ops"].get("notify") or {}, light.get("delivery") or {}
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {
        "post_rps_without": mean(base), "post_rps_with": mean(sub), "runs_without": base, "runs_with": sub,
        "cost_pct": 100 * (1 - mean(sub) / mean(base)) if mean(base) else None,
        "notify_p50_ms": n.get("p50_ms"), "notify_p99_ms": n.get("p99_ms"), "notified": n.get("ok", 0),
        "before_ack": (n.get("extra") or {}).get("before_ack", 0),
        "produced": d.get("produced", 0), "lost": d.get("lost"), "duplicated": d.get("duplicated"),
        "load": load,
    }


def start_target(name: str, work: Path, redis: RedisServer, db: int):
    if name.startswith("sluice-redis"):
        args = ["--access-log=false", "--log-level", "warn"] + ([] if SENDS[name] else ["--deliveries=false"])
        return SluiceServer(work / name, redis.url(db), extra_args=args)
    from zaqar_server import ZaqarServer

    return ZaqarServer(work / name, redis.url(db), extra_conf="\n[storage]\nmessage_pipeline = zaqar.notification.notifier\n")


def fmt(v: float | None, unit: str = "", digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}{unit}"


def render(results: dict, a: argparse.Namespace, command: str) -> str:
    out = [
        SECTION,
        "",
        f"Measured {dt.date.today().isoformat()} with `{command}` on this 2-core machine, everything on",
        "127.0.0.1 (sluice-bench and its webhook receiver, the server, redis-server). (a) closed loop,",
        f"{a.workers} producer workers on one queue for {a.seconds} s, without and with one webhook",
        f"subscriber, alternated {a.repeat} time(s); (b) {a.light_rate:g} posts/s for {a.light_seconds} s,",
        "latency from the post's 201 to the webhook's arrival. Zaqar 23.0.1 runs under uwsgi",
        "(2 processes) with `[storage] message_pipeline = zaqar.notification.notifier`.",
        "\"before 201\": notifications that arrived before the post's response (counted as 0 ms).",
        "`sluice-redis-nosend` is the same server with `--deliveries=false`: a post to the subscribed queue",
        "still records its delivery (in the post's Redis script) but nothing is sent, which separates the",
        "post path's own cost from the cost of sending the webhooks and receiving them on the same 2 cores.",
        "Load average: before the target, after each (a) pair, after (b).",
        "",
        "| target | POST/s, no subscriber | POST/s, 1 webhook | cost | notify p50 | notify p99 "
        "| notified / posted | before 201 | lost | dup | load avg (1 min) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, r in results.items():
        if "error" in r:
            out.append(f"| {name} | failed: {r['error']} ||||||||||")
            continue
        load = " / ".join(f"{x:.2f}" for x in r["load"])
        out.append(
            f"| {name} | {r['post_rps_without']:.0f} | {r['post_rps_with']:.0f} | {fmt(r['cost_pct'], ' %')} "
            f"| {fmt(r['notify_p50_ms'], ' ms', 2)} | {fmt(r['notify_p99_ms'], ' ms', 2)} "
            f"| {r['notified']} / {r['produced']} | {r['before_ack']} | {fmt(r['lost'], '', 0)} "
            f"| {fmt(r['duplicated'], '', 0)} | {load} |"
        )
    full, nosend = results.get("sluice-redis") or {}, results.get("sluice-redis-nosend") or {}
    if full.get("cost_pct") is not None and nosend.get("cost_pct") is not None:
        out += ["", f"With sending off, a subscribed post costs {nosend['cost_pct']:.1f} % (recording the delivery"
                f" in the post's script); the rest of the {full['cost_pct']:.1f} % is sending each webhook and"
                " receiving it, on the same 2 cores as the posts."]
    out += ["", "Goals (sluice): POST cost <= 10 %, notify p50 <= 5 ms, p99 <= 50 ms."]
    s = results.get("sluice-redis") or {}
    if "error" not in s and s:
        quiet = max(s["load"]) < 1
        checks = [
            ("POST cost <= 10 %", s["cost_pct"] is not None and s["cost_pct"] <= 10),
            ("p50 <= 5 ms", s["notify_p50_ms"] is not None and s["notify_p50_ms"] <= 5),
            ("p99 <= 50 ms", s["notify_p99_ms"] is not None and s["notify_p99_ms"] <= 50),
        ]
        verdict = ", ".join(f"{c}: {'yes' if ok else 'no'}" for c, ok in checks)
        if quiet:
            out.append(f"Load average stayed under 1: {verdict}.")
        else:
            out.append(
                f"Load average reached {max(s['load']):.2f} (the machine was shared with other work), so no"
                f" goal is claimed from this run; as measured: {verdict}."
            )
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", type=Path, default=BIN, help="directory with sluice-bench and sluice-server")
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--light-rate", type=float, default=20)
    ap.add_argument("--light-seconds", type=int, default=20)
    ap.add_argument("--write-doc", type=Path, help="replace this section of docs/benchmarks.md")
    a = ap.parse_args()
    binary = a.bin / "sluice-bench"
    if not binary.is_file():
        print(f"{binary} is missing (make build-bench)", file=sys.stderr)
        return 2
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-notify-") as tmp:
        work = Path(tmp)
        with RedisServer(work / "redis") as redis:
            for i, name in enumerate(t for t in a.targets.split(",") if t):
                try:
                    with start_target(name, work, redis, i) as server:
                        results[name] = measure(binary, server.url, a, name, SENDS.get(name, True))
                except (ProcessError, RuntimeError) as exc:
                    results[name] = {"error": str(exc).splitlines()[0][:200]}
                print(name, json.dumps(results[name]), flush=True)
    command = "make bench-notifications" + (f" BENCH_NOTIFY_ARGS=\"{os.environ['BENCH_NOTIFY_ARGS']}\"" if os.environ.get("BENCH_NOTIFY_ARGS") else "")
    text = render(results, a, command)
    print(text)
    if a.write_doc:
        write_doc_section(a.write_doc, text, SECTION)
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
