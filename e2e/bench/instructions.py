"""make bench-instructions: user-space instructions sluice-server executes
per request, counted by valgrind's callgrind, so that a change to the hot
path can be compared exactly whatever else the machine is doing (a CPU
figure from /proc moves by a quarter between identical runs on a shared
2-core machine; an instruction count repeats to within a fraction of a per
cent). The kernel's work (system calls, the loopback) is not counted: the
system calls per request are what `make bench-profile` reports for that.

One redis-server (the shard settings) and one sluice-server under
callgrind, started as the operator deploys it (GOMAXPROCS=1). One client
connection, keep-alive, requests one after another, so every storage call
goes alone (no group commit): the path a request takes at light load.
Phases, each after WARMUP unmeasured requests of its kind:
  post    POST one ~1 KiB message (the bench-server body)
  claim   claim 1 message, then delete it with its claim id (two requests)
Instrumentation is switched on (callgrind_control) only around each
phase's measured requests.

--json keeps the figures; --baseline FILE adds an earlier run's beside.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))

from harness import BIN, RedisServer, SluiceServer  # noqa: E402

sys.path.insert(0, str(HERE))
from bench_server import HEADERS as BENCH_HEADERS  # noqa: E402

HEADERS = {**BENCH_HEADERS, "X-Project-ID": "instructions"}


def message_body(size: int) -> bytes:
    """A POST of one message whose JSON is about size bytes: the body
    e2e/bench/wrk/common.lua's post_body(size, 1) builds for bench-server."""
    head, tail = '{"ttl":3600,"body":{"event":"bench","pad":"', '"}}'
    return ('{"messages":[' + head + "x" * max(size - len(head) - len(tail), 0) + tail + "]}").encode()


class Callgrind(SluiceServer):
    """sluice-server under callgrind, instrumentation off until asked."""

    def __init__(self, workdir: Path, store: str, binary: Path, out: Path, access_log: str):
        super().__init__(workdir, store, binary=binary, extra_args=["--access-log=" + access_log], gomaxprocs=1)
        self.out = out

    def command(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={self.out}", *super().command()]

    def start(self) -> None:
        self.spawn()
        self.wait_http("/", timeout=120)

    def control(self, *args: str) -> None:
        subprocess.run(["callgrind_control", *args, str(self.proc.pid)], check=True,
                       capture_output=True, timeout=120)


def total_ir(path: Path) -> int:
    """The Ir total of one callgrind dump. Its "totals:" line: "summary:"
    can wrap around below zero in a dump taken after instrumentation was
    switched off and on again."""
    for line in path.read_text().splitlines():
        m = re.match(r"totals:\s+(\d+)", line)
        if m:
            return int(m.group(1))
    raise RuntimeError(f"no totals in {path}")


ATTEMPTS = 3
KEEP: Path | None = None  # --keep: where each phase's dump is copied


def measured(srv: Callgrind, workdir: Path, name: str, n: int, run) -> float:
    """Instructions per request over n requests of run(), in the phase's own dump."""
    before = set(workdir.glob("callgrind.out*"))
    srv.control("--instr=on")
    run(n)
    srv.control("--dump=" + name)
    srv.control("--instr=off")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = [p for p in workdir.glob("callgrind.out*") if p not in before]
        if new:
            time.sleep(0.5)  # the dump is written in one go, but give it time to close
            if KEEP:
                shutil.copy(new[0], KEEP / f"{name}.callgrind")
            return total_ir(new[0]) / n
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump for phase " + name)


def run(args) -> dict:
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    results: dict = {"binary": str(args.server), "access_log": args.access_log, "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                     "loadavg_start": list(os.getloadavg()), "requests": args.requests, "phases": {}}
    with tempfile.TemporaryDirectory(prefix="sluice-instr-") as tmp:
        work = Path(tmp)
        (work / "redis").mkdir()
        (work / "server").mkdir()
        with RedisServer(work / "redis") as redis:
            srv = Callgrind(work / "server", redis.url(0), args.server.resolve(), work / "server" / "callgrind.out",
                           args.access_log)
            with srv:
                queue = "/v2/queues/instructions"
                conn = None

                def call(method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
                    nonlocal conn
                    if conn is None:
                        # A connection per phase: the server may close one
                        # left idle while callgrind writes a dump.
                        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
                    try:
                        conn.request(method, path, body=body, headers=HEADERS)
                        resp = conn.getresponse()
                        return resp.status, resp.read()
                    except (http.client.HTTPException, ConnectionError) as e:
                        log = (srv.workdir / "sluice-server.log").read_text(errors="replace")[-3000:]
                        raise RuntimeError(f"{method} {path}: {e!r}; server log:\n{log}") from e

                status, _ = call("PUT", queue, b"{}")
                assert status in (201, 204), status
                post = message_body(args.msg_size)

                def posts(k: int) -> None:
                    nonlocal conn
                    conn = None
                    for _ in range(k):
                        status, body = call("POST", queue + "/messages", post)
                        assert status == 201, (status, body)

                def cycles(k: int) -> None:
                    nonlocal conn
                    conn = None
                    for _ in range(k // 2):
                        status, body = call("POST", queue + "/claims?limit=1", b'{"ttl":60,"grace":60}')
                        assert status == 201, (status, body)
                        href = json.loads(body)["messages"][0]["href"]
                        status, body = call("DELETE", href)
                        assert status == 204, (status, body)

                posts(args.warmup)
                results["phases"]["post"] = {"instructions": measured(srv, work / "server", "post", args.requests, posts)}
                # The claims take half as many messages as the posts left.
                cycles(args.warmup)
                results["phases"]["claim"] = {"instructions": measured(srv, work / "server", "claim", args.requests, cycles)}
    results["loadavg_end"] = list(os.getloadavg())
    return results


def table(res: dict, base: dict | None) -> str:
    rows = ["| user-space instructions per request | " + ("before | after |" if base else "sluice-server |"),
            "|---|" + ("---:|---:|" if base else "---:|")]
    for phase, label in (("post", "POST 1 KiB"), ("claim", "claim 1 + delete (per request)")):
        now = res["phases"][phase]["instructions"]
        if base:
            was = base["phases"][phase]["instructions"]
            rows.append(f"| {label} | {was:,.0f} | {now:,.0f} ({(now - was) / was:+.1%}) |")
        else:
            rows.append(f"| {label} | {now:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", type=Path, default=BIN / "sluice-server", help="sluice-server binary")
    ap.add_argument("--requests", type=int, default=10000, help="measured requests per phase")
    ap.add_argument("--warmup", type=int, default=500, help="unmeasured requests before each phase")
    ap.add_argument("--msg-size", type=int, default=1024, help="bytes of message JSON per POST")
    ap.add_argument("--access-log", choices=("true", "false"), default="true",
                    help="the server's --access-log (on, as deployed; off shows what the log costs)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep each phase's callgrind dump here (callgrind_annotate reads them)")
    ap.add_argument("--baseline", type=Path, help="an earlier --json: shown as the before column")
    args = ap.parse_args()
    global KEEP
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        KEEP = args.keep
    # valgrind itself crashes now and then under a Go program's threads
    # (its report in the server log): such a run is done again.
    for attempt in range(1, ATTEMPTS + 1):
        try:
            res = run(args)
            break
        except (RuntimeError, ConnectionError, http.client.HTTPException) as e:
            if attempt == ATTEMPTS:
                raise
            print(f"run {attempt} failed ({str(e).splitlines()[0]}); again", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    base = json.loads(args.baseline.read_text()) if args.baseline else None
    print(table(res, base))


if __name__ == "__main__":
    main()
