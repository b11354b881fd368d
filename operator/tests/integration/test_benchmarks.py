"""Benchmarks on a real apiserver, scheduler, Job controller and kwok nodes.

No kubelet runs here, so the test plays its part where a test needs a pod in a
given state: it binds the pod to a node no simulated kubelet manages (kwok
would complete Job pods at once) and patches the pod's status exactly as the
kubelet reports ErrImagePull, a running container, an exit by SIGKILL or a
completion with its termination message. The Job controller, the scheduler
and the operator (under its own RBAC) are the real ones."""

from __future__ import annotations

import json
import pathlib
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from ..bench_pods import run_pods
from ..support import BENCH
from .conftest import Operator, _no_forbidden, apply, drop_namespace, get, kc, make_namespace, wait_for

HOLD = "it.sluice.dev/bench-hold"


@pytest.fixture(scope="module")
def bench_ns(sa_kubeconfig: pathlib.Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A namespace, its operator, and a node without any kubelet for the test to play one."""
    ns = make_namespace("sit-bench")
    node = f"sit-nokubelet-{uuid.uuid4().hex[:6]}"
    apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node, "labels": {HOLD: ns}}})
    op = Operator(
        sa_kubeconfig,
        ns,
        tmp_path_factory.mktemp("op") / "operator.log",
        {
            "SLUICE_OPERATOR_BENCH_INTERVAL": "1",
            "SLUICE_OPERATOR_BENCH_START_DELAY": "2",
            "SLUICE_OPERATOR_BENCH_UNSCHEDULABLE_SECONDS": "15",
            "SLUICE_OPERATOR_BENCH_BINARY": str(BENCH),
        },
    )
    yield ns, node
    # Pods on a node without a kubelet are never confirmed deleted: remove them as
    # the kubelet would have, and the node with them.
    kc("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0", check=False)
    kc("delete", "node", node, "--wait=false", check=False)
    drop_namespace(ns)
    op.stop()
    _no_forbidden(op)


def benchmark(ns: str, name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"scenario": "task-distribution", **spec},
    }


def held(ns: str) -> dict[str, Any]:
    # The scheduler cannot place these pods (the node is not Ready): the test binds them.
    return {"nodeClass": "any", "avoidTargets": False, "nodeSelector": {HOLD: ns}}


def status(ns: str, name: str) -> dict[str, Any]:
    return (get("benchmark", ns, name) or {}).get("status") or {}


def wait_phase(ns: str, name: str, phase: str, timeout: float = 60) -> dict[str, Any]:
    return wait_for(  # type: ignore[no-any-return]
        f"{name} {phase}", lambda: (s := status(ns, name)).get("phase") == phase and s, timeout=timeout
    )


def pods(ns: str, name: str, run: int = 1) -> list[dict[str, Any]]:
    sel = f"sluice.dev/benchmark={name},sluice.dev/run={run}"
    out = kc("get", "pods", "-n", ns, "-l", sel, "-o", "json")
    return sorted(json.loads(out.stdout)["items"], key=lambda p: p["metadata"]["name"])


def wait_pods(ns: str, name: str, n: int, run: int = 1) -> list[dict[str, Any]]:
    return wait_for(  # type: ignore[no-any-return]
        f"{n} pods of {name}", lambda: (p := pods(ns, name, run)) and len(p) == n and p
    )


def bind(ns: str, pod: str, node: str) -> None:
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}}
    kc("create", "--raw", f"/api/v1/namespaces/{ns}/pods/{pod}/binding", "-f", "-", stdin=json.dumps(body))


def kubelet_status(ns: str, pod: str, phase: str, state: dict[str, Any]) -> None:
    """kubelet_status reports the pod's container state as the kubelet would."""
    cs = {
        "name": "sluice-bench",
        "image": "sluice.dev/sluice-bench:dev",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": state,
    }
    body = {"status": {"phase": phase, "containerStatuses": [cs]}}
    kc("patch", "pod", pod, "-n", ns, "--subresource=status", "--type=merge", "-p", json.dumps(body))


def events_of(ns: str, name: str) -> list[str]:
    out = kc("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}", "-o", "json")
    return [e["reason"] for e in json.loads(out.stdout)["items"]]


def test_job_carries_image_args_placement_and_the_scheduler_keeps_it_off_the_servers_node(
    bench_ns: tuple[str, str],
) -> None:
    ns, _ = bench_ns
    # A server pod on sim-metal-1 (kwok marks it Running): the load must go elsewhere.
    server = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "fake-server",
            "namespace": ns,
            "labels": {"app.kubernetes.io/name": "sluice", "app.kubernetes.io/component": "server"},
        },
        "spec": {
            "nodeName": "sim-metal-1",
            "containers": [{"name": "s", "image": "sluice.dev/sluice-server:dev"}],
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
        },
    }
    apply(server)
    # Simulated nodes only (in full mode the real node is metal too, and kwok's taint is tolerated).
    placement = {
        "nodeClass": "metal",
        "policy": "required",
        "nodeSelector": {"sluice.dev/node-type": "simulated"},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
    }
    apply(benchmark(ns, "placed", parallelism=2, placement=placement))
    job = wait_for("Job placed-r1", lambda: get("job", ns, "placed-r1"))
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed",
        2,
        2,
        0,
    )
    (c,) = spec["template"]["spec"]["containers"]
    assert c["image"] == "sluice.dev/sluice-bench:dev"
    a = c["args"]
    assert a[:5] == ["run", "--scenario", "task-distribution", "-s", f"http://sluice-server.{ns}.svc:8888"]
    assert a[a.index("--pod-index") + 1] == "$(JOB_COMPLETION_INDEX)" and "--start-at" in a
    cm = get("configmap", ns, "placed-r1-params")
    assert cm and json.loads(cm["data"]["args.json"]) == a
    anti = spec["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    # The real scheduler: metal only, never the server's node.
    bound = wait_for(
        "bench pods bound",
        lambda: (p := pods(ns, "placed")) and len(p) == 2 and all(x["spec"].get("nodeName") for x in p) and p,
        timeout=60,
    )
    assert {p["spec"]["nodeName"] for p in bound} == {"sim-metal-2"}
    # kwok completes Job pods without running them: no summary, so the run fails and says why.
    st = wait_phase(ns, "placed", "Failed", timeout=120)
    assert st["reason"] == "NoResults" and "termination message" in st["message"] and st["verdict"] == "Fail"
    assert next(c for c in st["conditions"] if c["type"] == "Failed")["status"] == "True"
    assert "FailedNoResults" in events_of(ns, "placed")


def test_unschedulable_pods_fail_the_run_with_the_schedulers_reason(bench_ns: tuple[str, str]) -> None:
    ns, _ = bench_ns
    apply(
        benchmark(
            ns,
            "nowhere",
            placement={"nodeClass": "any", "avoidTargets": False, "nodeSelector": {"it.sluice.dev/no-such": "node"}},
        )
    )
    st = wait_phase(ns, "nowhere", "Failed")
    # The scheduler's own words (which filter refuses depends on the cluster's mode and taints).
    assert st["reason"] == "Unschedulable" and "nodes are available" in st["message"], st
    wait_for("Job deleted", lambda: get("job", ns, st["jobName"]) is None)


def test_image_pull_failure_fails_the_run_at_once(bench_ns: tuple[str, str]) -> None:
    ns, node = bench_ns
    apply(benchmark(ns, "nopull", image="sluice.dev/no-such-image:dev", placement=held(ns)))
    (p,) = wait_pods(ns, "nopull", 1)
    bind(ns, p["metadata"]["name"], node)
    kubelet_status(
        ns, p["metadata"]["name"], "Pending", {"waiting": {"reason": "ErrImagePull", "message": "pull access denied"}}
    )
    st = wait_phase(ns, "nopull", "Failed", timeout=30)
    assert st["reason"] == "ImagePullFailed" and "ErrImagePull" in st["message"]
    wait_for("Job deleted", lambda: get("job", ns, "nopull-r1") is None)


def test_a_run_whose_queue_a_queue_resource_names_fails_at_once(bench_ns: tuple[str, str]) -> None:
    """The run's queues are deleted and re-created before its load: a Queue resource
    naming one fails the run at once, naming it, and no Job is made."""
    ns, _ = bench_ns
    queue = {"pool": "nosuchpool", "name": "bench-clash-r1-p0-3"}
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "kept", "namespace": ns},
            "spec": queue,
        }
    )
    apply(benchmark(ns, "clash", placement=held(ns)))
    st = wait_phase(ns, "clash", "Failed", timeout=30)
    assert st["reason"] == "QueueConflict" and "Queue kept" in st["message"], st
    assert get("job", ns, "clash-r1") is None
    wait_for("QueueConflict Event", lambda: "QueueConflict" in events_of(ns, "clash"), timeout=30)
    kc("delete", "queue", "kept", "-n", ns, "--timeout=60s")


