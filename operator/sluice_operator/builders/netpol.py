"""NetworkPolicies of a served namespace: the backends only the server can reach.

- builtin Redis/MongoDB shards (component "backend") and the catalog accept
  connections only from the namespace's sluice-server pods, from backend
  pods (replicas follow pod 0; MongoDB members talk to each other) and from
  the operator, which probes shards and initiates replica sets: any pod of
  the operator's namespace, plus configured CIDRs for an operator running
  outside the cluster;
- sluice-server accepts clients on its HTTP port from anywhere, and its
  metrics port (/metrics alone) only from the monitoring namespaces
  (Config.metrics_namespace_selector);
- each mongodb-community shard's members accept 27017 only from the
  namespace's sluice-server pods, from each other (replication; the
  community operator's agents talk to their own mongod over loopback and
  never need another port) and from the operator's probes.

Only ingress is restricted; the policies are inert where the cluster runs
no policy engine. redis-operator copies a shard's labels into its pods, so
its Redis and Sentinel pods are covered too: the Sentinel port is open to the
same peers (the server finds the master through it; sentinels and replicas
are backend pods). The community operator (v0.9.0) merges the template
labels of a MongoDBCommunity's statefulSet override into its pods, so
sluice-backends selects them as well; their own policy selects them by the
label the community operator itself sets (`app: <shard>-svc`), so they stay
covered whatever labels reach them.
"""

from __future__ import annotations

from typing import Any

from ..config import Config
from . import builtin, common, thirdparty
from .server import CATALOG_PORT, METRICS_PORT


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
    """server admits anyone to the server's HTTP port, the monitoring namespaces to its
    metrics port, and nothing else."""
    clients = {"ports": [{"protocol": "TCP", "port": cfg.server_port}]}
    scrapers = {
        "from": [{"namespaceSelector": dict(cfg.metrics_namespace_selector)}],
        "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
    }
    policy = _policy(cfg, common.SERVER_NAME, ns, "server", owners, clients)
    policy["spec"]["ingress"].append(scrapers)
    return policy


def mongodb_policy_name(shard: str) -> str:
    """mongodb_policy_name is the NetworkPolicy of one mongodb-community shard."""
    return f"{shard}-mongodb"


def mongodb_community(cfg: Config, pool: dict[str, Any], index: int) -> dict[str, Any]:
    """mongodb_community admits the server, the replica set's own members and the
    operator to a mongodb-community shard's mongod port, selecting its pods by the
    label the community operator puts on them."""
    meta = pool["metadata"]
    shard = common.shard_name(meta["name"], index)
    members = {"podSelector": {"matchLabels": {thirdparty.MONGO_APP_LABEL: thirdparty.mongo_service_name(shard)}}}
    rule = {
        "from": [_pods(cfg, "server"), members, *_operator_peers(cfg)],
        "ports": [{"protocol": "TCP", "port": thirdparty.MONGO_PORT}],
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": mongodb_policy_name(shard),
            "namespace": meta["namespace"],
            "labels": common.shard_labels(cfg, meta["name"], index),
        },
        "spec": {"podSelector": members["podSelector"], "policyTypes": ["Ingress"], "ingress": [rule]},
    }


def desired(cfg: Config, ns: str, owners: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """desired are the namespace's policies (none when disabled)."""
    if not cfg.network_policies:
        return []
    objs = [backends(cfg, ns, owners), server(cfg, ns, owners)]
    if not cfg.catalog_uri:
        objs.append(catalog(cfg, ns, owners))
    return objs
