"""Deleting redis-operator shards against a model of what the pinned manager
(v0.16.0, controllers/redis*_controller.go and k8sutils/finalizer.go) and the
garbage collector do with them: whatever order they act in, a replicated
shard's RedisReplication and RedisSentinel are gone in the end, on Pool
deletion, on scale-down and when replicas crosses 1. Before the fix the
RedisSentinel kept its finalizer whenever its replication went first."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from sluice_operator import kube
from sluice_operator.builders import thirdparty
from sluice_operator.config import Config
from sluice_operator.handlers import pool as pool_handler
from sluice_operator.handlers import provisioning, shards

from .conftest import make_pool
from .kube_double import Patch, Store

API = "redis.redis.opstreelabs.in/v1beta2"
UPSTREAM_FINALIZERS = {
    "Redis": "redisFinalizer",
    "RedisReplication": "redisReplicationFinalizer",
    "RedisSentinel": "redisSentinelFinalizer",
}


class FinalizingStore(Store):
    """Store with the apiserver's finalizer rules: deleting an object that holds
    finalizers only marks it; it goes once the last finalizer is lifted. New
    finalizers cannot be added to an object being deleted."""

    def delete(self, kind: str, ns: str, name: str) -> bool:
        obj = self.objs.get((kind, ns, name))
        if obj is None:
            return False
        if obj["metadata"].get("finalizers"):
            obj["metadata"].setdefault("deletionTimestamp", "now")
            return True
        return super().delete(kind, ns, name)

    def patch(self, kind: str, ns: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        before = list(self.objs[(kind, ns, name)]["metadata"].get("finalizers") or [])
        out = super().patch(kind, ns, name, body)
        meta = self.objs[(kind, ns, name)]["metadata"]
        added = set(meta.get("finalizers") or []) - set(before)
        assert not (added and meta.get("deletionTimestamp")), "no new finalizers on an object being deleted"
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            super().delete(kind, ns, name)
        return out


def owner(kind: str, name: str) -> list[dict[str, Any]]:
    return [{"kind": kind, "name": name, "uid": f"uid-{name}", "blockOwnerDeletion": True}]


def replicated_shard(s: FinalizingStore, shard: str, ready: bool) -> None:
    """What the manager has made of a shard's RedisReplication + RedisSentinel."""
    for kind in ("RedisReplication", "RedisSentinel"):
        spec = {"redisSentinelConfig": {"redisReplicationName": shard}} if kind == "RedisSentinel" else {}
        s.apply(
            {
                "apiVersion": API,
                "kind": kind,
                "metadata": {
                    "name": shard,
                    "namespace": "shop",
                    "finalizers": [UPSTREAM_FINALIZERS[kind]],
                    "ownerReferences": owner("Pool", "web"),
                },
                "spec": spec,
            }
        )
    for sts, kind in ((shard, "RedisReplication"), (f"{shard}-sentinel", "RedisSentinel")):
        s.apply(
            {
                "kind": "StatefulSet",
                "metadata": {"name": sts, "namespace": "shop", "ownerReferences": owner(kind, shard)},
                "spec": {"replicas": 3},
                "status": {"readyReplicas": 3 if ready else 2},
            }
        )


def finalize_replication(s: FinalizingStore) -> None:
    """The Redis / RedisReplication reconcilers: HandleRedis*Finalizer runs first,
    with no condition (keepAfterDelete: the claims stay)."""
    for (kind, ns, name), obj in list(s.objs.items()):
        if kind in ("Redis", "RedisReplication") and obj["metadata"].get("deletionTimestamp"):
            held = [f for f in obj["metadata"].get("finalizers") or [] if f != UPSTREAM_FINALIZERS[kind]]
            s.patch(kind, ns, name, {"metadata": {"finalizers": held}})


def finalize_sentinel(s: FinalizingStore) -> None:
    """The RedisSentinel reconciler: IsRedisReplicationReady (the replication's
    StatefulSet all ready, and the RedisReplication readable for its master)
    comes before HandleRedisSentinelFinalizer; otherwise it requeues."""
    for (kind, ns, name), obj in list(s.objs.items()):
        if kind != "RedisSentinel" or not obj["metadata"].get("deletionTimestamp"):
            continue
        repl = obj["spec"]["redisSentinelConfig"]["redisReplicationName"]
        sts = s.get("StatefulSet", ns, repl)
        ready = sts is not None and sts["status"]["readyReplicas"] == sts["spec"]["replicas"]
        if ready and s.get("RedisReplication", ns, repl) is not None:
            held = [f for f in obj["metadata"]["finalizers"] if f != "redisSentinelFinalizer"]
            s.patch(kind, ns, name, {"metadata": {"finalizers": held}})


def collect_garbage(s: FinalizingStore) -> None:
    """Background garbage collection: an object whose owner is gone is deleted;
    a StatefulSet whose owner is being deleted loses its pods' readiness first."""
    for (kind, ns, name), obj in list(s.objs.items()):
        refs = obj["metadata"].get("ownerReferences") or []
        owners = [s.get(r["kind"], ns, r["name"]) for r in refs]
        if refs and all(o is None for o in owners):
            s.delete(kind, ns, name)
        elif kind == "StatefulSet" and any(o and o["metadata"].get("deletionTimestamp") for o in owners):
            s.objs[(kind, ns, name)]["status"]["readyReplicas"] = 0


