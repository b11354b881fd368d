"""End to end on the full local cluster (real node, real pods): the operator
from its image under its own RBAC, a metal builtin Redis Pool, a Queue used by
the unchanged python-zaqarclient, refusal to delete a Pool holding queues, and
namespace deletion that completes. Needs `make cluster-up images`."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator

import pytest

from ..integration.conftest import ROOT, apply, condition, get, kc, wait_for

COMPAT_PY = ROOT / "build/venv-compat/bin/python"


def full_cluster() -> bool:
    out = kc("get", "nodes", "-l", "sluice.dev/node-type=real", "-o", "name", check=False)
    return out.returncode == 0 and bool(out.stdout.strip())


@pytest.fixture(scope="module")
def operator() -> Iterator[None]:
    if not full_cluster():
        msg = "no full local cluster (make cluster-up images)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    kc("apply", "-f", str(ROOT / "crds"))
    kc("create", "namespace", "sluice-system", check=False)
    kc("apply", "-f", str(ROOT / "operator/deploy/rbac.yaml"))
    kc("apply", "-f", str(ROOT / "operator/deploy/operator.yaml"))
    kc("rollout", "status", "deployment/sluice-operator", "-n", "sluice-system", "--timeout=180s")
    yield


@pytest.fixture(scope="module")
def ns(operator: None) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", name)
    yield name
    start = time.monotonic()
    kc("delete", "namespace", name, "--timeout=300s")
    print(f"namespace deletion took {time.monotonic() - start:.1f}s")


def test_pool_queue_and_client(ns: str) -> None:
    start = time.monotonic()
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "web", "namespace": ns},
            "spec": {
                "backend": "redis",
                "provisioner": "builtin",
                "shards": 2,
                "storage": {"ephemeral": True},
                "placement": {"nodeClass": "metal", "policy": "required"},
            },
        }
    )
    wait_for("Pool Ready", lambda: condition(get("pool", ns, "web"), "Ready").get("status") == "True", timeout=300)
    pool_s = time.monotonic() - start
    start = time.monotonic()
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "orders", "namespace": ns},
            "spec": {"pool": "web", "messageTTL": 600},
        }
    )
    wait_for("Queue Ready", lambda: condition(get("queue", ns, "orders"), "Ready").get("status") == "True", timeout=60)
    queue_s = time.monotonic() - start
    print(f"pool apply->Ready {pool_s:.1f}s, queue apply->Ready {queue_s:.1f}s")
    svc = get("service", ns, "sluice-server")
    url = f"http://{svc['spec']['clusterIP']}:8888"
    out = subprocess.run(
        [str(COMPAT_PY), str(ROOT / "operator/tests/e2e/zaqar_client_check.py"), url, ns, "orders"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["claimed"] == [1, 2]


def test_pool_holding_queues_refuses_deletion(ns: str) -> None:
    kc("delete", "pool", "web", "-n", ns, "--wait=false")
    obj = wait_for(
        "Deleting=False", lambda: (o := get("pool", ns, "web")) and condition(o, "Deleting").get("reason") and o
    )
    assert "orders" in condition(obj, "Deleting")["message"]
    kc("delete", "queue", "orders", "-n", ns, "--timeout=60s")
    wait_for("Pool deleted", lambda: get("pool", ns, "web") is None, timeout=120)
