"""Objects for the third-party provisioners: OT-CONTAINER-KIT redis-operator
(Redis, RedisReplication + RedisSentinel) and mongodb-community-operator
(MongoDBCommunity). The operator creates and reads these but never registers
handlers on them, so Kopf writes nothing onto them."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..config import Config
from ..kube import HASH_ANNOTATION
from . import common

REDIS_GROUP = "redis.redis.opstreelabs.in"
REDIS_VERSION = "v1beta2"
MONGO_GROUP = "mongodbcommunity.mongodb.com"
MONGO_VERSION = "v1"
SENTINEL_MASTER = "mymaster"
# The port redis-operator's sentinels listen on (its image's default).
SENTINEL_PORT = 26379
SENTINEL_SIZE = 3
SENTINEL_DOWN_AFTER_MS = "5000"
SENTINEL_FAILOVER_TIMEOUT_MS = "30000"
# The community operator (v0.9.0) labels a replica set's pods app: <name>-svc
# (its governing Service's name) and runs mongod on 27017 (no spec.port set).
MONGO_APP_LABEL = "app"
MONGO_PORT = 27017
MONGO_USER = "sluice"
MONGO_DATABASE = "sluice"
# The operator's own default for its logs claim.
MONGO_LOGS_SIZE = "2Gi"
# Set on RedisReplication / RedisSentinel to make redis-operator reconcile now
# instead of at its next requeue (60 s / 600 s): it watches only its own kinds.
NUDGE_ANNOTATION = "sluice.dev/reconcile-request"
# redis-operator v0.16.0 copies a CR's annotations into its pod template, so
# a changed annotation would roll the shard's pods; these are ours and mean
# nothing to the pods.
IGNORED_ANNOTATIONS = [HASH_ANNOTATION, NUDGE_ANNOTATION]
# The digest of a shard's settings (redis_config), on its Redis / RedisReplication:
# Redis reads the ConfigMap only when it starts, and this annotation reaching the
# pod template is what rolls the pods onto changed settings (a new memory limit
# changes maxmemory).
CONFIG_ANNOTATION = "sluice.dev/redis-config"


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


def _redis_k8s_config(cfg: Config, spec: dict[str, Any], image: str) -> dict[str, Any]:
    out = _k8s_config(cfg, spec, image)
    out["ignoreAnnotations"] = list(IGNORED_ANNOTATIONS)
    return out


def _storage(spec: dict[str, Any]) -> dict[str, Any]:
    storage = spec.get("storage") or {}
    if storage.get("ephemeral"):
        # v0.16.0 dereferences spec.storage when the CR is deleted and
        # crash-loops without it; choose_provisioner refuses this combination.
        raise ValueError("redis-operator shards need persistent storage (storage.ephemeral is not supported)")
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "1Gi")}},
    }
    if storage.get("storageClassName"):
        claim["storageClassName"] = storage["storageClassName"]
    # Our retention policy: data outlives the shard and the Pool. Without this
    # the upstream finalizer deletes the claims with the CR.
    return {"keepAfterDelete": True, "volumeClaimTemplate": {"spec": claim}}


def redis_kinds(replicas: int) -> tuple[list[str], list[str]]:
    """redis_kinds: the redis-operator kinds a shard with `replicas` instances is made of,
    and those of the other shape, which must be gone before these are created (both
    shapes name their StatefulSet and Services after the shard)."""
    single, replicated = ["Redis"], ["RedisReplication", "RedisSentinel"]
    return (single, replicated) if replicas == 1 else (replicated, single)


def redis_labels(cfg: Config, pool: str, index: int) -> dict[str, str]:
    """redis_labels: redis-operator copies a CR's labels into the selectors of its
    StatefulSet and Services, which are immutable; so its CRs carry only labels that
    never change for a shard (no commonLabels)."""
    lbls = common.selector(common.shard_labels(cfg, pool, index))
    lbls["app.kubernetes.io/managed-by"] = common.MANAGED_BY
    return lbls


def _placement(cfg: Config, spec: dict[str, Any]) -> dict[str, Any]:
    placement = spec.get("placement") or {}
    fields = common.placement_pod_fields(cfg, placement)
    # redis-operator and MongoDBCommunity take affinity/nodeSelector/tolerations
    # but not topologySpreadConstraints at the top level.
    fields.pop("topologySpreadConstraints", None)
    return fields


def redis_config_name(shard: str) -> str:
    """redis_config_name is the ConfigMap holding a redis-operator shard's settings."""
    return f"{shard}-redis-config"


def redis_config(cfg: Config, pool: dict[str, Any], index: int) -> dict[str, Any]:
    """redis_config: the shard's settings (shard_settings.py) as the ConfigMap
    redis-operator mounts at /etc/redis/external.conf.d, whose redis-additional.conf
    the image's entrypoint appends to redis.conf."""
    meta = pool["metadata"]
    shard = common.shard_name(meta["name"], index)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(redis_config_name(shard), meta["namespace"], redis_labels(cfg, meta["name"], index)),
        "data": {"redis-additional.conf": common.redis_shard_conf(pool["spec"].get("resources"))},
    }


def redis_config_digest(pool: dict[str, Any]) -> str:
    """redis_config_digest identifies the settings redis_config gives the Pool's shards."""
    conf = common.redis_shard_conf(pool["spec"].get("resources"))
    return hashlib.sha256(conf.encode()).hexdigest()[:16]


