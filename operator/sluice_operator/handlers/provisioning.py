"""Which provisioner runs a Pool's shards, the objects it needs per shard,
and the URI each shard is reached at. The decisions (choose_provisioner,
shard_objects, parse_uris, uri_of, nudge_value) are pure functions of their
arguments; the functions that read or write the cluster (external_uris,
shard_uri, ensure_*, retire_other_redis_shape, nudge_redis_operator) fetch
what a decision needs and hand it over."""

from __future__ import annotations

import base64
import secrets
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import kube
from ..builders import backend_tls, builtin, common, netpol, thirdparty
from ..config import Config
from . import tls


class NotProvisionable(Exception):
    """NotProvisionable: the spec cannot work with what the cluster has; the message says why."""


# Why the third-party provisioners cannot run storage.ephemeral Pools: the
# pinned upstream releases would lose the shard or ignore the setting.
EPHEMERAL_REFUSALS = {
    "redis-operator": "redis-operator v0.16.0 cannot delete a shard without persistent storage "
    "(its finalizer dereferences spec.storage)",
    "mongodb-community": "mongodb-community always gives its pods persistent data and logs volumes",
}


def choose_provisioner(
    backend: str,
    requested: str,
    default: str,
    redis_operator: bool,
    mongodb_community: bool,
    has_image: bool,
    ephemeral: bool = False,
) -> tuple[str, str]:
    """choose_provisioner resolves `auto` (the Pool's, then the operator's default) and
    returns the provisioner with the reason for the choice."""
    if requested == "auto" and default != "auto":
        requested, via = default, "operator default"
    else:
        via = "spec.provisioner"
    if requested == "auto":
        if backend == "redis":
            if redis_operator and ephemeral:
                return "builtin", "auto: storage.ephemeral; " + EPHEMERAL_REFUSALS["redis-operator"]
            if redis_operator:
                return "redis-operator", "auto: redis.redis.opstreelabs.in CRDs are installed"
            return "builtin", "auto: redis-operator CRDs are not installed, running builtin StatefulSets"
        if mongodb_community and not ephemeral:
            return "mongodb-community", "auto: mongodbcommunity.mongodb.com CRDs are installed"
        why = (
            "storage.ephemeral; " + EPHEMERAL_REFUSALS["mongodb-community"]
            if mongodb_community
            else "mongodb-community CRDs are not installed"
        )
        if not has_image:
            raise NotProvisionable(f"auto: {why} and builtin MongoDB needs spec.image")
        return "builtin", f"auto: {why}, running builtin StatefulSets"
    if requested == "redis-operator":
        if backend != "redis":
            raise NotProvisionable(f"{via} redis-operator cannot run a {backend} Pool")
        if not redis_operator:
            raise NotProvisionable(f"{via} redis-operator: redis.redis.opstreelabs.in CRDs are not installed")
    if requested == "mongodb-community":
        if backend != "mongodb":
            raise NotProvisionable(f"{via} mongodb-community cannot run a {backend} Pool")
        if not mongodb_community:
            raise NotProvisionable(f"{via} mongodb-community: mongodbcommunity.mongodb.com CRDs are not installed")
    if ephemeral and requested in EPHEMERAL_REFUSALS:
        raise NotProvisionable(f"storage.ephemeral: {EPHEMERAL_REFUSALS[requested]}; use builtin")
    if requested == "builtin" and backend == "mongodb" and not has_image:
        raise NotProvisionable("builtin MongoDB needs spec.image")
    return requested, f"{via} asks for {requested}"


def shard_objects(
    cfg: Config, pool: dict[str, Any], provisioner: str, index: int, tls_digest: str = ""
) -> list[dict[str, Any]]:
    """shard_objects are the objects (besides generated Secrets) that make up one shard;
    tls_digest names a builtin shard's certificate (ensure_backend_tls)."""
    if provisioner in EPHEMERAL_REFUSALS and (pool["spec"].get("storage") or {}).get("ephemeral"):
        # A Pool switched to ephemeral after its provisioner was chosen.
        raise NotProvisionable(f"storage.ephemeral: {EPHEMERAL_REFUSALS[provisioner]}")
    if provisioner == "builtin":
        return [builtin.statefulset(cfg, pool, index, tls_digest), *builtin.services(cfg, pool, index)]
    if provisioner == "redis-operator":
        # The settings first: the pods mount them.
        return [thirdparty.redis_config(cfg, pool, index), *thirdparty.redis_objects(cfg, pool, index)]
    if provisioner == "mongodb-community":
        objs = [thirdparty.mongodb_community(cfg, pool, index)]
        return objs + ([netpol.mongodb_community(cfg, pool, index)] if cfg.network_policies else [])
    return []


