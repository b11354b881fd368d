"""Third-party provisioners without their controllers: the test installs the
upstream projects' own CRDs (redis-operator, mongodb-community-operator,
prometheus-operator's ServiceMonitor; see upstream/README.md), so the
apiserver validates the objects the operator creates against the real
schemas. It asserts those objects arrive whole (nothing pruned as unknown);
test_mongodb_community.py runs the community operator's real controller."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sluice_operator.builders import server as server_builders
from sluice_operator.builders import thirdparty
from sluice_operator.config import Config

from ..support import unavailable
from . import upstream_crds
from .conftest import Operator, apply, condition, get, kc, wait_for

LABEL = "sluice.dev/test=upstream-crd"
POOLS = ("ot", "ots", "mg")
# What redis-operator v0.16.0 itself puts on its kinds (k8sutils/finalizer.go).
UPSTREAM_FINALIZERS = {"redisFinalizer", "redisReplicationFinalizer", "redisSentinelFinalizer"}


@pytest.fixture(scope="module")
def upstream(metal_ns: tuple[str, Operator]) -> Iterator[None]:
    """The upstream CRDs, installed for this module and removed after it. CRDs that
    are already installed (real third-party operators on the cluster) are used as
    they are and left alone."""
    try:
        docs = upstream_crds.crds()
    except upstream_crds.Unavailable as exc:
        unavailable(f"upstream CRDs unavailable: {exc}")
    ours = []
    for d in docs:
        name = d["metadata"]["name"]
        if kc("get", "crd", name, check=False).returncode == 0:
            continue
        d["metadata"].setdefault("labels", {})["sluice.dev/test"] = "upstream-crd"
        ours.append(d)
    if ours:
        # Server-side: the schemas are too large for kubectl's last-applied annotation.
        kc("apply", "--server-side", "--field-manager=sluice-it", "-f", "-", stdin=yaml.safe_dump_all(ours))
    for d in docs:
        kc("wait", "--for=condition=Established", f"crd/{d['metadata']['name']}", "--timeout=60s")
    yield
    # The Pools go first, while the kinds their shards are made of still exist.
    kc("delete", "pools", *POOLS, "-n", metal_ns[0], "--ignore-not-found", "--timeout=80s", check=False)
    if ours:
        kc("delete", "crd", "-l", LABEL, "--timeout=90s", check=False)


def pool(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def missing(want: Any, live: Any, path: str = "") -> list[str]:
    """missing lists where `live` lacks or differs from what the operator sent: a
    field the schema does not know is pruned by the apiserver and shows up here."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return [f"{path}: {live!r}"]
        return [m for k, v in want.items() for m in missing(v, live.get(k, KeyError), f"{path}.{k}")]
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return [f"{path}: {live!r}"]
        return [m for i, (w, lv) in enumerate(zip(want, live, strict=True)) for m in missing(w, lv, f"{path}[{i}]")]
    return [] if want == live else [f"{path}: sent {want!r}, stored {live!r}"]


def assert_stored_whole(built: dict[str, Any], live: dict[str, Any]) -> None:
    assert not missing(built["spec"], live["spec"], "spec"), missing(built["spec"], live["spec"], "spec")
    assert not missing(built["metadata"]["labels"], live["metadata"]["labels"], "labels")


def test_redis_operator_objects(metal_ns: tuple[str, Operator], upstream: None) -> None:
    ns, op = metal_ns
    cfg = Config.from_env(op.env)
    apply(
        pool(
            ns,
            "ot",
            backend="redis",
            provisioner="redis-operator",
            shards=2,
            replicas=3,
            storage={"size": "2Gi"},
            resources={"requests": {"cpu": "100m", "memory": "128Mi"}},
            placement={"nodeClass": "metal", "policy": "required"},
        )
    )
    repl = wait_for("RedisReplication ot-1", lambda: get("redisreplication", ns, "ot-1"))
    spec = repl["spec"]
    assert spec["clusterSize"] == 3
    assert spec["storage"]["volumeClaimTemplate"]["spec"]["resources"]["requests"]["storage"] == "2Gi"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0] == {"key": "sluice.dev/node-class", "operator": "In", "values": ["metal"]}
    sentinel = wait_for("RedisSentinel ot-1", lambda: get("redissentinel", ns, "ot-1"))
    assert sentinel["spec"]["redisSentinelConfig"]["redisReplicationName"] == "ot-1"
    assert get("redis", ns, "ot-0") is None  # replicas > 1: no standalone Redis
    # What the operator built is what the real schemas stored.
    built = thirdparty.redis_objects(cfg, get("pool", ns, "ot"), 1)
    assert [b["kind"] for b in built] == ["RedisReplication", "RedisSentinel"]
    assert_stored_whole(built[0], repl)
    assert_stored_whole(built[1], sentinel)
    # Kopf never handles third-party objects: no Kopf state, no finalizers of
    # ours on them (a running redis-operator adds its own).
    for obj in (repl, sentinel):
        assert set(obj["metadata"].get("finalizers") or []) <= UPSTREAM_FINALIZERS
        assert not [a for a in obj["metadata"].get("annotations", {}) if "kopf" in a or "last-handled" in a]
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "Pool"
    st = wait_for("status", lambda: ((get("pool", ns, "ot") or {}).get("status") or {}).get("provisioner"))
    assert st == "redis-operator"
    obj = get("pool", ns, "ot")
    assert obj["status"]["shards"][0]["endpoint"] == f"ot-0-sentinel.{ns}.svc:26379"


