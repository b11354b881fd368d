"""make bench-profile: where the CPU of a Redis-backed POST and of a
claim+delete goes, measured per process rather than as throughput, so the
figures hold up on a machine other work shares.

One redis-server and one sluice-server (with --pprof-addr) on 127.0.0.1.
Two phases, each PHASE seconds of wrk paced to a fixed offered rate (every
connection waits --pace-ms between requests, e2e/bench/wrk's DELAY_MS):
  post    POST one ~1 KiB message per request (the bench-server body)
  claim   claim 1 message, delete it with its claim id, on the queue the
          post phase filled (it holds more than this phase takes)
Per phase: CPU-seconds of the server, redis-server and wrk per 1,000
requests (utime+stime from /proc/PID/stat; wrk's from its rusage), Redis
`INFO commandstats` after CONFIG RESETSTAT (script calls, their
usec_per_call, commands run inside them per request), Go allocations per
request (go_memstats_mallocs_total from /metrics) and the server's pprof
CPU and allocation tops. After the post phase, `INFO memory` used_memory
grown per stored message. Idle and peak RSS of the server.

--json keeps the raw figures; --baseline FILE (an earlier --json) adds its
figures beside this run's, for a before/after table; --write-doc puts the
section into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE))

from harness import BIN, RedisCLI, RedisServer, SluiceServer, free_port, rss_kib  # noqa: E402
from bench_server import NoopServer, api, machine, run_wrk  # noqa: E402
from report import add_server_gomaxprocs, gomaxprocs_words, write_doc_section  # noqa: E402

SECTION = "## Where a request's CPU goes (`make bench-profile`)"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime+stime of one process (all its threads), in seconds."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    fields = raw[raw.rindex(")") + 2:].split()  # the command may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def syscalls(pid: int) -> tuple[int, int]:
    """Read and write system calls of one process so far (/proc/PID/io):
    what pipelining saves, counted exactly whatever the machine's load."""
    io = dict(l.split(": ") for l in Path(f"/proc/{pid}/io").read_text().splitlines())
    return int(io["syscr"]), int(io["syscw"])


def per_request(before: tuple[int, int], after: tuple[int, int], n: int) -> dict:
    """The read+write system calls per request between two syscalls() readings, and the reads alone."""
    reads, writes = after[0] - before[0], after[1] - before[1]
    return {"syscalls": (reads + writes) / max(n, 1), "reads": reads / max(n, 1)}


def children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def scrape(url: str, metric: str) -> float:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
        for line in resp.read().decode().splitlines():
            if line.startswith(metric + " "):
                return float(line.split()[1])
    return 0.0


def fetch(url: str, dest: Path, timeout: float) -> None:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        dest.write_bytes(resp.read())


