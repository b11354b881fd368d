"""Benchmark faults: spec.faults injected while a run's load is on, each at its
time after the load starts, recorded in status.faults with the moment it
happened and what it hit, so sluice-bench can measure what clients saw around
each one. Deciding what is due and which pod a fault hits is pure; the
injection itself is the only I/O, and it acts in the Benchmark's namespace
(the operator's own pod, and a drained node, are the two exceptions the
fault asks for by name).

Faults with a duration kill nothing: fill, delay and partition run as an
ephemeral container in the shard's pod (builders/fault_container), inside
that pod's network namespace, and undo themselves when the duration ends;
slow-receiver is performed by sluice-bench's own webhook receiver on the
same schedule (builders/benchmark passes it as --receiver-fault), so the
operator only records it.

What each fault needs from the operator's RBAC is checked before a run
starts (required_access, missing_access): deleting, killing and scaling are
in its ClusterRole; a drain needs the opt-in roles of deploy/rbac-faults.yaml
(pods/eviction in the namespace, nodes patch), and so do fill, delay and
partition (pods/ephemeralcontainers patch in the namespace: a container of the
operator's choosing, with CAP_NET_ADMIN, in a tenant's pod); a Benchmark asking
for one without them waits with condition FaultsPermitted=False naming what is
missing."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import events, kube
from ..builders import common, fault_container
from ..config import Config

log = logging.getLogger(__name__)

# redis-operator labels the pods of a RedisReplication with their role.
ROLE_LABEL = "redis-role"


@dataclass(frozen=True)
class Access:
    """Access is one permission a fault needs: a verb on a resource in a namespace
    (empty: a cluster-scoped resource), what the fault does with it, and where
    the operator gets it."""

    verb: str
    resource: str
    namespace: str = ""
    subresource: str = ""
    group: str = ""
    why: str = ""
    grant: str = "the operator's ClusterRole (deploy/rbac.yaml) grants it"

    def key(self) -> tuple[str, str, str, str, str]:
        """key identifies the permission, whatever needs it."""
        return (self.verb, self.group, self.resource, self.subresource, self.namespace)

    def describe(self) -> str:
        """describe says the permission as `kubectl auth can-i` takes it."""
        what = self.resource + (f"/{self.subresource}" if self.subresource else "")
        what += f".{self.group}" if self.group else ""
        return f"{self.verb} {what}" + (f" in namespace {self.namespace}" if self.namespace else " (cluster-wide)")


def required_access(faults: list[dict[str, Any]], ns: str, operator_ns: str) -> list[Access]:
    """required_access lists, once each and in the order the faults ask, the permissions
    the operator needs to inject faults into namespace ns (operator_ns: where its own pod
    runs; empty when it runs outside the cluster)."""
    out: list[Access] = []
    for f in faults:
        if f["action"] == "scale":
            need = [Access("patch", "deployments", ns, group="apps", why="scale sets the server's replicas")]
        elif f["action"] == "drain":
            need = [
                Access(
                    "patch",
                    "nodes",
                    why="drain cordons the node",
                    grant="bind ClusterRole sluice-operator-node-faults (chart: benchmarkFaults.nodeDrain=true)",
                ),
                Access(
                    "create",
                    "pods",
                    ns,
                    subresource="eviction",
                    why="drain evicts the namespace's pods from the node",
                    grant=f"bind ClusterRole sluice-operator-faults in {ns} (chart: benchmarkFaults.namespaces)",
                ),
            ]
        elif f["action"] in fault_container.CONTAINER_ACTIONS:
            need = [
                Access(
                    "patch",
                    "pods",
                    ns,
                    subresource="ephemeralcontainers",
                    why=f"{f['action']} runs sluice-bench fault as an ephemeral container in the shard's pod",
                    grant=f"bind ClusterRole sluice-operator-faults in {ns} (chart: benchmarkFaults.namespaces)",
                )
            ]
        elif f["action"] == "slow-receiver":
            need = []
        elif f["target"] == "operator":
            need = (
                [Access("delete", "pods", operator_ns, why=f"{f['action']} deletes the operator's pod")]
                if operator_ns
                else []
            )
        else:
            need = [Access("delete", "pods", ns, why=f"{f['action']} deletes the {f['target']}'s pod")]
        seen = {a.key() for a in out}
        out += [a for a in need if a.key() not in seen]
    return out


def missing_access(body: dict[str, Any]) -> list[Access]:
    """missing_access asks the apiserver which of the Benchmark's required permissions
    the operator lacks. A review that cannot be asked counts as granted: the injection
    then records what the apiserver says."""
    ns = body["metadata"]["namespace"]
    missing = []
    operator_ns = os.environ.get("SLUICE_OPERATOR_NAMESPACE", "")
    for a in required_access(body["spec"].get("faults") or [], ns, operator_ns):
        try:
            allowed = kube.can_i(a.verb, a.resource, a.namespace, a.group, a.subresource)
        except ApiException as exc:
            log.warning(
                "access review of %s failed (%s %s): left to the injection", a.describe(), exc.status, exc.reason
            )
            continue
        if not allowed:
            missing.append(a)
    return missing


def missing_message(missing: list[Access]) -> str:
    """missing_message names each missing permission, what needs it and how to grant it."""
    return "the operator may not " + "; ".join(f"{a.describe()} ({a.why}): {a.grant}" for a in missing)


def _refusal(exc: ApiException) -> str:
    """_refusal is the apiserver's own sentence for a refusal (which names the verb,
    resource and user of a 403), or its status."""
    try:
        said = json.loads(exc.body or "{}").get("message") or ""
    except (ValueError, AttributeError):
        said = ""
    return said or f"{exc.status} {exc.reason}"


@dataclass(frozen=True)
class Due:
    """Due is a fault whose time has come and that has not been injected yet."""

    index: int  # position in spec.faults
    fault: dict[str, Any]
    scheduled: dt.datetime | None  # None: the load never started


def fault_name(f: dict[str, Any]) -> str:
    """fault_name is the fault's label: its own name, or what it does to what."""
    if f.get("name"):
        return str(f["name"])
    what = f"{f['action']} {f['target']}"
    if f["target"] == "shard":
        what += f" {f['pool']}/{f['shard']}"
    if f["action"] == "scale":
        what += f" to {f['replicas']}"
    if f["action"] == "slow-receiver":
        what = "slow-receiver"
    if f["action"] == "delay":
        what += f" {int(f['latencyMs'])}ms"
    if f.get("duration"):
        what += f" for {int(f['duration'])}s"
    return what


