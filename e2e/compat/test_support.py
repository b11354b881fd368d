"""The test support's own rules (e2e/testsupport/harness.py): what counts
as CI, and "fail under CI, else skip"."""

from __future__ import annotations

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
