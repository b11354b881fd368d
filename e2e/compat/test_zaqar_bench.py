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
ROLES = ("producer", "consumer", "observer")


def run_zaqar_bench(url: str, workdir: Path) -> tuple[dict, str]:
    exe = Path(sys.prefix) / "bin" / "zaqar-bench"
    assert exe.is_file(), f"{exe} missing (make venv-compat)"
    cmd = [str(exe), "--server_url", url, "--time", str(BENCH_SECONDS),
           "--queue_prefix", "compat-" + uuid.uuid4().hex[:8], "--num_queues", "4",
           "-pp", "1", "-pw", "4", "-cp", "1", "-cw", "4", "-op", "1", "-ow", "2",
           "--nodebug"]
    env = dict(os.environ, HOME=str(workdir), OS_AUTH_STRATEGY="noauth")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=env, cwd=workdir)
    assert done.returncode == 0, f"zaqar-bench exited {done.returncode}\n{done.stderr[-3000:]}"
    # stdout: two banner lines, then one JSON document.
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return summary, done.stderr


def request_errors(stderr: str) -> list[str]:
    """zaqar-bench reports each failed request on stderr as 'Could not ...';
    a worker that chokes on a response dies with a traceback."""
    return [line for line in stderr.splitlines()
            if line.startswith(("Could not", "Traceback", "Error")) or " failed with " in line]


def test_zaqar_bench_runs_without_errors(server, tmp_path, request):
    if server.target == "zaqar":
        # Zaqar 23.0.1's Redis driver answers 503 to the observer's first
        # listing (include_claimed=true without a marker): a known defect.
        request.applymarker(pytest.mark.xfail(strict=True, reason="Zaqar redis listing 503"))
    summary, stderr = run_zaqar_bench(server.url, tmp_path)
    errors = request_errors(stderr)
    assert errors == [], f"{len(errors)} failed requests, first: {errors[:5]}"
    for role in ROLES:
        stats = summary[role]
        assert stats["total_reqs"] > 0, (role, stats)
        assert stats["successful_reqs"] == stats["total_reqs"], (role, stats)
        assert stats["reqs_per_sec"] > 0, (role, stats)
        assert stats["duration_sec"] >= BENCH_SECONDS, (role, stats)
    assert summary["consumer"]["messages_processed"] > 0, summary["consumer"]
    assert summary["params"]["observer"] == {"processes": 1, "workers": 2}
