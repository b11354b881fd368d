"""Pool and Queue reconciliation end to end without a cluster: the Kubernetes
calls go to an in-memory object store, the server calls to the Zaqar double,
shard probes to a real redis-server (external provisioner)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kopf
import pytest

from sluice_operator import kube
from sluice_operator.config import Config
from sluice_operator.handlers import pool as pool_handler
from sluice_operator.handlers import queue as queue_handler

from .kube_double import Patch, Store
from .test_probes import redis_port  # noqa: F401  (fixture)
from .zaqar_double import ZaqarDouble


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store()
    monkeypatch.setattr(kube, "get", s.get)
    monkeypatch.setattr(kube, "list_objects", s.list_objects)
    monkeypatch.setattr(kube, "apply", s.apply)
    monkeypatch.setattr(kube, "delete", s.delete)
    monkeypatch.setattr(kube, "patch", s.patch)
    monkeypatch.setattr(kube, "group_served", lambda gv: False)
    monkeypatch.setattr(kube, "node_count", lambda key, value=None: 0)
    monkeypatch.setattr(pool_handler, "namespace_terminating", lambda ns: False)
    monkeypatch.setattr(queue_handler, "namespace_terminating", lambda ns: False)
    monkeypatch.setattr("sluice_operator.events.info", lambda *a, **k: None)
    monkeypatch.setattr("sluice_operator.events.warn", lambda *a, **k: None)
    return s


@pytest.fixture
def server() -> Iterator[ZaqarDouble]:
    d = ZaqarDouble()
    yield d
    d.stop()


def run_pool(cfg: Config, store: Store, name: str = "web") -> dict[str, Any]:
    body = store.get("Pool", "shop", name)
    assert body is not None
    p = Patch()
    pool_handler.reconcile(cfg, body, p)
    body.setdefault("status", {}).update(p.status)
    store.objs[("Pool", "shop", name)] = body
    return body


def cond(obj: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in obj["status"].get("conditions", []) if c["type"] == ctype), {})


def test_external_pool_registers_serves_queues_and_scales_down_safely(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,  # noqa: F811
) -> None:
    cfg = Config(server_url_template=server.url, probe_timeout=1.0)
    store.apply(
        {
            "kind": "Secret",
            "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
            "stringData": {"token": server.state.token},
        }
    )
    uris = "\n".join([f"redis://127.0.0.1:{redis_port}/0", f"redis://127.0.0.1:{redis_port}/1"])
    store.apply({"kind": "Secret", "metadata": {"name": "shards", "namespace": "shop"}, "stringData": {"uris": uris}})
    store.apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 1},
            "spec": {
                "backend": "redis",
                "provisioner": "external",
                "shards": 2,
                "weight": 100,
                "placement": {"nodeClass": "any"},
                "external": {"secretRef": {"name": "shards"}},
            },
        }
    )
    p = run_pool(cfg, store)
    assert cond(p, "Ready")["status"] == "True", p["status"]
    assert server.connections_closed()  # each step closes the connections it opened
    assert p["status"]["phase"] == "Ready" and p["status"]["readyShards"] == "2/2"
    assert p["status"]["provisioner"] == "external"
    assert set(server.state.pools) == {"web-0", "web-1"}
    dep = store.get("Deployment", "shop", "sluice-server")
    assert dep and [o["uid"] for o in dep["metadata"]["ownerReferences"]] == ["u1"]

    # A Queue lands through the server with its metadata, and reports stats. The
    # server's weighted choice is steered onto shard 1, the one about to leave.
    server.state.pools["web-0"]["weight"] = 0
    store.apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "orders", "namespace": "shop", "generation": 1},
            "spec": {"pool": "web", "messageTTL": 120},
        }
    )
    qp = Patch()
    queue_handler.reconcile(cfg, store.get("Queue", "shop", "orders"), qp)
    assert qp.status["conditions"][0]["status"] == "True"
    assert server.connections_closed()
    assert qp.status["messages"] == {"free": 2, "claimed": 1, "total": 3}
    assert server.state.queues[("shop", "orders")]["_default_message_ttl"] == 120
    assert server.state.placement[("shop", "orders")] == "web-1"
    assert qp.status["shard"] == "web-1"  # from the server's X-Sluice-Pool header

    # Scaling to one shard while the queue lives on shard 1 is refused, with the count.
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 1
    p = run_pool(cfg, store)
    assert server.state.pools["web-1"]["weight"] == 0 and server.state.pools["web-0"]["weight"] == 100
    c = cond(p, "ScaledDown")
    assert c["status"] == "False" and "web-1 holds 1 queue(s)" in c["message"]
    assert p["status"]["phase"] == "Draining"
    assert [s["name"] for s in p["status"]["shards"]] == ["web-0", "web-1"]
    # A second round changes nothing while the queue is there.
    p = run_pool(cfg, store)
    assert "web-1" in server.state.pools
    # Deleting the queue lets the scale-down finish.
    queue_handler.delete(cfg, store.get("Queue", "shop", "orders"), retry=0)
    assert server.connections_closed()
    store.delete("Queue", "shop", "orders")
    p = run_pool(cfg, store)
    assert "web-1" not in server.state.pools
    assert [s["name"] for s in p["status"]["shards"]] == ["web-0"]
    assert cond(p, "ScaledDown")["status"] == "True" and p["status"]["phase"] == "Ready"
    assert server.connections_closed()
    # Deleting the Pool unregisters what is left, and closes its connection too.
    pool_handler.delete(cfg, p, Patch(), retry=0)
    assert server.state.pools == {} and server.connections_closed()


def test_pool_deletion_refused_while_queue_resources_remain(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    body = {
        "kind": "Pool",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 2},
        "spec": {"backend": "redis"},
        "status": {"shards": []},
    }
    store.apply({"kind": "Queue", "metadata": {"name": "orders", "namespace": "shop"}, "spec": {"pool": "web"}})
    p = Patch()
    with pytest.raises(Exception, match="1 Queue\\(s\\) still use this Pool: orders"):
        pool_handler.delete(cfg, body, p, retry=0)
    assert p.status["conditions"][0]["reason"] == "QueuesRemain"


def test_refused_pool_deletion_closes_its_connection(store: Store, server: ZaqarDouble) -> None:
    # The retry kopf is asked for carries the handler's frame in its traceback for as
    # long as the exception lives; the client in that frame is closed all the same.
    cfg = Config(server_url_template=server.url)
    store.apply(
        {
            "kind": "Secret",
            "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
            "stringData": {"token": server.state.token},
        }
    )
    server.state.pools["web-0"] = {"uri": "redis://web-0:6379/0", "weight": 100, "flavor": "web"}
    server.state.placement[("shop", "orders")] = "web-0"
    body = {
        "kind": "Pool",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 2},
        "spec": {"backend": "redis"},
        "status": {"shards": [{"name": "web-0"}]},
    }
    p = Patch()
    with pytest.raises(kopf.TemporaryError, match="web-0 still holds queues") as refused:
        pool_handler.delete(cfg, body, p, retry=0)
    assert p.status["conditions"][0]["reason"] == "ShardsHoldQueues"
    assert refused.tb is not None and server.connections_closed()


def test_queue_deletion_released_when_server_is_gone(store: Store) -> None:
    cfg = Config(server_url_template="http://127.0.0.1:9", delete_retries=1)
    store.apply({"kind": "Pool", "metadata": {"name": "web", "namespace": "shop"}, "spec": {}})
    q = {"kind": "Queue", "metadata": {"name": "orders", "namespace": "shop"}, "spec": {"pool": "web"}}
    with pytest.raises(Exception, match="server unavailable"):
        queue_handler.delete(cfg, q, retry=0)
    queue_handler.delete(cfg, q, retry=1)  # released: no exception
