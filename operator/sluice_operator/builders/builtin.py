"""The builtin provisioner: one StatefulSet per shard, run by the operator itself.

Redis runs with AOF persistence and a generated password (requirepass, also
used by replicas as masterauth); replicas > 1 start as replicas of pod 0.
MongoDB runs the image the user names; replicas > 1 form a replica set that
the operator initiates when it first probes the shard. With Config.server_tls
both serve TLS only, with a certificate from the namespace's CA
(backend_tls.py).
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from . import backend_tls, common

REDIS_PORT = 6379
MONGO_PORT = 27017


def headless_name(shard: str) -> str:
    """headless_name is the governing Service that gives each shard pod a DNS name."""
    return f"{shard}-headless"


def password_secret_name(shard: str) -> str:
    """password_secret_name is the generated Secret holding a builtin Redis shard's password."""
    return f"{shard}-redis-auth"


def password_secret(cfg: Config, pool: dict[str, Any], index: int, password: str) -> dict[str, Any]:
    """password_secret holds the password a builtin Redis shard requires."""
    shard = common.shard_name(pool["metadata"]["name"], index)
    return common.password_secret(cfg, password_secret_name(shard), pool["metadata"]["namespace"], "backend", password)


def shard_uri(
    backend: str, shard: str, namespace: str, replicas: int, password: str | None = None, tls_ca: str | None = None
) -> str:
    """shard_uri is the URI the server uses for a builtin shard (with the Redis password when
    given); with tls_ca, over TLS trusting that CA file (a path in the server's pod)."""
    if backend == "redis":
        return common.redis_uri(f"{shard}.{namespace}.svc", REDIS_PORT, 0, password, tls_ca)
    tls_opt = "&" + backend_tls.mongo_query(tls_ca) if tls_ca else ""
    if replicas == 1:
        return f"mongodb://{shard}.{namespace}.svc:{MONGO_PORT}/?directConnection=true{tls_opt}"
    hosts = ",".join(f"{shard}-{i}.{headless_name(shard)}.{namespace}.svc:{MONGO_PORT}" for i in range(replicas))
    return f"mongodb://{hosts}/?replicaSet={shard}{tls_opt}"


def tls_names(shard: str, namespace: str) -> list[str]:
    """tls_names are the DNS names a builtin shard's certificate is issued for."""
    return backend_tls.dns_names(shard, namespace, headless_name(shard))


def _redis_command(
    shard: str, namespace: str, tls_on: bool = False, resources: dict[str, Any] | None = None
) -> list[str]:
    listen = backend_tls.redis_args(REDIS_PORT) if tls_on else f"--port {REDIS_PORT}"
    base = f"{listen} --bind 0.0.0.0 --protected-mode no --dir /data --appendonly yes --appendfsync everysec --save ''"
    # The container's memory limit bounds maxmemory (common.redis_shard_settings).
    base += " " + common.redis_shard_args(resources)
    primary = f"{shard}-0.{headless_name(shard)}.{namespace}.svc"
    # Pod 0 is the primary; the others follow it (the server only talks to pod 0
    # through the shard Service, replicas keep a warm copy).
    script = (
        f'if [ "${{HOSTNAME##*-}}" = "0" ]; then {common.redis_with_password(base)}; '
        f"else {common.redis_with_password(base + f' --replicaof {primary} {REDIS_PORT}')}; fi"
    )
    return ["sh", "-c", script]


def _mongo_command(shard: str, replicas: int) -> list[str]:
    cmd = ["mongod", "--bind_ip_all", "--port", str(MONGO_PORT), "--dbpath", "/data/db"]
    if replicas > 1:
        cmd += ["--replSet", shard]
    return cmd


def statefulset(cfg: Config, pool: dict[str, Any], index: int, tls_digest: str = "") -> dict[str, Any]:
    """statefulset builds the StatefulSet of shard `index` of a builtin Pool. With
    Config.server_tls the shard serves TLS only, from Secret `<shard>-tls`
    (backend_tls.py); tls_digest identifies that certificate (a new one restarts
    the pods)."""
    meta, spec = pool["metadata"], pool["spec"]
    name, ns = meta["name"], meta["namespace"]
    shard = common.shard_name(name, index)
    backend = spec["backend"]
    replicas = int(spec.get("replicas", 1))
    lbls = common.shard_labels(cfg, name, index)
    storage = spec.get("storage") or {}
    env: list[dict[str, Any]] = []
    if backend == "redis":
        image, port, mount = spec.get("image") or cfg.redis_image, REDIS_PORT, "/data"
        command = _redis_command(shard, ns, cfg.server_tls, spec.get("resources"))
        env = [common.secret_env(common.REDIS_PASSWORD_ENV, password_secret_name(shard))]
    else:
        image, port, mount = spec["image"], MONGO_PORT, "/data/db"
        command = _mongo_command(shard, replicas)
        if cfg.server_tls:
            command = backend_tls.mongo_command(command)
    container: dict[str, Any] = {
        "name": backend,
        "image": image,
        "imagePullPolicy": cfg.image_pull_policy,
        "command": command,
        "ports": [{"name": backend, "containerPort": port}],
        "volumeMounts": [{"name": "data", "mountPath": mount}, {"name": "tmp", "mountPath": "/tmp"}],
        "readinessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 5},
        "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": common.container_security(cfg),
    }
    if env:
        container["env"] = env
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    claims: list[dict[str, Any]] = []
    if storage.get("ephemeral"):
        volumes.append({"name": "data", "emptyDir": {}})
    else:
        claims.append(common.volume_claim("data", storage, lbls))
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": volumes,
        "securityContext": common.pod_security(cfg),
        "enableServiceLinks": False,
        **common.placement_pod_fields(cfg, spec.get("placement") or {}, lbls),
    }
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = common.pull_secrets(cfg)
    template: dict[str, Any] = {"metadata": {"labels": lbls}, "spec": pod_spec}
    if cfg.server_tls:
        backend_tls.mount(container, pod_spec, template, shard, tls_digest)
    sts: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": shard, "namespace": ns, "labels": lbls},
        "spec": {
            "serviceName": headless_name(shard),
            "replicas": replicas,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": common.selector(lbls)},
            "template": template,
        },
    }
    if claims:
        sts["spec"]["volumeClaimTemplates"] = claims
        # Data outlives the Pool unless the user deletes the claims: losing
        # messages must be a deliberate act.
        sts["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenDeleted": "Retain", "whenScaled": "Retain"}
    return sts


def services(cfg: Config, pool: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """services are the shard's headless governing Service and its client Service,
    which points at pod 0 only (the primary)."""
    meta, spec = pool["metadata"], pool["spec"]
    name, ns = meta["name"], meta["namespace"]
    shard = common.shard_name(name, index)
    lbls = common.shard_labels(cfg, name, index)
    port = REDIS_PORT if spec["backend"] == "redis" else MONGO_PORT
    ports = [{"name": spec["backend"], "port": port, "targetPort": port}]
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": headless_name(shard), "namespace": ns, "labels": lbls},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": common.selector(lbls),
            "ports": ports,
        },
    }
    primary_selector = dict(common.selector(lbls))
    primary_selector["statefulset.kubernetes.io/pod-name"] = f"{shard}-0"
    client = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": shard, "namespace": ns, "labels": lbls},
        "spec": {"selector": primary_selector, "ports": ports},
    }
    return [headless, client]
