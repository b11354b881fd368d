"""A Benchmark's runs end to end without a cluster: Kubernetes calls go to an in-memory
store, pods and Job states are set as the kubelet and Job controller would."""

from __future__ import annotations

import base64
import copy
import json
import zlib
from typing import Any

import pytest

from sluice_operator import events, kube
from sluice_operator.config import Config
from sluice_operator.handlers import benchmark as bh
from sluice_operator.handlers import benchmark_report as brep
from sluice_operator.handlers import benchmark_results as br

from .kube_double import Patch, Store

SETTINGS = bh.Settings(start_delay=1, unschedulable_grace=5, setup_timeout=5, interval=1)


def bits(*seq: int) -> str:
    """bits encodes message numbers as sluice-bench's delivery bitsets do
    (base64 of zlib of little-endian uint64 words)."""
    n = 0
    for i in seq:
        n |= 1 << i
    raw = n.to_bytes(max(8, (n.bit_length() + 63) // 64 * 8), "little")
    return base64.b64encode(zlib.compress(raw)).decode()


def log(start: int, end: int, produced: dict[str, str], seen: dict[str, str], dup: int = 0, **d: Any) -> dict[str, Any]:
    """log is one pod's termination message: a sluice-bench v1 compact summary whose
    histograms were shed (percentiles only), with the given delivery bitsets."""
    return {
        "v": 1,
        "scenario": "task-distribution",
        "pods": 1,
        "start": start,
        "end": end,
        "roles": [1, 2, 1, 2, 0, 0],
        "ops": {
            "post": {
                "n": 4,
                "ok": 3,
                "err": {"http_503": 1},
                "p50": 1.0,
                "p90": 2.0,
                "p99": 3.0,
                "p999": 4.0,
                "max": 5.0,
            }
        },
        "d": {"produced": 0, "consumed": d.get("consumed", 0), "dup": dup, "pb": produced, "sb": seen, **d},
    }


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> Store:
    s = Store()
    for fn in ("get", "list_objects", "apply", "delete"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))
    return s


@pytest.fixture
def posted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str]]:
    out: list[tuple[str, str, str]] = []
    monkeypatch.setattr(events, "info", lambda b, reason, message: out.append(("Normal", reason, message)))
    monkeypatch.setattr(events, "warn", lambda b, reason, message: out.append(("Warning", reason, message)))
    return out


def step(body: dict[str, Any]) -> dict[str, Any]:
    """One reconcile; the status patch is applied as the apiserver would (null deletes)."""
    patch = Patch()
    bh.reconcile(Config(), SETTINGS, copy.deepcopy(body), patch)
    st = dict(body.get("status") or {})
    for k, v in patch.status.items():
        if v is None:
            st.pop(k, None)
        else:
            st[k] = v
    body["status"] = st
    return body


def bench(gen: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": "td", "namespace": "shop", "uid": "u1", "generation": gen},
        "spec": {"scenario": "task-distribution", "parallelism": 2, "placement": {}, "target": {}, **spec},
    }


def finish_pods(store: Store, run: int, msgs: list[str]) -> None:
    """The kubelet ran the pods to completion; the Job controller marked the Job Complete."""
    job = store.objs[("Job", "shop", f"td-r{run}")]
    job["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": len(msgs)}
    for i, m in enumerate(msgs):
        labels = job["spec"]["template"]["metadata"]["labels"]
        state = {
            "terminated": {"exitCode": 0, "reason": "Completed", "message": m, "startedAt": "2026-11-22T08:00:00Z"}
        }
        store.objs[("Pod", "shop", f"td-r{run}-{i}-x")] = {
            "kind": "Pod",
            "metadata": {"name": f"td-r{run}-{i}-x", "namespace": "shop", "labels": labels},
            "spec": {"nodeName": "n1"},
            "status": {"phase": "Succeeded", "containerStatuses": [{"name": "sluice-bench", "state": state}]},
        }


