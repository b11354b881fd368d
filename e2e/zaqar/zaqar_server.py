"""The real OpenStack Zaqar 23.0.1, run the way operators run it: its WSGI
app under uwsgi with the Redis message store and an SQLite management store.

Facts this encodes (measured on Zaqar 23.0.1):
- its SQL migrations are MySQL-only (migration 006 uses ALTER ... CHANGE), so
  the SQLite management tables are created from
  zaqar.storage.sqlalchemy.tables.metadata directly;
- the WSGI app takes no arguments and reads ~/.zaqar/zaqar.conf, so each
  instance gets its own HOME;
- uwsgi's http-socket does not keep connections alive; without
  "Connection: close" keep-alive clients (wrk, requests) get resets.

Run standalone (for manual comparisons, Ctrl-C stops it):
    build/venv-compat/bin/python e2e/zaqar/zaqar_server.py --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "testsupport"))
from harness import Process, ProcessError, RedisServer, process_tree  # noqa: E402

CONF_TEMPLATE = """\
[DEFAULT]
pooling = {pooling}
admin_mode = {admin_mode}
unreliable = True

[drivers]
transport = wsgi
message_store = redis
management_store = sqlalchemy

[drivers:message_store:redis]
uri = {redis_uri}

[drivers:management_store:sqlalchemy]
uri = sqlite:///{sqlite_path}
"""


def zaqar_redis_uri(url: str) -> str:
    """Zaqar's Redis driver takes the database as ?dbid=N, not as a path."""
    base, _, db = url.rstrip("/").rpartition("/")
    if base.startswith("redis://") and db.isdigit():
        return f"{base}?dbid={db}"
    return url


def init_sqlite(path: Path) -> None:
    """Create the management tables the way the MySQL-only migrations would."""
    import sqlalchemy
    from zaqar.storage.sqlalchemy.tables import metadata

    engine = sqlalchemy.create_engine(f"sqlite:///{path}")
    metadata.create_all(engine)
    engine.dispose()


class ZaqarServer(Process):
    """Zaqar's WSGI app under uwsgi (master + N worker processes)."""

    name = "zaqar-uwsgi"
    # uwsgi treats SIGTERM as "reload" unless --die-on-term; SIGINT always stops.
    stop_signal = signal.SIGINT

    def __init__(self, workdir: Path, redis_url: str, processes: int = 2,
                 admin_mode: bool = False, extra_conf: str = "", pooling: bool = False):
        super().__init__(workdir)
        self.admin_mode = admin_mode
        # Pooling serves /v2/pools and /v2/flavors (with admin_mode), its
        # catalog in the management store.
        self.pooling = pooling
        # Further zaqar.conf sections, e.g. "[signed_url]\nsecret_key = k\n".
        self.extra_conf = extra_conf
        self.redis_url = redis_url
        self.processes = processes
        self.home = self.workdir / "home"

    def configure(self) -> None:
        conf_dir = self.home / ".zaqar"
        conf_dir.mkdir(parents=True, exist_ok=True)
        db = self.workdir / "zaqar-management.sqlite"
        init_sqlite(db)
        (conf_dir / "zaqar.conf").write_text(CONF_TEMPLATE.format(
            redis_uri=zaqar_redis_uri(self.redis_url), sqlite_path=db,
            admin_mode=self.admin_mode, pooling=self.pooling) + self.extra_conf)

    def command(self) -> list[str]:
        venv = Path(sys.prefix)
        uwsgi = venv / "bin" / "uwsgi"
        if not uwsgi.is_file():
            raise ProcessError(f"{uwsgi} is missing (run make venv-compat)")
        return [str(uwsgi),
                "--http-socket", f"127.0.0.1:{self.port}",
                "--module", "zaqar.transport.wsgi.app:application",
                "--virtualenv", str(venv),
                "--master", "--processes", str(self.processes),
                "--lazy-apps", "--die-on-term", "--disable-logging",
                "--add-header", "Connection: close"]

    def env(self) -> dict[str, str]:
        env = super().env()
        env["HOME"] = str(self.home)
        return env

    def start(self) -> None:
        self.configure()
        self.spawn()
        # Every worker imports the app lazily; wait until a real API call
        # (not just the versions document) has gone through storage.
        self.wait_http("/", timeout=60)
        self.wait_http("/v2/ping", timeout=60)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def pids(self) -> list[int]:
        return process_tree(self.pid)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--redis", help="redis URL; default: start a throwaway redis-server")
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    # SIGTERM (timeout, kill) takes the same way out as Ctrl-C.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="zaqar-") as tmp:
        redis = None
        if args.redis is None:
            redis = RedisServer(Path(tmp) / "redis")
            redis.start()
        url = args.redis or redis.url()
        try:
            with ZaqarServer(Path(tmp) / "zaqar", url, args.processes) as z:
                print(f"Zaqar 23.0.1 on {z.url} (redis {url}); Ctrl-C stops", flush=True)
                while z.proc.poll() is None:
                    time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            if redis is not None:
                redis.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