def pprof_top(go: str, args: list[str], lines: int) -> str:
    """The column header and the first lines of `go tool pprof -top`."""
    done = subprocess.run([go, "tool", "pprof", "-top", f"-nodecount={lines}", *args],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        return f"(go tool pprof failed: {done.stderr.strip()[:300]})"
    out = done.stdout.splitlines()
    start = next((i for i, l in enumerate(out) if l.lstrip().startswith("flat")), 0)
    return "\n".join(out[max(0, start - 1):start + 1 + lines])


# The script cells of the two phases: which scripts' calls are counted.
SCRIPT_COMMANDS = ("evalsha", "eval", "fcall", "fcall_ro")


def run_phase(name: str, script: str, server: SluiceServer, pprof: str, redis_cli: RedisCLI,
              redis_pid: int, workdir: Path, args) -> dict:
    env = {"QUEUE": args.queue, "MSG_SIZE": str(args.msg_size), "DELAY_MS": str(args.pace_ms)}
    redis_cli("CONFIG", "RESETSTAT")
    mallocs0 = scrape(server.url, "go_memstats_mallocs_total")
    allocs0 = workdir / f"{name}-allocs-0.pb.gz"
    fetch(pprof + "/debug/pprof/allocs", allocs0, 30)
    cpu_file = workdir / f"{name}-cpu.pb.gz"
    secs = max(1, int(args.phase) - 2)
    # The CPU profile covers the middle of the phase (wrk's start and end
    # excluded); it runs beside wrk in a thread.
    prof = threading.Thread(target=lambda: (time.sleep(1), fetch(
        f"{pprof}/debug/pprof/profile?seconds={secs}", cpu_file, secs + 30)), daemon=True)
    s0, r0, c0 = cpu_seconds(server.pid), cpu_seconds(redis_pid), children_cpu()
    sc0, rc0 = syscalls(server.pid), syscalls(redis_pid)
    peak = [rss_kib(server.pid)]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.2):
            peak[0] = max(peak[0], rss_kib(server.pid))
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    prof.start()
    res = run_wrk(server.url, script, args.conns, args.phase, env)
    s1, r1, c1 = cpu_seconds(server.pid), cpu_seconds(redis_pid), children_cpu()
    sc1, rc1 = syscalls(server.pid), syscalls(redis_pid)
    stop.set()
    prof.join(secs + 60)
    sampler.join()
    mallocs1 = scrape(server.url, "go_memstats_mallocs_total")
    allocs1 = workdir / f"{name}-allocs-1.pb.gz"
    fetch(pprof + "/debug/pprof/allocs", allocs1, 30)
    stats = redis_cli.commandstats()
    n = res["requests"]
    per_k = 1000 / max(n, 1)
    server_io = per_request(sc0, sc1, n)
    scripts = {k: v for k, v in stats.items() if k in SCRIPT_COMMANDS}
    inner = {k: v for k, v in stats.items() if k not in SCRIPT_COMMANDS
             and k not in ("config|resetstat", "info", "ping", "hello", "client|setinfo")}
    script_calls = sum(v["calls"] for v in scripts.values())
    out = {
        "requests": n, "rps": res["rps"], "errors": res["errors"],
        "p50_ms": res["p50_us"] / 1000, "p99_ms": res["p99_us"] / 1000,
        "server_cpu_ms_per_1k": (s1 - s0) * 1000 * per_k,
        "redis_cpu_ms_per_1k": (r1 - r0) * 1000 * per_k,
        "client_cpu_ms_per_1k": (c1 - c0) * 1000 * per_k,
        "server_syscalls_per_request": server_io["syscalls"],
        "server_reads_per_request": server_io["reads"],
        "redis_syscalls_per_request": per_request(rc0, rc1, n)["syscalls"],
        "allocs_per_request": (mallocs1 - mallocs0) / max(n, 1),
        "script_calls_per_request": script_calls / max(n, 1),
        "script_usec_per_call": (sum(v["usec"] for v in scripts.values()) / script_calls) if script_calls else 0,
        "redis_commands_per_request": sum(v["calls"] for v in inner.values()) / max(n, 1),
        "commands": {k: v["calls"] / max(n, 1) for k, v in sorted(inner.items(), key=lambda kv: -kv[1]["calls"])},
        # Time inside each command, per request: what is left of a script
        # call's usec beyond their sum is Lua itself and argument passing.
        "command_usec": {k: v["usec"] / max(n, 1) for k, v in sorted(inner.items(), key=lambda kv: -kv[1]["usec"])},
        "peak_rss_kib": peak[0],
        "cpu_top": pprof_top(args.go, [str(cpu_file)], args.top) if cpu_file.exists() else "(no CPU profile)",
        "alloc_top": pprof_top(args.go, ["-sample_index=alloc_space", f"-diff_base={allocs0}", str(allocs1)],
                               args.top),
    }
    if args.keep_profiles and cpu_file.exists():
        # The raw profiles, for `go tool pprof` views the summary does not show.
        args.keep_profiles.mkdir(parents=True, exist_ok=True)
        for f in (cpu_file, allocs0, allocs1):
            shutil.copy(f, args.keep_profiles / f.name)
    if "claimed" in res:
        out["cycles"] = res["claimed"]
        out["empty_claims"] = res["claims"] - res["claimed"]
    return out


