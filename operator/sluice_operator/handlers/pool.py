"""Pool reconciliation: provision shards, probe them, register them with the
namespace's server, scale down safely, and report it all in status."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import kopf

from .. import conditions as cond
from .. import events, kube, metrics, probes
from ..builders import builtin, common, thirdparty
from ..config import Config
from ..kube import namespace_terminating
from ..serverapi import ServerAPI, ServerError, Unavailable
from . import capacity, migration, provisioning, rebalance, scheduling, server, shards

log = logging.getLogger(__name__)


def phase_of(wanted: int, ready: int, registered: int, draining: int, failed: bool, broken: int = 0) -> str:
    """phase_of summarises a Pool in one word. Degraded means a registered shard
    stopped answering; shards still coming up (first start, scale-up) are Provisioning."""
    if failed:
        return "Failed"
    if draining:
        return "Draining"
    if ready == wanted and registered == wanted:
        return "Ready"
    if broken:
        return "Degraded"
    return "Provisioning"


def _resolve(cfg: Config, spec: dict[str, Any], status: dict[str, Any]) -> tuple[str, str]:
    # The choice is sticky: installing redis-operator later must not move running shards.
    if status.get("provisioner"):
        return status["provisioner"], status.get("provisionerReason", "")
    return provisioning.choose_provisioner(
        spec["backend"],
        spec.get("provisioner", "auto"),
        cfg.default_provisioner,
        kube.group_served(f"{thirdparty.REDIS_GROUP}/{thirdparty.REDIS_VERSION}"),
        kube.group_served(f"{thirdparty.MONGO_GROUP}/{thirdparty.MONGO_VERSION}"),
        bool(spec.get("image")),
        ephemeral=bool((spec.get("storage") or {}).get("ephemeral")),
    )


def _provision_shard(
    cfg: Config, body: dict[str, Any], prov: str, index: int, external: list[str] | None
) -> tuple[dict[str, Any], str | None]:
    meta, spec = body["metadata"], body["spec"]
    owner = common.owner_ref(body)
    name = common.shard_name(meta["name"], index)
    replicas = int(spec.get("replicas", 1))
    entry: dict[str, Any] = {"index": index, "name": name, "ready": False, "registered": False}
    backend_tls_on = prov == "builtin" and cfg.server_tls
    tls_digest = provisioning.ensure_backend_tls(cfg, body, index, owner)[0] if backend_tls_on else ""
    objects = provisioning.shard_objects(cfg, body, prov, index, tls_digest)
    if prov == "redis-operator":
        waiting = provisioning.retire_other_redis_shape(meta["namespace"], name, replicas)
        if waiting:
            entry["message"] = waiting
            return entry, None
    if prov == "mongodb-community":
        if index == 0:
            provisioning.ensure_mongo_database_rbac(cfg, meta["namespace"], common.owner_ref(body, controller=False))
        provisioning.ensure_mongo_password(cfg, body, index, owner)
    if prov == "builtin" and spec["backend"] == "redis":
        provisioning.ensure_redis_password(cfg, body, index, owner)
    for obj in objects:
        obj["metadata"]["ownerReferences"] = [owner]
        kube.apply(obj)
    uri = provisioning.shard_uri(body, prov, index, external, backend_tls_on)
    if uri is None:
        entry["message"] = "waiting for the shard's connection URI"
        return entry, None
    entry["endpoint"] = probes.endpoint(uri)
    # The operator's own copy of the namespace's CA: the URI names the server's.
    ca_file = server.backend_ca_file(meta["namespace"]) if backend_tls_on else None
    ok, msg = probes.probe(uri, cfg.probe_timeout, ca_file)
    if prov == "redis-operator" and replicas > 1 and not ok:
        sts = kube.get("StatefulSet", meta["namespace"], name)
        provisioning.nudge_redis_operator(meta["namespace"], name, provisioning.nudge_value(sts))
    if not ok and prov == "builtin" and spec["backend"] == "mongodb" and replicas > 1:
        hosts = [
            f"{name}-{i}.{builtin.headless_name(name)}.{meta['namespace']}.svc:{builtin.MONGO_PORT}"
            for i in range(replicas)
        ]
        msg += "; " + probes.initiate_replica_set(hosts, name, cfg.probe_timeout, backend_tls_on, ca_file)
    entry.update(ready=ok, message=msg)
    return entry, uri


def provisioned(wanted: int, prov: str, prov_error: str) -> tuple[bool, str, str]:
    """provisioned is the Provisioned condition (status, reason, message)."""
    if prov_error:
        return False, "NotProvisionable", prov_error
    return True, "Provisioned", f"{wanted} shards by {prov}"


def registered(entries: list[dict[str, Any]], wanted: int, flavor: str) -> tuple[bool, str, str]:
    """registered is the Registered condition after a registration that reached the server."""
    every = all(e.get("registered") for e in entries[:wanted])
    return (
        every and bool(entries),
        "Registered" if every else "ShardsNotReady",
        f"{sum(1 for e in entries if e.get('registered'))} shard(s) registered in flavor {flavor}",
    )


def scaled_down(
    blocked: list[str], staying: bool, leaving: bool, reported: bool, wanted: int, reason: str = "ShardsHoldQueues"
) -> tuple[bool, str, str] | None:
    """scaled_down is the ScaledDown condition, or None when there is nothing to say: no
    scale-down now (leaving) and none reported before (reported). While queues are being
    moved (reason MigratingQueues or MigrationFailed) the message is the moves' progress."""
    if blocked and reason != "ShardsHoldQueues":
        return False, reason, "; ".join(blocked)
    if blocked:
        return (
            False,
            "ShardsHoldQueues",
            "drained to weight 0 but not removed: "
            + "; ".join(blocked)
            + ". Delete those queues (or their Queue resources) to finish scaling down",
        )
    if not staying and (leaving or reported):
        return True, "Done", f"{wanted} shard(s) remain"
    return None


