"""make bench-server: the same wrk load against sluice-server, the real
Zaqar 23.0.1 and a no-op Go HTTP handler, one target at a time, on one
machine, printing a side-by-side table (and writing it into
docs/benchmarks.md with --write-doc).

Cells (each --duration seconds, wrk -t2, everything on 127.0.0.1):
  post-32   POST one ~1 KiB message per request, 32 connections (saturation)
  post-4    the same at 4 connections (light load: median and p99)
  claim-32  claim 1 message then delete it with its claim_id, 32 connections
  claim-4   the same at 4 connections
The claim cells run on a queue pre-filled (batched POSTs) with enough
messages for the whole cell. RSS is read from /proc/PID/status (VmRSS,
summed over uwsgi's master and workers): idle after start, and the largest
sample taken every 200 ms while load runs.

Targets are looked up in TARGETS by name. Another configuration (for
example sluice-server routing through a pool catalog of N Redis pools) is a
module e2e/bench/targets_<name>.py, loaded at start, that calls
    bench_server.register(Target("sluice-pooled-2", start_pooled, "sluice (2 pools)"))
with start_pooled(workdir, redis) -> a started Process (.url, .pid, .stop()
that also stops whatever else it started); then
    make bench-server BENCH_ARGS="--targets sluice-redis,sluice-pooled-2"
adds its column. measure() and report.py can be reused for a table of its own.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent / "zaqar"))

from harness import BIN, Process, ProcessError, RedisServer, SluiceServer, process_tree, rss_kib  # noqa: E402
from report import add_server_gomaxprocs, render_markdown, render_text, write_doc_section  # noqa: E402

WRK_DIR = HERE / "wrk"
HEADERS = {"Client-ID": "3381af92-2b9e-11e3-b191-71861300734c", "X-Project-ID": "bench",
           "Content-Type": "application/json"}


class NoopServer(Process):
    """e2e/bench/noop: net/http answering a fixed 201, no storage."""

    name = "noop-http"

    def command(self) -> list[str]:
        exe = BIN / "noop-http"
        if not exe.is_file():
            raise ProcessError(f"{exe} is missing (make build-noop)")
        return [str(exe), "--listen", f"127.0.0.1:{self.port}"]

    def start(self) -> None:
        self.spawn()
        self.wait_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Target:
    """A server configuration to measure: start(workdir, redis) -> Process
    with .url and .pid; queues=False for servers without a queue API."""
    name: str
    start: Callable[[Path, RedisServer], Process]
    label: str
    queues: bool = True


# GOMAXPROCS of every sluice-server the benchmark starts (--server-gomaxprocs).
SERVER_GOMAXPROCS: int | None = None


def _start_sluice(store_of: Callable[[RedisServer], str]):
    def start(workdir: Path, redis: RedisServer) -> Process:
        server = SluiceServer(workdir, store_of(redis), gomaxprocs=SERVER_GOMAXPROCS)
        server.start()
        return server
    return start


def _start_zaqar(workdir: Path, redis: RedisServer) -> Process:
    from zaqar_server import ZaqarServer

    server = ZaqarServer(workdir, redis.url(2), processes=2)
    server.start()
    return server


def _start_noop(workdir: Path, redis: RedisServer) -> Process:
    server = NoopServer(workdir)
    server.start()
    return server


def register(target: Target) -> None:
    """Add a column: called by e2e/bench/targets_*.py modules, loaded at start."""
    TARGETS[target.name] = target


def load_target_modules() -> None:
    # Run as a script this module is __main__; plugins import it by name and
    # must reach this very TARGETS, not a second copy.
    sys.modules.setdefault("bench_server", sys.modules[__name__])
    for path in sorted(HERE.glob("targets_*.py")):
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


TARGETS: dict[str, Target] = {
    "noop": Target("noop", _start_noop, "no-op Go HTTP", queues=False),
    "sluice-redis": Target("sluice-redis", _start_sluice(lambda r: r.url(1)), "sluice (redis)"),
    "sluice-memory": Target("sluice-memory", _start_sluice(lambda r: "memory"), "sluice (memory)"),
    "zaqar": Target("zaqar", _start_zaqar, "Zaqar 23.0.1 (uwsgi x2, redis)"),
}


@dataclass
class Cell:
    name: str
    script: str
    conns: int
    result: dict = field(default_factory=dict)


def cells_for(target: Target) -> list[Cell]:
    cells = [Cell("post-32", "post.lua", 32), Cell("post-4", "post.lua", 4)]
    if target.queues:
        cells += [Cell("claim-32", "claim_delete.lua", 32), Cell("claim-4", "claim_delete.lua", 4)]
    return cells


class RssSampler:
    """Largest summed VmRSS of a process tree, sampled every 200 ms."""

    def __init__(self, pid: int):
        self.pid, self.peak_kib = pid, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def now_kib(self) -> int:
        return sum(rss_kib(p) for p in process_tree(self.pid))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, self.now_kib())
            self._stop.wait(0.2)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def run_wrk(url: str, script: str, conns: int, seconds: float, env: dict[str, str]) -> dict:
    cmd = ["wrk", "-t", str(min(2, conns)), "-c", str(conns), "-d", f"{seconds:g}s",
           "--timeout", "5s", "-s", str(WRK_DIR / script), url]
    full_env = dict(os.environ, WRK_LUA_DIR=str(WRK_DIR), **env)
    done = subprocess.run(cmd, capture_output=True, text=True, env=full_env,
                          timeout=seconds + 60)
    for line in done.stdout.splitlines():
        if line.startswith("WRKJSON "):
            res = json.loads(line[len("WRKJSON "):])
            res["rps"] = res["requests"] / (res["duration_us"] / 1e6)
            res["errors"] = sum(res[k] for k in res if k.startswith("err_")) + res.get("bad", 0)
            return res
    raise RuntimeError(f"wrk printed no summary (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")


def api(url: str, method: str, path: str, body: dict | None = None) -> dict:
    """One Zaqar v2 call; a 5xx is retried (Zaqar's Redis driver answers 503
    now and then right after a saturating cell)."""
    data = json.dumps(body).encode() if body is not None else None
    for attempt in range(5):
        req = urllib.request.Request(url + path, data=data, method=method, headers=HEADERS)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
            return json.loads(raw) if raw else {}
        except urllib.error.HTTPError as err:
            if err.code < 500 or attempt == 4:
                raise
            time.sleep(1 + attempt)
    raise AssertionError("unreachable")


def used_memory(redis: RedisServer) -> int:
    """Bytes the shared redis-server has allocated (INFO memory used_memory)."""
    return int(redis.cli().info("memory")["used_memory"])


def queue_total(url: str, queue: str) -> int:
    return api(url, "GET", f"/v2/queues/{queue}/stats")["messages"]["total"]


def prefill(url: str, queue: str, want: int, size: int, log) -> int:
    """POST batches of 20 with wrk until the queue holds `want` messages."""
    for _ in range(60):  # bounded: 60 rounds of 2 s at most
        have = queue_total(url, queue)
        if have >= want:
            return have
        run_wrk(url, "post.lua", 8, 2, {"QUEUE": queue, "BATCH": "20", "MSG_SIZE": str(size)})
    have = queue_total(url, queue)
    log(f"  prefill of {queue} stopped at {have} of {want} messages")
    return have


def measure(target: Target, redis: RedisServer, workdir: Path, duration: float,
            msg_size: int, log: Callable[[str], None] = print, tag: str = "") -> dict:
    """Start target, run its cells, stop it; returns RSS and per-cell results.
    tag keeps queue names of repeated runs apart (no state carries over)."""
    log(f"== {target.label}")
    server = target.start(workdir / target.name, redis)
    try:
        time.sleep(1.0)  # let start-up allocations settle before "idle"
        sampler = RssSampler(server.pid)
        idle_kib = sampler.now_kib()
        cells = cells_for(target)
        with sampler:
            for cell in cells:
                queue = f"bench-{target.name}-{cell.name}{tag}"
                env = {"QUEUE": queue, "MSG_SIZE": str(msg_size)}
                if cell.script == "claim_delete.lua":
                    # A cycle is two requests, each about as costly as a POST,
                    # so cycles/s stays near the best POST rate; 1.5x of that
                    # keeps the queue from running dry (checked below).
                    best_post = max(c.result["rps"] for c in cells if c.name.startswith("post"))
                    want = int(best_post * duration * 1.5) + 1000
                    cell.result["prefilled"] = prefill(server.url, queue, want, msg_size, log)
                mem0 = used_memory(redis) if cell.script == "post.lua" and target.queues else None
                cell.result.update(run_wrk(server.url, cell.script, cell.conns, duration, env))
                r = cell.result
                if mem0 is not None:
                    # Every message of the cell is in its own queue and none
                    # expires during it, so growth / messages stored is what
                    # one message costs this target's Redis layout.
                    r["stored"] = queue_total(server.url, queue)
                    r["bytes_per_msg"] = (used_memory(redis) - mem0) / max(r["stored"], 1)
                if "claimed" in r:
                    # Claims still in flight at the end are never answered;
                    # more unanswered-or-empty claims than that means 204s.
                    r["dry"] = r["claims"] - r["claimed"] > 2 * cell.conns
                    if r["dry"]:
                        log(f"  {cell.name}: the queue ran dry; this round's numbers include empty claims")
                log(f"  {cell.name:9s} {r['rps']:9.0f} req/s  p50 {r['p50_us'] / 1000:7.2f} ms"
                    f"  p99 {r['p99_us'] / 1000:7.2f} ms  errors {r['errors']}"
                    + (f"  claimed {r['claimed']} empty {r['claims'] - r['claimed']}"
                       if "claimed" in r else "")
                    + (f"  Redis {r['bytes_per_msg']:,.0f} bytes/message" if "bytes_per_msg" in r else ""))
        return {"label": target.label, "idle_rss_kib": idle_kib,
                "errors_total": sum(c.result["errors"] for c in cells),
                "load_rss_kib": sampler.peak_kib,
                "cells": {c.name: c.result for c in cells}}
    finally:
        server.stop()


def merge(best: dict | None, run: dict) -> dict:
    """Keep, per cell, the round with the highest throughput (with that
    round's latencies) and the largest memory per message; RSS keeps the
    largest peak and the smallest idle."""
    if best is None:
        return run
    best["errors_total"] += run["errors_total"]  # errors count in every round
    for cell, res in run["cells"].items():
        old = best["cells"][cell]
        # Memory per message is no throughput: it keeps the largest round.
        # Redis freeing what an earlier cell left (expired or deleted
        # messages) during a cell understates a round, once even below 0.
        mem = [r["bytes_per_msg"] for r in (old, res) if "bytes_per_msg" in r]
        # A cell whose queue ran dry measured empty claims: never prefer it.
        if (old.get("dry", False), -old["rps"]) > (res.get("dry", False), -res["rps"]):
            best["cells"][cell] = res
        if mem:
            best["cells"][cell]["bytes_per_msg"] = max(mem)
    best["load_rss_kib"] = max(best["load_rss_kib"], run["load_rss_kib"])
    best["idle_rss_kib"] = min(best["idle_rss_kib"], run["idle_rss_kib"])
    return best


def machine() -> str:
    cpu = "?"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    wrk = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout.split()
    version = wrk[1] if len(wrk) > 1 else "?"  # "wrk debian/4.1.0-3+b2 [epoll] ..."
    return f"{os.cpu_count()} cores ({cpu}), wrk {version}"


def make_command(argv: list[str]) -> str:
    """The make invocation that reproduces this run (--write-doc is make's
    own; --json only picks an extra output file)."""
    rest, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--write-doc", "--json"):
            skip = True
        elif not a.startswith(("--write-doc=", "--json=")):
            rest.append(a)
    return "make bench-server" + (f' BENCH_ARGS="{" ".join(rest)}"' if rest else "")


def main() -> int:
    load_target_modules()
    ap = argparse.ArgumentParser(description="sluice-server vs Zaqar 23.0.1 vs no-op HTTP")
    ap.add_argument("--targets", default="noop,sluice-redis,zaqar",
                    help=f"comma list of {', '.join(TARGETS)}")
    ap.add_argument("--duration", type=float, default=10, help="seconds per cell")
    ap.add_argument("--rounds", type=int, default=2,
                    help="measure every target this many times; report each cell's best round")
    ap.add_argument("--msg-size", type=int, default=1024, help="bytes per message JSON")
    ap.add_argument("--json", type=Path, help="also write raw results here")
    add_server_gomaxprocs(ap)
    ap.add_argument("--write-doc", type=Path, help="replace this file's sluice-vs-Zaqar section")
    ap.add_argument("--render", type=Path, help="measure nothing: redraw from a --json file")
    args = ap.parse_args()
    if args.render:
        results = json.loads(args.render.read_text())
        print(render_text(results))
        if args.write_doc:
            write_doc_section(args.write_doc, render_markdown(results))
        return 0
    global SERVER_GOMAXPROCS
    SERVER_GOMAXPROCS = args.server_gomaxprocs
    names = [t.strip() for t in args.targets.split(",") if t.strip()]
    unknown = [n for n in names if n not in TARGETS]
    if unknown:
        ap.error(f"unknown targets {unknown}; known: {sorted(TARGETS)}")
    if shutil.which("wrk") is None:
        ap.error("wrk is not installed (make deps-apt)")
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop servers on kill

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    results = {"machine": machine(), "duration_s": args.duration, "msg_size": args.msg_size,
               "rounds": args.rounds, "server_gomaxprocs": args.server_gomaxprocs,
               "command": make_command(sys.argv[1:]),
               "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "targets": {}}
    start_load = os.getloadavg()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-server-") as tmp:
        with RedisServer(Path(tmp) / "redis") as redis:
            for rnd in range(args.rounds):
                # Alternate the order so a noisy neighbour cannot always hit
                # the same target; each round starts every server afresh.
                order = names if rnd % 2 == 0 else names[::-1]
                for name in order:
                    log(f"-- round {rnd + 1}/{args.rounds}")
                    try:
                        run = measure(TARGETS[name], redis, Path(tmp) / f"r{rnd}",
                                      args.duration, args.msg_size, log, tag=f"-r{rnd}")
                    except Exception as err:  # one bad round must not lose the others
                        log(f"  round {rnd + 1} of {name} failed: {err!r}")
                        failures.append(f"{name} round {rnd + 1}: {err!r}")
                        continue
                    results["targets"][name] = merge(results["targets"].get(name), run)
    results["loadavg"] = {"start": start_load, "end": os.getloadavg()}
    results["failed_rounds"] = failures
    missing = [n for n in names if n not in results["targets"]]
    if missing:
        log(f"no round of {missing} completed: {failures}")
        return 1
    print(render_text(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.write_doc:
        write_doc_section(args.write_doc, render_markdown(results))
        log(f"wrote the table into {args.write_doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