def noop_phase(work: Path, args) -> dict:
    """The HTTP floor under the same POST load: e2e/bench/noop (net/http, a fixed
    201, no storage), its CPU and wrk's per request, in the same run as the
    sluice phases so the two can be set side by side."""
    with NoopServer(work / "noop") as noop:
        s0, c0, sc0 = cpu_seconds(noop.pid), children_cpu(), syscalls(noop.pid)
        res = run_wrk(noop.url, "post.lua", args.conns, args.phase,
                      {"QUEUE": args.queue, "MSG_SIZE": str(args.msg_size), "DELAY_MS": str(args.pace_ms)})
        s1, c1, sc1 = cpu_seconds(noop.pid), children_cpu(), syscalls(noop.pid)
    n = max(res["requests"], 1)
    server_io = per_request(sc0, sc1, n)
    return {"requests": res["requests"], "rps": res["rps"], "errors": res["errors"],
            "p50_ms": res["p50_us"] / 1000, "p99_ms": res["p99_us"] / 1000,
            "server_cpu_ms_per_1k": (s1 - s0) * 1e6 / n, "client_cpu_ms_per_1k": (c1 - c0) * 1e6 / n,
            "server_syscalls_per_request": server_io["syscalls"], "server_reads_per_request": server_io["reads"]}


def profile(args) -> dict:
    results = {"machine": machine(), "redis_config": args.redis_config, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "binary": str(args.server), "server_gomaxprocs": args.server_gomaxprocs,
               "phase_s": args.phase, "conns": args.conns,
               "pace_ms": args.pace_ms, "msg_size": args.msg_size, "loadavg_start": os.getloadavg(),
               "phases": {}}
    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        work = Path(tmp)
        with RedisServer(work / "redis") as redis:
            cli = redis.cli()
            for kv in args.redis_config:
                cli("CONFIG", "SET", *kv.split("=", 1))
            pprof_port = free_port()
            server = SluiceServer(work / "server", redis.url(1), binary=args.server,
                                  extra_args=["--pprof-addr", f"127.0.0.1:{pprof_port}"],
                                  gomaxprocs=args.server_gomaxprocs)
            server.start()
            try:
                pprof = f"http://127.0.0.1:{pprof_port}"
                time.sleep(1.0)
                results["idle_rss_kib"] = rss_kib(server.pid)
                api(server.url, "PUT", f"/v2/queues/{args.queue}")
                # Warm-up: connections, the settings cache, the scripts.
                run_wrk(server.url, "post.lua", args.conns, 1,
                        {"QUEUE": args.queue + "-warm", "MSG_SIZE": str(args.msg_size)})
                mem0 = int(cli.info("memory")["used_memory"])
                post = run_phase("post", "post.lua", server, pprof, cli, redis.pid, work, args)
                stored = api(server.url, "GET", f"/v2/queues/{args.queue}/stats")["messages"]["total"]
                mem1 = int(cli.info("memory")["used_memory"])
                post["stored"] = stored
                post["bytes_per_message"] = (mem1 - mem0) / max(stored, 1)
                results["phases"]["post"] = post
                results["phases"]["claim"] = run_phase("claim", "claim_delete.lua", server, pprof, cli,
                                                       redis.pid, work, args)
            finally:
                server.stop()
        if args.noop:
            results["noop"] = noop_phase(work, args)
    results["loadavg_end"] = os.getloadavg()
    return results


