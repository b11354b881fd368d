"""Every field the builders put on a third-party object exists in that
project's own CRD schema (redis-operator v0.16.0, mongodb-kubernetes-operator
v0.9.0, read from their pinned Go modules): an unknown field would be pruned
by the apiserver without a word, and the setting silently lost. The
integration suite checks the same against a real apiserver."""

from __future__ import annotations

from typing import Any

import pytest

from sluice_operator.builders import thirdparty
from sluice_operator.config import Config

from ..integration import upstream_crds
from ..support import unavailable
from .conftest import make_pool


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict[str, Any]]:
    try:
        docs = upstream_crds.crds()
    except upstream_crds.Unavailable as exc:
        unavailable(f"upstream CRDs unavailable: {exc}")
    out = {}
    for d in docs:
        version = next(v for v in d["spec"]["versions"] if v.get("storage"))
        out[d["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return out


def unknown(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """unknown lists the paths in value that the structural schema would prune."""
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get("x-kubernetes-int-or-string"):
        return []
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out = []
        for k, v in value.items():
            if props and k in props:
                out += unknown(v, props[k], f"{path}.{k}")
            elif isinstance(extra, dict):
                out += unknown(v, extra, f"{path}.{k}")
            elif extra is not True:
                out.append(f"{path}.{k}")
        return out
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in unknown(v, schema.get("items") or {}, f"{path}[{i}]")]
    return []


@pytest.mark.parametrize("replicas", [1, 3])
def test_redis_operator_fields_are_known(schemas: dict[str, dict[str, Any]], replicas: int) -> None:
    cfg = Config(image_pull_secrets=["regcred"])
    pool = make_pool(
        replicas=replicas,
        storage={"size": "2Gi", "storageClassName": "fast"},
        resources={"requests": {"cpu": "50m"}},
        placement={"nodeClass": "metal", "policy": "preferred", "tolerations": [{"key": "a", "operator": "Exists"}]},
    )
    for obj in thirdparty.redis_objects(cfg, pool, 0):
        assert not unknown(obj["spec"], schemas[obj["kind"]]["properties"]["spec"], "spec"), obj["kind"]
    # The fields the fixes rely on are among them.
    kinds = {o["kind"]: o["spec"] for o in thirdparty.redis_objects(cfg, pool, 0)}
    data = kinds.get("Redis") or kinds["RedisReplication"]
    assert data["storage"]["keepAfterDelete"] and data["kubernetesConfig"]["ignoreAnnotations"]


def test_mongodb_community_fields_are_known(schemas: dict[str, dict[str, Any]]) -> None:
    cfg = Config(image_pull_secrets=["regcred"])
    obj = thirdparty.mongodb_community(cfg, make_pool(backend="mongodb", replicas=3), 0)
    assert not unknown(obj["spec"], schemas["MongoDBCommunity"]["properties"]["spec"], "spec")
