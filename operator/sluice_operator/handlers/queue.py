"""Queue reconciliation through the namespace's server (Zaqar v2 API), stats
refreshed on a timer, and a deletion that never hangs on a missing Pool or
an unreachable server."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import kopf

from .. import conditions as cond
from .. import events, kube, metrics
from ..builders import server as sb
from ..config import Config
from ..kube import namespace_terminating
from ..serverapi import ServerAPI, ServerError, Unavailable
from . import server, subscriptions

log = logging.getLogger(__name__)


# A status tick that read a Queue just before its deletion may still be talking
# to the server when the deletion runs: without this, its PUT could re-create
# the queue the deletion has just removed. Both run in this process, so one
# lock per Queue serialises them, and a tick that waited finds the queue gone.
_GUARD = threading.Lock()
_LOCKS: dict[str, threading.Lock] = {}
_DELETED: OrderedDict[str, None] = OrderedDict()
_DELETED_MAX = 10000


@contextmanager
def _exclusive(body: dict[str, Any]) -> Iterator[bool]:
    """_exclusive holds the Queue's lock; yields False when its server-side queue was deleted."""
    meta = body["metadata"]
    key = meta.get("uid") or f"{meta['namespace']}/{meta['name']}"
    with _GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:
        yield key not in _DELETED


def _mark_deleted(body: dict[str, Any]) -> None:
    meta = body["metadata"]
    key = meta.get("uid") or f"{meta['namespace']}/{meta['name']}"
    with _GUARD:
        _DELETED[key] = None
        while len(_DELETED) > _DELETED_MAX:
            _DELETED.popitem(last=False)
        _LOCKS.pop(key, None)


def identity(body: dict[str, Any]) -> tuple[str, str]:
    """identity is (project, server-side queue name) with their defaults applied."""
    meta, spec = body["metadata"], body["spec"]
    return spec.get("project") or meta["namespace"], spec.get("name") or meta["name"]


@dataclass(frozen=True)
class Claim:
    """Claim is one Queue's claim on its server-side queue (see identity)."""

    name: str
    uid: str
    created: str  # creationTimestamp
    deleting: bool


def claim(body: dict[str, Any]) -> Claim:
    """claim is the Queue's claim on its server-side queue."""
    meta = body["metadata"]
    return Claim(
        meta["name"], meta.get("uid") or meta["name"], meta.get("creationTimestamp") or "", "deletionTimestamp" in meta
    )


def owner(body: dict[str, Any], claims: list[Claim]) -> Claim:
    """owner is the Queue that owns a server-side queue several Queues of the namespace
    name (claims: every Queue naming it, body's own claim among them or not): the
    oldest that is not being deleted, by creation time then name. Only the owner
    changes the queue on the server; the others wait, Ready False (Conflict)."""
    me = claim(body)
    live = {c.uid: c for c in claims if not c.deleting}
    if not me.deleting:
        live[me.uid] = me
    return min(live.values(), key=lambda c: (c.created, c.name), default=me)