@dataclass(frozen=True)
class Readiness:
    """Readiness counts a Pool's wanted shards: answering, registered, and registered but
    no longer answering (broken)."""

    wanted: int
    ready: int
    registered: int
    broken: int
    provisioned: bool

    @classmethod
    def of(cls, entries: list[dict[str, Any]], wanted: int, prov_error: str) -> Readiness:
        """of counts the first `wanted` shard entries (leaving shards follow them)."""
        mine = entries[:wanted]
        return cls(
            wanted,
            sum(1 for e in mine if e["ready"]),
            sum(1 for e in mine if e.get("registered")),
            sum(1 for e in mine if e.get("registered") and not e["ready"]),
            not prov_error,
        )

    @property
    def is_ready(self) -> bool:
        """is_ready: every wanted shard answers and is registered, and provisioning worked."""
        return self.ready == self.wanted and self.registered == self.wanted and self.provisioned

    def message(self) -> str:
        """message is the Ready condition's message."""
        return f"{self.ready}/{self.wanted} shards answer, {self.registered}/{self.wanted} registered"


def _apply_shards(
    cfg: Config, body: dict[str, Any], prov: str, wanted: int
) -> tuple[list[dict[str, Any]], dict[str, str], str]:
    # Apply and probe every wanted shard: (status entries, shard name -> URI, provisioning problem).
    ns, spec = body["metadata"]["namespace"], body["spec"]
    external = None
    entries: list[dict[str, Any]] = []
    uris: dict[str, str] = {}
    prov_error = ""
    try:
        if prov == "external":
            external = provisioning.external_uris(ns, spec["external"]["secretRef"])
            if len(external) < wanted:
                prov_error = f"Secret lists {len(external)} URIs for {wanted} shards"
        for i in range(wanted):
            entry, uri = _provision_shard(cfg, body, prov, i, external)
            entries.append(entry)
            if uri:
                uris[entry["name"]] = uri
    except (provisioning.NotProvisionable, kube.Refused) as exc:
        prov_error = str(exc)
    return entries, uris, prov_error


def _schedulable(cfg: Config, body: dict[str, Any], wanted: int) -> tuple[bool | None, str, str]:
    # The Schedulable condition, as the scheduler sees the shards' pods.
    ns, name, spec = body["metadata"]["namespace"], body["metadata"]["name"], body["spec"]
    shard_names = [common.shard_name(name, i) for i in range(wanted)]
    placement = spec.get("placement") or {}
    pods = scheduling.shard_pods(kube.list_objects("Pod", ns), shard_names)
    node_class = placement.get("nodeClass", "metal")
    class_nodes = kube.node_count(cfg.metal_label_key, node_class) if node_class != "any" else None
    return scheduling.schedulable(pods, placement, cfg.metal_label_key, class_nodes)


def _leaving(
    body: dict[str, Any], status: dict[str, Any], entries: list[dict[str, Any]], wanted: int
) -> tuple[list[int], dict[int, dict[str, Any]]]:
    # Shards beyond `wanted` still known (status or StatefulSets): their indices, and their
    # entries, which stay in status until they are really gone, whatever fails later.
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    old = {int(s["index"]): s for s in status.get("shards") or [] if "index" in s}
    for e in entries:
        # A server outage must not make registered shards look unregistered.
        e["registered"] = bool(old.get(e["index"], {}).get("registered"))
        capacity.carry(e, old.get(e["index"]) or {})
    statefulsets = kube.list_objects("StatefulSet", ns, f"{common.LABEL_POOL}={name}")
    _, leaving = shards.plan(wanted, shards.known_indices(name, list(old.values()), statefulsets))
    staying: dict[int, dict[str, Any]] = {}
    for i in leaving:
        staying[i] = dict(old.get(i) or {"index": i, "name": common.shard_name(name, i)})
        staying[i]["ready"] = bool(staying[i].get("ready"))
    return leaving, staying