def test_run_lifecycle_results_report_and_history(
    store: Store, posted: list[tuple[str, str, str]], monkeypatch: pytest.MonkeyPatch, bench_exe: str
) -> None:
    body = step(bench(thresholds={"maxLost": 0, "minRequestsPerSecond": 1}))
    st = body["status"]
    assert (st["phase"], st["runGeneration"], st["jobName"], st["parametersConfigMap"]) == (
        "Pending",
        1,
        "td-r1",
        "td-r1-params",
    )
    assert ("Job", "shop", "td-r1") in store.objs and ("ConfigMap", "shop", "td-r1-params") in store.objs
    assert posted[0][:2] == ("Normal", "Pending")

    a = log(1000, 3000, {"A": bits(0, 1, 2)}, {"A": bits(0, 1)}, consumed=2)
    b = log(1000, 3000, {"B": bits(0)}, {"A": bits(2), "B": bits(0)}, consumed=2)
    finish_pods(store, 1, [json.dumps(a), json.dumps(b)])
    body = step(body)
    st = body["status"]
    assert st["phase"] == "Succeeded" and st["verdict"] == "Pass", st
    r = st["results"]
    assert (r["produced"], r["consumed"], r["lost"], r["duplicated"], r["pods"]) == (4, 4, 0, 0, 2)
    assert r["operations"]["post"]["requests"] == 8 and r["requestsPerSecond"] == 3.0
    assert st["completionTime"] and st["startTime"] == "2026-11-22T08:00:00Z"
    assert ("Normal", "Succeeded") in [(k, r) for k, r, _ in posted]
    assert br.LAST.labels("shop", "td", "task-distribution", "requests_per_second")._value.get() == 3.0

    monkeypatch.setattr(brep, "pod_log", lambda ns, pod: None)
    body = step(body)
    cm = store.objs[("ConfigMap", "shop", "td-r1-report")]
    assert body["status"]["reportConfigMap"] == "td-r1-report" and "report.html" in cm["data"]
    assert any(n.endswith(".png") for n in cm["binaryData"])
    assert any(c["type"] == "ReportReady" and c["status"] == "True" for c in body["status"]["conditions"])

    # A new spec starts run 2 and keeps run 1's summary.
    body["metadata"]["generation"] = 2
    body["spec"]["parallelism"] = 1
    body = step(body)
    st = body["status"]
    assert (st["runGeneration"], st["phase"], st["jobName"]) == (2, "Pending", "td-r2")
    assert "results" not in st and "verdict" not in st
    (h,) = st["history"]
    assert (h["runGeneration"], h["phase"], h["verdict"], h["requestsPerSecond"]) == (1, "Succeeded", "Pass", 3.0)
    assert ("Job", "shop", "td-r2") in store.objs


def test_threshold_missed_and_pods_without_results(
    store: Store, posted: list[tuple[str, str, str]], bench_exe: str
) -> None:
    body = step(bench(thresholds={"maxLost": 0}))
    lossy = log(0, 1000, {"A": bits(0, 1, 2)}, {"A": bits(0)}, consumed=1)
    finish_pods(store, 1, [json.dumps(lossy), json.dumps(log(0, 1000, {}, {}))])
    st = step(body)["status"]
    assert st["phase"] == "Succeeded" and st["verdict"] == "Fail" and st["verdictReasons"] == ["lost 2 > maximum 0"]
    assert st["message"].endswith("lost 2, duplicated 0: Fail")

    store.objs.clear()
    body = step(bench())
    finish_pods(store, 1, ["", ""])  # simulated nodes complete pods without running them
    st = step(body)["status"]
    assert (st["phase"], st["reason"], st["verdict"]) == ("Failed", "NoResults", "Fail")
    assert "td-r1-0-x" in st["message"]
    assert posted[-1][:2] == ("Warning", "FailedNoResults")