ACTORS = {"replication": finalize_replication, "sentinel": finalize_sentinel, "gc": collect_garbage}
# Every order of the three actors over four steps, then each of them a few more times.
ORDERS = list(itertools.product(sorted(ACTORS), repeat=4))


def settle(s: FinalizingStore, order: tuple[str, ...]) -> None:
    for step in list(order) + sorted(ACTORS) * 4:
        ACTORS[step](s)


def upstream_left(s: FinalizingStore) -> list[tuple[str, str]]:
    return [(k, n) for (k, _, n) in s.objs if k in UPSTREAM_FINALIZERS]


@pytest.fixture
def fstore(monkeypatch: pytest.MonkeyPatch) -> FinalizingStore:
    s = FinalizingStore()
    for name in ("get", "list_objects", "apply", "delete", "patch"):
        monkeypatch.setattr(kube, name, getattr(s, name))
    monkeypatch.setattr(pool_handler, "namespace_terminating", lambda ns: True)
    monkeypatch.setattr("sluice_operator.events.info", lambda *a, **k: None)
    monkeypatch.setattr("sluice_operator.events.warn", lambda *a, **k: None)
    return s


@pytest.mark.parametrize("ready", [True, False], ids=["ready", "master-down"])
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_pool_deletion_leaves_no_redis_operator_cr(
    fstore: FinalizingStore, order: tuple[str, ...], ready: bool
) -> None:
    body = make_pool(provisioner="redis-operator", shards=2, replicas=3)
    body["status"] = {"provisioner": "redis-operator", "shards": [{"index": 0, "name": "web-0"}]}
    fstore.apply(body)
    for i in range(2):
        replicated_shard(fstore, f"web-{i}", ready)
    # The server is unreachable in a terminating namespace: deletion goes on regardless.
    pool_handler.delete(Config(server_url_template="http://127.0.0.1:9"), body, Patch(), retry=0)
    fstore.objs.pop(("Pool", "shop", "web"))  # Kopf lifts its finalizer; the Pool goes
    settle(fstore, order)
    assert upstream_left(fstore) == []


@pytest.mark.parametrize("ready", [True, False], ids=["ready", "master-down"])
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_removed_shard_leaves_no_redis_operator_cr(
    fstore: FinalizingStore, order: tuple[str, ...], ready: bool
) -> None:
    fstore.apply(make_pool(provisioner="redis-operator", shards=1, replicas=3))
    replicated_shard(fstore, "web-1", ready)
    fstore.apply(thirdparty.redis_config(Config(), make_pool(provisioner="redis-operator"), 1))
    gone = shards.delete_workloads("shop", "redis-operator", "web-1")
    assert gone[0] == "RedisSentinel/web-1" and "RedisReplication/web-1" in gone
    assert "ConfigMap/web-1-redis-config" in gone
    settle(fstore, order)
    assert upstream_left(fstore) == []


@pytest.mark.parametrize("ready", [True, False], ids=["ready", "master-down"])
@pytest.mark.parametrize("order", ORDERS, ids="-".join)
def test_shape_change_to_one_replica_retires_the_sentinel(
    fstore: FinalizingStore, order: tuple[str, ...], ready: bool
) -> None:
    """R3, 3 -> 1: the shard waits only while the garbage collector works, and no
    RedisSentinel or RedisReplication outlives the switch."""
    fstore.apply(make_pool(provisioner="redis-operator", shards=1, replicas=1))
    replicated_shard(fstore, "web-0", ready)
    assert provisioning.retire_other_redis_shape("shop", "web-0", 1)
    settle(fstore, order)
    assert upstream_left(fstore) == []
    assert provisioning.retire_other_redis_shape("shop", "web-0", 1) is None


def test_release_keeps_other_finalizers(fstore: FinalizingStore) -> None:
    fstore.apply(
        {
            "kind": "RedisSentinel",
            "metadata": {
                "name": "web-0",
                "namespace": "shop",
                "finalizers": ["example.com/audit", "redisSentinelFinalizer"],
            },
        }
    )
    assert provisioning.release_redis_sentinel("shop", "web-0")
    live = fstore.get("RedisSentinel", "shop", "web-0")
    assert live and live["metadata"]["finalizers"] == ["example.com/audit"] and live["metadata"]["deletionTimestamp"]
    assert not provisioning.release_redis_sentinel("shop", "web-1")


def test_builtin_pool_deletion_touches_no_redis_operator_cr(fstore: FinalizingStore) -> None:
    body = make_pool(provisioner="builtin", shards=1, replicas=3)
    body["status"] = {"provisioner": "builtin", "shards": [{"index": 0, "name": "web-0"}]}
    replicated_shard(fstore, "web-0", True)
    assert provisioning.release_pool_sentinels(body) == []
    assert fstore.get("RedisSentinel", "shop", "web-0") is not None
