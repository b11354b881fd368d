"""Where a run stands, from its Job and pods as the apiserver reports them: a
pure function, so every failure mode (unschedulable, image pull, deadline,
pod killed, no results) is decided the same way in tests and in the cluster."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

# Waiting reasons that never resolve by waiting: the Job would sit in
# Pending until its deadline, so the run is failed at once.
PULL_FAILURES = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull")
CONFIG_FAILURES = ("CreateContainerConfigError", "CreateContainerError", "RunContainerError")
# sluice-bench exits 99 when a threshold is missed; the pods carry no thresholds,
# but an image configured with them still ends with a usable summary.
THRESHOLD_EXIT = 99


@dataclass(frozen=True)
class Observation:
    """Observation is the run's phase, with a reason and message for Failed (and Pending)."""

    phase: str  # Pending, Running, Succeeded (pods done: merge their logs), Failed
    reason: str
    message: str
    started: str | None = None  # when the first container started


def parse_time(s: str | None) -> dt.datetime | None:
    """parse_time reads an RFC 3339 timestamp as the apiserver writes it."""
    if not s:
        return None
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00"))


def _job_condition(job: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype and c.get("status") == "True":
            return c
    return None


def _name(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def _terminated(pod: dict[str, Any]) -> dict[str, Any] | None:
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        t = (cs.get("state") or {}).get("terminated")
        if t:
            return dict(t)
    return None


def _killed(pod: dict[str, Any], term: dict[str, Any]) -> str:
    code = term.get("exitCode")
    why = term.get("reason") or "Error"
    if why == "OOMKilled":
        return f"pod {_name(pod)} was killed mid-run: out of memory (exit {code})"
    if isinstance(code, int) and code > 128:
        return f"pod {_name(pod)} was killed mid-run by signal {code - 128} (exit {code}, {why})"
    msg = (term.get("message") or "").strip()
    detail = f": {msg[:200]}" if msg and not msg.startswith("{") else ""
    return f"pod {_name(pod)} failed with exit {code} ({why}){detail}"


def pod_failure(pod: dict[str, Any]) -> tuple[str, str] | None:
    """pod_failure is (reason, message) when a pod can no longer produce a result."""
    st = pod.get("status") or {}
    for cs in st.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        why = waiting.get("reason", "")
        if why in PULL_FAILURES:
            image = cs.get("image") or "?"
            return (
                "ImagePullFailed",
                f"pod {_name(pod)} cannot pull image {image}: {why} {waiting.get('message', '')}".strip(),
            )
        if why in CONFIG_FAILURES:
            return "ContainerFailed", f"pod {_name(pod)}: {why} {waiting.get('message', '')}".strip()
    term = _terminated(pod)
    if st.get("phase") == "Failed" or (term and term.get("exitCode") not in (0, THRESHOLD_EXIT)):
        if term and term.get("exitCode") == THRESHOLD_EXIT:
            return None
        if not term:
            why = st.get("reason") or "Failed"
            return "PodKilled", f"pod {_name(pod)} was stopped mid-run ({why}): {st.get('message', '')}".strip()
        reason = "PodKilled" if (term.get("exitCode") or 0) > 128 or term.get("reason") == "OOMKilled" else "PodFailed"
        return reason, _killed(pod, term)
    return None


def unschedulable(pod: dict[str, Any]) -> tuple[str, dt.datetime | None] | None:
    """unschedulable is (the scheduler's message, since when) for a pod it cannot place."""
    if (pod.get("spec") or {}).get("nodeName"):
        return None
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return c.get("message") or "no node fits", parse_time(c.get("lastTransitionTime"))
    return None


def observe(
    job: dict[str, Any] | None,
    pods: list[dict[str, Any]],
    expected: int,
    now: dt.datetime,
    unschedulable_grace: float,
) -> Observation:
    """observe decides the run's phase from its Job and pods."""
    if job is None:
        return Observation("Failed", "JobDeleted", "the run's Job was deleted before it finished")
    # Since Kubernetes 1.31 a failing Job is first marked FailureTarget and only
    # Failed once its pods are gone, which can take their whole grace period
    # (or forever for pods on an unreachable node): the verdict is already in.
    failed = _job_condition(job, "Failed") or _job_condition(job, "FailureTarget")
    # A failing pod tells more than the Job's summary: check pods first.
    for pod in sorted(pods, key=_name):
        f = pod_failure(pod)
        if f:
            return Observation("Failed", f[0], f[1])
    if failed:
        why = failed.get("reason") or "Failed"
        if why == "DeadlineExceeded":
            secs = (job.get("spec") or {}).get("activeDeadlineSeconds")
            return Observation(
                "Failed", "DeadlineExceeded", f"the run exceeded its deadline of {secs} s and was stopped"
            )
        if why == "BackoffLimitExceeded":
            # The failed pod is gone (deleted or evicted): it was stopped mid-run.
            n = (job.get("status") or {}).get("failed", 1)
            return Observation(
                "Failed", "PodKilled", f"{n} pod(s) of the run were stopped mid-run (deleted or evicted)"
            )
        return Observation("Failed", why, failed.get("message") or f"the Job failed ({why})")
    started = [
        t
        for p in pods
        for cs in (p.get("status") or {}).get("containerStatuses") or []
        for t in [
            ((cs.get("state") or {}).get("running") or (cs.get("state") or {}).get("terminated") or {}).get("startedAt")
        ]
        if t
    ]
    first = min(started) if started else None
    if _job_condition(job, "Complete") or _job_condition(job, "SuccessCriteriaMet"):
        return Observation("Succeeded", "Completed", f"{expected} pod(s) completed", first)
    for pod in sorted(pods, key=_name):
        u = unschedulable(pod)
        if u:
            msg, since = u
            waited = (now - since).total_seconds() if since else 0.0
            if waited >= unschedulable_grace:
                return Observation(
                    "Failed", "Unschedulable", f"pod {_name(pod)} cannot be scheduled for {waited:.0f} s: {msg}"
                )
            return Observation("Pending", "Unschedulable", f"pod {_name(pod)}: {msg}")
    running = [p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded")]
    if running:
        return Observation("Running", "Running", f"{len(running)}/{expected} pod(s) running or done", first)
    return Observation("Pending", "Starting", f"{len(pods)}/{expected} pod(s) created, none running yet")


def termination_messages(pods: list[dict[str, Any]]) -> tuple[list[tuple[str, str]], list[str]]:
    """termination_messages are (pod, message) of every pod that ended with one, and the
    names of the pods that ended without."""
    got, missing = [], []
    for pod in sorted(pods, key=_name):
        term = _terminated(pod)
        msg = (term or {}).get("message") or ""
        if msg.strip():
            got.append((_name(pod), msg))
        else:
            missing.append(_name(pod))
    return got, missing
