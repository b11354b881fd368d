"""Objects for the third-party provisioners: OT-CONTAINER-KIT redis-operator
(Redis, RedisReplication + RedisSentinel) and mongodb-community-operator
(MongoDBCommunity). The operator creates and reads these but never registers
handlers on them, so Kopf writes nothing onto them."""

from __future__ import annotations

from typing import Any

from ..config import Config
from . import common

REDIS_GROUP = "redis.redis.opstreelabs.in"
REDIS_VERSION = "v1beta2"
MONGO_GROUP = "mongodbcommunity.mongodb.com"
MONGO_VERSION = "v1"
SENTINEL_MASTER = "mymaster"
SENTINEL_SIZE = 3
MONGO_USER = "sluice"


def _k8s_config(cfg: Config, spec: dict[str, Any], image: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "image": image,
        "imagePullPolicy": cfg.image_pull_policy,
    }
    if spec.get("resources"):
        out["resources"] = spec["resources"]
    if cfg.image_pull_secrets:
        out["imagePullSecrets"] = common.pull_secrets(cfg)
    return out


def _storage(spec: dict[str, Any]) -> dict[str, Any] | None:
    storage = spec.get("storage") or {}
    if storage.get("ephemeral"):
        return None
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "1Gi")}},
    }
    if storage.get("storageClassName"):
        claim["storageClassName"] = storage["storageClassName"]
    return {"volumeClaimTemplate": {"spec": claim}}


def _placement(cfg: Config, spec: dict[str, Any]) -> dict[str, Any]:
    placement = spec.get("placement") or {}
    fields = common.placement_pod_fields(cfg, placement)
    # redis-operator and MongoDBCommunity take affinity/nodeSelector/tolerations
    # but not topologySpreadConstraints at the top level.
    fields.pop("topologySpreadConstraints", None)
    return fields


def redis_objects(cfg: Config, pool: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """redis_objects: a `Redis` for a single-instance shard, or a `RedisReplication`
    plus a `RedisSentinel` watching it when the shard has replicas."""
    meta, spec = pool["metadata"], pool["spec"]
    name, ns = meta["name"], meta["namespace"]
    shard = common.shard_name(name, index)
    lbls = common.shard_labels(cfg, name, index)
    replicas = int(spec.get("replicas", 1))
    image = spec.get("image") or cfg.redis_operator_image
    body: dict[str, Any] = {"kubernetesConfig": _k8s_config(cfg, spec, image), **_placement(cfg, spec)}
    storage = _storage(spec)
    if storage:
        body["storage"] = storage
    api = f"{REDIS_GROUP}/{REDIS_VERSION}"
    if replicas == 1:
        return [{"apiVersion": api, "kind": "Redis", "metadata": _meta(shard, ns, lbls), "spec": body}]
    body["clusterSize"] = replicas
    sentinel = {
        "apiVersion": api,
        "kind": "RedisSentinel",
        "metadata": _meta(shard, ns, lbls),
        "spec": {
            "clusterSize": SENTINEL_SIZE,
            "kubernetesConfig": _k8s_config(cfg, {}, cfg.redis_sentinel_image),
            "redisSentinelConfig": {
                "redisReplicationName": shard,
                "masterGroupName": SENTINEL_MASTER,
                "quorum": "2",
            },
            **_placement(cfg, spec),
        },
    }
    return [{"apiVersion": api, "kind": "RedisReplication", "metadata": _meta(shard, ns, lbls), "spec": body}, sentinel]


def redis_uri(shard: str, namespace: str, replicas: int) -> str:
    """redis_uri: the Redis Service, or the Sentinel form when the shard replicates."""
    if replicas == 1:
        return f"redis://{shard}.{namespace}.svc:6379/0"
    return f"redis://{shard}-sentinel.{namespace}.svc:26379?master={SENTINEL_MASTER}"


def mongo_password_secret(cfg: Config, pool: dict[str, Any], index: int, password: str) -> dict[str, Any]:
    """mongo_password_secret holds the password of the shard's database user."""
    meta = pool["metadata"]
    shard = common.shard_name(meta["name"], index)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(f"{shard}-password", meta["namespace"], common.shard_labels(cfg, meta["name"], index)),
        "type": "Opaque",
        "stringData": {"password": password},
    }


def mongo_connection_secret_name(shard: str) -> str:
    """mongo_connection_secret_name is where mongodb-community writes the connection string."""
    return f"{shard}-connection"


def mongodb_community(cfg: Config, pool: dict[str, Any], index: int) -> dict[str, Any]:
    """mongodb_community: one replica set per shard with one SCRAM user for the server."""
    meta, spec = pool["metadata"], pool["spec"]
    name, ns = meta["name"], meta["namespace"]
    shard = common.shard_name(name, index)
    lbls = common.shard_labels(cfg, name, index)
    pod_spec: dict[str, Any] = dict(_placement(cfg, spec))
    if spec.get("resources"):
        pod_spec["containers"] = [{"name": "mongod", "resources": spec["resources"]}]
    body: dict[str, Any] = {
        "members": int(spec.get("replicas", 1)),
        "type": "ReplicaSet",
        "version": spec.get("version", "7.0.14"),
        "security": {"authentication": {"modes": ["SCRAM"]}},
        "users": [
            {
                "name": MONGO_USER,
                "db": "admin",
                "passwordSecretRef": {"name": f"{shard}-password", "key": "password"},
                "roles": [
                    {"name": "readWriteAnyDatabase", "db": "admin"},
                    {"name": "dbAdminAnyDatabase", "db": "admin"},
                    {"name": "clusterMonitor", "db": "admin"},
                ],
                "scramCredentialsSecretName": f"{shard}-scram",
                "connectionStringSecretName": mongo_connection_secret_name(shard),
            }
        ],
        "additionalMongodConfig": {"storage.wiredTiger.engineConfig.journalCompressor": "zlib"},
        "statefulSet": {"spec": {"template": {"metadata": {"labels": lbls}, "spec": pod_spec}}},
    }
    storage = spec.get("storage") or {}
    if not storage.get("ephemeral"):
        claim: dict[str, Any] = {"resources": {"requests": {"storage": storage.get("size", "1Gi")}}}
        if storage.get("storageClassName"):
            claim["storageClassName"] = storage["storageClassName"]
        body["statefulSet"]["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data-volume"}, "spec": claim}]
    return {
        "apiVersion": f"{MONGO_GROUP}/{MONGO_VERSION}",
        "kind": "MongoDBCommunity",
        "metadata": _meta(shard, ns, lbls),
        "spec": body,
    }


def _meta(name: str, ns: str, lbls: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "labels": dict(lbls)}
