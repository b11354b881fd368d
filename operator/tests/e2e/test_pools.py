"""Pools and Queues with real pods: a metal builtin Redis Pool of 2 shards on
PersistentVolumes, a Queue the unchanged python-zaqarclient posts to and
claims from through the server's Service, a Pool holding queues that refuses
deletion, and an operator killed mid-reconcile that converges without
duplicates."""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
import urllib.request
from typing import Any

from sluice_operator.builders.shard_settings import REDIS_SHARD_SETTINGS

from ..integration.conftest import ROOT, apply, condition, get, kc, status, wait_for
from .conftest import RELEASE_NS, admin_get, client_token, metrics_url, operator_pods, server_url

COMPAT_PY = ROOT / "build/venv-compat/bin/python"


def pool(ns: str, name: str, shards: int) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "backend": "redis",
            "provisioner": "builtin",
            "shards": shards,
            "storage": {"size": "256Mi"},
            "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
            "placement": {"nodeClass": "metal", "policy": "required"},
        },
    }


def ready(kind: str, ns: str, name: str) -> bool:
    return condition(get(kind, ns, name), "Ready").get("status") == "True"


def names(kind: str, ns: str, selector: str) -> list[str]:
    out = kc("get", kind, "-n", ns, "-l", selector, "-o", "json")
    return sorted(o["metadata"]["name"] for o in json.loads(out.stdout)["items"])


def test_pool_queue_and_client(ns: str) -> None:
    start = time.monotonic()
    apply(pool(ns, "web", 2))
    wait_for("Pool web Ready", lambda: ready("pool", ns, "web"), timeout=300)
    pool_s = time.monotonic() - start
    p = get("pool", ns, "web")
    assert p and p["status"]["readyShards"] == "2/2" and p["status"]["provisioner"] == "builtin"
    # Placement: the real scheduler bound every shard pod to a metal node.
    pods = json.loads(kc("get", "pods", "-n", ns, "-l", "sluice.dev/pool=web", "-o", "json").stdout)["items"]
    assert len(pods) == 2
    for pod in pods:
        node = get("node", "", pod["spec"]["nodeName"])
        assert node and node["metadata"]["labels"]["sluice.dev/node-class"] == "metal", pod["spec"]["nodeName"]
    # Persistence is on: each shard's data lives on a bound PersistentVolumeClaim.
    pvcs = json.loads(kc("get", "pvc", "-n", ns, "-l", "sluice.dev/pool=web", "-o", "json").stdout)["items"]
    assert len(pvcs) == 2 and all(c["status"]["phase"] == "Bound" for c in pvcs), pvcs
    # Each shard's Redis runs with the settings sluice gives every shard.
    for pod in pods:
        for name, value in REDIS_SHARD_SETTINGS:
            cli = f'redis-cli -a "$REDIS_PASSWORD" --no-auth-warning config get {name}'
            out = kc("exec", "-n", ns, pod["metadata"]["name"], "--", "sh", "-c", cli, check=False)
            assert out.stdout.split() == [name, value], (pod["metadata"]["name"], out.stdout, out.stderr)

    start = time.monotonic()
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "orders", "namespace": ns},
            "spec": {"pool": "web", "messageTTL": 600},
        }
    )
    wait_for("Queue orders Ready", lambda: ready("queue", ns, "orders"), timeout=60)
    queue_s = time.monotonic() - start
    print(f"\nPool (2 builtin shards) apply->Ready {pool_s:.1f}s, Queue apply->Ready {queue_s:.1f}s")

    out = subprocess.run(
        [str(COMPAT_PY), str(ROOT / "operator/tests/e2e/zaqar_client_check.py"), server_url(ns), ns, "orders"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "SLUICE_TOKEN": client_token(ns)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["claimed"] == [1, 2]
    # The Queue's status names its shard, and that shard counts it.
    q = wait_for("Queue shard in status", lambda: (o := get("queue", ns, "orders")) and status(o).get("shard") and o)
    shard = q["status"]["shard"]
    assert shard in ("web-0", "web-1")
    assert admin_get(ns, f"/v2/pools/{shard}?detailed=true")["queues"] == 1
    # The kubelet resolves the server's GOMAXPROCS from its CPU request,
    # rounded up, and the Go runtime applies it (its own gauge says so).
    dep = get("deployment", ns, "sluice-server")
    assert dep
    box = dep["spec"]["template"]["spec"]["containers"][0]
    cpu = box["resources"]["requests"]["cpu"]
    want = math.ceil(int(cpu[:-1]) / 1000) if cpu.endswith("m") else math.ceil(float(cpu))
    # /metrics is served on the metrics port only (SLUICE_METRICS_LISTEN); this
    # machine is the pods' node, which the NetworkPolicy engine always admits.
    with urllib.request.urlopen(metrics_url(ns) + "/metrics", timeout=10) as resp:
        scrape = resp.read().decode()
    got = [ln.split()[1] for ln in scrape.splitlines() if ln.startswith("go_sched_gomaxprocs_threads ")]
    assert got == [str(want)], (cpu, got)


def test_pool_holding_queues_refuses_deletion(ns: str) -> None:
    kc("delete", "pool", "web", "-n", ns, "--wait=false")
    obj = wait_for(
        "Deleting=False", lambda: (o := get("pool", ns, "web")) and condition(o, "Deleting").get("reason") and o
    )
    msg = condition(obj, "Deleting")["message"]
    assert "orders" in msg, msg
    # Refused means refused: the shards and the server still serve.
    assert names("statefulset", ns, "sluice.dev/pool=web") == ["web-0", "web-1"]
    kc("delete", "queue", "orders", "-n", ns, "--timeout=60s")
    wait_for("Pool web deleted", lambda: get("pool", ns, "web") is None, timeout=120)


def test_operator_killed_mid_reconcile_converges(ns: str) -> None:
    before = {p["metadata"]["name"] for p in operator_pods()}
    apply(pool(ns, "burst", 3))
    # Kill the operator as soon as it has started on the Pool: the first shard exists.
    wait_for("first shard created", lambda: get("statefulset", ns, "burst-0"), timeout=60, interval=0.2)
    for name in before:
        kc("delete", "pod", name, "-n", RELEASE_NS, "--grace-period=0", "--force", check=False)
    wait_for(
        "a new operator pod Running",
        lambda: any(
            p["metadata"]["name"] not in before and p["status"].get("phase") == "Running" for p in operator_pods()
        ),
        timeout=180,
    )
    wait_for("Pool burst Ready after the restart", lambda: ready("pool", ns, "burst"), timeout=300)
    # No duplicates: exactly one of everything, and exactly 3 registered shards.
    assert names("statefulset", ns, "sluice.dev/pool=burst") == ["burst-0", "burst-1", "burst-2"]
    assert names("deployment", ns, "app.kubernetes.io/component=server") == ["sluice-server"]
    registered = [p["name"] for p in admin_get(ns, "/v2/pools?limit=20")["pools"] if p["name"].startswith("burst-")]
    assert sorted(registered) == ["burst-0", "burst-1", "burst-2"]
    flavor = admin_get(ns, "/v2/flavors/burst")
    assert sorted(flavor["pool_list"]) == registered
    assert len(operator_pods()) == 1, [p["metadata"]["name"] for p in operator_pods()]
