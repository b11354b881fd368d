"""NetworkPolicies of a served namespace: the backends only the server can reach.

- builtin Redis/MongoDB shards (component "backend") and the catalog accept
  connections only from the namespace's sluice-server pods, from backend
  pods (replicas follow pod 0; MongoDB members talk to each other) and from
  the operator, which probes shards and initiates replica sets: any pod of
  the operator's namespace, plus configured CIDRs for an operator running
  outside the cluster;
- sluice-server accepts clients on its HTTP port only (which also serves
  /metrics, so Prometheus needs no rule of its own).

Only ingress is restricted; the policies are inert where the cluster runs
no policy engine. redis-operator copies a shard's labels into its pods, so
its Redis and Sentinel pods are covered too: the Sentinel port is open to the
same peers (the server finds the master through it; sentinels and replicas
are backend pods). The MongoDB community operator's pods carry its own
labels and are not covered.
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from . import builtin, common, thirdparty
from .server import CATALOG_PORT


def _pods(cfg: Config, component: str) -> dict[str, Any]:
    return {"podSelector": {"matchLabels": common.selector(common.labels(cfg, component))}}


def _operator_peers(cfg: Config) -> list[dict[str, Any]]:
    peers: list[dict[str, Any]] = []
    if cfg.namespace:
        peers.append({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": cfg.namespace}}})
    peers += [{"ipBlock": {"cidr": c}} for c in cfg.network_policy_cidrs]
    return peers


def _policy(
    cfg: Config, name: str, ns: str, component: str, owners: list[dict[str, Any]], rule: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns, "labels": common.labels(cfg, component), "ownerReferences": owners},
        "spec": {
            "podSelector": _pods(cfg, component)["podSelector"],
            "policyTypes": ["Ingress"],
            "ingress": [rule],
        },
    }


def backends(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """backends admits the server, other backends and the operator to the builtin shards."""
    rule = {
        "from": [_pods(cfg, "server"), _pods(cfg, "backend"), *_operator_peers(cfg)],
        "ports": [
            {"protocol": "TCP", "port": builtin.REDIS_PORT},
            {"protocol": "TCP", "port": builtin.MONGO_PORT},
            {"protocol": "TCP", "port": thirdparty.SENTINEL_PORT},
        ],
    }
    return _policy(cfg, "sluice-backends", ns, "backend", owners, rule)


def catalog(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """catalog admits the server and the operator to the catalog Redis."""
    rule = {"from": [_pods(cfg, "server"), *_operator_peers(cfg)], "ports": [{"protocol": "TCP", "port": CATALOG_PORT}]}
    return _policy(cfg, common.CATALOG_NAME, ns, "catalog", owners, rule)


def server(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> dict[str, Any]:
    """server admits anyone to the server's HTTP port, and nothing else."""
    rule = {"ports": [{"protocol": "TCP", "port": cfg.server_port}]}
    return _policy(cfg, common.SERVER_NAME, ns, "server", owners, rule)


def desired(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """desired are the namespace's policies (none when disabled)."""
    if not cfg.network_policies:
        return []
    objs = [backends(cfg, ns, owners), server(cfg, ns, owners)]
    if not cfg.catalog_uri:
        objs.append(catalog(cfg, ns, owners))
    return objs