@dataclass
class Drain:
    """Drain is what draining the leaving shards learned this pass: why shards stay
    (`blocked`), the queue moves' status block, and the ScaledDown reason."""

    blocked: list[str]
    moves: dict[str, Any] | None
    reason: str = "ShardsHoldQueues"


def _drain(
    api: ServerAPI,
    body: dict[str, Any],
    prov: str,
    leaving: list[int],
    staying: dict[int, dict[str, Any]],
    queue_crs: list[dict[str, Any]],
    targets: list[str],
    out: Drain,
) -> None:
    # Drain leaving shards; remove those that hold no queue (dropping them from staying)
    # and record in `out` why the others stay: what was learned before a server failure
    # (Unavailable, ServerError: raised) still counts. Queues are moved off one shard at
    # a time (the first leaving one that still holds any); the others wait at weight 0.
    ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
    opts = body["spec"].get("drain") or {}
    moving = bool(opts.get("migrateQueues", True))
    mover_busy = False
    for i in leaving:
        entry = staying[i]
        qnames: list[str] = []
        if not entry.get("registered"):
            # Never registered with the server: it cannot hold a queue.
            removed, count = True, 0
        elif moving and not mover_busy:
            removed, block = shards.drain_by_moves(
                api, name, entry, targets, out.moves, int(opts.get("maxInFlight", 2)), time.time()
            )
            if block is not None:
                out.moves = block
                if not removed:
                    mover_busy = True
                    out.reason, msg = migration.summary(block, targets)
                    entry.update(queues=block["queuesRemaining"])
                    out.blocked.append(msg)
                    continue
            if not removed:
                # The server cannot move queues: wait for them to be deleted, as without moves.
                removed, count, qnames = shards.drain(api, name, entry, queue_crs)
        else:
            removed, count, qnames = shards.drain(api, name, entry, queue_crs)
        if removed:
            gone = shards.delete_workloads(ns, prov, entry["name"])
            events.info(body, reason="ShardRemoved", message=f"shard {entry['name']} drained and removed: {gone}")
            del staying[i]
            continue
        entry.update(queues=count, queueNames=qnames[:20])
        if mover_busy:
            out.blocked.append(f"{entry['name']} waits at weight 0 for its turn")
            continue
        which = ", ".join(qnames[:10]) or "reported by the server"
        out.blocked.append(f"{entry['name']} holds {count} queue(s) ({which})")


