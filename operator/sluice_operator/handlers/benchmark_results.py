"""What a finished run means: the status.results shape, the verdict against
spec.thresholds, the comparison with another Benchmark, the bounded history,
and Prometheus gauges for the last result of every Benchmark."""

from __future__ import annotations

import contextlib
from typing import Any

from prometheus_client import Gauge

from ..metrics import REGISTRY

HISTORY_LIMIT = 10
OP_FIELDS = ("requestsPerSecond", "msPerRequest", "p50Ms", "p99Ms", "p999Ms", "requests", "errors")

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


def status_results(merged: dict[str, Any]) -> dict[str, Any]:
    """status_results is the part of a merged result that goes into status.results."""
    out: dict[str, Any] = {
        k: merged[k]
        for k in (
            "requestsPerSecond",
            "p99Ms",
            "produced",
            "consumed",
            "lost",
            "duplicated",
            "exact",
            "pods",
            "durationSeconds",
            "requests",
            "errors",
            "dropped",
        )
        if k in merged
    }
    out["operations"] = {
        name: {k: op[k] for k in (*OP_FIELDS, "p90Ms", "maxMs") if k in op} for name, op in merged["operations"].items()
    }
    if merged.get("truncated"):
        out["truncated"] = list(merged["truncated"])
    return out


def verdict(thresholds: dict[str, Any] | None, results: dict[str, Any]) -> tuple[str, list[str]]:
    """verdict is Pass or Fail against spec.thresholds (req/s over all operations, the
    worst operation's p99, lost messages), with one reason per missed threshold."""
    t = thresholds or {}
    reasons = []
    rps, p99, lost = results.get("requestsPerSecond", 0.0), results.get("p99Ms", 0.0), results.get("lost", 0)
    if t.get("minRequestsPerSecond") is not None and rps < float(t["minRequestsPerSecond"]):
        reasons.append(f"requests/s {rps:.1f} < minimum {float(t['minRequestsPerSecond']):.1f}")
    if t.get("maxP99Ms") is not None and p99 > float(t["maxP99Ms"]):
        reasons.append(f"p99 {p99:.3f} ms > maximum {float(t['maxP99Ms']):.3f} ms")
    if t.get("maxLost") is not None and lost > int(t["maxLost"]):
        reasons.append(f"lost {lost} > maximum {int(t['maxLost'])}")
    if reasons:
        return "Fail", reasons
    return "Pass", ["all thresholds met"] if t else ["no thresholds set"]


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def comparison(name: str, mine: dict[str, Any] | None, other: dict[str, Any] | None) -> dict[str, Any]:
    """comparison puts this run's numbers beside another Benchmark's, per operation and in
    total; ratios are this/other (req/s > 1 and latency < 1 mean this one is better)."""
    out: dict[str, Any] = {"benchmark": name}
    if other is None:
        out["message"] = f"Benchmark {name} does not exist"
        return out
    theirs = (other.get("status") or {}).get("results")
    if not theirs:
        out["message"] = f"Benchmark {name} has no results yet"
        return out
    if not mine:
        out["message"] = "this Benchmark has no results yet"
        return out
    ops: dict[str, dict[str, float]] = {}
    pairs = [("total", mine, theirs)]
    pairs += [
        (k, v, theirs["operations"][k])
        for k, v in mine.get("operations", {}).items()
        if k in (theirs.get("operations") or {})
    ]
    for op, a, b in pairs:
        row: dict[str, float] = {}
        for f in ("requestsPerSecond", "p50Ms", "p99Ms", "p999Ms"):
            if f in a and f in b:
                row[f] = a[f]
                row["other" + f[0].upper() + f[1:]] = b[f]
                r = _ratio(a[f], b[f])
                if r is not None:
                    row[f + "Ratio"] = r
        ops[op] = row
    out["operations"] = ops
    t = ops["total"]
    parts = [
        f"req/s x{t['requestsPerSecondRatio']}" if "requestsPerSecondRatio" in t else "",
        f"p99 x{t['p99MsRatio']}" if "p99MsRatio" in t else "",
    ]
    scen = (other.get("spec") or {}).get("scenario")
    out["message"] = f"vs {name} ({scen}): " + ", ".join(p for p in parts if p)
    return out


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