def retire_other_redis_shape(namespace: str, shard: str, replicas: int) -> str | None:
    """retire_other_redis_shape deletes the redis-operator CRs of the shape the shard no
    longer has (replicas crossed 1: Redis <-> RedisReplication + RedisSentinel). Both shapes
    name a StatefulSet and Services after the shard, so the new CRs must wait until those
    of the old one are gone; returns what is being waited for, or None."""
    _, stale = thirdparty.redis_kinds(replicas)
    for kind in stale:
        if kind == "RedisSentinel":
            release_redis_sentinel(namespace, shard)
        elif kube.get(kind, namespace, shard) is not None:
            kube.delete(kind, namespace, shard)
    named = [("StatefulSet", shard)] + [("Service", shard + sfx) for sfx in ("", "-headless", "-additional")]
    for kind, name in named:
        obj = kube.get(kind, namespace, name)
        owners = {o.get("kind") for o in (obj or {}).get("metadata", {}).get("ownerReferences") or []}
        if owners & set(stale):
            return f"waiting for {kind} {name} of the previous {'/'.join(sorted(owners & set(stale)))} to go"
    return None


# redis-operator v0.16.0's finalizer on a RedisSentinel deletes nothing
# (finalizeRedisSentinelPVC returns nil), but its manager reaches it only past
# IsRedisReplicationReady: while the sentinel's RedisReplication exists and
# every one of its pods is ready. A sentinel deleted with or after its
# replication (Pool deletion, scale-down, replicas crossing 1, namespace
# deletion) keeps the finalizer forever, and so does its namespace.
SENTINEL_FINALIZER = "redisSentinelFinalizer"


def release_redis_sentinel(namespace: str, shard: str) -> bool:
    """release_redis_sentinel deletes a shard's RedisSentinel and lifts the upstream
    finalizer off it (SENTINEL_FINALIZER says why); other finalizers stay. Call it
    before the RedisReplication goes. Returns whether there was a sentinel."""
    existed = False
    for _ in range(5):
        live = kube.get("RedisSentinel", namespace, shard)
        if live is None:
            return existed
        existed = True
        meta = live["metadata"]
        if not meta.get("deletionTimestamp"):
            kube.delete("RedisSentinel", namespace, shard)
            continue
        held = meta.get("finalizers") or []
        if SENTINEL_FINALIZER not in held:
            return True
        body: dict[str, Any] = {"finalizers": [f for f in held if f != SENTINEL_FINALIZER]}
        if meta.get("resourceVersion"):
            # Only over the version read: the manager may be updating it too.
            body["resourceVersion"] = meta["resourceVersion"]
        try:
            kube.patch("RedisSentinel", namespace, shard, {"metadata": body})
        except ApiException as exc:
            if exc.status not in (404, 409):
                raise
    return existed


def release_pool_sentinels(pool: dict[str, Any]) -> list[str]:
    """release_pool_sentinels releases the RedisSentinel of every shard a deleted
    redis-operator Pool has or had (spec and status), before the garbage collector
    takes their replications. Returns the shards that had one."""
    meta, status = pool["metadata"], pool.get("status") or {}
    if status.get("provisioner") != "redis-operator":
        return []
    names = {common.shard_name(meta["name"], i) for i in range(int(pool["spec"].get("shards", 1)))}
    names |= {s["name"] for s in status.get("shards") or [] if s.get("name")}
    return [n for n in sorted(names) if release_redis_sentinel(meta["namespace"], n)]


def nudge_value(statefulset: dict[str, Any] | None) -> str:
    """nudge_value changes exactly when redis-operator has something new to act on while
    the shard does not answer: the ready count of the replication StatefulSet."""
    ready = int(((statefulset or {}).get("status") or {}).get("readyReplicas") or 0)
    return f"ready={ready}"


def nudge_redis_operator(namespace: str, shard: str, value: str) -> list[str]:
    """nudge_redis_operator sets NUDGE_ANNOTATION on a replicated shard's CRs when it
    changed: redis-operator requeues a RedisReplication whose pods are not all ready after
    60 s and a RedisSentinel after 600 s, and watches nothing else, so without this a new
    shard waits minutes for its replication and sentinels. The annotation is in
    ignoreAnnotations: pods do not roll. Returns the kinds nudged."""
    out = []
    for kind in ("RedisReplication", "RedisSentinel"):
        live = kube.get(kind, namespace, shard)
        if live is None:
            continue
        if (live["metadata"].get("annotations") or {}).get(thirdparty.NUDGE_ANNOTATION) == value:
            continue
        kube.patch(kind, namespace, shard, {"metadata": {"annotations": {thirdparty.NUDGE_ANNOTATION: value}}})
        out.append(kind)
    return out