def redis_objects(cfg: Config, pool: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """redis_objects: a `Redis` for a single-instance shard, or a `RedisReplication`
    plus a `RedisSentinel` watching it when the shard has replicas. Its Redis nodes run with the
    settings of redis_config (the Sentinels need none)."""
    meta, spec = pool["metadata"], pool["spec"]
    name, ns = meta["name"], meta["namespace"]
    shard = common.shard_name(name, index)
    lbls = redis_labels(cfg, name, index)
    replicas = int(spec.get("replicas", 1))
    image = spec.get("image") or cfg.redis_operator_image
    data_meta = _meta(shard, ns, lbls)
    data_meta["annotations"] = {CONFIG_ANNOTATION: redis_config_digest(pool)}
    body: dict[str, Any] = {
        "kubernetesConfig": _redis_k8s_config(cfg, spec, image),
        "storage": _storage(spec),
        "redisConfig": {"additionalRedisConfig": redis_config_name(shard)},
        **_placement(cfg, spec),
    }
    api = f"{REDIS_GROUP}/{REDIS_VERSION}"
    if replicas == 1:
        return [{"apiVersion": api, "kind": "Redis", "metadata": data_meta, "spec": body}]
    body["clusterSize"] = replicas
    sentinel = {
        "apiVersion": api,
        "kind": "RedisSentinel",
        "metadata": _meta(shard, ns, lbls),
        "spec": {
            "clusterSize": SENTINEL_SIZE,
            "kubernetesConfig": _redis_k8s_config(cfg, {}, cfg.redis_sentinel_image),
            "redisSentinelConfig": {
                "redisReplicationName": shard,
                "masterGroupName": SENTINEL_MASTER,
                "quorum": "2",
                # A queue shard is unavailable while its master is: notice
                # in 5 s (upstream default 30 s) and retry a stalled
                # failover after 30 s (default 3 min).
                "downAfterMilliseconds": SENTINEL_DOWN_AFTER_MS,
                "failoverTimeout": SENTINEL_FAILOVER_TIMEOUT_MS,
            },
            **_placement(cfg, spec),
        },
    }
    return [{"apiVersion": api, "kind": "RedisReplication", "metadata": data_meta, "spec": body}, sentinel]


def redis_uri(shard: str, namespace: str, replicas: int) -> str:
    """redis_uri: the Redis Service, or the Sentinel form when the shard replicates."""
    if replicas == 1:
        return f"redis://{shard}.{namespace}.svc:6379/0"
    return f"redis://{shard}-sentinel.{namespace}.svc:{SENTINEL_PORT}?master={SENTINEL_MASTER}"


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


def mongo_service_name(shard: str) -> str:
    """mongo_service_name is the community operator's headless Service of a shard,
    also the value of its pods' app label."""
    return f"{shard}-svc"


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
    # The community operator (v0.9.0) pulls its agent, version-hook and readiness
    # images with imagePullPolicy Always; the statefulSet override merges
    # containers by name, so every container gets the operator's policy.
    mongod: dict[str, Any] = {"name": "mongod", "imagePullPolicy": cfg.image_pull_policy}
    if spec.get("resources"):
        mongod["resources"] = spec["resources"]
    pod_spec["containers"] = [mongod, {"name": "mongodb-agent", "imagePullPolicy": cfg.image_pull_policy}]
    pod_spec["initContainers"] = [
        {"name": c, "imagePullPolicy": cfg.image_pull_policy}
        for c in ("mongod-posthook", "mongodb-agent-readinessprobe")
    ]
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = common.pull_secrets(cfg)
    storage = spec.get("storage") or {}
    if storage.get("ephemeral"):
        # It always mounts data and logs claims; choose_provisioner refuses this.
        raise ValueError("mongodb-community shards need persistent storage (storage.ephemeral is not supported)")
    claims = []
    for volume, size in (("data-volume", storage.get("size", "1Gi")), ("logs-volume", MONGO_LOGS_SIZE)):
        claim: dict[str, Any] = {"resources": {"requests": {"storage": size}}}
        if storage.get("storageClassName"):
            claim["storageClassName"] = storage["storageClassName"]
        claims.append({"metadata": {"name": volume}, "spec": claim})
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
        "statefulSet": {
            "spec": {"template": {"metadata": {"labels": lbls}, "spec": pod_spec}, "volumeClaimTemplates": claims}
        },
    }
    return {
        "apiVersion": f"{MONGO_GROUP}/{MONGO_VERSION}",
        "kind": "MongoDBCommunity",
        "metadata": _meta(shard, ns, lbls),
        "spec": body,
    }


# The ServiceAccount the community operator (v0.9.0) gives every replica-set
# pod, and what its agents do with it: read their Secrets, and annotate,
# read and restart their own pods. Upstream ships these for its own
# namespace only (config/rbac/*_database.yaml).
MONGO_DATABASE_ACCOUNT = "mongodb-database"
MONGO_DATABASE_RULES = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch", "delete"]},
]


def mongo_database_rbac(cfg: Config, namespace: str) -> list[dict[str, Any]]:
    """mongo_database_rbac: the ServiceAccount, Role and RoleBinding the community
    operator's pods need in every namespace that holds a mongodb-community Pool."""
    lbls = common.labels(cfg, "backend")
    name = MONGO_DATABASE_ACCOUNT
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, lbls)},
        {"apiVersion": rbac, "kind": "Role", "metadata": _meta(name, namespace, lbls), "rules": MONGO_DATABASE_RULES},
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": _meta(name, namespace, lbls),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def mongo_data_uri(connection_string: str) -> str:
    """mongo_data_uri turns the community operator's connection string (path /admin: the
    user's authentication database) into the shard URI: the data database is MONGO_DATABASE,
    and authentication stays with admin through authSource."""
    parts = urlsplit(connection_string)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    if not any(k == "authSource" for k, _ in query):
        query.append(("authSource", parts.path.strip("/") or "admin"))
    return urlunsplit((parts.scheme, parts.netloc, "/" + MONGO_DATABASE, urlencode(query), parts.fragment))


def _meta(name: str, ns: str, lbls: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "labels": dict(lbls)}
