"""Test support for every Python suite and benchmark under e2e/ (compat,
bench, keystone, zaqar) and bench-job's scripts: free loopback ports, the
one definition of "running under CI" with "fail under CI, else skip", and
harnesses for the real processes they start.

Everything listens on 127.0.0.1 on a port picked free at start, logs to a
file in a caller-owned directory, and is stopped by the object that started
it (never by name): other people's redis-servers run on the same machine.
Scripts outside this directory put it on sys.path and `import harness`.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Absolute: the processes started from it run in their own working directory.
BIN = Path(os.environ.get("SLUICE_BIN", ROOT / "build" / "bin")).resolve()


def free_port() -> int:
    """Return a loopback port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_PR_SET_PDEATHSIG = 1


def _die_with_parent(sig: int):
    """preexec_fn: the kernel sends sig to the child if we die first, so a
    crashed test run or benchmark never leaves servers behind."""
    def set_pdeathsig() -> None:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(sig))
    return set_pdeathsig


def in_ci() -> bool:
    """CI is set to a non-empty value other than 0 or false (any case): the
    one meaning of CI across the project's test support."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def need(ok: object, why: str) -> None:
    """Go on when ok; else fail the test under CI (a dependency CI must
    have) and skip it elsewhere, saying why."""
    if ok:
        return
    import pytest

    if in_ci():
        pytest.fail(f"CI={os.environ.get('CI')} and {why}", pytrace=False)
    pytest.skip(why)


class ProcessError(RuntimeError):
    """A managed process did not start or died; the message quotes its log."""


class Process:
    """One child process with a log file, stopped with SIGTERM then SIGKILL."""

    name = "process"
    stop_signal = signal.SIGTERM

    def __init__(self, workdir: Path):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / f"{self.name}.log"
        self.proc: subprocess.Popen | None = None
        self.port = free_port()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        return dict(os.environ)

    def spawn(self) -> None:
        log = open(self.log_path, "ab")
        # A new session keeps our signals (Ctrl-C on pytest) from reaching
        # the child twice, and lets stop() reach forked workers (uwsgi).
        self.proc = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=self.env(), cwd=self.workdir,
            start_new_session=True, preexec_fn=_die_with_parent(self.stop_signal))
        log.close()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def fail(self, why: str) -> ProcessError:
        return ProcessError(f"{self.name}: {why}\n--- {self.log_path} ---\n{self.log_tail()}")

    def wait_port(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise self.fail(f"exited with {self.proc.returncode} before listening")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise self.fail(f"not listening on 127.0.0.1:{self.port} after {timeout}s")

    def wait_http(self, path: str = "/", timeout: float = 30.0) -> None:
        """Wait until GET path answers with any HTTP status."""
        url = f"http://127.0.0.1:{self.port}{path}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise self.fail(f"exited with {self.proc.returncode} before answering")
            try:
                urllib.request.urlopen(url, timeout=2).close()
                return
            except urllib.error.HTTPError:
                return
            except OSError:
                time.sleep(0.1)
        raise self.fail(f"{url} did not answer after {timeout}s")

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, self.stop_signal)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self) -> None:
        raise NotImplementedError


@functools.cache
def redis_shard_settings() -> tuple[str, ...]:
    """The settings the operator gives every Redis shard it provisions, as
    redis-server arguments: read once from the operator's own definition
    (plain Python, no dependencies), so suites and benchmarks run Redis as
    it is deployed."""
    path = ROOT / "operator" / "sluice_operator" / "builders" / "shard_settings.py"
    spec = importlib.util.spec_from_file_location("sluice_shard_settings", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return tuple(arg for name, value in mod.REDIS_SHARD_SETTINGS for arg in (f"--{name}", value))


class RedisServer(Process):
    """A throwaway redis-server without persistence, with the shard settings."""

    name = "redis-server"

    def command(self) -> list[str]:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ProcessError("redis-server is not installed (make deps-apt installs it)")
        return [exe, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", str(self.workdir),
                "--protected-mode", "yes", *redis_shard_settings(),
                # Suites give each server and pool a database of its own; 16 ran out.
                "--databases", "32"]

    def start(self) -> None:
        self.spawn()
        self.wait_port()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def cli(self) -> RedisCLI:
        return RedisCLI(self.port)


class RedisCLI:
    """redis-cli against a local redis-server: INFO sections as dicts."""

    def __init__(self, port: int):
        self.port = port

    def __call__(self, *args: str) -> str:
        exe = shutil.which("redis-cli") or "redis-cli"
        return subprocess.run([exe, "-p", str(self.port), *args], capture_output=True,
                              text=True, check=True, timeout=30).stdout

    def info(self, section: str) -> dict[str, str]:
        out = {}
        for line in self("INFO", section).splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.strip().split(":", 1)
                out[k] = v
        return out

    def commandstats(self) -> dict[str, dict[str, float]]:
        """cmdstat_<name> -> {calls, usec, usec_per_call}."""
        stats = {}
        for k, v in self.info("commandstats").items():
            if not k.startswith("cmdstat_"):
                continue
            fields = dict(kv.split("=", 1) for kv in v.split(","))
            stats[k[len("cmdstat_"):]] = {f: float(fields[f]) for f in ("calls", "usec", "usec_per_call")}
        return stats


def ferretdb_binary() -> Path | None:
    """FerretDB (MongoDB wire protocol over SQLite) as `make ferretdb` builds
    it: $SLUICE_FERRETDB_BIN, else the newest build in the cache."""
    if os.environ.get("SLUICE_FERRETDB_BIN"):
        return Path(os.environ["SLUICE_FERRETDB_BIN"])
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sluice"
    found = sorted(cache.glob("ferretdb-*/ferretdb"))
    return found[-1] if found else None


class FerretDB(Process):
    """A throwaway FerretDB on SQLite files in its workdir, the MongoDB the
    Go suites use (server/internal/testutil/ferretdb.go)."""

    name = "ferretdb"

    def command(self) -> list[str]:
        exe = ferretdb_binary()
        if exe is None or not exe.is_file():
            raise ProcessError("FerretDB is not built (make ferretdb, or set SLUICE_FERRETDB_BIN)")
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        # synchronous(normal): a test database need not survive power loss,
        # and an fsync per write makes FerretDB crawl.
        return [str(exe), f"--listen-addr=127.0.0.1:{self.port}",
                f"--sqlite-url=file:{data}/?_pragma=synchronous(normal)", "--log-level=warn"]

    def start(self) -> None:
        self.spawn()
        self.wait_port()

    def url(self, db: str) -> str:
        return f"mongodb://127.0.0.1:{self.port}/{db}"


class SluiceServer(Process):
    """build/bin/sluice-server on a free port with the given --store."""

    name = "sluice-server"

    def __init__(self, workdir: Path, store: str, binary: Path | None = None,
                 extra_args: list[str] | None = None, gomaxprocs: int | None = None):
        super().__init__(workdir)
        self.store = store
        self.binary = Path(binary or BIN / "sluice-server")
        self.extra_args = extra_args or []
        # GOMAXPROCS as the operator sets it in a pod (its CPU request,
        # rounded up); None or 0: Go's own choice.
        self.gomaxprocs = gomaxprocs

    def env(self) -> dict[str, str]:
        env = super().env()
        if self.gomaxprocs:
            env["GOMAXPROCS"] = str(self.gomaxprocs)
        return env

    def command(self) -> list[str]:
        if not self.binary.is_file():
            raise ProcessError(f"{self.binary} is missing (run make build-server)")
        # No load balancer to drain from, and a short linger for the idle
        # connections tests' clients keep (docs/server.md): stop() is quick.
        # extra_args come last, so they can set either.
        return [str(self.binary), "--listen", f"127.0.0.1:{self.port}",
                "--store", self.store, "--drain-delay=0s", "--shutdown-timeout=4s",
                *self.extra_args]

    def start(self) -> None:
        self.spawn()
        self.wait_http("/")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (uwsgi master plus workers)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                kids = Path(f"/proc/{p}/task/{task}/children").read_text().split()
                todo.extend(int(k) for k in kids)
        except OSError:
            continue
    return out


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """A kB field of /proc/PID/status (VmRSS now, VmHWM peak, RssAnon, RssFile)
    of one process, in KiB; 0 if it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class WebhookReceiver:
    """A webhook subscriber on a free loopback port, in a thread: records
    every POST (path, headers, JSON body) so tests can see what a server
    delivered. Answers 200, or `status` when a test sets it."""

    def __init__(self):
        import http.server
        import threading

        self.requests: list[dict] = []
        self.status = 200
        self._cond = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                with receiver._cond:
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    receiver._cond.notify_all()
                self.send_response(receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait(self, n: int, timeout: float = 10.0) -> list[dict]:
        """The first n requests, waiting up to timeout for them."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.requests) < n and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            return list(self.requests[:n])

    def clear(self) -> None:
        with self._cond:
            self.requests.clear()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()