ROWS = [
    # (label, phase, field, format)
    ("offered and served rate (req/s)", None, "rps", "{:,.0f}"),
    ("latency p50 / p99 (ms)", None, "lat", None),
    ("server CPU per 1,000 requests (ms)", None, "server_cpu_ms_per_1k", "{:.1f}"),
    ("redis-server CPU per 1,000 requests (ms)", None, "redis_cpu_ms_per_1k", "{:.1f}"),
    ("wrk (client) CPU per 1,000 requests (ms)", None, "client_cpu_ms_per_1k", "{:.1f}"),
    ("server read+write syscalls per request", None, "server_syscalls_per_request", "{:.2f}"),
    ("server read syscalls per request (of those)", None, "server_reads_per_request", "{:.2f}"),
    ("redis-server read+write syscalls per request", None, "redis_syscalls_per_request", "{:.2f}"),
    ("Redis script calls per request", None, "script_calls_per_request", "{:.2f}"),
    ("Redis usec per script call (commandstats)", None, "script_usec_per_call", "{:.1f}"),
    ("Redis commands inside scripts per request", None, "redis_commands_per_request", "{:.1f}"),
    ("server allocations per request", None, "allocs_per_request", "{:.0f}"),
    ("errors (socket + non-2xx)", None, "errors", "{:.0f}"),
]


def cell(phase: dict | None, field: str, fmt: str | None) -> str:
    if not phase or (field != "lat" and field not in phase):
        return "-"
    if field == "lat":
        return f"{phase['p50_ms']:.2f} / {phase['p99_ms']:.2f}"
    return fmt.format(phase[field])


