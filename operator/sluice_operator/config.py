"""Operator configuration, read once from SLUICE_OPERATOR_* environment variables.

The Helm chart sets these from its values; every field has a default that
works on the repository's local cluster.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROVISIONERS = ("auto", "redis-operator", "mongodb-community", "builtin", "external")
# sluice-server --auth of every server the operator runs (docs/security.md).
AUTH_MODES = ("kubernetes", "keystone", "tokens", "none")


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the variable."""


def env_int(env: Mapping[str, str], name: str, default: int, lo: int, hi: int) -> int:
    """env_int reads integer variable `name` from env, `default` when unset or empty,
    raising ConfigError naming the variable when it is not an integer in lo..hi."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name}={raw!r} is not an integer") from exc
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is outside {lo}..{hi}")
    return value


def _opt_int(env: Mapping[str, str], name: str, lo: int, hi: int) -> int | None:
    """_opt_int is env_int for a setting whose absence means "the server's default"."""
    if env.get(name, "").strip() == "":
        return None
    return env_int(env, name, 0, lo, hi)


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw == "":
        return default
    if raw not in ("true", "false", "1", "0", "yes", "no"):
        raise ConfigError(f"{name}={raw!r} is not a boolean")
    return raw in ("true", "1", "yes")


def _selector(env: dict[str, str], name: str, default: dict[str, Any]) -> dict[str, Any]:
    """_selector reads a label selector (matchLabels, matchExpressions) given as JSON."""
    sel = _json_obj(env, name, default)
    if not isinstance(sel, dict) or not sel or set(sel) - {"matchLabels", "matchExpressions"}:
        raise ConfigError(f"{name} must be a non-empty label selector: matchLabels and/or matchExpressions")
    if not isinstance(sel.get("matchLabels", {}), dict) or not isinstance(sel.get("matchExpressions", []), list):
        raise ConfigError(f"{name}: matchLabels must be an object, matchExpressions a list")
    return sel


def _json_obj(env: dict[str, str], name: str, default: Any) -> Any:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{name} is not valid JSON: {exc}") from exc


def _auth(e: dict[str, str], p: str, refs: dict[str, str]) -> dict[str, str]:
    """_auth reads and checks the authentication settings: each mode's required ones present."""
    mode = e.get(p + "AUTH_MODE", "kubernetes").strip().lower() or "kubernetes"
    if mode not in AUTH_MODES:
        raise ConfigError(f"{p}AUTH_MODE={mode!r} is not one of {', '.join(AUTH_MODES)}")
    out = {"auth_mode": mode, "auth_audience": e.get(p + "AUTH_AUDIENCE", "sluice").strip()}
    for field_name, var in (
        ("keystone_url", "KEYSTONE_URL"),
        ("keystone_username", "KEYSTONE_USERNAME"),
        ("keystone_project", "KEYSTONE_PROJECT"),
        ("keystone_user_domain", "KEYSTONE_USER_DOMAIN"),
        ("keystone_project_domain", "KEYSTONE_PROJECT_DOMAIN"),
    ):
        value = e.get(p + var, "").strip()
        if value or not field_name.endswith("_domain"):
            out[field_name] = value
    out["keystone_password_secret"] = refs["KEYSTONE_PASSWORD_SECRET"]
    out["auth_tokens_secret"] = refs["AUTH_TOKENS_SECRET"]
    if mode == "kubernetes" and not out["auth_audience"]:
        raise ConfigError(f"{p}AUTH_AUDIENCE: required with {p}AUTH_MODE=kubernetes")
    if mode == "keystone":
        missing = [
            p + name
            for name, value in (
                ("KEYSTONE_URL", out["keystone_url"]),
                ("KEYSTONE_USERNAME", out["keystone_username"]),
                ("KEYSTONE_PROJECT", out["keystone_project"]),
                ("KEYSTONE_PASSWORD_SECRET", out["keystone_password_secret"]),
            )
            if not value
        ]
        if missing:
            raise ConfigError(f"{', '.join(missing)}: required with {p}AUTH_MODE=keystone")
    if mode == "tokens" and not out["auth_tokens_secret"]:
        raise ConfigError(f"{p}AUTH_TOKENS_SECRET: required with {p}AUTH_MODE=tokens")
    return out


