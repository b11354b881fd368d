"""Benchmark reconciliation: one run (a ConfigMap with its exact parameters and
an indexed Job) per spec generation, followed through Pending, Running,
Succeeded and Failed on a short timer so no run stays Running once its pods
cannot finish; the pods' termination logs merged into status.results with the
verdict and the comparison (by sluice-bench: benchmark_results.py), history,
Events on every phase change, gauges, and the report ConfigMap."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import conditions as cond
from .. import events, kube, metrics
from ..builders import benchmark as bb
from ..config import Config, env_int
from ..serverapi import ServerError, Unavailable
from . import benchmark_pods as bp
from . import benchmark_report as brep
from . import benchmark_results as br
from . import faults, queue, server

log = logging.getLogger(__name__)
ACTIVE = ("Pending", "Running")
REPORT_ATTEMPTS = 3


@dataclass(frozen=True)
class Settings:
    """Settings of the Benchmark controller (SLUICE_OPERATOR_BENCH_* variables)."""

    # Seconds between creating the Job and the load's start (--start-at), so pods start together.
    start_delay: int = 15
    # A pod the scheduler cannot place for this long fails the run (an autoscaler may add nodes first).
    unschedulable_grace: int = 60
    # Seconds a run may wait for its Pool's queues to be created before it fails.
    setup_timeout: int = 600
    # Timer period while a run is active.
    interval: int = 2

    @classmethod
    def from_env(cls) -> Settings:
        """from_env reads the settings, raising ConfigError on bad values."""
        e, p, d = os.environ, "SLUICE_OPERATOR_BENCH_", cls()
        return cls(
            start_delay=env_int(e, p + "START_DELAY", d.start_delay, 0, 3600),
            unschedulable_grace=env_int(e, p + "UNSCHEDULABLE_SECONDS", d.unschedulable_grace, 0, 86400),
            setup_timeout=env_int(e, p + "SETUP_TIMEOUT", d.setup_timeout, 1, 86400),
            interval=env_int(e, p + "INTERVAL", d.interval, 1, 600),
        )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _ts(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def _transition(body: dict[str, Any], old: dict[str, Any], new: dict[str, Any]) -> None:
    # One Event per phase change, Warning for Failed.
    if new.get("phase") == old.get("phase") and new.get("runGeneration") == old.get("runGeneration"):
        return
    msg = f"run {new.get('runGeneration')}: {new.get('message') or new.get('reason') or new.get('phase')}"
    if new.get("phase") == "Failed":
        events.warn(body, reason=f"Failed{new.get('reason') or ''}"[:128], message=msg[:1000])
    else:
        events.info(body, reason=str(new.get("phase")), message=msg[:1000])


def _write(patch: Any, body: dict[str, Any], status: dict[str, Any], new: dict[str, Any]) -> None:
    gen = body["metadata"].get("generation")
    new.setdefault("observedGeneration", gen)
    phase = new.get("phase", status.get("phase"))
    reason = new.get("reason", status.get("reason")) or ""
    message = new.get("message", status.get("message")) or ""
    conds = status.get("conditions")
    conds = cond.set_condition(conds, "Complete", phase in ("Succeeded", "Failed"), reason, message, gen)
    conds = cond.set_condition(
        conds,
        "Failed",
        phase == "Failed",
        reason if phase == "Failed" else "",
        message if phase == "Failed" else "",
        gen,
    )
    new["conditions"] = conds
    _transition(body, status, {**status, **new})
    cond.write_status(patch, status, new)


def start_run(cfg: Config, st: Settings, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """start_run begins a run for the current spec generation: the previous run goes into
    history and its Job away; the Pool's queues are prepared; then ConfigMap and Job."""
    meta, spec = body["metadata"], body["spec"]
    ns, name, gen = meta["namespace"], meta["name"], int(meta.get("generation") or 1)
    status = body.get("status") or {}
    new: dict[str, Any] = {}
    if status.get("runGeneration") not in (None, gen):
        old_job = status.get("jobName")
        if status.get("phase") in ACTIVE and old_job:
            kube.delete("Job", ns, old_job)
            events.info(body, reason="RunSuperseded", message=f"spec changed: run {status['runGeneration']} stopped")
        new["history"] = br.push_history(status.get("history"), br.history_entry(status))
    if status.get("runGeneration") != gen:
        now = _now()
        new.update(
            runGeneration=gen,
            phase="Pending",
            reason="Preparing",
            message="preparing the run",
            jobName=None,
            parametersConfigMap=None,
            reportConfigMap=None,
            results=None,
            verdict=None,
            verdictReasons=None,
            comparison=None,
            startTime=None,
            completionTime=None,
            loadStart=None,
            faults=None,
            runCreated=_ts(now),
        )
        status_after = {**status, "conditions": []}
        _write(patch, body, status_after, new)
        status = {**status, **{k: v for k, v in new.items() if v is not None}}
        for k, v in new.items():
            if v is None:
                status.pop(k, None)
    conflict = queue_conflict(body, gen)
    if conflict:
        events.warn(body, reason="QueueConflict", message=conflict)
        done = {"completionTime": _ts(_now()), "verdict": "Fail", "verdictReasons": [conflict]}
        _write(patch, body, status, {"phase": "Failed", "reason": "QueueConflict", "message": conflict, **done})
        return
    created = bp.parse_time(status.get("runCreated")) or _now()
    status, denied = fault_access(patch, body, status, gen)
    problem = denied or prepare_pool(cfg, body, gen)
    if problem:
        reason, message = problem
        waited = (_now() - created).total_seconds()
        if waited >= st.setup_timeout:
            _write(
                patch,
                body,
                status,
                {
                    "phase": "Failed",
                    "reason": reason,
                    "message": f"{message} (gave up after {waited:.0f} s)",
                    "completionTime": _ts(_now()),
                    "verdict": "Fail",
                    "verdictReasons": [message],
                },
            )
        else:
            _write(patch, body, status, {"phase": "Pending", "reason": reason, "message": message})
        return
    start_at = _ts(_now() + dt.timedelta(seconds=st.start_delay))
    image = spec.get("image") or cfg.bench_image
    params = bb.parameters(cfg, body, gen, start_at, image)
    job = bb.job(cfg, body, gen, start_at, st.start_delay)
    if kube.get("Job", ns, job["metadata"]["name"]) is None:
        try:
            kube.apply(params)
            try:
                kube.apply(job)
            except ApiException as exc:
                # Created meanwhile (a restarted operator): a Job's template is immutable, keep the live one.
                if kube.get("Job", ns, job["metadata"]["name"]) is None:
                    raise
                logger.info("Job %s already exists (%s)", job["metadata"]["name"], exc.status)
        except kube.Refused as exc:
            # Fields the CRD passes through as Kubernetes' own types (tolerations): this run
            # cannot start, and the next spec generation starts a new one.
            why = str(exc)[:400]
            done = {"completionTime": _ts(_now()), "verdict": "Fail", "verdictReasons": [why]}
            _write(patch, body, status, {"phase": "Failed", "reason": "Invalid", "message": why, **done})
            return
        logger.info("Benchmark %s/%s: run %d starts at %s", ns, name, gen, start_at)
    _write(
        patch,
        body,
        status,
        {
            "phase": "Pending",
            "reason": "Starting",
            "message": f"Job {job['metadata']['name']} created; load starts at {start_at}",
            "jobName": job["metadata"]["name"],
            "parametersConfigMap": params["metadata"]["name"],
            "loadStart": start_at,
        },
    )


