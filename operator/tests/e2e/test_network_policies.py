"""NetworkPolicies enforced by a real engine: kube-router's firewall, a host
process of the full local cluster (e2e/cluster/kube-router.sh). A stray pod
in a Pool's namespace is refused by the builtin shard's Redis port and by the
catalog (by pod address and by Service address), while the server's client
port stays open to it; sluice-server still serves messages from that shard
through the catalog, and the operator's pod still reaches both. The server's
metrics port is refused to the stray pod and to the operator (neither is in
a monitoring namespace) and serves /metrics to this machine, the pods' node,
which kube-router always admits; the client port answers 404 for /metrics.
Without the engine the stray pod connects, so the refusal waits below time
out and fail."""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from sluice_operator.builders.server import METRICS_PORT

from ..integration.conftest import apply, condition, get, kc, wait_for
from .conftest import RELEASE_NS, _need, metrics_url, operator_pods, server_url

# kube-router.sh serves /healthz here (127.0.0.1:10295 + 100 * SLUICE_INSTANCE).
HEALTHZ = os.environ.get(
    "SLUICE_KUBE_ROUTER_HEALTHZ", f"127.0.0.1:{10295 + 100 * int(os.environ.get('SLUICE_INSTANCE', '0'))}"
)
REDIS_IMAGE = "sluice.dev/redis:dev"
SERVER_SELECTOR = "app.kubernetes.io/component=server"
STRAY = "stray"

# probe ADDR PORT prints "open" when a TCP connection is accepted within 3 s,
# "closed" when it is refused or times out (bash's /dev/tcp: no client needed).
PROBE = 'if timeout 3 bash -c "exec 3<>/dev/tcp/$0/$1" 2>/dev/null; then echo open; else echo closed; fi'


@pytest.fixture(scope="module")
def engine(operator: None) -> None:
    try:
        with urllib.request.urlopen(f"http://{HEALTHZ}/healthz", timeout=5) as resp:
            ok = resp.status == 200
    except (urllib.error.URLError, OSError) as err:
        ok = False
        print(f"\nkube-router healthz at {HEALTHZ}: {err}")
    _need(ok, f"no NetworkPolicy engine (kube-router healthz {HEALTHZ}): make cluster-up starts it")


def probe(ns: str, pod: str, addr: str, port: int) -> str:
    out = kc("exec", "-n", ns, pod, "--", "bash", "-c", PROBE, addr, str(port), check=False)
    assert out.returncode == 0, f"exec in {ns}/{pod}: {out.stderr}"
    return out.stdout.strip()


