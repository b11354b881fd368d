"""The test support's own rules (e2e/testsupport/harness.py): what counts
as CI, and "fail under CI, else skip"."""

from __future__ import annotations

import copy
import random
import socket
import subprocess
import sys

import pytest
from _pytest.outcomes import Failed, Skipped

import harness


@pytest.mark.parametrize(
    "value, ci",
    [
        (None, False), ("", False), ("0", False), ("false", False), ("False", False),
        ("FALSE", False), (" false ", False), ("true", True), ("1", True), ("yes", True),
        ("True", True), ("on", True), ("anything", True),
    ],
)
def test_in_ci(monkeypatch, value, ci):
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    assert harness.in_ci() is ci


@pytest.mark.parametrize("value, outcome", [("true", Failed), ("1", Failed), ("", Skipped), ("0", Skipped), ("false", Skipped)])
def test_need_fails_under_ci_and_skips_elsewhere(monkeypatch, value, outcome):
    monkeypatch.setenv("CI", value)
    harness.need(True, "present")  # a met need never ends the test
    with pytest.raises(outcome) as info:
        harness.need(None, "frobnicator is not installed")
    assert "frobnicator is not installed" in str(info.value)


def test_free_port_is_bindable():
    port = harness.free_port()
    assert 0 < port < 65536
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


# The benchmark drivers are run by hand (make bench-*), never by make test,
# so a moved import breaks one silently; --help imports everything it needs.
BENCH_DRIVERS = sorted(
    p.relative_to(harness.ROOT).as_posix()
    for p in [*(harness.ROOT / "e2e" / "bench").glob("bench_*.py"),
              *(harness.ROOT / "bench-job" / "scripts").glob("bench_*.py")]
)


@pytest.mark.parametrize("driver", BENCH_DRIVERS)
def test_benchmark_driver_starts(driver):
    out = subprocess.run([sys.executable, str(harness.ROOT / driver), "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{driver} --help failed:\n{out.stderr[-2000:]}"
    assert "usage:" in out.stdout


def test_benchmark_drivers_found():
    assert "e2e/bench/bench_server.py" in BENCH_DRIVERS


def _bench_server():
    sys.path.insert(0, str(harness.ROOT / "e2e" / "bench"))
    try:
        import bench_server
    finally:
        sys.path.pop(0)
    return bench_server


@pytest.mark.parametrize("seed", range(50))
def test_bench_server_merge_keeps_best_rate_and_largest_memory(seed):
    """Rounds merged in any order: each cell keeps the fastest round that
    did not run dry (its latencies with it) and the largest memory per
    message of any round, however small or negative another round's."""
    merge = _bench_server().merge
    rng = random.Random(seed)
    rounds = []
    for _ in range(rng.randint(1, 4)):
        cells = {}
        for name in ("post-32", "claim-32"):
            r = {"rps": rng.uniform(100, 50000), "p99_us": rng.uniform(100, 9000)}
            if name == "post-32" and rng.random() < 0.8:
                r["bytes_per_msg"] = rng.uniform(-100, 2000)
            if name == "claim-32":
                r["dry"] = rng.random() < 0.3
            cells[name] = r
        rounds.append({"errors_total": rng.randint(0, 2), "load_rss_kib": rng.randint(1, 9),
                       "idle_rss_kib": rng.randint(1, 9), "cells": cells})
    want_errors = sum(r["errors_total"] for r in rounds)
    expected = {}
    for name in ("post-32", "claim-32"):
        runs = [copy.deepcopy(r["cells"][name]) for r in rounds]
        fastest = min(runs, key=lambda r: (r.get("dry", False), -r["rps"]))
        mem = [r["bytes_per_msg"] for r in runs if "bytes_per_msg" in r]
        expected[name] = (fastest["rps"], fastest["p99_us"], max(mem) if mem else None)
    best = None
    for r in copy.deepcopy(rounds):
        best = merge(best, r)
    assert best["errors_total"] == want_errors
    for name, (rps, p99, mem) in expected.items():
        cell = best["cells"][name]
        assert (cell["rps"], cell["p99_us"], cell.get("bytes_per_msg")) == (rps, p99, mem)
