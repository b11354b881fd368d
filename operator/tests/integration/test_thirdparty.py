"""Third-party provisioners without their controllers: the test installs
stand-in CRDs for the same groups and kinds (open schemas), asserts the exact
objects the operator creates, then plays the controller's part (the
connection-string Secret) to drive the rest of the flow."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from .conftest import Operator, apply, condition, get, kc, wait_for

STANDINS = [
    ("redis.redis.opstreelabs.in", "v1beta2", "Redis", "redis"),
    ("redis.redis.opstreelabs.in", "v1beta2", "RedisReplication", "redisreplications"),
    ("redis.redis.opstreelabs.in", "v1beta2", "RedisSentinel", "redissentinels"),
    ("mongodbcommunity.mongodb.com", "v1", "MongoDBCommunity", "mongodbcommunity"),
]


def standin_crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}", "labels": {"sluice.dev/test": "standin"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def standins(metal_ns: tuple[str, Operator]) -> Iterator[None]:
    docs = [standin_crd(*s) for s in STANDINS]
    preexisting = [
        d["metadata"]["name"] for d in docs if kc("get", "crd", d["metadata"]["name"], check=False).returncode == 0
    ]
    if preexisting:
        pytest.skip(f"real third-party CRDs are installed here: {preexisting}")
    kc("apply", "-f", "-", stdin=yaml.safe_dump_all(docs))
    for d in docs:
        kc("wait", "--for=condition=Established", f"crd/{d['metadata']['name']}", "--timeout=60s")
    yield
    kc("delete", "crd", "-l", "sluice.dev/test=standin", "--wait=false", check=False)


def pool(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


def test_redis_operator_objects(metal_ns: tuple[str, Operator], standins: None) -> None:
    ns, _ = metal_ns
    apply(
        pool(
            ns,
            "ot",
            backend="redis",
            provisioner="redis-operator",
            shards=2,
            replicas=3,
            storage={"size": "2Gi"},
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
    # Kopf never handles third-party objects: no Kopf state, no finalizers on them.
    for obj in (repl, sentinel):
        assert not obj["metadata"].get("finalizers")
        assert not [a for a in obj["metadata"].get("annotations", {}) if "kopf" in a or "last-handled" in a]
        assert obj["metadata"]["ownerReferences"][0]["kind"] == "Pool"
    st = wait_for("status", lambda: ((get("pool", ns, "ot") or {}).get("status") or {}).get("provisioner"))
    assert st == "redis-operator"
    obj = get("pool", ns, "ot")
    assert obj["status"]["shards"][0]["endpoint"] == f"ot-0-sentinel.{ns}.svc:26379"


def test_mongodb_community_flow(metal_ns: tuple[str, Operator], standins: None) -> None:
    ns, _ = metal_ns
    apply(pool(ns, "mg", backend="mongodb", provisioner="mongodb-community", shards=1, replicas=3))
    mdb = wait_for("MongoDBCommunity mg-0", lambda: get("mongodbcommunity", ns, "mg-0"))
    spec = mdb["spec"]
    assert spec["members"] == 3 and spec["type"] == "ReplicaSet"
    (user,) = spec["users"]
    pw = wait_for("password Secret", lambda: get("secret", ns, user["passwordSecretRef"]["name"]))
    assert len(base64.b64decode(pw["data"]["password"])) >= 24
    shard = wait_for("waiting for URI", lambda: ((get("pool", ns, "mg") or {}).get("status") or {}).get("shards"))
    assert shard[0]["message"] == "waiting for the shard's connection URI"
    # Play mongodb-community: it writes the connection string Secret once the replica set is up.
    uri = f"mongodb://sluice:pw@mg-0-0.mg-0-svc.{ns}.svc:27017/admin?replicaSet=mg-0"
    apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": user["connectionStringSecretName"], "namespace": ns},
            "stringData": {"connectionString.standard": uri},
        }
    )
    got = wait_for(
        "endpoint from the Secret",
        lambda: ((((get("pool", ns, "mg") or {}).get("status") or {}).get("shards") or [{}])[0]).get("endpoint"),
    )
    assert got == f"mg-0-0.mg-0-svc.{ns}.svc:27017"  # credentials never reach status
    assert condition(get("pool", ns, "mg"), "Ready")["status"] == "False"