def reconcile(cfg: Config, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """reconcile converges one Pool and writes its status; safe to run any number of times.
    Steps: resolve the provisioner, apply and probe the shards, check scheduling, drain
    leaving shards, register the rest, then the conditions and status."""
    meta, spec = body["metadata"], body["spec"]
    status = dict(body.get("status") or {})
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
    conds = status.get("conditions") or []
    metrics.RECONCILES.labels("Pool").inc()
    try:
        prov, why = _resolve(cfg, spec, status)
        # The namespace's server: the operator's settings (chart values such as
        # server.placement) that the apiserver refuses leave every Pool here unready.
        summary = server.ensure(cfg, ns, body)
    except (provisioning.NotProvisionable, kube.Refused) as exc:
        conds = cond.set_condition(conds, "Provisioned", False, "NotProvisionable", str(exc), gen)
        conds = cond.set_condition(conds, "Ready", False, "NotProvisionable", str(exc), gen)
        cond.write_status(patch, status, {"phase": "Failed", "conditions": conds, "observedGeneration": gen})
        metrics.POOL_READY.labels(ns, name).set(0)
        return
    logger.debug("server objects: %s", summary)

    wanted = int(spec.get("shards", 1))
    entries, uris, prov_error = _apply_shards(cfg, body, prov, wanted)
    conds = cond.set_condition(conds, "Provisioned", *provisioned(wanted, prov, prov_error), gen)
    if prov != "external":
        conds = cond.set_condition(conds, "Schedulable", *_schedulable(cfg, body, wanted), gen)

    queue_crs = [q for q in kube.list_objects("Queue", ns) if q.get("spec", {}).get("pool") == name]
    leaving, staying = _leaving(body, status, entries, wanted)
    failure: tuple[str, str] | None = None
    with server.api(cfg, ns) as api:
        out = Drain([], migration.latest(body, status) if leaving else status.get("migration"))
        # Queues move only to the shards that stay, answer, are registered and keep them.
        targets = [e["name"] for e in entries if e["ready"] and e.get("registered") and not capacity.refused(e)]
        try:
            _drain(api, body, prov, leaving, staying, queue_crs, targets, out)
            shards.register(api, name, entries + list(staying.values()), uris, int(spec.get("weight", 100)))
            detail_ok = True
            conds = cond.set_condition(conds, "Registered", *registered(entries, wanted, name), gen)
        except (Unavailable, ServerError) as exc:
            detail_ok = False
            failure = registration_failure(exc)
            conds = cond.set_condition(conds, "Registered", False, *failure, gen)
        entries += [staying[i] for i in sorted(staying)]
        if detail_ok:
            capacity.observe(api, entries)
            capacity.withhold(api, entries)
        reported = bool(cond.get_condition(conds, "ScaledDown"))
        scaled = scaled_down(out.blocked, bool(staying), bool(leaving), reported, wanted, out.reason)
        if scaled:
            conds = cond.set_condition(conds, "ScaledDown", *scaled, gen)

        for e in entries:
            if e.get("draining"):
                continue
            e["queues"], names = shards.queues_on_shard(None, queue_crs, name, e["name"])
            e.setdefault("queueNames", names[:20])
        r = Readiness.of(entries, wanted, prov_error)
        settled = r.is_ready and detail_ok and not staying
        members = [e["name"] for e in entries[:wanted] if not capacity.refused(e)]
        balance, conds = rebalance.reconcile(api, body, status, members, settled, conds, time.time())
    conds = cond.set_condition(conds, "Ready", r.is_ready, "Ready" if r.is_ready else "NotReady", r.message(), gen)
    conds, warned = capacity.conditions(spec, prov, entries, conds, gen)
    for reason, message in warned:
        events.warn(body, reason=reason, message=message)
    cond.write_status(
        patch,
        status,
        dict(
            phase=phase_of(wanted, r.ready, r.registered, len(staying), False, r.broken),
            provisioner=prov,
            provisionerReason=why,
            flavor=name,
            server=cfg.server_url(ns),
            readyShards=f"{r.ready}/{wanted}",
            memory=capacity.memory_column(entries, capacity.unbounded(spec, prov)),
            queues=len(queue_crs),
            shards=entries,
            migration=out.moves,
            rebalance=balance,
            conditions=conds,
            observedGeneration=gen,
        ),
    )
    metrics.POOL_READY.labels(ns, name).set(1 if r.is_ready else 0)
    metrics.POOL_SHARDS_READY.labels(ns, name).set(r.ready)
    if failure:
        metrics.ERRORS.labels("Pool", failure[0]).inc()


def registration_failure(exc: Exception) -> tuple[str, str]:
    """registration_failure is the Registered condition's reason and message when the server
    could not register the shards: unreachable (retried), or refusing them (a 4xx, such as a
    shard URI another pool already uses), which only a change to the Pool or its Secret mends."""
    if isinstance(exc, ServerError):
        return "ServerRefused", f"{exc.title}: {exc.description}"[:400]
    return "ServerUnavailable", str(exc)[:400]


def delete(cfg: Config, body: dict[str, Any], patch: Any, retry: int, logger: Any = log) -> None:
    """delete refuses while queues remain (Queue resources, or the server's 409), then
    unregisters the shards and the flavor. The workloads go with their owner."""
    meta = body["metadata"]
    ns, name, gen = meta["namespace"], meta["name"], meta.get("generation")
    status = body.get("status") or {}
    conds = status.get("conditions") or []
    terminating = namespace_terminating(ns)
    queue_crs = [q for q in kube.list_objects("Queue", ns) if q.get("spec", {}).get("pool") == name]
    if queue_crs and not terminating:
        names = sorted(q["metadata"]["name"] for q in queue_crs)
        msg = f"{len(names)} Queue(s) still use this Pool: {', '.join(names[:10])}; delete them first"
        patch.status["conditions"] = cond.set_condition(conds, "Deleting", False, "QueuesRemain", msg, gen)
        raise kopf.TemporaryError(msg, delay=10)
    with server.api(cfg, ns) as api:
        try:
            for s in status.get("shards") or []:
                try:
                    api.delete_pool(s["name"])
                except ServerError as exc:
                    if exc.status == 409 and not terminating:
                        msg = f"shard {s['name']} still holds queues on the server: {exc.description}"
                        patch.status["conditions"] = cond.set_condition(
                            conds, "Deleting", False, "ShardsHoldQueues", msg, gen
                        )
                        raise kopf.TemporaryError(msg, delay=10) from exc
            api.delete_flavor(name)
        except Unavailable as exc:
            if retry < cfg.delete_retries and not terminating:
                raise kopf.TemporaryError(f"server unavailable: {exc}", delay=5) from exc
            events.warn(body, reason="ServerGone", message=f"server unreachable, shards left registered: {exc}")
    provisioning.release_pool_sentinels(body)
    metrics.forget_pool(ns, name)
