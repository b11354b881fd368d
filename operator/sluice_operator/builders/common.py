"""Names, labels, placement and security settings shared by every builder."""

from __future__ import annotations

import copy
import math
from typing import Any
from urllib.parse import quote

from kubernetes.utils import parse_quantity

from .. import API_VERSION
from ..config import Config
from .shard_settings import REDIS_SHARD_SETTINGS, maxmemory_bytes

MANAGED_BY = "sluice-operator"
LABEL_POOL = "sluice.dev/pool"
LABEL_SHARD = "sluice.dev/shard"
LABEL_COMPONENT = "app.kubernetes.io/component"

SERVER_NAME = "sluice-server"
CATALOG_NAME = "sluice-catalog"
ADMIN_SECRET = "sluice-server-admin"
CATALOG_SECRET = "sluice-catalog-auth"
# Key of a generated password Secret, and the variable a Redis container reads it from.
PASSWORD_KEY = "password"
REDIS_PASSWORD_ENV = "REDIS_PASSWORD"


def shard_name(pool: str, index: int) -> str:
    """shard_name names shard `index` of `pool`: its workload, Service and server-side pool."""
    return f"{pool}-{index}"


def labels(cfg: Config, component: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """labels are the common labels on everything the operator creates."""
    out = dict(cfg.common_labels)
    out.update(
        {
            "app.kubernetes.io/name": "sluice",
            "app.kubernetes.io/managed-by": MANAGED_BY,
            LABEL_COMPONENT: component,
        }
    )
    out.update(extra or {})
    return out


def shard_labels(cfg: Config, pool: str, index: int) -> dict[str, str]:
    """shard_labels select exactly the pods of one shard."""
    return labels(cfg, "backend", {LABEL_POOL: pool, LABEL_SHARD: str(index)})


def selector(lbls: dict[str, str]) -> dict[str, str]:
    """selector keeps only the labels that identify pods (never commonLabels, which may change)."""
    keep = ("app.kubernetes.io/name", LABEL_COMPONENT, LABEL_POOL, LABEL_SHARD)
    return {k: v for k, v in lbls.items() if k in keep}


def owner_ref(owner: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    """owner_ref points at a sluice.dev object (Pool, Queue, Benchmark) by uid."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner.get("apiVersion", API_VERSION),
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def affinity(cfg: Config, placement: dict[str, Any], pod_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """affinity turns a placement (nodeClass + policy) into node affinity, plus soft
    anti-affinity between pods with the same labels so replicas land on different nodes."""
    out: dict[str, Any] = {}
    node_class = placement.get("nodeClass", "metal")
    if node_class != "any":
        term = {"matchExpressions": [{"key": cfg.metal_label_key, "operator": "In", "values": [node_class]}]}
        if placement.get("policy", "preferred") == "required":
            out["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        else:
            out["nodeAffinity"] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": term}]
            }
    if pod_labels:
        out["podAntiAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 50,
                    "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname",
                        "labelSelector": {"matchLabels": selector(pod_labels)},
                    },
                }
            ]
        }
    return out


def placement_pod_fields(
    cfg: Config, placement: dict[str, Any], pod_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    """placement_pod_fields are the pod-spec fields (affinity, nodeSelector, tolerations,
    topologySpreadConstraints) a placement asks for."""
    out: dict[str, Any] = {}
    aff = affinity(cfg, placement, pod_labels)
    if aff:
        out["affinity"] = aff
    if placement.get("nodeSelector"):
        out["nodeSelector"] = dict(placement["nodeSelector"])
    if placement.get("tolerations"):
        out["tolerations"] = copy.deepcopy(placement["tolerations"])
    spread = []
    for c in placement.get("topologySpreadConstraints") or []:
        c = copy.deepcopy(c)
        if "labelSelector" not in c and pod_labels:
            c["labelSelector"] = {"matchLabels": selector(pod_labels)}
        spread.append(c)
    if spread:
        out["topologySpreadConstraints"] = spread
    return out


def pod_security(cfg: Config, uid: int = 999) -> dict[str, Any]:
    """pod_security runs pods as non-root with the default seccomp profile, or as configured."""
    if cfg.pod_security_context:
        return copy.deepcopy(cfg.pod_security_context)
    return {
        "runAsNonRoot": True,
        "runAsUser": uid,
        "runAsGroup": uid,
        "fsGroup": uid,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security(cfg: Config) -> dict[str, Any]:
    """container_security: read-only root filesystem, no privilege escalation, no capabilities
    (or the configured context)."""
    if cfg.container_security_context:
        return copy.deepcopy(cfg.container_security_context)
    return {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def pull_secrets(cfg: Config) -> list[dict[str, str]]:
    """pull_secrets lists the configured imagePullSecrets."""
    return [{"name": n} for n in cfg.image_pull_secrets]


def volume_claim(name: str, storage: dict[str, Any], lbls: dict[str, str]) -> dict[str, Any]:
    """volume_claim is a StatefulSet volumeClaimTemplate for a Pool's storage settings."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": storage.get("size", "1Gi")}},
    }
    if storage.get("storageClassName"):
        spec["storageClassName"] = storage["storageClassName"]
    return {"metadata": {"name": name, "labels": selector(lbls)}, "spec": spec}


def password_secret(cfg: Config, name: str, ns: str, component: str, password: str) -> dict[str, Any]:
    """password_secret holds a generated backend password (created once, never rotated)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns, "labels": labels(cfg, component)},
        "type": "Opaque",
        "stringData": {PASSWORD_KEY: password},
    }


def secret_env(env_name: str, secret: str) -> dict[str, Any]:
    """secret_env is an environment variable read from a password Secret."""
    return {"name": env_name, "valueFrom": {"secretKeyRef": {"name": secret, "key": PASSWORD_KEY}}}


def memory_limit_bytes(resources: dict[str, Any] | None) -> int | None:
    """memory_limit_bytes is a container's memory limit (a Pool's spec.resources) in bytes,
    rounded up as the kubelet rounds it; None without one. A default limit a namespace's
    LimitRange adds to the pod is not seen here."""
    limit = ((resources or {}).get("limits") or {}).get("memory")
    if limit is None:
        return None
    value = math.ceil(parse_quantity(limit))
    return value if value > 0 else None


def redis_shard_settings(resources: dict[str, Any] | None = None) -> tuple[tuple[str, str], ...]:
    """redis_shard_settings are REDIS_SHARD_SETTINGS plus, when the shard's container has a
    memory limit, the maxmemory that keeps Redis inside it (shard_settings.maxmemory_bytes).
    Without a limit Redis runs without maxmemory: it grows until its node runs out."""
    limit = memory_limit_bytes(resources)
    if limit is None:
        return REDIS_SHARD_SETTINGS
    return (*REDIS_SHARD_SETTINGS, ("maxmemory", str(maxmemory_bytes(limit))))


def redis_shard_args(resources: dict[str, Any] | None = None) -> str:
    """redis_shard_args are redis_shard_settings as redis-server arguments."""
    return " ".join(f"--{name} {value}" for name, value in redis_shard_settings(resources))


def redis_shard_conf(resources: dict[str, Any] | None = None) -> str:
    """redis_shard_conf is redis_shard_settings as redis.conf lines."""
    return "".join(f"{name} {value}\n" for name, value in redis_shard_settings(resources))


def redis_with_password(redis_server_args: str) -> str:
    """redis_with_password is a shell line starting redis-server with requirepass and masterauth
    from $REDIS_PASSWORD. They go through a config file in /tmp (an emptyDir), not the command
    line, where any process in the pod could read them with ps."""
    return (
        "umask 077; "
        f'printf \'requirepass %s\\nmasterauth %s\\n\' "${REDIS_PASSWORD_ENV}" "${REDIS_PASSWORD_ENV}" '
        "> /tmp/redis-auth.conf; "
        f"exec redis-server /tmp/redis-auth.conf {redis_server_args}"
    )


def redis_uri(host: str, port: int, db: int, password: str | None, tls_ca: str | None = None) -> str:
    """redis_uri is a redis:// URI, with the password as its userinfo when there is one;
    with tls_ca, rediss:// trusting that CA file (sluice-server's tls_ca_file)."""
    auth = f":{quote(password, safe='')}@" if password else ""
    if tls_ca:
        return f"rediss://{auth}{host}:{port}/{db}?tls_ca_file={quote(tls_ca, safe='/')}"
    return f"redis://{auth}{host}:{port}/{db}"