def _secret_value(secret: dict[str, Any] | None, key: str) -> str | None:
    if not secret:
        return None
    raw = (secret.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw else None


def external_uris(namespace: str, ref: dict[str, Any]) -> list[str]:
    """external_uris reads one URI per line (blank lines and # comments skipped) from a Secret."""
    secret = kube.get("Secret", namespace, ref["name"])
    if secret is None:
        raise NotProvisionable(f"Secret {ref['name']} (spec.external.secretRef) does not exist")
    text = _secret_value(secret, ref.get("key", "uris"))
    if text is None:
        raise NotProvisionable(f"Secret {ref['name']} has no key {ref.get('key', 'uris')!r}")
    return parse_uris(text)


def parse_uris(text: str) -> list[str]:
    """parse_uris keeps one URI per line, skipping blank lines and # comments. Commas are not
    separators: a URI may hold them (a MongoDB seed list, a query string)."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def ensure_mongo_database_rbac(cfg: Config, namespace: str, owner: dict[str, Any]) -> None:
    """ensure_mongo_database_rbac gives the namespace the community operator's pod
    identity, owned (not controlled) by every mongodb-community Pool there, so it goes
    with the last of them."""
    for obj in thirdparty.mongo_database_rbac(cfg, namespace):
        obj["metadata"]["ownerReferences"] = [owner]
        kube.apply(obj)


def ensure_mongo_password(cfg: Config, pool: dict[str, Any], index: int, owner: dict[str, Any]) -> None:
    """ensure_mongo_password creates the shard user's password Secret once (never rotated)."""
    ns = pool["metadata"]["namespace"]
    shard = common.shard_name(pool["metadata"]["name"], index)
    if kube.get("Secret", ns, f"{shard}-password") is None:
        secret = thirdparty.mongo_password_secret(cfg, pool, index, secrets.token_urlsafe(24))
        secret["metadata"]["ownerReferences"] = [owner]
        kube.apply(secret)


def ensure_redis_password(cfg: Config, pool: dict[str, Any], index: int, owner: dict[str, Any]) -> None:
    """ensure_redis_password creates a builtin Redis shard's password Secret once (never rotated)."""
    ns = pool["metadata"]["namespace"]
    shard = common.shard_name(pool["metadata"]["name"], index)
    if kube.get("Secret", ns, builtin.password_secret_name(shard)) is None:
        secret = builtin.password_secret(cfg, pool, index, secrets.token_urlsafe(24))
        secret["metadata"]["ownerReferences"] = [owner]
        kube.apply(secret)


def ensure_backend_tls(cfg: Config, pool: dict[str, Any], index: int, owner: dict[str, Any]) -> tuple[str, list[str]]:
    """ensure_backend_tls provides a builtin shard's certificate (Config.server_tls) from
    the namespace's issuer; returns its digest ("" until issued) and what changed."""
    ns = pool["metadata"]["namespace"]
    shard = common.shard_name(pool["metadata"]["name"], index)
    secret = backend_tls.secret_name(shard)
    changed = tls.ensure_backend(cfg, ns, secret, "backend", builtin.tls_names(shard, ns), [owner])
    return backend_tls.digest(kube.get("Secret", ns, secret)), changed


def shard_uri(
    pool: dict[str, Any], provisioner: str, index: int, external: list[str] | None, backend_tls_on: bool = False
) -> str | None:
    """shard_uri is the URI the server is given for a shard; None while it is not known yet
    (mongodb-community writes its connection-string Secret once the replica set is up).
    It reads the Secret the URI needs; uri_of decides."""
    meta, spec = pool["metadata"], pool["spec"]
    ns = meta["namespace"]
    shard = common.shard_name(meta["name"], index)
    password = connection = None
    if provisioner == "builtin" and spec["backend"] == "redis":
        # The server registers the shard with this URI; the operator never
        # logs it or writes it to status (probes.endpoint drops userinfo).
        password = _secret_value(kube.get("Secret", ns, builtin.password_secret_name(shard)), common.PASSWORD_KEY)
    if provisioner == "mongodb-community":
        secret = kube.get("Secret", ns, thirdparty.mongo_connection_secret_name(shard))
        connection = _secret_value(secret, "connectionString.standard")
    return uri_of(pool, provisioner, index, external, password, connection, backend_tls_on)


def uri_of(
    pool: dict[str, Any],
    provisioner: str,
    index: int,
    external: list[str] | None,
    password: str | None = None,
    connection: str | None = None,
    backend_tls_on: bool = False,
) -> str | None:
    """uri_of is shard_uri's decision without I/O: password is a builtin Redis shard's
    (from its Secret), connection the mongodb-community connection string (None: not yet);
    backend_tls_on: a builtin shard serves TLS only, trusted through the server's CA file."""
    meta, spec = pool["metadata"], pool["spec"]
    ns = meta["namespace"]
    shard = common.shard_name(meta["name"], index)
    replicas = int(spec.get("replicas", 1))
    if provisioner == "builtin":
        ca = backend_tls.server_ca_file() if backend_tls_on else None
        return builtin.shard_uri(spec["backend"], shard, ns, replicas, password, ca)
    if provisioner == "redis-operator":
        return thirdparty.redis_uri(shard, ns, replicas)
    if provisioner == "mongodb-community":
        return thirdparty.mongo_data_uri(connection) if connection else None
    if external is not None and index < len(external):
        return external[index]
    return None
