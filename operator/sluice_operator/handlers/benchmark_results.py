"""What a finished run means, as sluice-bench decides it: the pods' termination
logs merged into status.results with the verdict against spec.thresholds, and
the comparison with another Benchmark, are computed by the sluice-bench binary
the operator ships (docs/benchmark-cr.md) and copied into status as they come;
here are the calls, the bounded history, and Prometheus gauges for the last
result of every Benchmark."""

from __future__ import annotations

import contextlib
import json
import pathlib
import subprocess
import tempfile
from typing import Any

from prometheus_client import Gauge

from ..metrics import REGISTRY
from . import benchmark_report as brep

HISTORY_LIMIT = 10
# Seconds sluice-bench may take to merge or compare (64 pods' logs merge in well under one).
TIMEOUT = 60

LAST = Gauge(
    "sluice_benchmark_last_result",
    "Last result of a Benchmark run, by metric (requests_per_second, p99_ms, lost, duplicated, produced, consumed).",
    ["namespace", "benchmark", "scenario", "metric"],
    registry=REGISTRY,
)
LAST_OP = Gauge(
    "sluice_benchmark_last_operation",
    "Last result of a Benchmark run per operation, by metric (requests_per_second, ms_per_request, p50_ms, p99_ms, "
    "p999_ms).",
    ["namespace", "benchmark", "scenario", "operation", "metric"],
    registry=REGISTRY,
)
LAST_PASS = Gauge(
    "sluice_benchmark_last_verdict_pass",
    "1 when the last run passed its thresholds.",
    ["namespace", "benchmark"],
    registry=REGISTRY,
)
LAST_COMPLETION = Gauge(
    "sluice_benchmark_last_completion_timestamp_seconds",
    "When the last run of a Benchmark completed (unix seconds).",
    ["namespace", "benchmark"],
    registry=REGISTRY,
)


class ResultsError(RuntimeError):
    """sluice-bench could not merge or compare; the message is its own explanation."""


def _run(exe: str, args: list[str], stdin: str | None = None, cwd: str | None = None) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            [exe, *args], input=stdin, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ResultsError(f"sluice-bench {args[0]}: {exc}") from exc
    # 99 is a missed threshold: the document is complete, the verdict says Fail.
    if proc.returncode not in (0, 99):
        lines = proc.stderr.strip().splitlines() or [f"exited {proc.returncode}"]
        raise ResultsError(lines[-1].removeprefix("sluice-bench: "))
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise ResultsError(f"sluice-bench {args[0]} printed no JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ResultsError(f"sluice-bench {args[0]} printed {type(doc).__name__}, not an object")
    return doc


def merge(exe: str, messages: list[tuple[str, str]], thresholds: dict[str, Any] | None) -> dict[str, Any]:
    """merge has `sluice-bench merge --status` merge the pods' termination messages (pod
    name, text) and judge them against spec.thresholds; it returns what goes into status:
    results, verdict, verdictReasons and message. Every pod ran with --pod-index, on
    queues of its own, hence --own-queues. Raises ResultsError naming a bad pod."""
    args = ["merge", "--status", "--own-queues"]
    t = thresholds or {}
    for key, flag in (("minRequestsPerSecond", "--min-rps"), ("maxP99Ms", "--max-p99")):
        if t.get(key) is not None:
            args += [flag, repr(float(t[key]))]
    if t.get("maxLost") is not None:
        args += ["--max-lost", str(int(t["maxLost"]))]
    with tempfile.TemporaryDirectory(prefix="sluice-merge-") as tmp:
        # One file per pod, named after it, so sluice-bench's errors name the pod.
        for pod, text in messages:
            (pathlib.Path(tmp) / pod).write_text(text)
        return _run(exe, [*args, *(pod for pod, _ in messages)], cwd=tmp)


def comparison(exe: str | None, name: str, mine: dict[str, Any] | None, other: dict[str, Any] | None) -> dict[str, Any]:
    """comparison is status.comparison from `sluice-bench compare --status`: this run's
    results beside those of Benchmark `name` (`other`, None when it does not exist)."""
    if exe is None:
        return {"benchmark": name, "message": brep.MISSING}
    try:
        return _run(
            exe, ["compare", "--status"], stdin=json.dumps({"benchmark": name, "results": mine, "other": other})
        )
    except ResultsError as exc:
        return {"benchmark": name, "message": str(exc)[:300]}


def history_entry(status: dict[str, Any]) -> dict[str, Any] | None:
    """history_entry summarizes a finished or abandoned run for status.history."""
    if status.get("runGeneration") is None:
        return None
    res = status.get("results") or {}
    entry = {
        "runGeneration": status["runGeneration"],
        "phase": status.get("phase") or "Pending",
        "reason": status.get("reason"),
        "verdict": status.get("verdict"),
        "requestsPerSecond": res.get("requestsPerSecond"),
        "p99Ms": res.get("p99Ms"),
        "lost": res.get("lost"),
        "duplicated": res.get("duplicated"),
        "jobName": status.get("jobName"),
        "reportConfigMap": status.get("reportConfigMap"),
        "startTime": status.get("startTime"),
        "completionTime": status.get("completionTime"),
    }
    return {k: v for k, v in entry.items() if v is not None}


def push_history(history: list[dict[str, Any]] | None, entry: dict[str, Any] | None) -> list[dict[str, Any]]:
    """push_history appends a run's summary, keeping the newest HISTORY_LIMIT entries."""
    out = list(history or [])
    if entry:
        out.append(entry)
    return out[-HISTORY_LIMIT:]


def export(ns: str, name: str, scenario: str, results: dict[str, Any], passed: bool, completed: float) -> None:
    """export sets the gauges of a Benchmark's last result."""
    for metric, key in (
        ("requests_per_second", "requestsPerSecond"),
        ("p99_ms", "p99Ms"),
        ("lost", "lost"),
        ("duplicated", "duplicated"),
        ("produced", "produced"),
        ("consumed", "consumed"),
    ):
        LAST.labels(ns, name, scenario, metric).set(float(results.get(key) or 0))
    for op, row in (results.get("operations") or {}).items():
        for metric, key in (
            ("requests_per_second", "requestsPerSecond"),
            ("ms_per_request", "msPerRequest"),
            ("p50_ms", "p50Ms"),
            ("p99_ms", "p99Ms"),
            ("p999_ms", "p999Ms"),
        ):
            LAST_OP.labels(ns, name, scenario, op, metric).set(float(row.get(key) or 0))
    LAST_PASS.labels(ns, name).set(1 if passed else 0)
    LAST_COMPLETION.labels(ns, name).set(completed)


def forget(ns: str, name: str) -> None:
    """forget drops every series of a deleted Benchmark."""
    for gauge in (LAST, LAST_OP, LAST_PASS, LAST_COMPLETION):
        for labels in list(gauge._metrics):  # prometheus_client keeps children by label tuple
            if labels[:2] == (ns, name):
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
