"""Real sluice-bench pods for the tests: load generators with queues of their
own (--pod-index), started together against a real sluice-server on loopback,
each writing the termination log a Kubernetes pod would."""

from __future__ import annotations

import os
import pathlib
import socket
import subprocess
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCH = ROOT / "build/bin/sluice-bench"
SERVER = ROOT / "build/bin/sluice-server"


def need(path: pathlib.Path) -> None:
    """need fails under CI (skips otherwise) when a binary the test runs is not built."""
    if not path.exists():
        msg = f"{path} missing (make build-bench build-server)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_pods(tmp: pathlib.Path, pods: int = 2) -> list[pathlib.Path]:
    """run_pods runs `pods` task-distribution pods for 2 s and returns their termination logs."""
    need(BENCH)
    need(SERVER)
    port = free_port()
    srv = subprocess.Popen(
        [str(SERVER), "--listen", f"127.0.0.1:{port}", "--store", "memory"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        start = str(int(time.time()) + 2)
        paths = [tmp / f"pod{i}.json" for i in range(pods)]
        procs = [
            subprocess.Popen(
                [
                    str(BENCH),
                    "run",
                    "--scenario",
                    "task-distribution",
                    "-s",
                    f"http://127.0.0.1:{port}",
                    "-t",
                    "2",
                    "-pw",
                    "5",
                    "-cw",
                    "5",
                    "--drain",
                    "5s",
                    "--start-at",
                    start,
                    "--pod-index",
                    str(i),
                    "--termination-log",
                    str(p),
                    "--progress",
                    "never",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for i, p in enumerate(paths)
        ]
        for pr in procs:
            assert pr.wait(timeout=60) in (0, 99)
        return paths
    finally:
        srv.terminate()
        srv.wait(timeout=10)
