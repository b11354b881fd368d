"""The namespace's queue server: sluice-server Deployment, Service,
PodDisruptionBudget, optional ServiceMonitor, the admin-token Secret, and the
catalog store (a small persistent Redis) when no external catalog is configured.

Every object is owned by all of the namespace's Pools (non-controller owner
references), so the garbage collector removes it with the last Pool.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import Config
from . import backend_tls, common, tls

CATALOG_PORT = 6379
# sluice-server's --metrics-listen port: /metrics only, so the NetworkPolicy
# can admit the monitoring namespace to it and no one else.
METRICS_PORT = 9464
# The server container's variable holding the builtin catalog's password; the
# catalog and store URIs refer to it as $(CATALOG_PASSWORD), which the kubelet
# expands, so the password is never part of the Deployment object.
CATALOG_PASSWORD_ENV = "CATALOG_PASSWORD"
# Queue.spec.access of every Queue of the namespace, as the server's
# --access-file (ServiceAccounts of other namespaces granted one queue each).
ACCESS_CONFIGMAP = "sluice-access"
ACCESS_KEY = "access.json"
ACCESS_DIR = "/etc/sluice/access"
# The keys of encrypted queues (--encryption-key-file): generated per served
# namespace unless Config.encryption_key_secret names a Secret.
ENCRYPTION_SECRET = "sluice-encryption"
ENCRYPTION_KEY = "keys"
ENCRYPTION_DIR = "/etc/sluice/encryption"


def _builtin_catalog_uri(cfg: Config, namespace: str, db: int) -> str:
    # Built as text, not by common.redis_uri: $(VAR) must stay unquoted for the kubelet.
    host = f"{common.CATALOG_NAME}.{namespace}.svc:{CATALOG_PORT}"
    if cfg.server_tls:
        ca = backend_tls.server_ca_file()
        return f"rediss://:$({CATALOG_PASSWORD_ENV})@{host}/{db}?tls_ca_file={ca}"
    return f"redis://:$({CATALOG_PASSWORD_ENV})@{host}/{db}"


def catalog_tls_names(namespace: str) -> list[str]:
    """catalog_tls_names are the DNS names the builtin catalog's certificate is issued for."""
    return backend_tls.dns_names(common.CATALOG_NAME, namespace)


def catalog_uri(cfg: Config, namespace: str) -> str:
    """catalog_uri is the management store the server keeps pools, flavors and placements in."""
    if cfg.catalog_uri:
        return cfg.catalog_uri.format(namespace=namespace)
    return _builtin_catalog_uri(cfg, namespace, 0)


def store_uri(cfg: Config, namespace: str) -> str:
    """store_uri is the server's default store, used until the first pool is registered."""
    if cfg.server_store:
        return cfg.server_store.format(namespace=namespace)
    if cfg.catalog_uri:
        return catalog_uri(cfg, namespace)
    return _builtin_catalog_uri(cfg, namespace, 1)


def _meta(name: str, ns: str, lbls: dict[str, str], owners: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "namespace": ns, "labels": dict(lbls), "ownerReferences": owners}