def test_a_pod_killed_mid_run_fails_the_run(bench_ns: tuple[str, str]) -> None:
    ns, node = bench_ns
    apply(benchmark(ns, "killed", placement=held(ns)))
    (p,) = wait_pods(ns, "killed", 1)
    name = p["metadata"]["name"]
    bind(ns, name, node)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kubelet_status(ns, name, "Running", {"running": {"startedAt": now}})
    st = wait_phase(ns, "killed", "Running", timeout=30)
    assert st["startTime"] == now
    kubelet_status(
        ns, name, "Failed", {"terminated": {"exitCode": 137, "reason": "Error", "startedAt": now, "finishedAt": now}}
    )
    st = wait_phase(ns, "killed", "Failed", timeout=30)
    assert st["reason"] == "PodKilled" and "signal 9" in st["message"]
    assert {"Pending", "Running", "FailedPodKilled"} <= set(events_of(ns, "killed"))


def test_deadline_fails_the_run(bench_ns: tuple[str, str]) -> None:
    ns, node = bench_ns
    apply(benchmark(ns, "slow", activeDeadlineSeconds=30, placement=held(ns)))
    (p,) = wait_pods(ns, "slow", 1)
    bind(ns, p["metadata"]["name"], node)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kubelet_status(ns, p["metadata"]["name"], "Running", {"running": {"startedAt": now}})
    wait_phase(ns, "slow", "Running", timeout=30)
    st = wait_phase(ns, "slow", "Failed", timeout=90)
    assert st["reason"] == "DeadlineExceeded" and "30 s" in st["message"]


