"""Shard probes against a real redis-server started on a free loopback port."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

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


def test_redis_replica_is_not_ready(tmp_path) -> None:
    # A replica answers PING but refuses writes: the probe says so by name.
    procs = Processes()
    try:
        primary = procs.redis(tmp_path / "primary")
        replica = procs.redis(tmp_path / "replica")
        wait_port(primary, 10)
        wait_port(replica, 10)

        conn = redis.Redis(port=replica)
        conn.execute_command("REPLICAOF", "127.0.0.1", str(primary))
        ok, msg = probes.probe(f"redis://127.0.0.1:{replica}/0", 2.0)
        assert not ok and f"a replica of 127.0.0.1:{primary}" in msg, msg
        ok, msg = probes.probe(f"redis://127.0.0.1:{primary}/0", 2.0)
        assert ok and "primary" in msg, msg
        # Promoted, the same node is ready.
        conn.execute_command("REPLICAOF", "NO", "ONE")
        ok, msg = probes.probe(f"redis://127.0.0.1:{replica}/0", 2.0)
        assert ok, msg
        conn.close()
    finally:
        procs.stop()


def test_redis_user_without_role_is_trusted_on_ping(redis_port: int) -> None:
    # An ACL user who may PING but not ROLE still gets a ready shard.

    admin = redis.Redis(port=redis_port)
    admin.execute_command("ACL", "SETUSER", "app", "on", ">pw", "~*", "+@all", "-role")
    admin.close()
    ok, msg = probes.probe(f"redis://app:pw@127.0.0.1:{redis_port}/0", 2.0)
    assert ok and "ROLE refused" in msg and "primary unchecked" in msg, msg
