"""What the operator's tests and benchmarks (tests/, bench/) share: where the
repository's binaries are, free loopback ports, processes started and always
stopped, and the one rule for a missing dependency: a test that cannot get
what it needs fails under CI and skips, saying why, anywhere else."""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = ROOT / "build/bin"
BENCH = BIN / "sluice-bench"
SERVER = BIN / "sluice-server"
# QUICK_STOP: sluice-server flags for a test process, which has no load balancer
# to drain from: no drain delay and a short linger for idle connections.
QUICK_STOP = ["--drain-delay=0s", "--shutdown-timeout=4s"]


def ci() -> bool:
    """ci is true when CI is set to anything but empty, 0 or false (GitHub and GitLab set
    CI=true; some systems CI=1): the one definition every suite of the repository uses."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def unavailable(reason: str) -> NoReturn:
    """unavailable ends a test that lacks a dependency: a failure under CI, else a skip."""
    if ci():
        pytest.fail(reason)
    pytest.skip(reason)


def need_file(path: pathlib.Path, hint: str) -> str:
    """need_file returns path when it exists; otherwise unavailable (hint: how to make it)."""
    if not path.exists():
        unavailable(f"{path} missing ({hint})")
    return str(path)


def need_program(name: str, hint: str = "make deps-apt installs it") -> str:
    """need_program finds an executable on PATH; otherwise unavailable."""
    found = shutil.which(name)
    if not found:
        unavailable(f"{name} is not installed ({hint})")
    return found


def free_port() -> int:
    """free_port is a loopback TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20) -> bool:
    """wait_port waits (bounded) until something accepts on 127.0.0.1:port."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.1)
    return False


class Processes:
    """Processes started for a test or a benchmark, stopped together by stop() (terminate,
    then kill after a grace period), also when the code between failed."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []
        self.logs: list[IO] = []

    def start(
        self, args: Sequence[str], log: pathlib.Path | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen:
        """start runs args with stdout and stderr into the file log (discarded when None)."""
        out: Any = subprocess.DEVNULL
        if log is not None:
            out = log.open("w")
            self.logs.append(out)
        proc = subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(proc)
        return proc

    def redis(self, data: pathlib.Path) -> int:
        """redis starts a redis-server on a free loopback port with its files in data."""
        port = free_port()
        data.mkdir(parents=True, exist_ok=True)
        binary = need_program("redis-server")
        self.start([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(data)])
        return port

    def stop(self) -> None:
        """stop ends every process, newest first."""
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs.clear()
        for fh in self.logs:
            fh.close()
        self.logs.clear()


@dataclass(frozen=True)
class ServerStack:
    """ServerStack is an `external` Pool's world without a kubelet: redis-server shards
    and a sluice-server (pooling on, its catalog in a third redis-server) on loopback."""

    shard_uris: list[str]
    base: str
    token: str

    def secrets(self, ns: str) -> list[dict[str, Any]]:
        """secrets are the namespace's Secrets the operator reads: the server's admin token
        (sluice-server-admin) and the shards' URIs for the Pool (shards)."""
        return [
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "sluice-server-admin", "namespace": ns},
                "stringData": {"token": self.token},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "shards", "namespace": ns},
                "stringData": {"uris": "\n".join(self.shard_uris)},
            },
        ]


def server_stack(procs: Processes, tmp: pathlib.Path, shards: int = 2) -> ServerStack:
    """server_stack starts a ServerStack with `shards` shards under procs (stopped with
    them); logs go to tmp."""
    server = need_file(SERVER, "make build-server")
    ports = [procs.redis(tmp / f"redis{i}") for i in range(shards + 1)]
    for p in ports:
        if not wait_port(p):
            raise RuntimeError(f"redis-server on port {p} did not start")
    token = secrets.token_urlsafe(16)
    sport = free_port()
    catalog = f"redis://127.0.0.1:{ports[shards]}"
    procs.start(
        [
            server,
            "--listen",
            f"127.0.0.1:{sport}",
            "--store",
            f"{catalog}/1",
            "--catalog",
            f"{catalog}/0",
            "--admin-token",
            token,
            *QUICK_STOP,
        ],
        log=tmp / "server.log",
    )
    if not wait_port(sport, 30):
        raise RuntimeError(f"sluice-server did not start (see {tmp / 'server.log'})")
    return ServerStack([f"redis://127.0.0.1:{p}/0" for p in ports[:shards]], f"http://127.0.0.1:{sport}", token)
