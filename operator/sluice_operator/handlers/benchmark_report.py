"""The full report of a run (report.html, PNG plots, CSV time series) in a
ConfigMap referenced from status.reportConfigMap.

Each pod prints its full summary with per-second series on stdout
(`run --json --series`); the operator reads the pods' logs, merges them and
renders the report with the sluice-bench binary it ships
(`sluice-bench merge --out DIR` then `sluice-bench report DIR`). When a log
cannot be read (a node without a kubelet, a log already rotated) the pod's
termination message is used instead: totals, percentiles and the CDF stay
exact, only the time plots lose that pod's series. The report pods need no
API access, and the operator needs only `get pods/log`."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import pathlib
import shutil
import subprocess
import tempfile
from typing import Any

from kubernetes import client

log = logging.getLogger(__name__)

# Said wherever sluice-bench is needed and cannot be found.
MISSING = "sluice-bench is not installed next to the operator (SLUICE_OPERATOR_BENCH_BINARY)"

# A ConfigMap holds at most 1 MiB; leave room for metadata.
MAX_BYTES = 900 * 1024


class ReportError(RuntimeError):
    """The report could not be rendered; the message says why."""


def binary() -> str | None:
    """binary locates sluice-bench: SLUICE_OPERATOR_BENCH_BINARY, else PATH."""
    configured = os.environ.get("SLUICE_OPERATOR_BENCH_BINARY", "").strip()
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("sluice-bench")


def summary_from_log(text: str) -> dict[str, Any] | None:
    """summary_from_log finds the JSON summary in a pod's log (stderr lines may precede it)."""
    start = text.find("{\n") if text.find("{\n") >= 0 else text.find("{")
    while start >= 0:
        try:
            doc = json.loads(text[start:])
            return doc if isinstance(doc, dict) and "ops" in doc else None
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
    return None


def pod_log(ns: str, pod: str) -> str | None:
    """pod_log reads a pod's log, None when the node cannot serve it."""
    try:
        return str(
            client.CoreV1Api().read_namespaced_pod_log(pod, ns, container="sluice-bench", _request_timeout=(5, 30))
        )
    except Exception as exc:  # any transport or API failure means: fall back to the termination message
        log.info("log of pod %s/%s unavailable (%s); using its termination message", ns, pod, exc)
        return None


def faults_input(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """faults_input is sluice-bench's --faults list from status.faults: the faults
    that happened, at the millisecond they happened."""
    out = []
    for r in records:
        if r.get("result") == "Injected" and r.get("injected"):
            at = dt.datetime.fromisoformat(str(r["injected"]).replace("Z", "+00:00"))
            out.append({"name": r["name"], "at_unix_ms": int(at.timestamp() * 1000)})
    return out


# sluice-bench's per-fault figures, as status.faults spells them.
FAULT_FIGURES = {
    "first_error_s": "firstErrorSeconds",
    "unavailable_s": "unavailableSeconds",
    "recovery_s": "recoverySeconds",
    "baseline_rps": "baselineRequestsPerSecond",
    "errors": "errors",
    # Of those errors, the ones whose response carried Retry-After, by reason
    # ({responses, min, max, unreadable}: one-word keys, spelled alike in both).
    "retry_after": "retryAfter",
}


def fault_figures(records: list[dict[str, Any]], summary: bytes | None) -> list[dict[str, Any]] | None:
    """fault_figures adds what sluice-bench measured around each injected fault
    (from the merged summary) to its status.faults record; None when there is
    nothing to add."""
    if not records or not summary:
        return None
    measured = {f.get("name"): f for f in json.loads(summary).get("faults") or []}
    out = []
    for r in records:
        m = measured.get(r.get("name")) if r.get("result") == "Injected" else None
        out.append({**r, **{k: m.get(g) for g, k in FAULT_FIGURES.items()}} if m else r)
    return out if out != records else None


# spec.thresholds that bound faults, and the sluice-bench merge flag for each.
FAULT_BOUNDS = {"maxUnavailableSeconds": "--max-unavailable", "maxRecoverySeconds": "--max-recovery"}


def fault_bound_failures(summary: bytes | None) -> list[str]:
    """fault_bound_failures is sluice-bench's verdict on the fault bounds it was given."""
    verdict = (json.loads(summary).get("thresholds") or {}) if summary else {}
    return [str(f) for f in verdict.get("failures") or []]


def render(
    inputs: dict[str, str],
    exe: str,
    timeout: float = 120,
    faults: list[dict[str, Any]] | None = None,
    thresholds: dict[str, Any] | None = None,
) -> dict[str, bytes]:
    """render merges the inputs (file name -> JSON text: summaries or termination logs) and
    returns the report's files (name -> bytes); faults (faults_input) are measured, marked
    and judged against the fault bounds among thresholds (summary.json's verdict)."""
    with tempfile.TemporaryDirectory(prefix="sluice-report-") as tmp:
        root = pathlib.Path(tmp)
        paths = []
        for name, text in sorted(inputs.items()):
            p = root / "in" / name
            p.parent.mkdir(exist_ok=True)
            p.write_text(text)
            paths.append(str(p))
        out = root / "merged"
        merge = [exe, "merge", "--out", str(out)]
        if faults:
            (root / "faults.json").write_text(json.dumps(faults))
            merge += ["--faults", str(root / "faults.json")]
            bounds = thresholds or {}
            for key, flag in FAULT_BOUNDS.items():
                if bounds.get(key) is not None:
                    merge += [flag, str(float(bounds[key]))]
        for args in ([*merge, *paths], [exe, "report", str(out)]):
            proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
            if proc.returncode not in (0, 99):
                raise ReportError(
                    f"{pathlib.Path(args[0]).name} {args[1]} exited {proc.returncode}: {proc.stderr[-300:]}"
                )
        return {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.is_file()}


def fit(files: dict[str, bytes]) -> tuple[dict[str, bytes], list[str]]:
    """fit keeps the report under a ConfigMap's size: report.html (plots inlined) always,
    then the PNGs, the CSVs and summary.json while they fit. Returns the kept files and
    the names left out."""
    order = ["report.html", *sorted(n for n in files if n.endswith(".png"))]
    order += [*sorted(n for n in files if n.endswith(".csv")), "summary.json"]
    order += sorted(n for n in files if n not in order)
    kept, dropped, size = {}, [], 0
    for name in order:
        if name not in files:
            continue
        data = files[name]
        cost = len(data) if not name.endswith(".png") else (len(data) + 2) // 3 * 4
        if size + cost <= MAX_BYTES or name == "report.html":
            kept[name] = data
            size += cost
        else:
            dropped.append(name)
    return kept, dropped


def configmap_payload(files: dict[str, bytes]) -> dict[str, Any]:
    """configmap_payload splits files into data (text) and binaryData (PNG, base64)."""
    data, binary_data = {}, {}
    for name, raw in files.items():
        if name.endswith(".png"):
            binary_data[name] = base64.b64encode(raw).decode()
        else:
            data[name] = raw.decode("utf-8", errors="replace")
    return {"data": data, "binaryData": binary_data}