@pytest.fixture(scope="module")
def termination_logs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two real sluice-bench pods' termination logs, run against a real sluice-server on loopback."""
    return [p.read_text() for p in run_pods(tmp_path_factory.mktemp("logs"))]


def complete(ns: str, name: str, node: str, logs: list[str], run: int = 1) -> float:
    """Run every pod of run `run` to completion with a termination message."""
    ps = wait_pods(ns, name, len(logs), run)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for p in ps:
        bind(ns, p["metadata"]["name"], node)
        kubelet_status(ns, p["metadata"]["name"], "Running", {"running": {"startedAt": now}})
    for p, text in zip(ps, logs, strict=True):
        kubelet_status(
            ns,
            p["metadata"]["name"],
            "Succeeded",
            {
                "terminated": {
                    "exitCode": 0,
                    "reason": "Completed",
                    "message": text,
                    "startedAt": now,
                    "finishedAt": now,
                }
            },
        )
    return time.monotonic()


def test_results_verdict_report_comparison_and_history(bench_ns: tuple[str, str], termination_logs: list[str]) -> None:
    ns, node = bench_ns
    t0 = time.monotonic()
    apply(benchmark(ns, "base", parallelism=2, placement=held(ns), thresholds={"maxLost": 0}))
    wait_for("Job base-r1", lambda: get("job", ns, "base-r1"))
    t_job = time.monotonic() - t0
    done = complete(ns, "base", node, termination_logs)
    st = wait_phase(ns, "base", "Succeeded", timeout=60)
    # Overheads of the CR (printed with -s; recorded in docs/benchmarks.md, never asserted).
    print(
        f"\nbenchmark overhead: apply -> Job {t_job:.2f} s; pods Succeeded -> results {time.monotonic() - done:.2f} s"
    )
    r = st["results"]
    assert r["pods"] == 2 and r["produced"] > 0 and r["lost"] == 0 and r["duplicated"] == 0 and r["exact"]
    assert {"post", "claim", "delete"} <= set(r["operations"]) and r["requestsPerSecond"] > 0
    assert st["verdict"] == "Pass" and st["startTime"] and st["completionTime"]
    # The report, from termination logs (no kubelet serves logs here).
    st = wait_for("report", lambda: (s := status(ns, "base")).get("reportConfigMap") and s, timeout=60)
    cm = get("configmap", ns, st["reportConfigMap"])
    assert cm and "report.html" in cm["data"] and "cdf.png" in cm["binaryData"]
    # kubectl get shows the answer.
    row = kc("get", "benchmark", "base", "-n", ns).stdout
    assert "task-distribution" in row and "Succeeded" in row and "Pass" in row

    # A threshold that cannot be met, compared with the first run.
    apply(
        benchmark(
            ns, "strict", parallelism=2, placement=held(ns), compareTo="base", thresholds={"minRequestsPerSecond": 1e9}
        )
    )
    complete(ns, "strict", node, termination_logs)
    st = wait_phase(ns, "strict", "Succeeded", timeout=60)
    assert st["verdict"] == "Fail" and "minimum" in st["verdictReasons"][0]
    cmp = st["comparison"]
    assert cmp["benchmark"] == "base" and cmp["operations"]["total"]["requestsPerSecondRatio"] == 1.0

    # A spec change starts a new run (new Job) and keeps the previous run in history.
    kc(
        "patch",
        "benchmark",
        "strict",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec": {"thresholds": {"minRequestsPerSecond": null, "maxLost": 0}}}',
    )
    st = wait_for("run 2", lambda: (s := status(ns, "strict")).get("runGeneration") == 2 and s.get("jobName") and s)
    assert st["jobName"] == "strict-r2" and get("job", ns, "strict-r2")
    assert [h["runGeneration"] for h in st["history"]] == [1] and st["history"][0]["verdict"] == "Fail"
    complete(ns, "strict", node, termination_logs, run=2)
    st = wait_phase(ns, "strict", "Succeeded", timeout=60)
    assert st["verdict"] == "Pass" and st["runGeneration"] == 2
    # Running may fall between two checks here (the test completes pods at once); killed's test sees it.
    assert {"Pending", "Succeeded"} <= set(events_of(ns, "strict"))