def test_redis_operator_standalone_shard(metal_ns: tuple[str, Operator], upstream: None) -> None:
    ns, op = metal_ns
    cfg = Config.from_env(op.env)
    apply(
        pool(
            ns,
            "ots",
            backend="redis",
            provisioner="redis-operator",
            shards=1,
            replicas=1,
            placement={"nodeClass": "any", "tolerations": [{"key": "dedicated", "operator": "Exists"}]},
        )
    )
    redis = wait_for("Redis ots-0", lambda: get("redis", ns, "ots-0"))
    built = thirdparty.redis_objects(cfg, get("pool", ns, "ots"), 0)
    assert [b["kind"] for b in built] == ["Redis"]
    assert_stored_whole(built[0], redis)
    assert redis["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert get("redisreplication", ns, "ots-0") is None and get("redissentinel", ns, "ots-0") is None
    endpoint = wait_for(
        "endpoint", lambda: (((get("pool", ns, "ots") or {}).get("status") or {}).get("shards") or [{}])[0]
    ).get("endpoint")
    assert endpoint == f"ots-0.{ns}.svc:6379"


def test_mongodb_community_flow(metal_ns: tuple[str, Operator], upstream: None) -> None:
    ns, op = metal_ns
    cfg = Config.from_env(op.env)
    apply(
        pool(
            ns,
            "mg",
            backend="mongodb",
            provisioner="mongodb-community",
            shards=1,
            replicas=3,
            resources={"limits": {"memory": "1Gi"}},
        )
    )
    mdb = wait_for("MongoDBCommunity mg-0", lambda: get("mongodbcommunity", ns, "mg-0"))
    spec = mdb["spec"]
    assert spec["members"] == 3 and spec["type"] == "ReplicaSet"
    assert_stored_whole(thirdparty.mongodb_community(cfg, get("pool", ns, "mg"), 0), mdb)
    (user,) = spec["users"]
    pw = wait_for("password Secret", lambda: get("secret", ns, user["passwordSecretRef"]["name"]))
    assert len(base64.b64decode(pw["data"]["password"])) >= 24
    shard = wait_for("waiting for URI", lambda: ((get("pool", ns, "mg") or {}).get("status") or {}).get("shards"))
    assert shard[0]["message"] == "waiting for the shard's connection URI"
    # No community operator watches this namespace: nothing writes the connection
    # Secret, and the shard keeps waiting (test_mongodb_community.py runs the real
    # controller, which owns that Secret; one written here it would refuse to adopt).
    assert condition(get("pool", ns, "mg"), "Ready")["status"] == "False"
    assert get("secret", ns, user["connectionStringSecretName"]) is None


def test_service_monitor_for_the_server(metal_ns: tuple[str, Operator], upstream: None) -> None:
    """With monitoring.coreos.com served, the namespace's server gets a ServiceMonitor
    that prometheus-operator's own schema accepts whole."""
    ns, op = metal_ns
    cfg = Config.from_env(op.env)
    sm = wait_for("ServiceMonitor sluice-server", lambda: get("servicemonitor", ns, "sluice-server"))
    assert_stored_whole(server_builders.service_monitor(cfg, ns, []), sm)
    svc = get("service", ns, "sluice-server")
    assert svc is not None
    # It selects the server's Service and scrapes the port that Service names.
    assert all(svc["metadata"]["labels"].get(k) == v for k, v in sm["spec"]["selector"]["matchLabels"].items())
    assert sm["spec"]["endpoints"][0]["port"] in [p["name"] for p in svc["spec"]["ports"]]
    assert {o["kind"] for o in sm["metadata"]["ownerReferences"]} == {"Pool"}
