"""End to end on the full local cluster (a real node running real pods): the
operator as the chart installs it (`make e2e` installs the release first),
under the chart's RBAC, with the images built by `make images`."""

from __future__ import annotations

import base64
import functools
import json
import os
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sluice_operator.builders.server import METRICS_PORT

from ..integration.conftest import kc
from ..support import unavailable

RELEASE_NS = os.environ.get("SLUICE_E2E_RELEASE_NAMESPACE", "sluice-system")
OPERATOR_SELECTOR = "app.kubernetes.io/component=operator,app.kubernetes.io/name=sluice"


def _need(ok: bool, msg: str) -> None:
    if not ok:
        unavailable(msg)


def operator_pods() -> list[dict[str, Any]]:
    out = kc("get", "pods", "-n", RELEASE_NS, "-l", OPERATOR_SELECTOR, "-o", "json", check=False)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else []


@pytest.fixture(scope="session")
def operator() -> None:
    real = kc("get", "nodes", "-l", "sluice.dev/node-type=real", "-o", "name", check=False)
    _need(real.returncode == 0 and bool(real.stdout.strip()), "no full local cluster (make cluster-up)")
    running = [p for p in operator_pods() if p["status"].get("phase") == "Running"]
    _need(bool(running), f"no sluice operator running in {RELEASE_NS} (make e2e installs the chart)")


DELETION_TIMEOUT = 300.0  # a namespace still there this long after its deletion began is stuck


@pytest.fixture(scope="session")
def deleted_namespaces() -> Iterator[dict[str, float]]:
    """deleted_namespaces are the namespaces the modules deleted (name -> when): each
    deletion must complete, checked once the suite is done. The namespace controller
    rechecks a namespace only after its pods' whole termination grace period (35 s for
    the server) although the pods exit in seconds, so waiting in each module would add
    that much idle time per module; the deletions complete while later modules run."""
    deleted: dict[str, float] = {}
    yield deleted
    stuck = []
    for name, start in deleted.items():
        while (there := kc("get", "namespace", name, check=False).returncode == 0) and (
            time.monotonic() - start < DELETION_TIMEOUT
        ):
            time.sleep(2)
        state = "still there" if there else "gone"
        print(f"\nnamespace {name}: {state} {time.monotonic() - start:.0f}s after its deletion")
        if there:
            stuck.append(name)
    assert not stuck, f"namespace deletion did not complete in {DELETION_TIMEOUT:.0f}s: {stuck}"


@pytest.fixture(scope="module")
def ns(operator: None, deleted_namespaces: dict[str, float]) -> Iterator[str]:
    """ns is a fresh namespace per module; its deletion must complete (deleted_namespaces)."""
    name = f"e2e-{uuid.uuid4().hex[:6]}"
    kc("create", "namespace", name)
    yield name
    kc("delete", "namespace", name, "--wait=false")
    deleted_namespaces[name] = time.monotonic()


def server_url(ns: str) -> str:
    """server_url is the namespace's sluice-server Service: kube-proxy on this
    machine routes service addresses, so the tests reach it directly."""
    svc = json.loads(kc("get", "service", "sluice-server", "-n", ns, "-o", "json").stdout)
    return f"http://{svc['spec']['clusterIP']}:8888"


def metrics_url(ns: str) -> str:
    """metrics_url is the same Service's metrics port, where the server serves /metrics."""
    svc = json.loads(kc("get", "service", "sluice-server", "-n", ns, "-o", "json").stdout)
    return f"http://{svc['spec']['clusterIP']}:{METRICS_PORT}"


@functools.lru_cache(maxsize=64)
def client_token(ns: str, account: str = "default", audience: str = "sluice") -> str:
    """client_token is a ServiceAccount token made by the cluster's apiserver, as a pod
    of `ns` running as `account` gets it projected: the server's default auth mode
    (kubernetes) takes nothing else from a client."""
    return kc("create", "token", account, "-n", ns, "--audience", audience, "--duration", "2h").stdout.strip()


def admin_get(ns: str, path: str) -> Any:
    """admin_get calls the server's admin API with the token the operator keeps."""
    secret = json.loads(kc("get", "secret", "sluice-server-admin", "-n", ns, "-o", "json").stdout)
    token = base64.b64decode(secret["data"]["token"]).decode()
    req = urllib.request.Request(
        server_url(ns) + path,
        headers={"Authorization": f"Bearer {token}", "X-Project-ID": "sluice-admin", "Client-ID": str(uuid.uuid4())},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")