def fault_access(
    patch: Any, body: dict[str, Any], status: dict[str, Any], gen: int
) -> tuple[dict[str, Any], tuple[str, str] | None]:
    """fault_access checks that the operator may inject every fault of spec.faults and
    writes condition FaultsPermitted. Returns the status with it, and (reason, message)
    while a permission is missing: the run waits for it as for its Pool (granting it
    needs no change of the spec) and fails after the setup timeout."""
    if not body["spec"].get("faults"):
        return status, None
    missing = faults.missing_access(body)
    if missing:
        reason, msg = "MissingPermission", faults.missing_message(missing)
    else:
        reason, msg = "Permitted", "the operator may inject every fault of spec.faults"
    before = cond.get_condition(status.get("conditions"), "FaultsPermitted") or {}
    if missing and before.get("status") != "False":
        events.warn(body, reason="FaultsNotPermitted", message=msg[:1000])
    conds = cond.set_condition(status.get("conditions"), "FaultsPermitted", not missing, reason, msg[:1000], gen)
    cond.write_status(patch, status, {"conditions": conds})
    return {**status, "conditions": conds}, (("FaultsNotPermitted", msg[:500]) if missing else None)


def queue_conflict(body: dict[str, Any], run: int) -> str | None:
    """queue_conflict names a Queue resource whose server-side queue is one of the run's:
    sluice-bench deletes and re-creates each of those before its load, which would take
    that Queue's messages. None for a run against a server outside the namespace."""
    if (body["spec"].get("target") or {}).get("url"):
        return None
    project, names = bb.project(body), set(bb.queue_names(body, run))
    for q in kube.list_objects("Queue", body["metadata"]["namespace"]):
        qproject, qname = queue.identity(q)
        if qproject == project and qname in names:
            return (
                f"Queue {q['metadata']['name']} names queue {qname} of project {project}, which run {run} "
                "deletes and re-creates before its load; rename that Queue's spec.name or change this spec"
            )
    return None