def test_results_that_cannot_be_merged_fail_the_run_naming_the_pod(
    store: Store, posted: list[Any], bench_exe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = step(bench())
    finish_pods(store, 1, [json.dumps(log(0, 1000, {}, {})), "not json"])
    st = step(body)["status"]
    assert (st["phase"], st["reason"], st["verdict"]) == ("Failed", "BadResults", "Fail")
    assert "td-r1-1-x" in st["message"] and "not a sluice-bench summary" in st["message"], st["message"]

    store.objs.clear()
    monkeypatch.setenv("SLUICE_OPERATOR_BENCH_BINARY", "/nonexistent/sluice-bench")
    body = step(bench())
    finish_pods(store, 1, [json.dumps(log(0, 1000, {}, {}))])
    st = step(body)["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "BenchBinaryMissing") and "SLUICE_OPERATOR_BENCH_BINARY" in st[
        "message"
    ]


def test_comparison_follows_the_other_benchmark(store: Store, posted: list[Any], bench_exe: str) -> None:
    body = step(bench(compareTo="base"))
    finish_pods(store, 1, [json.dumps(log(1000, 3000, {"A": bits(0)}, {"A": bits(0)}, consumed=1))])
    st = step(body)["status"]
    assert st["comparison"] == {"benchmark": "base", "message": "Benchmark base does not exist"}
    other = {"kind": "Benchmark", "metadata": {"name": "base", "namespace": "shop"}, "spec": {"scenario": "s"}}
    other["status"] = {"results": {"requestsPerSecond": 0.75, "p99Ms": st["results"]["p99Ms"] * 2}}
    store.objs[("Benchmark", "shop", "base")] = other
    patch = Patch()
    bh.refresh_comparison(body, patch)
    c = patch.status["comparison"]
    assert c["operations"]["total"]["requestsPerSecondRatio"] == 2.0 and c["operations"]["total"]["p99MsRatio"] == 0.5
    assert c["message"] == "vs base (s): req/s x2.0, p99 x0.5"


def test_a_deleted_job_fails_the_run_and_a_failed_run_stops_its_job(store: Store, posted: list[Any]) -> None:
    body = step(bench())
    store.delete("Job", "shop", "td-r1")
    st = step(body)["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "JobDeleted")
    body = step(bench(gen=1))
    job = store.objs[("Job", "shop", "td-r1")]
    labels = job["spec"]["template"]["metadata"]["labels"]
    waiting = {"waiting": {"reason": "ErrImagePull", "message": "not found"}}
    store.objs[("Pod", "shop", "p")] = {
        "kind": "Pod",
        "metadata": {"name": "td-r1-0-a", "namespace": "shop", "labels": labels},
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "sluice-bench", "image": "i", "state": waiting}]},
    }
    st = step(body)["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "ImagePullFailed")
    assert ("Job", "shop", "td-r1") not in store.objs  # stopped, not left to its deadline
    # A finished run stays finished: further ticks change nothing.
    again = step(copy.deepcopy(body))
    assert again["status"] == body["status"]


def test_pool_queues_wait_for_the_pool_then_fail_after_the_setup_timeout(store: Store, posted: list[Any]) -> None:
    body = step(bench(pool="metal"))
    st = body["status"]
    assert (st["phase"], st["reason"]) == ("Pending", "PoolNotFound") and ("Job", "shop", "td-r1") not in store.objs
    body["status"]["runCreated"] = "2020-01-01T00:00:00Z"
    st = step(body)["status"]
    assert (st["phase"], st["reason"]) == ("Failed", "PoolNotFound") and "gave up" in st["message"]


def test_settings_refuse_bad_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLUICE_OPERATOR_BENCH_START_DELAY", "soon")
    with pytest.raises(ValueError, match="START_DELAY"):
        bh.Settings.from_env()


def test_a_benchmark_being_deleted_starts_nothing(store: Store, posted: list[Any]) -> None:
    body = bench(gen=5)
    body["metadata"]["deletionTimestamp"] = "2026-11-22T08:00:00Z"
    assert step(body)["status"] == {} and not store.objs and not posted


def test_a_run_whose_queues_a_queue_resource_names_fails_before_touching_them(store: Store, posted: list[Any]) -> None:
    """sluice-bench deletes and re-creates its run's queues before the load: a Queue
    resource naming one of them (same project) would lose its messages, so the run
    fails at once naming it and creates nothing. A Queue of another project, or a
    target elsewhere, is no conflict."""

    def queue(obj: str, **spec: str) -> None:
        store.apply({"kind": "Queue", "metadata": {"name": obj, "namespace": "shop"}, "spec": {"pool": "p", **spec}})

    queue("elsewhere", name="bench-td-r1-p1-2", project="other")
    queue("orders", name="bench-td-r1-p1-2")
    st = step(bench())["status"]
    assert (st["phase"], st["reason"], st["verdict"]) == ("Failed", "QueueConflict", "Fail"), st
    assert "Queue orders" in st["message"] and "bench-td-r1-p1-2" in st["message"], st["message"]
    assert not [k for k in store.objs if k[0] in ("Job", "ConfigMap")]
    assert ("Warning", "QueueConflict", st["message"]) in posted
    # A new spec generation runs under new names.
    st = step(bench(gen=2, **{"target": {}}) | {"status": st})["status"]
    assert st["phase"] == "Pending" and st["reason"] == "Starting", st
    # The run of an outside target touches no queue of this namespace's server.
    store.objs.pop(("Job", "shop", "td-r2"), None)
    queue("r3", name="bench-td-r3-p0-0")
    st = step(bench(gen=3, target={"url": "http://zaqar.example:8888"}))["status"]
    assert st["reason"] == "Starting", st