@dataclass(frozen=True)
class Config:
    """Config holds everything the operator needs besides the cluster's own state."""

    metal_label_key: str = "sluice.dev/node-class"
    server_image: str = "sluice.dev/sluice-server:dev"
    redis_image: str = "sluice.dev/redis:dev"
    image_pull_policy: str = "IfNotPresent"
    # Images for redis-operator shards: its entrypoints expect its own images.
    redis_operator_image: str = "quay.io/opstree/redis:v7.0.15"
    redis_sentinel_image: str = "quay.io/opstree/redis-sentinel:v7.0.15"
    server_replicas: int = 2
    server_port: int = 8888
    server_resources: dict[str, Any] = field(default_factory=dict)
    # Placement of the sluice-server pods, in the same shape as Pool.spec.placement.
    server_placement: dict[str, Any] = field(default_factory=lambda: {"nodeClass": "metal", "policy": "preferred"})
    default_provisioner: str = "auto"
    # Empty: the operator runs a small persistent Redis per namespace as the catalog.
    catalog_uri: str = ""
    catalog_storage_size: str = "1Gi"
    # sluice-server's default store (queues created before any pool exists).
    # Empty: database 1 of the builtin catalog Redis, or the external catalog URI.
    server_store: str = ""
    # Environment variable through which sluice-server receives the catalog URI.
    catalog_env: str = "SLUICE_CATALOG"
    # Template for the server URL the operator calls; {namespace} and {service}
    # are filled in. Overridden when the operator runs outside the cluster.
    server_url_template: str = "http://{service}.{namespace}.svc:{port}"
    probe_timeout: float = 2.0
    pool_interval: float = 10.0
    queue_interval: float = 15.0
    metrics_port: int = 9090
    liveness_port: int = 8080
    watch_namespaces: tuple[str, ...] = ()
    image_pull_secrets: tuple[str, ...] = ()
    common_labels: dict[str, str] = field(default_factory=dict)
    # The operator's own namespace and log level (set by the chart).
    namespace: str = ""
    log_level: str = "INFO"
    # sluice-bench image for Benchmark Jobs.
    bench_image: str = "sluice.dev/sluice-bench:dev"
    # Security contexts for every pod / container the operator creates; empty:
    # the builders' defaults (non-root, read-only root, no privilege escalation).
    pod_security_context: dict[str, Any] = field(default_factory=dict)
    container_security_context: dict[str, Any] = field(default_factory=dict)
    # Create a ServiceMonitor per server when the monitoring.coreos.com CRDs exist.
    service_monitor: bool = True
    service_monitor_labels: dict[str, str] = field(default_factory=dict)
    # Retries of a Queue deletion against an unreachable server before the
    # finalizer is released anyway (with an event saying so).
    delete_retries: int = 3
    # Notifications (sluice-server --smtp-url, --require-confirmation): the SMTP
    # relay for mailto subscribers, as a URL or as "secret-name/key" of a Secret
    # in each namespace with a Pool (a URL that carries a password).
    smtp_url: str = ""
    smtp_url_secret: str = ""
    require_confirmation: bool = False
    # Queue moves (sluice-server --migrate-batch, --migrate-rate): the most
    # messages one step carries and the messages per second one move carries
    # (0: no cap), which pace every Pool scale-down and rebalance; None: the
    # server's defaults (docs/server.md).
    migrate_batch: int | None = None
    migrate_rate: int | None = None
    # GOMAXPROCS of each sluice-server: None: the CPUs its container requests,
    # rounded up (the kubelet resolves it; a server given more Ps than the
    # CPU it gets spends the difference waking and stealing between them,
    # docs/benchmarks.md); 0: Go's own choice (the CPU limit, else every core
    # of the node); N: N.
    server_gomaxprocs: int | None = None
    # Key of pre-signed URLs (sluice-server --signed-url-secret), as
    # "secret-name/key" of a Secret in each namespace with a Pool; empty: /share is off.
    signed_url_secret: str = ""
    # NetworkPolicies per served namespace: builtin shards and the catalog
    # accept only the namespace's sluice-server pods, each other (replication)
    # and the operator (its namespace, plus these CIDRs when it runs outside
    # the cluster); the server accepts clients on its port only.
    network_policies: bool = True
    network_policy_cidrs: tuple[str, ...] = ()
    # The namespaces (a label selector) whose pods may reach the server's
    # metrics port; its client port stays open to every pod.
    metrics_namespace_selector: dict[str, Any] = field(
        default_factory=lambda: {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    )
    # HTTPS for every served namespace's sluice-server (builders/tls.py): a
    # cert-manager Certificate when that CRD is served (from tls_issuer,
    # "Issuer/name" or "ClusterIssuer/name", else a per-namespace CA made by
    # cert-manager), otherwise a per-namespace CA the operator generates; the
    # server certificate lives tls_cert_days and is renewed tls_renew_days
    # before it expires. The builtin shards and catalog then serve TLS only,
    # with certificates from the same issuer (builders/backend_tls.py).
    server_tls: bool = False
    tls_issuer: str = ""
    tls_cert_days: int = 90
    tls_renew_days: int = 30
    # How every server authenticates its clients (sluice-server --auth):
    # kubernetes: a pod's projected ServiceAccount token of audience
    # auth_audience, its namespace its project; keystone: Keystone tokens,
    # validated with the service user keystone_username (password in Secret
    # keystone_password_secret, "name/key", in each served namespace); tokens:
    # static tokens from Secret auth_tokens_secret ("name/key", content
    # "token=project,..."); none: no authentication, only on request.
    auth_mode: str = "kubernetes"
    auth_audience: str = "sluice"
    keystone_url: str = ""
    keystone_username: str = ""
    keystone_project: str = ""
    keystone_user_domain: str = "Default"
    keystone_project_domain: str = "Default"
    keystone_password_secret: str = ""
    auth_tokens_secret: str = ""
    # Keys of encrypted queues (sluice-server --encryption-key-file), as
    # "name/key" of a Secret in each served namespace; empty: the operator
    # generates Secret sluice-encryption in each served namespace.
    encryption_key_secret: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Config:
        """from_env builds a Config from SLUICE_OPERATOR_* variables, raising ConfigError on bad values."""
        e = dict(os.environ if env is None else env)
        p = "SLUICE_OPERATOR_"
        d = cls()
        provisioner = e.get(p + "DEFAULT_PROVISIONER", d.default_provisioner)
        if provisioner not in PROVISIONERS:
            raise ConfigError(f"{p}DEFAULT_PROVISIONER={provisioner!r} is not one of {', '.join(PROVISIONERS)}")
        policy = e.get(p + "IMAGE_PULL_POLICY", d.image_pull_policy)
        if policy not in ("Always", "IfNotPresent", "Never"):
            raise ConfigError(f"{p}IMAGE_PULL_POLICY={policy!r} is not Always, IfNotPresent or Never")
        placement = _json_obj(e, p + "SERVER_PLACEMENT", d.server_placement)
        if not isinstance(placement, dict) or placement.get("nodeClass", "any") not in ("metal", "virtual", "any"):
            raise ConfigError(f"{p}SERVER_PLACEMENT needs nodeClass metal, virtual or any")
        resources = _json_obj(e, p + "SERVER_RESOURCES", {})
        labels = _json_obj(e, p + "COMMON_LABELS", {})
        if not isinstance(resources, dict) or not isinstance(labels, dict):
            raise ConfigError(f"{p}SERVER_RESOURCES and {p}COMMON_LABELS must be JSON objects")
        objs = {}
        for key in ("POD_SECURITY_CONTEXT", "CONTAINER_SECURITY_CONTEXT", "SERVICE_MONITOR_LABELS"):
            objs[key] = _json_obj(e, p + key, {})
            if not isinstance(objs[key], dict):
                raise ConfigError(f"{p}{key} must be a JSON object")
        monitor = _bool(e, p + "SERVICE_MONITOR", True)
        confirm = _bool(e, p + "REQUIRE_CONFIRMATION", d.require_confirmation)
        refs = {}
        for key in (
            "SMTP_URL_SECRET",
            "SIGNED_URL_SECRET",
            "KEYSTONE_PASSWORD_SECRET",
            "AUTH_TOKENS_SECRET",
            "ENCRYPTION_KEY_SECRET",
        ):
            refs[key] = e.get(p + key, "").strip()
            if refs[key] and len([x for x in refs[key].split("/") if x]) != 2:
                raise ConfigError(f"{p}{key}={refs[key]!r} is not secret-name/key")
        netpol = _bool(e, p + "NETWORK_POLICIES", d.network_policies)
        issuer = e.get(p + "TLS_ISSUER", d.tls_issuer).strip()
        if issuer and (len(issuer.split("/")) != 2 or issuer.split("/")[0] not in ("Issuer", "ClusterIssuer")):
            raise ConfigError(f"{p}TLS_ISSUER={issuer!r} is not Issuer/name or ClusterIssuer/name")
        cert_days = env_int(e, p + "TLS_CERT_DAYS", d.tls_cert_days, 2, 3650)
        renew_days = env_int(e, p + "TLS_RENEW_DAYS", d.tls_renew_days, 1, 3649)
        if renew_days >= cert_days:
            raise ConfigError(f"{p}TLS_RENEW_DAYS={renew_days} must be below {p}TLS_CERT_DAYS={cert_days}")
        auth = _auth(e, p, refs)
        level = e.get(p + "LOG_LEVEL", d.log_level).upper()
        if level not in ("DEBUG", "INFO", "WARNING", "WARN", "ERROR"):
            raise ConfigError(f"{p}LOG_LEVEL={level!r} is not debug, info, warning or error")
        split = lambda s: tuple(x.strip() for x in s.split(",") if x.strip())  # noqa: E731
        return cls(
            metal_label_key=e.get(p + "METAL_LABEL_KEY", d.metal_label_key),
            server_image=e.get(p + "SERVER_IMAGE", d.server_image),
            redis_image=e.get(p + "REDIS_IMAGE", d.redis_image),
            image_pull_policy=policy,
            redis_operator_image=e.get(p + "REDIS_OPERATOR_IMAGE", d.redis_operator_image),
            redis_sentinel_image=e.get(p + "REDIS_SENTINEL_IMAGE", d.redis_sentinel_image),
            server_replicas=env_int(e, p + "SERVER_REPLICAS", d.server_replicas, 1, 100),
            server_port=env_int(e, p + "SERVER_PORT", d.server_port, 1, 65535),
            server_resources=resources,
            server_placement=placement,
            default_provisioner=provisioner,
            catalog_uri=e.get(p + "CATALOG_URI", d.catalog_uri),
            catalog_storage_size=e.get(p + "CATALOG_STORAGE_SIZE", d.catalog_storage_size),
            server_store=e.get(p + "SERVER_STORE", d.server_store),
            catalog_env=e.get(p + "CATALOG_ENV", d.catalog_env),
            server_url_template=e.get(p + "SERVER_URL_TEMPLATE", d.server_url_template),
            probe_timeout=float(env_int(e, p + "PROBE_TIMEOUT_MS", int(d.probe_timeout * 1000), 50, 60000)) / 1000,
            pool_interval=float(env_int(e, p + "POOL_INTERVAL", int(d.pool_interval), 1, 3600)),
            queue_interval=float(env_int(e, p + "QUEUE_INTERVAL", int(d.queue_interval), 1, 3600)),
            metrics_port=env_int(e, p + "METRICS_PORT", d.metrics_port, 0, 65535),
            liveness_port=env_int(e, p + "LIVENESS_PORT", d.liveness_port, 0, 65535),
            watch_namespaces=split(e.get(p + "WATCH_NAMESPACES", "")),
            image_pull_secrets=split(e.get(p + "IMAGE_PULL_SECRETS", "")),
            common_labels={str(k): str(v) for k, v in labels.items()},
            namespace=e.get(p + "NAMESPACE", d.namespace),
            log_level="WARNING" if level == "WARN" else level,
            bench_image=e.get(p + "BENCH_IMAGE", d.bench_image),
            pod_security_context=objs["POD_SECURITY_CONTEXT"],
            container_security_context=objs["CONTAINER_SECURITY_CONTEXT"],
            service_monitor=monitor,
            service_monitor_labels={str(k): str(v) for k, v in objs["SERVICE_MONITOR_LABELS"].items()},
            delete_retries=env_int(e, p + "DELETE_RETRIES", d.delete_retries, 0, 100),
            smtp_url=e.get(p + "SMTP_URL", d.smtp_url).strip(),
            smtp_url_secret=refs["SMTP_URL_SECRET"],
            require_confirmation=confirm,
            signed_url_secret=refs["SIGNED_URL_SECRET"],
            migrate_batch=_opt_int(e, p + "MIGRATE_BATCH", 1, 10000),
            migrate_rate=_opt_int(e, p + "MIGRATE_RATE", 0, 10_000_000),
            server_gomaxprocs=_opt_int(e, p + "SERVER_GOMAXPROCS", 0, 1024),
            network_policies=netpol,
            network_policy_cidrs=split(e.get(p + "NETWORK_POLICY_CIDRS", "")),
            metrics_namespace_selector=_selector(e, p + "METRICS_NAMESPACE_SELECTOR", d.metrics_namespace_selector),
            server_tls=_bool(e, p + "SERVER_TLS", d.server_tls),
            tls_issuer=issuer,
            tls_cert_days=cert_days,
            tls_renew_days=renew_days,
            encryption_key_secret=refs["ENCRYPTION_KEY_SECRET"],
            **auth,
        )

    def server_url(self, namespace: str, service: str = "sluice-server") -> str:
        """server_url is where the operator reaches the namespace's sluice-server
        (https when the servers serve TLS, whatever scheme the template names)."""
        url = self.server_url_template.format(namespace=namespace, service=service, port=self.server_port)
        if self.server_tls and url.startswith("http://"):
            url = "https://" + url[len("http://") :]
        return url
