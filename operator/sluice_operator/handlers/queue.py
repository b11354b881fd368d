"""Queue reconciliation through the namespace's server (Zaqar v2 API), stats
refreshed on a timer, and a deletion that never hangs on a missing Pool or
an unreachable server."""

from __future__ import annotations

import logging
import time
from typing import Any

import kopf

from .. import conditions as cond
from .. import events, kube, metrics
from ..config import Config
from ..serverapi import ServerError, Unavailable
from . import server
from .pool import namespace_terminating

log = logging.getLogger(__name__)


def identity(body: dict[str, Any]) -> tuple[str, str]:
    """identity is (project, server-side queue name) with their defaults applied."""
    meta, spec = body["metadata"], body["spec"]
    return spec.get("project") or meta["namespace"], spec.get("name") or meta["name"]


def queue_metadata(spec: dict[str, Any]) -> dict[str, Any]:
    """queue_metadata maps a Queue spec onto Zaqar's reserved metadata keys."""
    md: dict[str, Any] = {
        "_flavor": spec["pool"],
        "_default_message_ttl": int(spec.get("messageTTL", 3600)),
        "_default_message_delay": int(spec.get("delay", 0)),
        "_max_messages_post_size": int(spec.get("maxPostSize", 262144)),
    }
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


def _not_ready(patch: Any, status: dict[str, Any], gen: Any, reason: str, msg: str, ns: str, name: str) -> None:
    conds = cond.set_condition(status.get("conditions"), "Ready", False, reason, msg, gen)
    cond.write_status(patch, status, {"conditions": conds, "observedGeneration": gen})
    metrics.QUEUE_READY.labels(ns, name).set(0)


def reconcile(cfg: Config, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """reconcile creates or updates the queue on the server and refreshes its status."""
    meta, spec = body["metadata"], body["spec"]
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
    status = body.get("status") or {}
    conds = status.get("conditions") or []
    project, qname = identity(body)
    metrics.RECONCILES.labels("Queue").inc()
    pool = kube.get("Pool", ns, spec["pool"])
    if pool is None:
        _not_ready(patch, status, gen, "PoolNotFound", f"Pool {spec['pool']} does not exist in {ns}", ns, name)
        return
    pstatus = pool.get("status") or {}
    members = [s["name"] for s in pstatus.get("shards") or [] if s.get("registered") and not s.get("draining")]
    if not members:
        _not_ready(patch, status, gen, "PoolNotReady", f"Pool {spec['pool']} has no registered shard yet", ns, name)
        return
    api = server.api(cfg, ns)
    want = queue_metadata(spec)
    try:
        # Flavors may be scoped by project on the server: make sure the queue's project sees it.
        api.put_flavor(spec["pool"], members, project=project)
        created = api.put_queue(project, qname, want)
        have = api.get_queue(project, qname)
        changes = metadata_changes(want, have)
        if changes:
            api.patch_queue(project, qname, changes, have)
            have = api.get_queue(project, qname)
        stats, oldest_age = api.queue_stats(project, qname)
    except Unavailable as exc:
        metrics.ERRORS.labels("Queue", "ServerUnavailable").inc()
        _not_ready(patch, status, gen, "ServerUnavailable", str(exc)[:400], ns, name)
        return
    except ServerError as exc:
        metrics.ERRORS.labels("Queue", "Rejected").inc()
        _not_ready(patch, status, gen, "Rejected", f"{exc.title}: {exc.description}"[:400], ns, name)
        return
    if created:
        events.info(body, reason="Created", message=f"queue {qname} created in project {project}")
    conds = cond.set_condition(conds, "Ready", True, "Ready", f"queue {qname} serves project {project}", gen)
    new: dict[str, Any] = {
        "queueName": qname,
        "project": project,
        "pool": spec["pool"],
        "messages": stats,
        "conditions": conds,
        "observedGeneration": gen,
    }
    shard = have.get("_pool") or have.get("_shard")
    if isinstance(shard, str):
        new["shard"] = shard
    cond.write_status(patch, status, new, touch="lastSynced")
    metrics.QUEUE_READY.labels(ns, name).set(1)
    metrics.QUEUE_OLDEST_AGE.labels(ns, name).set(oldest_age)
    for state, n in stats.items():
        metrics.QUEUE_MESSAGES.labels(ns, name, state).set(n)


def delete(cfg: Config, body: dict[str, Any], retry: int, logger: Any = log) -> None:
    """delete removes the server-side queue (deletionPolicy Delete). With the Pool or the
    server gone, the finalizer is released anyway and an event says why."""
    meta, spec = body["metadata"], body["spec"]
    ns, name = meta["namespace"], meta["name"]
    project, qname = identity(body)
    metrics.forget_queue(ns, name)
    if spec.get("deletionPolicy", "Delete") == "Retain":
        events.info(body, reason="Retained", message=f"queue {qname} kept on the server (deletionPolicy Retain)")
        return
    if kube.get("Pool", ns, spec["pool"]) is None:
        events.warn(body, reason="PoolGone", message=f"Pool {spec['pool']} is gone; nothing to delete on a server")
        return
    try:
        api = server.api(cfg, ns)
        api.delete_queue(project, qname)
        # A timer tick that read the Queue just before its deletion may still be
        # re-creating it; deleting again after that window closes the race.
        time.sleep(cfg.probe_timeout)
        api.delete_queue(project, qname)
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