def due(
    faults: list[dict[str, Any]], recorded: list[dict[str, Any]], load_start: dt.datetime, now: dt.datetime
) -> list[Due]:
    """due lists the faults to inject now, earliest first: their time after the
    load's start has passed and status.faults holds no record of them."""
    done = {r.get("index") for r in recorded}
    out = []
    for i, f in enumerate(faults):
        at = load_start + dt.timedelta(seconds=float(f["at"]))
        if i not in done and at <= now:
            out.append(Due(i, f, at))
    return sorted(out, key=lambda d: (d.scheduled or load_start, d.index))


def _alive(pod: dict[str, Any]) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") == "Running"


def pick_pod(target: str, pods: list[dict[str, Any]]) -> dict[str, Any] | None:
    """pick_pod chooses the pod a fault hits among the target's running pods:
    for a shard with several pods the current master (redis-operator's role
    label), otherwise the first by name, so a run's faults are repeatable."""
    live = sorted((p for p in pods if _alive(p)), key=lambda p: str(p["metadata"]["name"]))
    if not live:
        return None
    if target == "shard":
        masters = [p for p in live if (p["metadata"].get("labels") or {}).get(ROLE_LABEL) == "master"]
        if masters:
            return masters[0]
    return live[0]


def target_selector(f: dict[str, Any]) -> str:
    """target_selector is the label selector of the pods a fault may hit in the
    Benchmark's namespace (not used for the operator's own pod)."""
    if f["target"] == "shard":
        return f"{common.LABEL_POOL}={f['pool']},{common.LABEL_SHARD}={int(f['shard'])}"
    return f"{common.LABEL_COMPONENT}={'server' if f['target'] == 'server' else 'catalog'}"