def stray_pod(ns: str) -> dict[str, Any]:
    """stray_pod is any workload of the namespace that is not sluice-server:
    it has bash and a Redis client, and the restricted pod security settings."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": STRAY, "namespace": ns, "labels": {"app": STRAY}},
        "spec": {
            "nodeSelector": {"sluice.dev/node-type": "real"},
            "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": STRAY,
                    "image": REDIS_IMAGE,
                    "imagePullPolicy": "Never",
                    # Bounded: the pod ends by itself if the test dies.
                    "command": ["sleep", "900"],
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def server_call(ns: str, method: str, path: str, body: Any = None) -> Any:
    """server_call is a project request to the namespace's server (the admin
    token acts for the project it names), from this machine."""
    secret = json.loads(kc("get", "secret", "sluice-server-admin", "-n", ns, "-o", "json").stdout)
    token = base64.b64decode(secret["data"]["token"]).decode()
    req = urllib.request.Request(
        server_url(ns) + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "X-Project-ID": ns,
            "Client-ID": str(uuid.uuid4()),
            "Content-Type": "application/json",
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def pod_ip(ns: str, selector: str) -> str:
    pods = json.loads(kc("get", "pods", "-n", ns, "-l", selector, "-o", "json").stdout)["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    return str(pods[0]["status"]["podIP"])


def cluster_ip(ns: str, name: str) -> str:
    return str(json.loads(kc("get", "service", name, "-n", ns, "-o", "json").stdout)["spec"]["clusterIP"])


def round_trip(ns: str, queue: str, body: str) -> None:
    """round_trip posts a message and reads it back: server -> catalog -> shard."""
    server_call(ns, "PUT", f"/v2/queues/{queue}", {})
    server_call(ns, "POST", f"/v2/queues/{queue}/messages", {"messages": [{"ttl": 300, "body": body}]})
    got = server_call(ns, "GET", f"/v2/queues/{queue}/messages?echo=true&limit=10")
    assert body in [m["body"] for m in got["messages"]], got


def test_stray_pod_refused_server_and_operator_admitted(engine: None, ns: str) -> None:
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "guarded", "namespace": ns},
            "spec": {
                "backend": "redis",
                "provisioner": "builtin",
                "shards": 1,
                "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                "placement": {"nodeClass": "metal", "policy": "required"},
            },
        }
    )
    wait_for(
        "Pool guarded Ready",
        lambda: condition(get("pool", ns, "guarded"), "Ready").get("status") == "True",
        timeout=300,
    )
    policies = json.loads(kc("get", "networkpolicy", "-n", ns, "-o", "json").stdout)["items"]
    assert {p["metadata"]["name"] for p in policies} >= {"sluice-backends", "sluice-catalog", "sluice-server"}

    apply(stray_pod(ns))
    wait_for(
        "stray pod Running",
        lambda: (get("pod", ns, STRAY) or {}).get("status", {}).get("phase") == "Running",
        timeout=120,
    )
    shard_sel = "sluice.dev/pool=guarded,app.kubernetes.io/component=backend"
    backends = {
        "shard pod": (pod_ip(ns, shard_sel), 6379),
        "shard Service": (cluster_ip(ns, "guarded-0"), 6379),
        "catalog pod": (pod_ip(ns, "app.kubernetes.io/component=catalog"), 6379),
        "catalog Service": (cluster_ip(ns, "sluice-catalog"), 6379),
    }
    server = (cluster_ip(ns, "sluice-server"), 8888)
    server_pods = json.loads(kc("get", "pods", "-n", ns, "-l", SERVER_SELECTOR, "-o", "json").stdout)["items"]
    metrics = {
        "server pod's metrics port": (str(server_pods[0]["status"]["podIP"]), METRICS_PORT),
        "server Service's metrics port": (cluster_ip(ns, "sluice-server"), METRICS_PORT),
    }

    # The policies existed before the stray pod: the engine refuses it from
    # the start; the bounded wait only absorbs the engine's sync after a new pod.
    for what, (addr, port) in backends.items():
        wait_for(
            f"{what} {addr}:{port} refused to the stray pod",
            lambda a=addr, p=port: probe(ns, STRAY, a, p) == "closed",  # type: ignore[misc]
        )
    assert probe(ns, STRAY, *server) == "open", "the server's client port must stay open to every pod"
    for what, (addr, port) in metrics.items():
        wait_for(
            f"{what} {addr}:{port} refused to the stray pod",
            lambda a=addr, p=port: probe(ns, STRAY, a, p) == "closed",  # type: ignore[misc]
        )
    # Served there (not merely closed), and only there.
    with urllib.request.urlopen(metrics_url(ns) + "/metrics", timeout=10) as resp:
        assert "sluice_http_requests_total" in resp.read().decode()
    with pytest.raises(urllib.error.HTTPError) as not_here:
        urllib.request.urlopen(server_url(ns) + "/metrics", timeout=10)
    assert not_here.value.code == 404

    # sluice-server still reaches the catalog and the shard under enforcement.
    round_trip(ns, "fenced", "through-the-server")

    # The operator (its namespace is admitted) still reaches both backends.
    op = [p for p in operator_pods() if p["status"].get("phase") == "Running"]
    assert op, f"no running operator pod in {RELEASE_NS}"
    for what in ("shard pod", "catalog pod"):
        addr, port = backends[what]
        assert probe(RELEASE_NS, op[0]["metadata"]["name"], addr, port) == "open", f"operator -> {what}"
    # Its namespace is not a monitoring one: the metrics port is closed to it.
    addr, port = metrics["server pod's metrics port"]
    assert probe(RELEASE_NS, op[0]["metadata"]["name"], addr, port) == "closed", "operator -> server metrics"

    # A Pool holding queues refuses deletion: empty it so the namespace goes.
    server_call(ns, "DELETE", "/v2/queues/fenced")
    kc("delete", "pod", STRAY, "-n", ns, "--wait=false")
    kc("delete", "pool", "guarded", "-n", ns, "--wait=false")
