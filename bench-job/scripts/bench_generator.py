#!/usr/bin/env python3
"""sluice-bench vs zaqar-bench as load generators (make bench-generator).

Both tools run the same producer workload (1 process x W workers, one
message per POST) against the no-op HTTP server, so the server is never the
limit. For each tool we measure successful requests and the CPU time (user +
system) its whole process tree spent. Start-up costs (Python imports, queue
reset) are cancelled by running each tool twice, for 1 s and for 1+T s, and
dividing the differences: requests per client CPU-second of load.
"""
import argparse
import json
import os
import re
import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

# free_port comes from the one test-support module of the repository.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e" / "testsupport"))
from harness import free_port  # noqa: E402


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick


def run_tool(cmd, seconds):
    """Runs one tool, returns (successful producer requests, CPU seconds, wall s)."""
    argv = cmd + ["-t", str(seconds)]
    before, t0 = children_cpu(), time.monotonic()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 120)
    cpu, wall = children_cpu() - before, time.monotonic() - t0
    if out.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    m = re.search(r"\{.*\}", out.stdout, re.S)
    if not m:
        sys.exit(f"{' '.join(argv)} printed no JSON:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    doc = json.loads(m.group(0))
    return doc["producer"]["successful_reqs"], doc["producer"]["reqs_per_sec"], cpu, wall


def measure(cmd, seconds):
    short = run_tool(cmd, 1)
    long = run_tool(cmd, 1 + seconds)
    reqs, cpu = long[0] - short[0], long[2] - short[2]
    return {"rps": long[1], "reqs": reqs, "cpu": cpu, "cpu_per_s": cpu / seconds,
            "per_cpu_s": reqs / cpu if cpu > 0 else float("inf"), "startup_cpu": short[2]}


def reading(all_res):
    sb = [r["sluice-bench"] for r in all_res]
    zb = [r["zaqar-bench 23.0.1"] for r in all_res]
    ratios = [a["per_cpu_s"] / b["per_cpu_s"] for a, b in zip(sb, zb)]
    us = [1e6 / r["per_cpu_s"] for r in sb]
    return f"""
Reading: one zaqar-bench producer process is CPU-bound (up to
{max(r['cpu_per_s'] for r in zb):.2f} CPU-s per second) at {min(r['rps'] for r in zb):,.0f}-{max(r['rps'] for r in zb):,.0f} req/s, so with one
process per role it cannot drive any server faster; sluice-bench spends
{min(us):.0f}-{max(us):.0f} µs of client CPU per request ({min(ratios):.0f}-{max(ratios):.0f}x less), with one keep-alive
connection per worker. The machine was shared with other work (load average
{os.getloadavg()[0]:.0f} on 2 cores at the end of this run), so absolute rates vary from run to
run; the ratio is the result.
"""


def write_doc(path, body):
    text = open(path).read()
    head = "## sluice-bench efficiency vs zaqar-bench"
    start = text.index(head)
    nl = text.index("\n", start) + 1
    nxt = text.find("\n## ", nl)
    end = len(text) if nxt < 0 else nxt + 1
    open(path, "w").write(text[:nl] + "\n" + body.rstrip() + "\n\n" + text[end:].lstrip("\n"))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--bin", required=True, help="directory with sluice-bench and noop-http")
    ap.add_argument("--zaqar-bench", required=True)
    ap.add_argument("--seconds", type=int, default=15, help="measured load per run")
    ap.add_argument("--workers", default="10,50", help="producer workers to compare")
    ap.add_argument("--write-doc", help="replace the section in this docs/benchmarks.md")
    a = ap.parse_args()

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    noop = subprocess.Popen([os.path.join(a.bin, "noop-http"), "--listen", f"127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        rows, all_res = [], []
        for w in [int(x) for x in a.workers.split(",")]:
            flags = ["-s", url, "-pp", "1", "-pw", str(w), "-cp", "1", "-cw", "0", "-op", "1", "-ow", "0"]
            tools = {
                "sluice-bench": [os.path.join(a.bin, "sluice-bench")] + flags,
                "zaqar-bench 23.0.1": [a.zaqar_bench, "--nodebug"] + flags,
            }
            res = {}
            for name, cmd in tools.items():
                n0 = proc_cpu(noop.pid)
                res[name] = measure(cmd, a.seconds)
                res[name]["server_cpu"] = proc_cpu(noop.pid) - n0
                print(f"workers={w} {name}: {res[name]}", file=sys.stderr)
            all_res.append(res)
            ratio = res["sluice-bench"]["per_cpu_s"] / res["zaqar-bench 23.0.1"]["per_cpu_s"]
            for name, r in res.items():
                rows.append(f"| {w} | {name} | {r['rps']:,.0f} | {r['cpu_per_s']:.2f} | {r['per_cpu_s']:,.0f} | "
                            f"{r['startup_cpu']:.2f} | {ratio:.1f}x |" if name == "sluice-bench" else
                            f"| {w} | {name} | {r['rps']:,.0f} | {r['cpu_per_s']:.2f} | {r['per_cpu_s']:,.0f} | "
                            f"{r['startup_cpu']:.2f} | 1.0x |")
    finally:
        noop.terminate()
        noop.wait(timeout=10)

    body = f"""Command: `make bench-generator` (driver `bench-job/scripts/bench_generator.py`,
{a.seconds} s of measured load per run, `BENCH_GEN_ARGS` to change). Both tools run
zaqar-bench's producer workload (`-pp 1 -pw W -cw 0 -ow 0`, one message per POST)
against the no-op Go HTTP server (`e2e/bench/noop`), the cheapest server there is.
Client, server (and other work) share this machine's 2 cores, so wall-clock req/s
is bounded by the CPU left over; the fair measure is requests per client
CPU-second. Client CPU is user+system time of the tool's whole process tree;
each tool runs for 1 s and for 1+{a.seconds} s and the
differences are used, so start-up (Python imports, queue reset) does not count
against zaqar-bench. Goal: sluice-bench >= 5x zaqar-bench in requests per client
CPU-second.

| workers | tool | req/s (wall) | client CPU s per s | requests per client CPU-second | start-up CPU s (1 s run) | vs zaqar-bench |
|---:|---|---:|---:|---:|---:|---:|
""" + "\n".join(rows) + "\n" + reading(all_res)
    print(body)
    if a.write_doc:
        write_doc(a.write_doc, body)


if __name__ == "__main__":
    main()
