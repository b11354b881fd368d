"""Shard probes against a real redis-server started on a free loopback port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest

from sluice_operator import probes


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def redis_port(tmp_path) -> Iterator[int]:
    binary = shutil.which("redis-server")
    if not binary:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (make deps-apt installs it)")
        pytest.skip("redis-server not installed")
    port = free_port()
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_redis_ping(redis_port: int) -> None:
    ok, msg = probes.probe(f"redis://127.0.0.1:{redis_port}/0", 2.0)
    assert ok, msg


def test_closed_port_fails_with_reason() -> None:
    ok, msg = probes.probe(f"redis://127.0.0.1:{free_port()}/0", 0.5)
    assert not ok and msg.startswith("PING failed")


def test_mongo_unreachable_fails_fast() -> None:
    start = time.monotonic()
    ok, msg = probes.probe(f"mongodb://127.0.0.1:{free_port()}/?directConnection=true", 0.5)
    assert not ok and "hello failed" in msg
    assert time.monotonic() - start < 10


def test_unknown_scheme() -> None:
    ok, msg = probes.probe("amqp://u:p@h/", 1)
    assert not ok and "amqp://h/" in msg