def render(results: dict, baseline: dict | None) -> str:
    cols = ["post", "claim"]
    head = "| per phase |"
    sep = "|---|"
    for c in cols:
        name = "POST 1 KiB" if c == "post" else "claim 1 + delete"
        if baseline:
            head += f" {name}: before | {name}: after |"
            sep += "---:|---:|"
        else:
            head += f" {name} |"
            sep += "---:|"
    lines = [SECTION, "",
             "Command: `make bench-profile` (`e2e/bench/bench_profile.py`"
             + (f", started {results['started']}" if results.get("started") else "") + ").",
             f"Machine: {results['machine']}; load average {fmt_load(results['loadavg_start'])} at the "
             f"start, {fmt_load(results['loadavg_end'])} at the end. One redis-server and one sluice-server "
             f"on 127.0.0.1, the server with {gomaxprocs_words(results)}. Each phase runs wrk for "
             f"{results['phase_s']:g} s on {results['conns']} "
             f"connections, each waiting {results['pace_ms']} ms between requests (a fixed offered rate, "
             "not saturation), so CPU per request, not throughput, is the figure to compare: it moves "
             "little with the load of other work. CPU is utime+stime from /proc; Redis figures are "
             "`INFO commandstats` after `CONFIG RESETSTAT` (commands inside scripts are counted "
             "in their own rows by Redis 7).", ""]
    if baseline:
        lines += [f"Before: {baseline.get('label') or baseline['binary']} (started {baseline['started']}, "
                  f"load average {fmt_load(baseline['loadavg_start'])}); after: "
                  f"{results.get('label') or results['binary']}.", ""]
    lines += [head, sep]
    for label, _, field, fmt in ROWS:
        row = f"| {label} |"
        for c in cols:
            if baseline:
                row += f" {cell(baseline['phases'].get(c), field, fmt)} |"
            row += f" {cell(results['phases'].get(c), field, fmt)} |"
        lines.append(row)
    post, bpost = results["phases"]["post"], (baseline or {}).get("phases", {}).get("post")
    mem = f"{post['bytes_per_message']:,.0f} bytes ({post['stored']:,} messages)"
    if bpost:
        mem = f"{bpost['bytes_per_message']:,.0f} bytes before, " + mem + " after"
    idle = f"{results['idle_rss_kib'] / 1024:.1f} MB idle, {max(p['peak_rss_kib'] for p in results['phases'].values()) / 1024:.1f} MB peak"
    conf = ", redis-server with " + ", ".join(f"`{c}`" for c in results["redis_config"]) \
        if results.get("redis_config") else ""
    lines += ["", f"Redis memory per stored message (used_memory growth over the post phase / messages "
                  f"stored, {results['msg_size']}-byte message JSON{conf}): {mem}. Server RSS: {idle}.", ""]
    noop = results.get("noop")
    if noop:
        lines += [f"The no-op HTTP server (`e2e/bench/noop`, `--noop`) under the same POST load, same run: "
                  f"{noop['rps']:,.0f} req/s, its CPU {noop['server_cpu_ms_per_1k']:.1f} ms and wrk's "
                  f"{noop['client_cpu_ms_per_1k']:.1f} ms per 1,000 requests, "
                  f"{noop['server_syscalls_per_request']:.2f} read+write syscalls per request"
                  + (f" ({noop['server_reads_per_request']:.2f} reads)" if "server_reads_per_request" in noop else "")
                  + ": the HTTP floor under the server columns.", ""]
    for c in cols:
        ph = results["phases"][c]
        cmds = ", ".join(f"{k} {v:.2f}" for k, v in list(ph["commands"].items())[:12])
        lines += [f"Redis commands per request, {c} phase: {cmds}.", ""]
        if "command_usec" in ph:  # runs before it was recorded lack it
            inside = sum(ph["command_usec"].values())
            script = ph["script_calls_per_request"] * ph["script_usec_per_call"]
            usec = ", ".join(f"{k} {v:.2f}" for k, v in list(ph["command_usec"].items())[:8])
            lines += [f"Redis time per request, {c} phase: {script:.1f} µs in script calls, of it "
                      f"{inside:.1f} µs inside commands ({usec}), the rest Lua itself.", ""]
    for c in cols:
        ph = results["phases"][c]
        lines += [f"Server CPU profile, {c} phase (`go tool pprof -top`):", "", *("    " + l for l in ph["cpu_top"].splitlines()), ""]
        lines += [f"Server allocations, {c} phase (bytes, `-sample_index=alloc_space`, difference over the phase):",
                  "", *("    " + l for l in ph["alloc_top"].splitlines()), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def fmt_load(la) -> str:
    return "/".join(f"{x:.1f}" for x in la)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", type=Path, default=BIN / "sluice-server", help="sluice-server binary")
    ap.add_argument("--label", default="", help="names this run in a before/after table")
    ap.add_argument("--phase", type=float, default=10, help="seconds per phase")
    ap.add_argument("--conns", type=int, default=8, help="wrk connections")
    ap.add_argument("--pace-ms", type=int, default=4, help="each connection's pause between requests")
    ap.add_argument("--msg-size", type=int, default=1024, help="bytes of message JSON per POST")
    ap.add_argument("--queue", default="profile", help="queue name")
    ap.add_argument("--redis-config", action="append", default=[], metavar="NAME=VALUE",
                    help="CONFIG SET on the redis-server before measuring (repeatable)")
    add_server_gomaxprocs(ap)
    ap.add_argument("--noop", action="store_true",
                    help="also measure the no-op HTTP server (make build-noop) under the same POST load")
    ap.add_argument("--top", type=int, default=15, help="lines of each pprof top")
    ap.add_argument("--go", default=os.environ.get("GO", "go"), help="go command (for go tool pprof)")
    ap.add_argument("--json", type=Path, help="write the raw figures here")
    ap.add_argument("--keep-profiles", type=Path, metavar="DIR", help="copy each phase's pprof files here")
    ap.add_argument("--baseline", type=Path, help="an earlier --json: shown as the before column")
    ap.add_argument("--write-doc", type=Path, help="replace this section of the given Markdown file")
    ap.add_argument("--render", type=Path, help="measure nothing: redraw from a --json file")
    args = ap.parse_args()
    if args.render:
        results = json.loads(args.render.read_text())
    else:
        if shutil.which("wrk") is None:
            ap.error("wrk is not installed (make deps-apt)")
        args.server = args.server.resolve()  # the server runs in a work directory
        results = profile(args)
        results["label"] = args.label
    baseline = json.loads(args.baseline.read_text()) if args.baseline else None
    text = render(results, baseline)
    print(text)
    if args.json and not args.render:
        args.json.write_text(json.dumps(results, indent=2))
    if args.write_doc:
        write_doc_section(args.write_doc, text.rstrip("\n"), SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
