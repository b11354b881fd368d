"""The unchanged zaqar-bench (console script of the zaqar package) runs
against the server with producers, consumers and observers all active."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

BENCH_SECONDS = 5
# What each role writes to stderr per failed request; a worker that chokes on
# a response instead dies with a gevent line "<Greenlet ... role(...)> failed with".
ROLE_ERRORS = {
    "producer": ("Could not post",),
    "consumer": ("Could not claim", "Could not delete"),
    "observer": ("Could not list",),
}


class BenchRun:
    def __init__(self, summary: dict, stderr: str):
        self.summary, self.stderr = summary, stderr

    def errors(self, role: str) -> list[str]:
        return [line for line in self.stderr.splitlines()
                if line.startswith(ROLE_ERRORS[role])
                or (" failed with " in line and f": {role}(" in line)]


@pytest.fixture(scope="module")
def bench_run(server, tmp_path_factory) -> BenchRun:
    """One 5 s zaqar-bench run per server, shared by the role checks."""
    workdir = tmp_path_factory.mktemp("zaqar-bench")
    exe = Path(sys.prefix) / "bin" / "zaqar-bench"
    assert exe.is_file(), f"{exe} missing (make venv-compat)"
    cmd = [str(exe), "--server_url", server.url, "--time", str(BENCH_SECONDS),
           "--queue_prefix", "compat-" + uuid.uuid4().hex[:8], "--num_queues", "4",
           "-pp", "1", "-pw", "4", "-cp", "1", "-cw", "4", "-op", "1", "-ow", "2",
           "--nodebug"]
    # HOME keeps a developer's ~/.zaqar/zaqar.conf out of zaqar-bench's config.
    env = dict(os.environ, HOME=str(workdir), OS_AUTH_STRATEGY="noauth")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          env=env, cwd=workdir)
    assert done.returncode == 0, f"zaqar-bench exited {done.returncode}\n{done.stderr[-3000:]}"
    # stdout: two banner lines, then one JSON document.
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["params"]["observer"] == {"processes": 1, "workers": 2}
    return BenchRun(summary, done.stderr)


def check_role(run: BenchRun, role: str) -> dict:
    errors = run.errors(role)
    assert errors == [], f"{role}: {len(errors)} failures, first: {errors[:3]}"
    stats = run.summary[role]
    assert stats["total_reqs"] > 0, stats
    assert stats["successful_reqs"] == stats["total_reqs"], stats
    assert stats["reqs_per_sec"] > 0, stats
    assert stats["duration_sec"] >= BENCH_SECONDS, stats
    return stats


def test_zaqar_bench_producer(bench_run):
    check_role(bench_run, "producer")


def test_zaqar_bench_consumer(bench_run):
    stats = check_role(bench_run, "consumer")
    assert stats["messages_processed"] > 0, stats
    assert stats["claim_total_requests"] > 0, stats


def test_zaqar_bench_observer(bench_run, server, request):
    if server.target == "zaqar":
        # Zaqar 23.0.1's Redis driver answers 503 to the observer's first
        # listing (include_claimed=true without a marker): its defect 1.
        request.applymarker(pytest.mark.xfail(strict=True, reason="Zaqar redis listing 503"))
    check_role(bench_run, "observer")
