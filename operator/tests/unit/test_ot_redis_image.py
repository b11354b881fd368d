"""The entrypoints of the images redis-operator runs (e2e/images/ot-redis),
started outside an image on loopback with Debian's redis-server: the
environment redis-operator v0.16.0 sets turns into the server and sentinel
configuration the OT-CONTAINER-KIT/redis contract promises."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from sluice_operator.builders import thirdparty
from sluice_operator.config import Config

from ..support import free_port, need_program
from .conftest import make_pool

SRC = pathlib.Path(__file__).resolve().parents[3] / "e2e/images/ot-redis"


class Images:
    """Runs the entrypoints with their configuration in a temporary directory."""

    def __init__(self, tmp: pathlib.Path) -> None:
        self.tmp, self.procs = tmp, []  # type: list[subprocess.Popen]
        self.conf = tmp / "etc"
        self.conf.mkdir()
        for f in ("redis.base.conf", "sentinel.base.conf"):
            shutil.copy(SRC / f, self.conf / f)
        # Debian's redis-server is the sentinel when started under that name.
        bindir = tmp / "bin"
        bindir.mkdir()
        server = shutil.which("redis-server")
        assert server
        (bindir / "redis-sentinel").symlink_to(os.path.realpath(server))
        self.path = f"{bindir}:{os.environ['PATH']}"

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": self.path, "REDIS_CONF_DIR": str(self.conf), "HOME": str(self.tmp), **extra}

    def start(self, script: str, port: int, **extra: str) -> subprocess.Popen:
        log = (self.tmp / f"{script}.{port}.log").open("w")
        # Its working directory is where a server without a data directory saves.
        p = subprocess.Popen(
            ["bash", str(SRC / script)], env=self.env(**extra), stdout=log, stderr=subprocess.STDOUT, cwd=self.tmp
        )
        self.procs.append(p)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=port, socket_timeout=0.5).ping()
                return p
            except redis.AuthenticationError:
                return p
            except redis.ResponseError as exc:
                if "NOAUTH" in str(exc):
                    return p
            except redis.ConnectionError:
                assert p.poll() is None, (self.tmp / f"{script}.{port}.log").read_text()
            time.sleep(0.05)
        raise AssertionError(f"{script} did not listen on {port}")

    def health(self, **extra: str) -> int:
        return subprocess.run(
            ["bash", str(SRC / "healthcheck.sh")], env=self.env(**extra), capture_output=True
        ).returncode

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
            p.wait(timeout=10)


@pytest.fixture
def images(tmp_path: pathlib.Path) -> Iterator[Images]:
    need_program("redis-server")
    im = Images(tmp_path)
    yield im
    im.stop()


def config(client: redis.Redis, key: str) -> Any:
    return client.config_get(key)[key]


def test_redis_persistence_password_and_external_config(images: Images, tmp_path: pathlib.Path) -> None:
    port, data = free_port(), tmp_path / "data"
    (images.conf / "external.conf.d").mkdir()
    (images.conf / "external.conf.d/redis-additional.conf").write_text("maxmemory-policy allkeys-lru\n")
    env = {"REDIS_PORT": str(port), "REDIS_PASSWORD": "s3cret", "PERSISTENCE_ENABLED": "true", "DATA_DIR": str(data)}
    images.start("entrypoint.sh", port, SETUP_MODE="standalone", SERVER_MODE="standalone", **env)
    with pytest.raises((redis.AuthenticationError, redis.ResponseError), match=r"NOAUTH|authenticated"):
        redis.Redis(port=port).set("k", "v")
    c = redis.Redis(port=port, password="s3cret")
    assert config(c, "appendonly") == "yes" and config(c, "dir") == str(data)
    assert config(c, "maxmemory-policy") == "allkeys-lru"
    assert config(c, "masterauth") == "s3cret"
    assert images.health(REDIS_PORT=str(port), REDIS_PASSWORD="s3cret") == 0
    assert images.health(REDIS_PORT=str(port), REDIS_PASSWORD="wrong") != 0
    # A restarted container begins again from the base: nothing appended twice.
    images.stop()
    images.start("entrypoint.sh", port, **env)
    lines = (images.conf / "redis.conf").read_text().splitlines()
    assert lines.count("appendonly yes") == 1 and lines.count(f"port {port}") == 1


def test_redis_without_persistence_or_password(images: Images) -> None:
    port = free_port()
    images.start("entrypoint.sh", port, REDIS_PORT=str(port))
    c = redis.Redis(port=port)
    assert config(c, "appendonly") == "no" and config(c, "protected-mode") == "no"
    assert images.health(REDIS_PORT=str(free_port())) != 0  # nothing there: not ready


def test_sentinel_monitors_the_master_it_is_given(images: Images) -> None:
    port, sport = free_port(), free_port()
    images.start("entrypoint.sh", port, REDIS_PORT=str(port), REDIS_PASSWORD="pw")
    images.start(
        "entrypoint-sentinel.sh",
        sport,
        SENTINEL_PORT=str(sport),
        MASTER_GROUP_NAME="mymaster",
        IP="127.0.0.1",
        PORT=str(port),
        QUORUM="1",
        DOWN_AFTER_MILLISECONDS="5000",
        FAILOVER_TIMEOUT="30000",
        MASTER_PASSWORD="pw",
    )
    s = redis.Redis(port=sport, decode_responses=True)
    assert s.execute_command("SENTINEL", "get-master-addr-by-name", "mymaster") == ["127.0.0.1", str(port)]
    master = s.sentinel_master("mymaster")
    assert master["down-after-milliseconds"] == 5000 and master["failover-timeout"] == 30000
    assert master["quorum"] == 1
    # Sentinel authenticates to the master: it sees it up, not down.
    deadline = time.monotonic() + 10
    while "s_down" in s.sentinel_master("mymaster")["flags"] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert s.sentinel_master("mymaster")["is_master"]
    assert images.health(SERVER_MODE="sentinel", SENTINEL_PORT=str(sport)) == 0


def test_shard_settings_configmap_reaches_redis(images: Images) -> None:
    # The ConfigMap the operator gives a redis-operator shard, mounted where the
    # operator mounts it: the running Redis has its settings.
    pool = make_pool(provisioner="redis-operator", resources={"limits": {"memory": "1Gi"}})
    cm = thirdparty.redis_config(Config(), pool, 0)
    (images.conf / "external.conf.d").mkdir()
    for name, text in cm["data"].items():
        (images.conf / "external.conf.d" / name).write_text(text)
    port = free_port()
    images.start("entrypoint.sh", port, REDIS_PORT=str(port))
    c = redis.Redis(port=port)
    assert config(c, "hash-max-listpack-value") == "2048"
    # 70 % of the 1Gi limit, whole MiB; full means refusing writes, never evicting.
    assert config(c, "maxmemory") == str(716 * 1024 * 1024)
    assert config(c, "maxmemory-policy") == "noeviction"
    # A 1 KiB message hash stays one listpack.
    c.hset("m", mapping={"b": "x" * 1024, "c": 1, "e": 2, "s": 3, "u": "client"})
    assert c.object("encoding", "m") == b"listpack"
