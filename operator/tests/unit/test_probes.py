"""Shard probes against a real redis-server started on a free loopback port."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from sluice_operator import probes

from ..support import Processes, free_port, wait_port


@pytest.fixture
def redis_port(tmp_path) -> Iterator[int]:
    procs = Processes()
    try:
        port = procs.redis(tmp_path)
        wait_port(port, 10)
        yield port
    finally:
        procs.stop()


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