def admin_secret(cfg: Config, ns: str, token: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """admin_secret holds the server's admin token, shared by the server and the operator."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(common.ADMIN_SECRET, ns, common.labels(cfg, "server"), owners),
        "type": "Opaque",
        "stringData": {"token": token},
    }


def _secret_env(name: str, ref: str) -> dict[str, Any]:
    # optional: a namespace without the Secret still gets a running server (the
    # feature is then off there) rather than pods stuck in CreateContainerConfigError.
    secret, key = ref.split("/", 1)
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key, "optional": True}}}


def notification_env(cfg: Config) -> list[dict[str, Any]]:
    """notification_env passes the SMTP relay, the confirmation rule and the key of
    pre-signed URLs to the server (its --smtp-url, --require-confirmation and
    --signed-url-secret, as SLUICE_* variables)."""
    env: list[dict[str, Any]] = []
    if cfg.smtp_url:
        env.append({"name": "SLUICE_SMTP_URL", "value": cfg.smtp_url})
    elif cfg.smtp_url_secret:
        env.append(_secret_env("SLUICE_SMTP_URL", cfg.smtp_url_secret))
    if cfg.require_confirmation:
        env.append({"name": "SLUICE_REQUIRE_CONFIRMATION", "value": "true"})
    if cfg.signed_url_secret:
        env.append(_secret_env("SLUICE_SIGNED_URL_SECRET", cfg.signed_url_secret))
    return env


def encryption_ref(cfg: Config) -> tuple[str, str]:
    """encryption_ref is the (Secret, key) holding the namespace's encryption keys."""
    if cfg.encryption_key_secret:
        name, key = cfg.encryption_key_secret.split("/", 1)
        return name, key
    return ENCRYPTION_SECRET, ENCRYPTION_KEY


def encryption_secret(cfg: Config, ns: str, keys: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """encryption_secret holds generated encryption keys, lines KEYID:BASE64 (the first
    encrypts; a key rotates by prepending a new line and later dropping the old one)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(ENCRYPTION_SECRET, ns, common.labels(cfg, "server"), owners),
        "type": "Opaque",
        "stringData": {ENCRYPTION_KEY: keys},
    }


def access_configmap(
    cfg: Config, ns: str, grants: list[dict[str, Any]], owners: list[dict[str, Any]]
) -> dict[str, Any]:
    """access_configmap is the server's --access-file: which ServiceAccounts of other
    namespaces may use which queue, from the namespace's Queues' spec.access."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(ACCESS_CONFIGMAP, ns, common.labels(cfg, "server"), owners),
        "data": {ACCESS_KEY: json.dumps({"grants": grants}, indent=1, sort_keys=True)},
    }


def _secret_ref(name: str, ref: str) -> dict[str, Any]:
    # Not optional: a server whose credentials are missing must not start
    # (its pod reports the missing Secret) rather than run without them.
    secret, key = ref.split("/", 1)
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def auth_env(cfg: Config) -> list[dict[str, Any]]:
    """auth_env sets how the server authenticates clients (its --auth and that mode's
    settings) and where its encryption keys are (--encryption-key-file)."""
    env: list[dict[str, Any]] = [{"name": "SLUICE_AUTH", "value": cfg.auth_mode}]
    if cfg.auth_mode == "kubernetes":
        env += [
            {"name": "SLUICE_KUBERNETES_AUDIENCE", "value": cfg.auth_audience},
            {"name": "SLUICE_ACCESS_FILE", "value": f"{ACCESS_DIR}/{ACCESS_KEY}"},
        ]
    elif cfg.auth_mode == "keystone":
        env += [
            {"name": "SLUICE_KEYSTONE_URL", "value": cfg.keystone_url},
            {"name": "SLUICE_KEYSTONE_USERNAME", "value": cfg.keystone_username},
            {"name": "SLUICE_KEYSTONE_PROJECT", "value": cfg.keystone_project},
            {"name": "SLUICE_KEYSTONE_USER_DOMAIN", "value": cfg.keystone_user_domain},
            {"name": "SLUICE_KEYSTONE_PROJECT_DOMAIN", "value": cfg.keystone_project_domain},
            _secret_ref("SLUICE_KEYSTONE_PASSWORD", cfg.keystone_password_secret),
        ]
    elif cfg.auth_mode == "tokens":
        env.append(_secret_ref("SLUICE_AUTH_TOKENS", cfg.auth_tokens_secret))
    env.append({"name": "SLUICE_ENCRYPTION_KEY_FILE", "value": f"{ENCRYPTION_DIR}/{ENCRYPTION_KEY}"})
    return env


def _auth_volumes(cfg: Config, container: dict[str, Any], pod_spec: dict[str, Any]) -> None:
    """_auth_volumes mounts the access grants (kubernetes mode) and the encryption keys,
    and gives the pod its own ServiceAccount token, with which the server reads the
    cluster's token-signing keys (kubernetes mode)."""
    name, key = encryption_ref(cfg)
    vols = [{"name": "encryption", "secret": {"secretName": name, "items": [{"key": key, "path": ENCRYPTION_KEY}]}}]
    mounts = [{"name": "encryption", "mountPath": ENCRYPTION_DIR, "readOnly": True}]
    if cfg.auth_mode == "kubernetes":
        # Optional: the ConfigMap is written with the first Queue; until then no grants.
        vols.append({"name": "access", "configMap": {"name": ACCESS_CONFIGMAP, "optional": True}})
        mounts.append({"name": "access", "mountPath": ACCESS_DIR, "readOnly": True})
        pod_spec["automountServiceAccountToken"] = True
    else:
        pod_spec["automountServiceAccountToken"] = False
    pod_spec.setdefault("volumes", []).extend(vols)
    container.setdefault("volumeMounts", []).extend(mounts)


def migration_env(cfg: Config) -> list[dict[str, Any]]:
    """migration_env passes the pace of queue moves (--migrate-batch, --migrate-rate)
    when the operator is given one; otherwise the server's defaults apply."""
    env: list[dict[str, Any]] = []
    if cfg.migrate_batch is not None:
        env.append({"name": "SLUICE_MIGRATE_BATCH", "value": str(cfg.migrate_batch)})
    if cfg.migrate_rate is not None:
        env.append({"name": "SLUICE_MIGRATE_RATE", "value": str(cfg.migrate_rate)})
    return env


def metrics_env(cfg: Config) -> list[dict[str, Any]]:
    """metrics_env serves /metrics on a port of its own (--metrics-listen), not on the
    client port."""
    return [{"name": "SLUICE_METRICS_LISTEN", "value": f"0.0.0.0:{METRICS_PORT}"}]


def gomaxprocs_env(cfg: Config) -> list[dict[str, Any]]:
    """gomaxprocs_env sets the server's GOMAXPROCS: by default the CPUs its
    container requests, rounded up, which the kubelet resolves (divisor 1
    rounds up); nothing when the container names no CPU or when the
    operator is told to leave it to Go (0)."""
    n = cfg.server_gomaxprocs
    if n == 0:
        return []
    if n is not None:
        return [{"name": "GOMAXPROCS", "value": str(n)}]
    res = cfg.server_resources or {}
    if not any("cpu" in (res.get(kind) or {}) for kind in ("requests", "limits")):
        return []
    return [{"name": "GOMAXPROCS", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1"}}}]


def catalog_secret(cfg: Config, ns: str, password: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """catalog_secret holds the builtin catalog Redis's password, shared by it and the server."""
    secret = common.password_secret(cfg, common.CATALOG_SECRET, ns, "catalog", password)
    secret["metadata"]["ownerReferences"] = owners
    return secret


def deployment(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """deployment runs sluice-server with the catalog URI and the admin token from its Secret."""
    lbls = common.labels(cfg, "server")
    # Defined before the URIs that refer to it: the kubelet expands $(VAR) only
    # from variables listed earlier.
    env = [] if cfg.catalog_uri else [common.secret_env(CATALOG_PASSWORD_ENV, common.CATALOG_SECRET)]
    env += [
        {"name": "SLUICE_LISTEN", "value": f"0.0.0.0:{cfg.server_port}"},
        {"name": "SLUICE_STORE", "value": store_uri(cfg, ns)},
        {"name": cfg.catalog_env, "value": catalog_uri(cfg, ns)},
        {"name": "SLUICE_METRICS", "value": "true"},
        {
            "name": "SLUICE_ADMIN_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": common.ADMIN_SECRET, "key": "token"}},
        },
    ]
    env += auth_env(cfg) + notification_env(cfg) + migration_env(cfg) + gomaxprocs_env(cfg)
    env += metrics_env(cfg)
    container: dict[str, Any] = {
        "name": "sluice-server",
        "image": cfg.server_image,
        "imagePullPolicy": cfg.image_pull_policy,
        "env": env,
        "ports": [
            {"name": "http", "containerPort": cfg.server_port},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        # The server keeps retrying its catalog for up to SLUICE_START_TIMEOUT
        # (2 min) while a fresh namespace's catalog Redis starts: the startup
        # probe holds liveness off that long instead of restarting it.
        "startupProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 2, "failureThreshold": 75},
        "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 2},
        "livenessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 10, "failureThreshold": 6},
        "securityContext": common.container_security(cfg),
    }
    if cfg.server_resources:
        container["resources"] = cfg.server_resources
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "securityContext": common.pod_security(cfg, 65532),
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 35,  # drain 5 s + shutdown 25 s (server defaults), and a margin
        **common.placement_pod_fields(cfg, cfg.server_placement, lbls),
    }
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = common.pull_secrets(cfg)
    _auth_volumes(cfg, container, pod_spec)
    tls.serve_https(cfg, container, pod_spec)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(common.SERVER_NAME, ns, lbls, owners),
        "spec": {
            "replicas": cfg.server_replicas,
            "selector": {"matchLabels": common.selector(lbls)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
            "template": {"metadata": {"labels": lbls}, "spec": pod_spec},
        },
    }


def service(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """service is the stable address clients, Benchmarks and the operator use."""
    lbls = common.labels(cfg, "server")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(common.SERVER_NAME, ns, lbls, owners),
        "spec": {
            "selector": common.selector(lbls),
            "ports": [
                {"name": "http", "port": cfg.server_port, "targetPort": "http"},
                {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"},
            ],
        },
    }


def pdb(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """pdb keeps at least one server replica up through voluntary disruptions."""
    lbls = common.labels(cfg, "server")
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(common.SERVER_NAME, ns, lbls, owners),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": common.selector(lbls)}},
    }


def service_monitor(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """service_monitor lets a Prometheus operator scrape every server replica."""
    lbls = common.labels(cfg, "server")
    endpoint: dict[str, Any] = {"port": "metrics", "path": "/metrics", "interval": "30s"}
    if cfg.server_tls:
        endpoint["scheme"] = "https"
        endpoint["tlsConfig"] = {
            "ca": {"secret": {"name": tls.SECRET, "key": tls.CA_KEY}},
            "serverName": tls.dns_names(cfg, ns)[2],
        }
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(common.SERVER_NAME, ns, {**lbls, **cfg.service_monitor_labels}, owners),
        "spec": {"selector": {"matchLabels": common.selector(lbls)}, "endpoints": [endpoint]},
    }


def catalog_statefulset(cfg: Config, ns: str, owners: list[dict[str, Any]], tls_digest: str = "") -> dict[str, Any]:
    """catalog_statefulset is a single persistent Redis (AOF) holding the server's catalog;
    with Config.server_tls it serves TLS only from Secret `sluice-catalog-tls`
    (backend_tls.py), tls_digest naming that certificate."""
    lbls = common.labels(cfg, "catalog")
    listen = backend_tls.redis_args(CATALOG_PORT) if cfg.server_tls else f"--port {CATALOG_PORT}"
    container: dict[str, Any] = {
        "name": "redis",
        "image": cfg.redis_image,
        "imagePullPolicy": cfg.image_pull_policy,
        "command": [
            "sh",
            "-c",
            common.redis_with_password(
                f"{listen} --bind 0.0.0.0 --protected-mode no --dir /data --appendonly yes --appendfsync always"
            ),
        ],
        "env": [common.secret_env(common.REDIS_PASSWORD_ENV, common.CATALOG_SECRET)],
        "ports": [{"name": "redis", "containerPort": CATALOG_PORT}],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}],
        "readinessProbe": {"tcpSocket": {"port": CATALOG_PORT}, "periodSeconds": 5},
        "securityContext": common.container_security(cfg),
    }
    pod_spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "securityContext": common.pod_security(cfg),
        "enableServiceLinks": False,
        **common.placement_pod_fields(cfg, cfg.server_placement),
    }
    if cfg.image_pull_secrets:
        pod_spec["imagePullSecrets"] = common.pull_secrets(cfg)
    template: dict[str, Any] = {"metadata": {"labels": lbls}, "spec": pod_spec}
    if cfg.server_tls:
        backend_tls.mount(container, pod_spec, template, common.CATALOG_NAME, tls_digest)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(common.CATALOG_NAME, ns, lbls, owners),
        "spec": {
            "serviceName": common.CATALOG_NAME,
            "replicas": 1,
            "selector": {"matchLabels": common.selector(lbls)},
            "template": template,
            "volumeClaimTemplates": [common.volume_claim("data", {"size": cfg.catalog_storage_size}, lbls)],
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
        },
    }


def catalog_service(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """catalog_service addresses the catalog Redis."""
    lbls = common.labels(cfg, "catalog")
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(common.CATALOG_NAME, ns, lbls, owners),
        "spec": {
            "selector": common.selector(lbls),
            "ports": [{"name": "redis", "port": CATALOG_PORT, "targetPort": CATALOG_PORT}],
        },
    }