def access_grants(queues: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """access_grants is the server's access file from the namespace's Queues: each
    queue's spec.access as "namespace/serviceAccount" names. Only a queue's owner
    (see owner) grants: a Queue in Conflict changes nothing on the server, its
    access list included."""
    by_queue: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for q in queues:
        if not q["metadata"].get("deletionTimestamp"):
            by_queue.setdefault(identity(q), []).append(q)
    out = []
    for (project, qname), named in sorted(by_queue.items()):
        first = owner(named[0], [claim(q) for q in named])
        body = next(q for q in named if claim(q).uid == first.uid)
        accounts = sorted({f"{a['namespace']}/{a['serviceAccount']}" for a in body["spec"].get("access") or []})
        if accounts:
            out.append({"project": project, "queue": qname, "serviceAccounts": accounts})
    return out


def sync_access(cfg: Config, ns: str) -> None:
    """sync_access writes the namespace's access grants where its server reads them
    (kubernetes auth only: the other modes know no ServiceAccounts)."""
    if cfg.auth_mode != "kubernetes":
        return
    refs = server.owners(kube.list_objects("Pool", ns))
    if refs:
        kube.apply(sb.access_configmap(cfg, ns, access_grants(kube.list_objects("Queue", ns)), refs))


def queue_metadata(spec: dict[str, Any]) -> dict[str, Any]:
    """queue_metadata maps a Queue spec onto Zaqar's reserved metadata keys."""
    md: dict[str, Any] = {
        "_flavor": spec["pool"],
        "_default_message_ttl": int(spec.get("messageTTL", 3600)),
        "_default_message_delay": int(spec.get("delay", 0)),
        "_max_messages_post_size": int(spec.get("maxPostSize", 262144)),
    }
    if spec.get("encrypted") is not None:
        md["_enable_encrypt_messages"] = bool(spec["encrypted"])
    dl = spec.get("deadLetter")
    if dl:
        md["_dead_letter_queue"] = dl["queue"]
        md["_max_claim_count"] = int(dl["maxClaimCount"])
        if dl.get("messageTTL") is not None:
            md["_dead_letter_queue_messages_ttl"] = int(dl["messageTTL"])
    return md


def metadata_changes(want: dict[str, Any], have: dict[str, Any]) -> dict[str, Any]:
    """metadata_changes are the keys whose value on the server differs from the spec
    (the flavor is left alone: a queue never changes pool implicitly)."""
    return {k: v for k, v in want.items() if k != "_flavor" and have.get(k) != v}


@dataclass
class Synced:
    """Synced is what the server holds for a Queue after sync_server."""

    created: bool  # the queue was new
    metadata: dict[str, Any]  # its metadata, with "_pool" the shard holding it
    stats: dict[str, int]
    oldest_age: float
    subs: subscriptions.Outcome
    deliveries: dict[str, Any] | None


def sync_server(api: ServerAPI, body: dict[str, Any], members: list[str]) -> Synced:
    """sync_server makes the server hold the Queue as its spec says, on the Pool's
    registered shards (members): the flavor, the queue and its metadata, and its
    subscriptions. ServerError and Unavailable propagate."""
    spec = body["spec"]
    project, qname = identity(body)
    want = queue_metadata(spec)
    # Flavors may be scoped by project on the server: make sure the queue's project sees it.
    api.put_flavor(spec["pool"], members, project=project)
    created = api.put_queue(project, qname, want)
    have = api.get_queue(project, qname)
    changes = metadata_changes(want, have)
    if changes:
        api.patch_queue(project, qname, changes, have)
        have = api.get_queue(project, qname)
    stats, oldest_age = api.queue_stats(project, qname)
    subs = subscriptions.sync(api, body, project, qname)
    return Synced(created, have, stats, oldest_age, subs, api.deliveries(project, qname))


def _not_ready(patch: Any, status: dict[str, Any], gen: Any, reason: str, msg: str, ns: str, name: str) -> None:
    conds = cond.set_condition(status.get("conditions"), "Ready", False, reason, msg, gen)
    cond.write_status(patch, status, {"conditions": conds, "observedGeneration": gen})
    metrics.QUEUE_READY.labels(ns, name).set(0)


def reconcile(
    cfg: Config, body: dict[str, Any], patch: Any, logger: Any = log, claims: list[Claim] | None = None
) -> None:
    """reconcile creates or updates the queue on the server and refreshes its status;
    claims are the Queues of the namespace naming the same server-side queue."""
    with _exclusive(body) as live:
        if live:
            _reconcile(cfg, body, patch, claims or [])


def _reconcile(cfg: Config, body: dict[str, Any], patch: Any, claims: list[Claim]) -> None:
    meta, spec = body["metadata"], body["spec"]
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
    status = body.get("status") or {}
    conds = status.get("conditions") or []
    project, qname = identity(body)
    metrics.RECONCILES.labels("Queue").inc()
    first = owner(body, claims)
    if first.uid != claim(body).uid:
        msg = f"queue {qname} of project {project} is Queue {first.name}'s; this Queue changes nothing on the server"
        _not_ready(patch, status, gen, "Conflict", msg, ns, name)
        return
    pool = kube.get("Pool", ns, spec["pool"])
    if pool is None:
        _not_ready(patch, status, gen, "PoolNotFound", f"Pool {spec['pool']} does not exist in {ns}", ns, name)
        return
    pstatus = pool.get("status") or {}
    members = [s["name"] for s in pstatus.get("shards") or [] if s.get("registered") and not s.get("draining")]
    if not members:
        _not_ready(patch, status, gen, "PoolNotReady", f"Pool {spec['pool']} has no registered shard yet", ns, name)
        return
    with server.api(cfg, ns) as api:
        try:
            got = sync_server(api, body, members)
        except Unavailable as exc:
            metrics.ERRORS.labels("Queue", "ServerUnavailable").inc()
            _not_ready(patch, status, gen, "ServerUnavailable", str(exc)[:400], ns, name)
            return
        except ServerError as exc:
            metrics.ERRORS.labels("Queue", "Rejected").inc()
            _not_ready(patch, status, gen, "Rejected", f"{exc.title}: {exc.description}"[:400], ns, name)
            return
    sync_access(cfg, ns)
    if got.created:
        events.info(body, reason="Created", message=f"queue {qname} created in project {project}")
    conds = cond.set_condition(conds, "Ready", True, "Ready", f"queue {qname} serves project {project}", gen)
    new: dict[str, Any] = {
        "queueName": qname,
        "project": project,
        "pool": spec["pool"],
        "messages": got.stats,
        "conditions": conds,
        "observedGeneration": gen,
    }
    declared = len(spec.get("subscriptions") or [])
    new.update(subscriptions.status_fields(got.subs, got.deliveries, conds, gen, declared))
    shard = got.metadata.get("_pool") or got.metadata.get("_shard")
    if isinstance(shard, str):
        new["shard"] = shard
    cond.write_status(patch, status, new, touch="lastSynced")
    metrics.QUEUE_READY.labels(ns, name).set(1)
    metrics.QUEUE_OLDEST_AGE.labels(ns, name).set(got.oldest_age)
    for state, n in got.stats.items():
        metrics.QUEUE_MESSAGES.labels(ns, name, state).set(n)


def delete(cfg: Config, body: dict[str, Any], retry: int, logger: Any = log, claims: list[Claim] | None = None) -> None:
    """delete removes the server-side queue (deletionPolicy Delete), and its dead-letter
    queue when nothing else uses it, unless another Queue (claims) still names it. With
    the Pool or the server gone, the finalizer is released anyway and an event says why."""
    meta, spec = body["metadata"], body["spec"]
    ns, name = meta["namespace"], meta["name"]
    project, qname = identity(body)
    metrics.forget_queue(ns, name)
    if kube.get("Pool", ns, spec["pool"]) is not None:
        # The grants go with the Queue, whatever happens to the queue's messages.
        sync_access(cfg, ns)
    if spec.get("deletionPolicy", "Delete") == "Retain":
        events.info(body, reason="Retained", message=f"queue {qname} kept on the server (deletionPolicy Retain)")
        return
    heir = owner(body, claims or [])
    if heir.uid != claim(body).uid:
        events.info(body, reason="Retained", message=f"queue {qname} kept on the server: Queue {heir.name} names it")
        return
    if kube.get("Pool", ns, spec["pool"]) is None:
        events.warn(body, reason="PoolGone", message=f"Pool {spec['pool']} is gone; nothing to delete on a server")
        return
    with server.api(cfg, ns) as api:
        try:
            with _exclusive(body):
                subscriptions.remove_managed(api, body, project, qname)
                api.delete_queue(project, qname)
                _mark_deleted(body)
            _release_dead_letter(api, body, project)
        except Unavailable as exc:
            if retry < cfg.delete_retries and not namespace_terminating(ns):
                raise kopf.TemporaryError(f"server unavailable, retrying: {exc}", delay=5) from exc
            events.warn(
                body,
                reason="ServerGone",
                message=f"server unreachable after {retry + 1} attempt(s); queue {qname} may remain on its shard",
            )
        except ServerError as exc:
            events.warn(body, reason="DeleteRefused", message=f"{exc.title}: {exc.description}")


def dead_letter_in_use(body: dict[str, Any], others: list[dict[str, Any]]) -> bool:
    """dead_letter_in_use: another live Queue of the same project is the dead-letter
    queue itself or names it as its own dead-letter queue."""
    project, _ = identity(body)
    dlq = (body["spec"].get("deadLetter") or {}).get("queue")
    for q in others:
        qm = q["metadata"]
        if qm.get("uid") == body["metadata"].get("uid") or qm.get("deletionTimestamp"):
            continue
        qproject, qname = identity(q)
        if qproject == project and dlq in (qname, (q["spec"].get("deadLetter") or {}).get("queue")):
            return True
    return False


def _release_dead_letter(api: Any, body: dict[str, Any], project: str) -> None:
    """The server keeps a dead-letter queue on its queue's shard, and reserves that
    place as soon as the queue names it, before any message was dead-lettered. Once
    the queue is gone, an empty dead-letter queue nothing else uses is deleted too,
    so the reservation does not pin the shard (a drained shard could never leave)."""
    dlq = (body["spec"].get("deadLetter") or {}).get("queue")
    if not dlq or dead_letter_in_use(body, kube.list_objects("Queue", body["metadata"]["namespace"])):
        return
    counts, _ = api.queue_stats(project, dlq)
    if counts["total"]:
        events.info(
            body, reason="DeadLetterKept", message=f"dead-letter queue {dlq} holds {counts['total']} message(s)"
        )
        return
    api.delete_queue(project, dlq)
