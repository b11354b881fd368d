"""Registering shards with the server, and scaling down safely: a shard
leaving the Pool is first drained (weight 0), its queues are moved to the
shards that stay (migration.py), and it is only unregistered and removed
once it holds no queue."""

from __future__ import annotations

import logging
from typing import Any

from .. import kube
from ..builders import common, netpol, thirdparty
from ..serverapi import ServerAPI, ServerError, queue_count_from
from . import capacity, migration, provisioning

log = logging.getLogger(__name__)


def queues_on_shard(
    detail: dict[str, Any] | None, queue_crs: list[dict[str, Any]], pool: str, shard: str
) -> tuple[int, list[str]]:
    """queues_on_shard counts the queues a shard holds: the server's own count when its
    pool detail reports one, and at least the Queue resources placed on the shard."""
    names = sorted(
        q["metadata"]["name"]
        for q in queue_crs
        if q.get("spec", {}).get("pool") == pool and (q.get("status") or {}).get("shard") == shard
    )
    count = len(names)
    if detail:
        reported = detail.get("queues", detail.get("queue_count"))
        if isinstance(reported, list):
            names = sorted(set(names) | {str(x) for x in reported})
            count = len(names)
        elif isinstance(reported, int):
            count = max(count, reported)
    return count, names


def register(api: ServerAPI, flavor: str, shards: list[dict[str, Any]], uris: dict[str, str], weight: int) -> None:
    """register makes every ready shard a server pool in the Pool's flavor with the Pool's weight
    (0 for a leaving or refused shard, capacity.refused), then sets the flavor's pool list;
    it marks each shard's `registered` in place."""
    live = [s for s in shards if s["ready"] and uris.get(s["name"])]
    current = {s["name"]: api.get_pool(s["name"]) for s in live}
    if any(c is None or c.get("flavor") != flavor for c in current.values()):
        # A pool may only name a flavor that exists: declare it first with the
        # shards already registered (an empty list is fine).
        api.put_flavor(flavor, sorted(n for n, c in current.items() if c is not None))
    for s in shards:
        if s not in live:
            s["registered"] = bool(s.get("registered"))
            continue
        uri, cur = uris[s["name"]], current[s["name"]]
        # A leaving shard takes no new queues, nor one whose Redis would evict.
        want = 0 if s.get("draining") or capacity.refused(s) else weight
        if cur is None:
            api.put_pool(s["name"], uri, want, flavor)
        elif cur.get("uri") != uri or cur.get("weight") != want or cur.get("flavor") != flavor:
            api.patch_pool(s["name"], uri=uri, weight=want, flavor=flavor)
        s["registered"], s["weight"] = True, want
    members = [s["name"] for s in shards if s.get("registered")]
    if members:
        api.put_flavor(flavor, members)


def drain(
    api: ServerAPI, pool: str, shard: dict[str, Any], queue_crs: list[dict[str, Any]]
) -> tuple[bool, int, list[str]]:
    """drain sets a leaving shard's weight to 0 and unregisters it when empty.
    Returns (removed, queue count, queue names)."""
    name = shard["name"]
    detail = api.get_pool(name)
    if detail is not None and detail.get("weight") != 0:
        api.patch_pool(name, weight=0)
    shard.update(draining=True, weight=0)
    count, names = queues_on_shard(detail, queue_crs, pool, name)
    if count:
        return False, count, names
    if detail is not None:
        try:
            api.delete_pool(name)
        except ServerError as exc:
            if exc.status != 409:
                raise
            return False, queue_count_from(exc.description) or 1, names
    return True, 0, []


def drain_by_moves(
    api: ServerAPI,
    pool: str,
    shard: dict[str, Any],
    targets: list[str],
    block: dict[str, Any] | None,
    limit: int,
    now: float,
) -> tuple[bool, dict[str, Any] | None]:
    """drain_by_moves drains a leaving shard by moving its queues to `targets`, at most
    `limit` at a time, and unregisters it once the server says it is empty. Returns
    (removed, migration status block); the block is None when the server cannot move
    queues, and the caller waits for them to be deleted as before."""
    # The server is the authority on what a shard holds (a Queue resource's shard is
    # refreshed only at its own tick, so after a move it may still name this one).
    mine = bool(block and block.get("shard") == shard["name"] and not block.get("finished"))
    # With moves in flight the weight is 0 already; polling them comes first, so a move
    # that emptied the shard is counted before the shard goes.
    if not (mine and block and block["inFlight"]):
        removed, _, _ = drain(api, pool, shard, [])
        if removed:
            return True, migration.finish(block, now) if mine and block else block
    block = migration.step(api, shard["name"], targets, block, limit, now)
    if block is None or not migration.idle(block):
        return False, block
    removed, _, _ = drain(api, pool, shard, [])
    return removed, migration.finish(block, now) if removed else block


def delete_workloads(ns: str, provisioner: str, shard: str) -> list[str]:
    """delete_workloads removes a drained shard's objects (volumes stay: data is never
    deleted implicitly). Returns what was deleted."""
    kinds = {
        "builtin": [("StatefulSet", shard), ("Service", shard), ("Service", f"{shard}-headless")],
        # The sentinel first: its upstream finalizer waits for a ready replication.
        "redis-operator": [
            ("RedisSentinel", shard),
            ("RedisReplication", shard),
            ("Redis", shard),
            ("ConfigMap", thirdparty.redis_config_name(shard)),
        ],
        "mongodb-community": [
            ("MongoDBCommunity", shard),
            ("Secret", f"{shard}-password"),
            ("NetworkPolicy", netpol.mongodb_policy_name(shard)),
        ],
    }.get(provisioner, [])
    out = []
    for kind, obj in kinds:
        try:
            if kind == "RedisSentinel":
                if provisioning.release_redis_sentinel(ns, obj):
                    out.append(f"{kind}/{obj}")
            elif kube.delete(kind, ns, obj):
                out.append(f"{kind}/{obj}")
        except Exception as exc:  # a kind whose CRD is gone: nothing left to delete
            log.debug("delete %s/%s: %s", kind, obj, exc)
    return out


def plan(wanted: int, known: set[int]) -> tuple[list[int], list[int]]:
    """plan splits shard indices into those to keep (0..wanted-1) and those to remove."""
    return list(range(wanted)), sorted(i for i in known if i >= wanted)


def known_indices(pool: str, status_shards: list[dict[str, Any]], statefulsets: list[dict[str, Any]]) -> set[int]:
    """known_indices are the shards that exist: from status and from labelled StatefulSets."""
    out = {int(s["index"]) for s in status_shards if "index" in s}
    for sts in statefulsets:
        lbl = sts["metadata"].get("labels", {})
        if lbl.get(common.LABEL_POOL) == pool and lbl.get(common.LABEL_SHARD, "").isdigit():
            out.add(int(lbl[common.LABEL_SHARD]))
    return out