def prepare_pool(cfg: Config, body: dict[str, Any], run: int) -> tuple[str, str] | None:
    """prepare_pool creates the run's queues in spec.pool's flavor on the namespace's server.
    Returns (reason, message) while that is not possible yet."""
    spec, ns = body["spec"], body["metadata"]["namespace"]
    if not spec.get("pool") or (spec.get("target") or {}).get("url"):
        return None
    pool = kube.get("Pool", ns, spec["pool"])
    if pool is None:
        return "PoolNotFound", f"Pool {spec['pool']} does not exist in {ns}"
    shards = (pool.get("status") or {}).get("shards") or []
    members = [s["name"] for s in shards if s.get("registered") and not s.get("draining")]
    if not members:
        return "PoolNotReady", f"Pool {spec['pool']} has no registered shard yet"
    project = bb.project(body)
    with server.api(cfg, ns) as api:
        try:
            api.put_flavor(spec["pool"], members, project=project)
            for q in bb.queue_names(body, run):
                api.put_queue(project, q, {"_flavor": spec["pool"]})
        except Unavailable as exc:
            return "ServerUnavailable", str(exc)[:300]
        except ServerError as exc:
            return "QueueSetupRefused", f"{exc.title}: {exc.description}"[:300]
    return None


def follow(cfg: Config, st: Settings, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """follow moves an active run along from its Job and pods; a run that can no longer
    finish is failed with its reason and its Job deleted."""
    meta, spec, status = body["metadata"], body["spec"], body.get("status") or {}
    ns, name, run = meta["namespace"], meta["name"], int(status["runGeneration"])
    job_name = status.get("jobName")
    if not job_name:
        start_run(cfg, st, body, patch, logger)
        return
    job = kube.get("Job", ns, job_name)
    pods = kube.list_objects("Pod", ns, f"{bb.LABEL_BENCHMARK}={name},{bb.LABEL_RUN}={run}")
    expected = int(spec.get("parallelism", 1))
    obs = bp.observe(job, pods, expected, _now(), st.unschedulable_grace)
    new: dict[str, Any] = {"phase": obs.phase, "reason": obs.reason, "message": obs.message}
    if obs.started and not status.get("startTime"):
        new["startTime"] = obs.started
    if obs.phase == "Running" and not status.get("startTime") and not obs.started:
        new["startTime"] = _ts(_now())
    # The operator's own watchdog: never Running past the deadline, even if the Job controller is not acting.
    if job is not None and obs.phase in ACTIVE:
        created = bp.parse_time(job["metadata"].get("creationTimestamp"))
        limit = int((job.get("spec") or {}).get("activeDeadlineSeconds") or 0)
        if created and limit and (_now() - created).total_seconds() > limit + 60:
            obs = bp.Observation("Failed", "DeadlineExceeded", f"the run exceeded its deadline of {limit} s")
            new.update(phase=obs.phase, reason=obs.reason, message=obs.message)
    if obs.phase == "Succeeded":
        new.update(finish(cfg, body, pods))
    if new["phase"] == "Failed":
        new.setdefault("completionTime", _ts(_now()))
        new.setdefault("verdict", "Fail")
        new.setdefault("verdictReasons", [f"{new['reason']}: {new['message']}"[:300]])
        if job is not None and obs.phase == "Failed":
            kube.delete("Job", ns, job_name)  # stop pods that would otherwise wait for their deadline
        metrics.ERRORS.labels("Benchmark", new["reason"]).inc()
    new.update(faults.step(cfg, body, status, new["phase"], _now()))
    _write(patch, body, status, new)


def finish(cfg: Config, body: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """finish has sluice-bench merge the pods' termination logs into results and a verdict
    (or a Failed NoResults when a pod ended without one, BadResults when they cannot be
    merged)."""
    meta, spec = body["metadata"], body["spec"]
    now = _now()
    msgs, missing = bp.termination_messages(pods)
    if missing:
        return {
            "phase": "Failed",
            "reason": "NoResults",
            "message": f"pod(s) {', '.join(missing)} ended without a termination message (no sluice-bench summary)",
        }
    exe = brep.binary()
    if exe is None:
        return {"phase": "Failed", "reason": "BenchBinaryMissing", "message": brep.MISSING}
    try:
        merged = br.merge(exe, msgs, spec.get("thresholds"))
    except br.ResultsError as exc:
        return {"phase": "Failed", "reason": "BadResults", "message": str(exc)[:500]}
    results = merged["results"]
    out: dict[str, Any] = {
        "results": results,
        "verdict": merged["verdict"],
        "verdictReasons": merged["verdictReasons"],
        "completionTime": _ts(now),
        "message": merged["message"],
    }
    if spec.get("compareTo"):
        other = kube.get("Benchmark", meta["namespace"], spec["compareTo"])
        out["comparison"] = br.comparison(exe, spec["compareTo"], results, other)
    passed = merged["verdict"] == "Pass"
    br.export(meta["namespace"], meta["name"], spec["scenario"], results, passed, now.timestamp())
    return out


def report(cfg: Config, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """report renders a Succeeded run's report into its ConfigMap (bounded attempts)."""
    meta, status = body["metadata"], body.get("status") or {}
    ns, name, run = meta["namespace"], meta["name"], int(status["runGeneration"])
    c = cond.get_condition(status.get("conditions"), "ReportReady")
    tries = int(status.get("reportAttempts") or 0)
    if (c and c.get("status") == "True") or tries >= REPORT_ATTEMPTS:
        return
    gen = meta.get("generation")
    exe = brep.binary()
    if exe is None:
        conds = cond.set_condition(
            status.get("conditions"),
            "ReportReady",
            False,
            "RendererMissing",
            brep.MISSING,
            gen,
        )
        cond.write_status(patch, status, {"conditions": conds, "reportAttempts": REPORT_ATTEMPTS})
        return
    pods = kube.list_objects("Pod", ns, f"{bb.LABEL_BENCHMARK}={name},{bb.LABEL_RUN}={run}")
    msgs, _ = bp.termination_messages(pods)
    inputs: dict[str, str] = {}
    for pod, text in msgs:
        full = brep.summary_from_log(brep.pod_log(ns, pod) or "")
        inputs[f"{pod}.json"] = json.dumps(full) if full else text
    try:
        rendered = brep.render(
            inputs,
            exe,
            faults=brep.faults_input(status.get("faults") or []),
            thresholds=body["spec"].get("thresholds"),
        )
        measured = brep.fault_figures(status.get("faults") or [], rendered.get("summary.json"))
        missed = brep.fault_bound_failures(rendered.get("summary.json")) if measured else []
        files, dropped = brep.fit(rendered)
    except (brep.ReportError, OSError, TimeoutError) as exc:
        conds = cond.set_condition(status.get("conditions"), "ReportReady", False, "RenderFailed", str(exc)[:300], gen)
        cond.write_status(patch, status, {"conditions": conds, "reportAttempts": tries + 1})
        return
    cm = bb.report(cfg, body, run, brep.configmap_payload(files))
    cm_name = cm["metadata"]["name"]
    kube.apply(cm)
    note = f"; left out to fit: {', '.join(dropped)}" if dropped else ""
    conds = cond.set_condition(
        status.get("conditions"),
        "ReportReady",
        True,
        "Rendered",
        f"{len(files)} file(s) in ConfigMap {cm_name}{note}",
        gen,
    )
    new: dict[str, Any] = {"conditions": conds, "reportConfigMap": cm_name, "reportAttempts": tries + 1}
    if measured:
        new["faults"] = measured
    if missed:
        # The fault bounds need the per-second series, which only the report has.
        kept = [r for r in status.get("verdictReasons") or [] if r not in ("all thresholds met", "no thresholds set")]
        new.update(verdict="Fail", verdictReasons=kept + missed)
        events.warn(body, reason="FaultBoundsMissed", message="; ".join(missed)[:1000])
    cond.write_status(patch, status, new)
    events.info(body, reason="ReportReady", message=f"report in ConfigMap {cm_name}")


def refresh_comparison(body: dict[str, Any], patch: Any) -> None:
    """refresh_comparison follows compareTo after the run: the other Benchmark may finish later."""
    meta, spec, status = body["metadata"], body["spec"], body.get("status") or {}
    if not spec.get("compareTo") or status.get("phase") != "Succeeded":
        if not spec.get("compareTo") and status.get("comparison"):
            cond.write_status(patch, status, {"comparison": None})
        return
    other = kube.get("Benchmark", meta["namespace"], spec["compareTo"])
    comparison = br.comparison(brep.binary(), spec["compareTo"], status.get("results"), other)
    cond.write_status(patch, status, {"comparison": comparison})


def reconcile(cfg: Config, st: Settings, body: dict[str, Any], patch: Any, logger: Any = log) -> None:
    """reconcile is the whole controller: start a run for a new spec, follow an active one,
    render the report of a finished one."""
    # Deletion bumps the generation (foreground deletion of the owned Job and
    # ConfigMaps): a Benchmark on its way out never starts another run.
    if body["metadata"].get("deletionTimestamp"):
        return
    metrics.RECONCILES.labels("Benchmark").inc()
    gen = int(body["metadata"].get("generation") or 1)
    status = body.get("status") or {}
    try:
        if status.get("runGeneration") != gen:
            start_run(cfg, st, body, patch, logger)
        elif status.get("phase") in ACTIVE:
            follow(cfg, st, body, patch, logger)
        elif status.get("phase") == "Succeeded":
            report(cfg, body, patch, logger)
    except ApiException as exc:
        if exc.status == 403 and "being terminated" in str(exc.body):
            logger.info(
                "namespace %s is being deleted: Benchmark %s left alone",
                body["metadata"]["namespace"],
                body["metadata"]["name"],
            )
            return
        raise
