"""Real sluice-bench pods for the tests: load generators with queues of their
own (--pod-index), started together against a real sluice-server on loopback,
each writing the termination log a Kubernetes pod would."""

from __future__ import annotations

import pathlib
import subprocess
import time

from .support import BENCH, SERVER, Processes, free_port, need_file, wait_port

BUILD_HINT = "make build-bench build-server"


def run_pods(tmp: pathlib.Path, pods: int = 2) -> list[pathlib.Path]:
    """run_pods runs `pods` task-distribution pods for 2 s and returns their termination logs."""
    need_file(BENCH, BUILD_HINT)
    need_file(SERVER, BUILD_HINT)
    port = free_port()
    server = Processes()
    server.start([str(SERVER), "--listen", f"127.0.0.1:{port}", "--store", "memory"])
    try:
        assert wait_port(port), "sluice-server did not start"
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
        server.stop()