def test_a_spec_the_job_cannot_carry_fails_the_run_with_the_apiservers_words(bench_ns: tuple[str, str]) -> None:
    """Tolerations pass through to the pods unchecked by the CRD (they are Kubernetes'
    own type): one the apiserver refuses in the Job fails the run at once, with the
    apiserver's message, instead of a retry loop that only the operator's log explains."""
    ns, _ = bench_ns
    bad = {"key": "it.sluice.dev/x", "operator": "Sometimes", "effect": "NoSchedule"}
    apply(benchmark(ns, "badtol", placement={"nodeClass": "any", "tolerations": [bad]}))
    st = wait_phase(ns, "badtol", "Failed", timeout=30)
    assert st["reason"] == "Invalid", st
    assert "tolerations[0].operator" in st["message"] and "Sometimes" in st["message"], st
    assert st["verdict"] == "Fail" and st["verdictReasons"] == [st["message"]], st


def test_a_drain_the_operator_may_not_perform_waits_naming_the_permissions(bench_ns: tuple[str, str]) -> None:
    """Under the operator's own RBAC (deploy/rbac.yaml: no nodes patch, no pods/eviction)
    the apiserver's access reviews refuse what a drain needs: the Benchmark waits with
    FaultsPermitted=False naming both and makes no Job; kill faults need nothing more."""
    ns, _ = bench_ns
    drain = {"at": 1, "action": "drain", "target": "server"}
    apply(benchmark(ns, "drainer", placement=held(ns), faults=[drain]))

    def permitted(name: str) -> dict[str, Any] | None:
        conds = status(ns, name).get("conditions") or []
        return next((c for c in conds if c["type"] == "FaultsPermitted"), None)

    c = wait_for("FaultsPermitted on drainer", lambda: permitted("drainer"), timeout=30)
    assert (c["status"], c["reason"]) == ("False", "MissingPermission"), c
    assert "patch nodes (cluster-wide)" in c["message"] and f"create pods/eviction in namespace {ns}" in c["message"]
    st = status(ns, "drainer")
    assert (st["phase"], st["reason"]) == ("Pending", "FaultsNotPermitted") and not st.get("jobName"), st
    assert get("job", ns, "drainer-r1") is None
    wait_for("FaultsNotPermitted Event", lambda: "FaultsNotPermitted" in events_of(ns, "drainer"), timeout=30)
    kc("delete", "benchmark", "drainer", "-n", ns, "--timeout=60s")

    apply(benchmark(ns, "killer", placement=held(ns), faults=[{"at": 1, "action": "kill", "target": "server"}]))
    c = wait_for("FaultsPermitted on killer", lambda: permitted("killer"), timeout=30)
    assert (c["status"], c["reason"]) == ("True", "Permitted"), c
    kc("delete", "benchmark", "killer", "-n", ns, "--timeout=60s")
