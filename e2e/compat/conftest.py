"""Fixtures: a real sluice-server per store (memory, redis, mongo) on a free
loopback port, and clients from the unchanged python-zaqarclient.

COMPAT_TARGETS (default "memory,redis") picks the servers; "mongo" adds
sluice on FerretDB (the MongoDB driver); "zaqar" runs the same suite against
the real Zaqar 23.0.1 (uwsgi + Redis) to see which of its behaviours the
suite relies on. Under CI=true a missing dependency fails the
run instead of skipping it.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent / "zaqar"))

from harness import BIN, FerretDB, RedisServer, SluiceServer, ferretdb_binary, need  # noqa: E402

TARGETS = [t.strip() for t in os.environ.get("COMPAT_TARGETS", "memory,redis").split(",")
           if t.strip()]


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    need(shutil.which("redis-server"), "redis-server is not installed (make deps-apt)")
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def ferretdb(tmp_path_factory):
    exe = ferretdb_binary()
    need(exe is not None and exe.is_file(), "FerretDB is not built (make ferretdb)")
    server = FerretDB(tmp_path_factory.mktemp("ferretdb"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session", params=TARGETS)
def server(request, tmp_path_factory):
    """A running server speaking Zaqar v2; .url, .name and .target."""
    target = request.param
    workdir = tmp_path_factory.mktemp(target)
    if target == "zaqar":
        from zaqar_server import ZaqarServer

        redis = request.getfixturevalue("redis_server")
        proc = ZaqarServer(workdir, redis.url(2))
    else:
        need((BIN / "sluice-server").is_file(),
             f"{BIN / 'sluice-server'} is missing (make build-server)")
        if target == "memory":
            store = "memory"
        elif target == "redis":
            store = request.getfixturevalue("redis_server").url(1)
        elif target == "mongo":
            store = request.getfixturevalue("ferretdb").url("compat")
        else:
            raise ValueError(f"unknown COMPAT_TARGETS entry {target!r}")
        proc = SluiceServer(workdir, store)
    proc.target = target
    proc.start()
    yield proc
    crashed = proc.proc.poll()
    proc.stop()
    # A server that died mid-suite must not pass unnoticed.
    assert crashed is None, f"{target} server exited with {crashed}\n{proc.log_tail()}"


def make_client(url: str, project: str, client_id: str | None = None):
    from zaqarclient.queues.v2 import client

    conf = {"auth_opts": {"backend": "noauth", "options": {"os_project_id": project}}}
    if client_id:
        conf["client_uuid"] = client_id
    return client.Client(url, version=2, conf=conf)


@pytest.fixture
def project() -> str:
    return "compat-" + uuid.uuid4().hex[:12]


@pytest.fixture
def client(server, project):
    """A zaqarclient in a project of its own, so tests never see each other."""
    return make_client(server.url, project)


@pytest.fixture
def other_client(server, project):
    """Same project, different Client-ID (for echo semantics)."""
    return make_client(server.url, project)


@pytest.fixture
def queue(client):
    q = client.queue("q-" + uuid.uuid4().hex[:8], force_create=True)
    yield q
    q.delete()

