"""Benchmark faults: spec.faults injected while a run's load is on, each at its
time after the load starts, recorded in status.faults with the moment it
happened and what it hit, so sluice-bench can measure what clients saw around
each one. Deciding what is due and which pod a fault hits is pure; the
injection itself is the only I/O, and it acts in the Benchmark's namespace
(the operator's own pod, and a drained node, are the two exceptions the
fault asks for by name).

What each fault needs from the operator's RBAC is checked before a run
starts (required_access, missing_access): deleting, killing and scaling are
in its ClusterRole; a drain needs the opt-in roles of deploy/rbac-faults.yaml
(pods/eviction in the namespace, nodes patch), and a Benchmark asking for one
without them waits with condition FaultsPermitted=False naming what is
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
from ..builders import common
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


def inject(cfg: Config, ns: str, d: Due, now: Any = None) -> dict[str, Any]:
    """inject performs one fault and returns its status record; a fault that
    cannot be performed (no such pod, refused) is recorded as Failed, never
    retried, so the run's timeline stays what it was."""
    clock = now or (lambda: dt.datetime.now(dt.UTC))
    f = d.fault
    try:
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
        done = restore(cfg, ns, recorded)
        if done:
            events.info(body, reason="FaultsUndone", message="; ".join(done)[:1000])
        missed = not_reached(spec.get("faults") or [], recorded, load_start, phase)
        for r in missed:
            events.warn(body, reason="FaultNotReached", message=f"{r['name']}: {r['message']}"[:1000])
        return {"faults": recorded + missed} if missed else {}
    if load_start is None or not spec.get("faults"):
        return {}
    for d in due(spec["faults"], recorded, load_start, now):
        r = inject(cfg, ns, d)
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
