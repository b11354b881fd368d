"""Pool and Queue apply -> Ready with real pods, on the full local cluster,
through the operator the chart installed (make up, or make e2e's release):
builtin Redis shards on PersistentVolumes, placed on metal nodes.

Two Pools of SHARDS (3) shards: the first in a fresh namespace, so its time
includes the namespace's sluice-server and catalog coming up; the second in
the same namespace, where they already run. Then a Queue.

    make bench-pool-ready   (SHARDS=3)
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

from tests.e2e.test_pools import pool  # noqa: E402  (the e2e suite's Pool: builtin, metal, on PVs)
from tests.integration.conftest import apply, condition, get, kc  # noqa: E402


def wait_ready(kind: str, ns: str, name: str, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition(get(kind, ns, name), "Ready").get("status") == "True":
            return time.monotonic() - start
        time.sleep(0.2)
    raise SystemExit(f"{kind} {ns}/{name} not Ready after {timeout}s")


def main() -> int:
    shards = int(os.environ.get("SHARDS", "3"))
    ns = f"poolbench-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", ns)
    try:
        apply(pool(ns, "first", shards))
        first = wait_ready("pool", ns, "first", 300)
        apply(pool(ns, "second", shards))
        second = wait_ready("pool", ns, "second", 300)
        apply(
            {
                "apiVersion": "sluice.dev/v1alpha1",
                "kind": "Queue",
                "metadata": {"name": "q", "namespace": ns},
                "spec": {"pool": "second"},
            }
        )
        queue = wait_ready("queue", ns, "q", 60)
        print(
            json.dumps(
                {
                    "shards": shards,
                    "first_pool_in_namespace_apply_to_ready_s": round(first, 1),
                    "second_pool_apply_to_ready_s": round(second, 1),
                    "queue_apply_to_ready_s": round(queue, 2),
                },
                indent=2,
            )
        )
        return 0
    finally:
        kc("delete", "namespace", ns, "--timeout=300s", check=False)


if __name__ == "__main__":
    sys.exit(main())