def _stamp(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(d: Due, injected: dt.datetime | None, pod: str, result: str, message: str) -> dict[str, Any]:
    """record is a fault's entry in status.faults."""
    out: dict[str, Any] = {"index": d.index, "name": fault_name(d.fault)}
    if d.scheduled is not None:
        out["scheduled"] = d.scheduled.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    out.update(pod=pod, result=result, message=message[:300])
    if injected is not None:
        out["injected"] = _stamp(injected)
    return out


def not_reached(
    faults: list[dict[str, Any]], recorded: list[dict[str, Any]], load_start: dt.datetime | None, phase: str
) -> list[dict[str, Any]]:
    """not_reached records each fault of an ended run that was never injected
    (its time fell after the run ended, or the load never started), so
    status.faults accounts for every fault asked for."""
    done = {r.get("index") for r in recorded}
    out = []
    for i, f in enumerate(faults):
        if i in done:
            continue
        if load_start is None:
            d, when = Due(i, f, None), "before the load started"
        else:
            d = Due(i, f, load_start + dt.timedelta(seconds=float(f["at"])))
            when = f"before its time, {float(f['at']):g} s after the load started"
        out.append(record(d, None, "", "NotReached", f"not injected: the run ended ({phase}) {when}"))
    return out


def _own_pod() -> tuple[str, str]:
    from ..cli import identity  # cli starts the operator, which imports the handlers

    return os.environ.get("SLUICE_OPERATOR_NAMESPACE", ""), identity()


def _until(out: dict[str, Any], at: dt.datetime, f: dict[str, Any]) -> dict[str, Any]:
    return {**out, "until": _stamp(at + dt.timedelta(seconds=int(f["duration"])))}


def inject(cfg: Config, ns: str, d: Due, run: int = 0, bench: str = "", now: Any = None) -> dict[str, Any]:
    """inject performs one fault and returns its status record; a fault that
    cannot be performed (no such pod, refused) is recorded as Failed, never
    retried, so the run's timeline stays what it was. run and bench (the
    Benchmark's name) name the ephemeral container of a fill, delay or partition."""
    clock = now or (lambda: dt.datetime.now(dt.UTC))
    f = d.fault
    try:
        if f["action"] == "slow-receiver":
            at = clock()
            latency, fail = int(f.get("latencyMs") or 0), int(f.get("failPercent") or 0)
            msg = f"the webhook receiver answers {latency} ms late and fails {fail} % of its calls"
            msg += f" for {f['duration']} s"
            return _until(record(d, at, "", "Injected", msg), at, f)
        if f["action"] == "scale":
            dep = kube.get("Deployment", ns, common.SERVER_NAME)
            if dep is None:
                return record(d, None, "", "Failed", f"no Deployment {common.SERVER_NAME} in {ns}")
            before = int((dep.get("spec") or {}).get("replicas") or 1)
            kube.patch("Deployment", ns, common.SERVER_NAME, {"spec": {"replicas": int(f["replicas"])}})
            out = record(
                d,
                clock(),
                common.SERVER_NAME,
                "Injected",
                f"Deployment {common.SERVER_NAME} scaled from {before} to {f['replicas']}",
            )
            return {**out, "previousReplicas": before}
        if f["target"] == "operator":
            pod_ns, pod_name = _own_pod()
            if not pod_ns:
                return record(
                    d, None, "", "Failed", "the operator does not run in a pod (SLUICE_OPERATOR_NAMESPACE unset)"
                )
            pod = kube.get("Pod", pod_ns, pod_name)
        else:
            pod_ns = ns
            pod = pick_pod(f["target"], kube.list_objects("Pod", ns, target_selector(f)))
        if pod is None:
            return record(d, None, "", "Failed", f"no running pod for {fault_name(f)} in {pod_ns}")
        name = str(pod["metadata"]["name"])
        if f["action"] in fault_container.CONTAINER_ACTIONS:
            return _container_fault(cfg, ns, d, pod, fault_container.container_name(bench, run, d.index), clock)
        if f["action"] == "drain":
            node = (pod.get("spec") or {}).get("nodeName") or ""
            at = clock()
            kube.cordon(node, True)
            evicted = [
                str(p["metadata"]["name"])
                for p in kube.list_objects("Pod", ns)
                if (p.get("spec") or {}).get("nodeName") == node and _alive(p)
            ]
            for i, victim in enumerate(evicted):
                try:
                    kube.evict(ns, victim)
                except ApiException as exc:
                    # The node is cordoned: its record says so, and restore uncordons it.
                    done = ", ".join(evicted[:i]) or "nothing"
                    msg = f"node {node} cordoned; evicted {done}; evicting {victim}: {_refusal(exc)}"
                    return {**record(d, at, name, "Failed", msg), "node": node}
            out = record(
                d, at, name, "Injected", f"node {node} cordoned; evicted {', '.join(evicted) or 'nothing'} in {ns}"
            )
            return {**out, "node": node}
        grace = 0 if f["action"] == "kill" else None
        at = clock()
        if f["target"] == "operator":
            # The record must be in status before this process ends: the
            # caller writes it first and calls delete_own_pod afterwards.
            return record(d, at, name, "Injected", f"pod {pod_ns}/{name} deleted")
        kube.delete_pod(pod_ns, name, grace)
        how = "killed (no grace period)" if grace == 0 else "deleted"
        return record(d, at, name, "Injected", f"pod {name} {how}")
    except ApiException as exc:
        return record(d, None, "", "Failed", f"{fault_name(f)}: {_refusal(exc)}")


def _container_fault(cfg: Config, ns: str, d: Due, pod: dict[str, Any], container: str, clock: Any) -> dict[str, Any]:
    """_container_fault starts sluice-bench fault in the shard's pod. It takes a
    Redis shard: a MongoDB shard's port and protocol are not what it speaks."""
    f, name = d.fault, str(pod["metadata"]["name"])
    pool = kube.get("Pool", ns, str(f["pool"])) or {}
    backend = (pool.get("spec") or {}).get("backend", "redis")
    if backend != "redis":
        return record(d, None, name, "Failed", f"{f['action']} takes a Redis shard; Pool {f['pool']} is {backend}")
    spec = fault_container.build(cfg, f, pod, container)
    at = clock()
    kube.add_ephemeral_container(ns, name, spec)
    if f["action"] == "fill":
        what = "filling the Redis to its maxmemory"
    elif f["action"] == "delay":
        what = f"holding its traffic {int(f['latencyMs'])} ms +- {int(f.get('jitterMs') or 0)} ms each way"
    else:
        what = "dropping its packets"
    out = record(d, at, name, "Injected", f"pod {name}: {what} for {f['duration']} s (container {container})")
    return _until({**out, "container": container}, at, f)


def outcomes(ns: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """outcomes adds to each container fault's record what its container said
    when it ended (its termination message: what it did and undid), once; a
    container that has not ended yet is left for a later pass."""
    out = []
    for r in records:
        if r.get("container") and r.get("result") == "Injected" and not r.get("outcome"):
            pod = kube.get("Pod", ns, str(r.get("pod") or "")) or {}
            states = (pod.get("status") or {}).get("ephemeralContainerStatuses") or []
            st: dict[str, Any] = next((c for c in states if c.get("name") == r["container"]), {})
            ended = (st.get("state") or {}).get("terminated")
            if ended:
                msg = str(ended.get("message") or "").strip() or f"ended with exit code {ended.get('exitCode')}"
                r = {**r, "outcome": msg[:300]}
                if ended.get("exitCode"):
                    r["result"] = "Failed"
            elif not pod:
                r = {**r, "outcome": "the pod is gone: its fault went with it"}
        out.append(r)
    return out


def delete_own_pod(f: dict[str, Any]) -> None:
    """delete_own_pod ends this operator's pod (the operator fault), after its
    record is written."""
    pod_ns, pod_name = _own_pod()
    kube.delete_pod(pod_ns, pod_name, 0 if f["action"] == "kill" else None)


def restore(cfg: Config, ns: str, records: list[dict[str, Any]]) -> list[str]:
    """restore undoes what outlives a run once it has ended: nodes it cordoned
    are uncordoned and a scaled server Deployment gets its replicas back.
    Returns what it did, for an Event."""
    done = []
    for r in records:
        # A drain refused after its cordon is Failed and still names the node.
        if r.get("node"):
            kube.cordon(str(r["node"]), False)
            done.append(f"node {r['node']} uncordoned")
        if r.get("result") != "Injected":
            continue
        if r.get("previousReplicas") is not None:
            kube.patch("Deployment", ns, common.SERVER_NAME, {"spec": {"replicas": int(r["previousReplicas"])}})
            done.append(f"{common.SERVER_NAME} back to {r['previousReplicas']} replica(s)")
    return done


def step(cfg: Config, body: dict[str, Any], status: dict[str, Any], phase: str, now: dt.datetime) -> dict[str, Any]:
    """step is the Benchmark controller's fault work on one tick of an active
    run: inject what is due while the run is active; once it has ended, undo
    what outlives it and record the faults it never reached. Returns the status
    fields to write."""
    spec, ns = body["spec"], body["metadata"]["namespace"]
    recorded = list(status.get("faults") or [])
    start = status.get("loadStart")
    load_start = dt.datetime.fromisoformat(start.replace("Z", "+00:00")) if start else None
    if phase not in ("Pending", "Running"):
        settled = outcomes(ns, recorded)
        changed = settled != recorded
        recorded = settled
        done = restore(cfg, ns, recorded)
        if done:
            events.info(body, reason="FaultsUndone", message="; ".join(done)[:1000])
        missed = not_reached(spec.get("faults") or [], recorded, load_start, phase)
        for r in missed:
            events.warn(body, reason="FaultNotReached", message=f"{r['name']}: {r['message']}"[:1000])
        return {"faults": recorded + missed} if missed or changed else {}
    if load_start is None or not spec.get("faults"):
        return {}
    for d in due(spec["faults"], recorded, load_start, now):
        r = inject(cfg, ns, d, int(status.get("runGeneration") or 0), body["metadata"]["name"])
        recorded.append(r)
        if r["result"] == "Injected":
            events.info(body, reason="FaultInjected", message=f"{r['name']}: {r['message']}"[:1000])
        else:
            events.warn(body, reason="FaultFailed", message=f"{r['name']}: {r['message']}"[:1000])
        if d.fault["target"] == "operator" and r["result"] == "Injected":
            # This process ends here: the record goes into status first.
            kube.patch_status("Benchmark", ns, body["metadata"]["name"], {"faults": recorded})
            delete_own_pod(d.fault)
    return {"faults": recorded} if recorded != list(status.get("faults") or []) else {}
