"""Queues and deletion on a real apiserver: a Queue waits for its Pool, and
deletion never hangs when the Pool or the server is gone."""

from __future__ import annotations

import time
from typing import Any

from .conftest import Operator, apply, condition, get, kc, wait_for
from .test_pools import pool


def queue(ns: str, name: str, pool_name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"pool": pool_name, **spec},
    }


def test_queue_waits_for_its_pool_and_deletes_without_hanging(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    apply(queue(ns, "orphan", "nosuchpool"))
    obj = wait_for(
        "PoolNotFound",
        lambda: (o := get("queue", ns, "orphan")) and condition(o, "Ready").get("reason") == "PoolNotFound" and o,
    )
    assert condition(obj, "Ready")["status"] == "False"
    start = time.monotonic()
    kc("delete", "queue", "orphan", "-n", ns, "--timeout=60s")
    assert time.monotonic() - start < 60
    events = kc(
        "get", "events", "-n", ns, "--field-selector", "involvedObject.name=orphan", "-o", "jsonpath={.items[*].reason}"
    ).stdout
    assert "PoolGone" in events


def test_pool_with_queues_refuses_deletion(metal_ns: tuple[str, Operator]) -> None:
    ns, _ = metal_ns
    apply(pool(ns, "held", shards=1, replicas=1))
    apply(queue(ns, "orders", "held"))
    apply(queue(ns, "invoices", "held"))
    wait_for(
        "queue sees the pool", lambda: condition(get("queue", ns, "orders"), "Ready").get("reason") == "PoolNotReady"
    )
    kc("delete", "pool", "held", "-n", ns, "--wait=false")
    obj = wait_for(
        "Deleting=False",
        lambda: (o := get("pool", ns, "held")) and condition(o, "Deleting").get("reason") == "QueuesRemain" and o,
    )
    msg = condition(obj, "Deleting")["message"]
    assert msg.startswith("2 Queue(s) still use this Pool") and "invoices" in msg and "orders" in msg
    # Server unreachable (no kubelet): the Queue's finalizer is released after the retries.
    kc("delete", "queue", "orders", "invoices", "-n", ns, "--timeout=90s")
    wait_for("pool deleted", lambda: get("pool", ns, "held") is None, timeout=60)
