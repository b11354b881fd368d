"""Pools run by the real redis-operator v0.16.0 on the full local cluster
(make cluster-up starts it; make up or make e2e installs the sluice operator):
apply -> Ready for SHARDS (3) shards of single instances and of REPLICAS (3)
members behind Sentinel, then the failover time of a replicated shard: from
the forced deletion of its master pod to the first message the server posts
again.

    make bench-redis-operator   (SHARDS=3 REPLICAS=3)
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "operator"))

from tests.e2e.test_redis_operator import make_queue, pool, post, ready, replication  # noqa: E402
from tests.integration.conftest import apply, kc  # noqa: E402


def wait_ready(ns: str, name: str, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if ready(ns, name):
            return time.monotonic() - start
        time.sleep(0.5)
    raise SystemExit(f"Pool {ns}/{name} not Ready after {timeout}s")


def main() -> int:
    shards, replicas = int(os.environ.get("SHARDS", "3")), int(os.environ.get("REPLICAS", "3"))
    ns = f"robench-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", ns)
    load = [os.getloadavg()]
    try:
        apply(pool(ns, "single", shards, 1))
        single = wait_ready(ns, "single", 900)
        apply(pool(ns, "replicated", shards, replicas))
        replicated = wait_ready(ns, "replicated", 900)
        shard = make_queue(ns, "replicated", "q")
        assert post(ns, "q", 10, "before"), "post before the failover failed"
        members = [f"{shard}-{i}" for i in range(replicas)]
        master = next(m for m in members if replication(ns, m).get("role") == "master")
        killed = time.monotonic()
        kc("delete", "pod", master, "-n", ns, "--grace-period=0", "--force")
        failover = None
        while time.monotonic() - killed < 180:
            if post(ns, "q", 1, "after"):
                failover = time.monotonic() - killed
                break
            time.sleep(0.2)
        load.append(os.getloadavg())
        print(
            json.dumps(
                {
                    "shards": shards,
                    "replicas": replicas,
                    "replicas_1_apply_to_ready_s": round(single, 1),
                    f"replicas_{replicas}_apply_to_ready_s": round(replicated, 1),
                    "master_kill_to_first_post_s": round(failover, 1) if failover is not None else None,
                    "loadavg_start_end": [round(x[0], 1) for x in load],
                },
                indent=2,
            )
        )
        return 0 if failover is not None else 1
    finally:
        kc("delete", "namespace", ns, "--timeout=300s", check=False)


if __name__ == "__main__":
    sys.exit(main())
