"""Benchmarks with real pods: zaqar-bench's task-distribution against a
2-shard Redis Pool completes with every message consumed exactly once, its
results in status and its plots in the report ConfigMap; a threshold no run
can meet ends with verdict Fail; compareTo fills the comparison."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from typing import Any

import pytest

from ..integration.conftest import apply, condition, get, kc, status, wait_for
from .test_pools import pool, ready

FINAL = ("Succeeded", "Failed")


def benchmark(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "scenario": "task-distribution",
            "pool": "bench",
            "duration": 10,
            "parallelism": 1,
            # One real node runs the server, the shards and the load: keep the
            # metal preference, let it share the node with what it measures.
            "placement": {"nodeClass": "metal", "policy": "preferred", "avoidTargets": False},
            **spec,
        },
    }


def run(ns: str, obj: dict[str, Any]) -> dict[str, Any]:
    name = obj["metadata"]["name"]
    start = time.monotonic()
    apply(obj)
    running = wait_for(
        f"{name} Running",
        lambda: (b := get("benchmark", ns, name)) and (b.get("status") or {}).get("phase") in ("Running", *FINAL),
        timeout=600,
    )
    to_running = time.monotonic() - start
    done = wait_for(
        f"{name} finished",
        lambda: (b := get("benchmark", ns, name)) and b["status"].get("phase") in FINAL and b,
        timeout=600,
    )
    job = get("job", ns, done["status"].get("jobName") or "")
    lag = ""
    if job and job["status"].get("completionTime") and done["status"].get("completionTime"):
        waited = _seconds(done["status"]["completionTime"]) - _seconds(job["status"]["completionTime"])
        lag = f", Job complete->results {waited:.0f}s"
    print(f"\nBenchmark {name}: apply->Running {to_running:.1f}s, total {time.monotonic() - start:.1f}s{lag}")
    assert running
    return done


def _seconds(ts: str) -> float:
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def bench_pool(ns: str) -> str:
    apply(pool(ns, "bench", 2))
    wait_for("Pool bench Ready", lambda: ready("pool", ns, "bench"), timeout=300)
    return ns


def test_task_distribution_consumes_every_message_once(bench_pool: str) -> None:
    ns = bench_pool
    b = run(ns, benchmark(ns, "td", thresholds={"maxLost": 0}))
    st = b["status"]
    r = st.get("results") or {}
    if not r.get("produced"):
        # Nothing acknowledged (the verdict fails it): show why, from the run
        # and the server, before the namespace goes.
        logs = kc("logs", "deployment/sluice-server", "-n", ns, "--tail=40", check=False)
        seen = json.dumps(st, default=str)[:3000]
        pytest.fail(f"no post acknowledged: {seen}\nserver log:\n{logs.stdout}{logs.stderr}")
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"))
    assert r["consumed"] == r["produced"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["exact"] is True, r
    assert {"post", "claim", "delete"} <= set(r["operations"]), r["operations"].keys()
    assert r["requestsPerSecond"] > 0 and r["p99Ms"] > 0
    assert st["verdict"] == "Pass" and condition(b, "Complete").get("status") == "True"
    # The report (rendered after the run: condition ReportReady): CSV series,
    # PNG plots (non-empty, real PNGs) and the HTML page.
    b = wait_for(
        "report rendered", lambda: (o := get("benchmark", ns, "td")) and status(o).get("reportConfigMap") and o
    )
    assert condition(b, "ReportReady").get("status") == "True"
    cm = get("configmap", ns, b["status"]["reportConfigMap"])
    assert cm is not None
    pngs = {k: base64.b64decode(v) for k, v in (cm.get("binaryData") or {}).items() if k.endswith(".png")}
    assert pngs and all(len(v) > 1000 and v[:8] == b"\x89PNG\r\n\x1a\n" for v in pngs.values()), list(pngs)
    assert "<html" in cm["data"]["report.html"].lower()
    assert any(k.endswith(".csv") and v.count("\n") > 2 for k, v in cm["data"].items())
    # Events tell the phases.
    reasons = kc(
        "get", "events", "-n", ns, "--field-selector", "involvedObject.name=td", "-o", "jsonpath={.items[*].reason}"
    ).stdout.split()
    assert {"Pending", "Running", "Succeeded"} <= set(reasons), reasons


def test_unmeetable_threshold_fails_and_compare_to_fills_comparison(bench_pool: str) -> None:
    ns = bench_pool
    wait_for("td finished", lambda: (b := get("benchmark", ns, "td")) and b["status"].get("results"), timeout=600)
    b = run(ns, benchmark(ns, "td-strict", thresholds={"minRequestsPerSecond": 1e9, "maxLost": 0}, compareTo="td"))
    st = b["status"]
    assert st["phase"] == "Succeeded" and st["verdict"] == "Fail", st
    assert any(r.startswith("requests/s") for r in st["verdictReasons"]), st["verdictReasons"]
    comp = st["comparison"]
    assert comp["benchmark"] == "td" and {"post", "claim", "delete"} <= set(comp["operations"]), comp


def test_message_size_the_queues_refuse_fails_before_the_load(bench_pool: str) -> None:
    """A custom messageSize whose POSTs the namespace's server refuses (over
    its queues' _max_messages_post_size, 262144): the run fails at once,
    saying why, instead of posting for its whole duration into 400s."""
    ns = bench_pool
    custom = {"producers": {"workers": 2}, "consumers": {"workers": 2}, "observers": {"workers": 0}}
    b = run(ns, benchmark(ns, "too-large", scenario="custom", custom={**custom, "messageSize": 300000, "queues": 1}))
    st = b["status"]
    assert st["phase"] == "Failed" and st["reason"] == "PodFailed", st
    assert "_max_messages_post_size" in st["message"] and "262144" in st["message"], st["message"]
    assert not st.get("results"), st
