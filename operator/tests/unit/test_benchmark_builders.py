"""Benchmark builders: the Job, its pods' command line and placement, and the parameters ConfigMap."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from sluice_operator.builders import benchmark as bb
from sluice_operator.config import Config

START = "2026-11-22T08:00:00Z"


def bench(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"scenario": "task-distribution", "parallelism": 3, "target": {}, "placement": {}}
    base.update(copy.deepcopy(spec))
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Benchmark",
        "metadata": {"name": "td", "namespace": "shop", "uid": "uid-td", "generation": 2},
        "spec": base,
    }


def pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    return job["spec"]["template"]["spec"]


def test_job_is_indexed_started_together_and_never_retried(cfg: Config) -> None:
    job = bb.job(cfg, bench(), 2, START, 15)
    spec = job["spec"]
    assert job["metadata"]["name"] == "td-r2"
    assert (spec["completionMode"], spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (
        "Indexed",
        3,
        3,
        0,
    )
    # 10 s preset + start delay + margin.
    assert spec["activeDeadlineSeconds"] == 10 + 15 + bb.DEADLINE_MARGIN
    (c,) = pod_spec(job)["containers"]
    assert c["image"] == "sluice.dev/sluice-bench:dev" and c["imagePullPolicy"] == "IfNotPresent"
    assert c["terminationMessagePath"] == "/dev/termination-log"
    args = c["args"]
    assert args[:5] == ["run", "--scenario", "task-distribution", "-s", "http://sluice-server.shop.svc:8888"]
    assert args[args.index("--start-at") + 1] == START
    assert args[args.index("--pod-index") + 1] == "$(JOB_COMPLETION_INDEX)"
    assert args[args.index("--termination-log") + 1] == "/dev/termination-log"
    assert args[args.index("--project-id") + 1] == "shop"
    assert args[args.index("-q") + 1] == "bench-td-r2"
    assert {"--json", "--series"} <= set(args)
    # Thresholds are judged on the merged result, never per pod.
    assert not {"--min-rps", "--max-p99", "--max-lost"} & set(args)
    env = {e["name"]: e for e in c["env"]}
    ref = env["JOB_COMPLETION_INDEX"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert ref == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    assert pod_spec(job)["restartPolicy"] == "Never"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "uid-td"
    assert job["spec"]["template"]["metadata"]["labels"]["sluice.dev/run"] == "2"


def test_default_placement_prefers_metal_and_never_shares_a_node_with_the_targets(cfg: Config) -> None:
    aff = pod_spec(bb.job(cfg, bench(), 1, START, 15))["affinity"]
    pref = aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["preference"]
    assert pref["matchExpressions"] == [{"key": "sluice.dev/node-class", "operator": "In", "values": ["metal"]}]
    (term,) = aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    expr = term["labelSelector"]["matchExpressions"][0]
    assert expr["key"] == "app.kubernetes.io/component" and set(expr["values"]) == {"server", "catalog", "backend"}
    # The load-generator pods spread over nodes too (softly).
    soft = aff["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert soft["labelSelector"]["matchLabels"]["sluice.dev/benchmark"] == "td"


def test_placement_is_overridable(cfg: Config) -> None:
    placement = {
        "nodeClass": "virtual",
        "policy": "required",
        "avoidTargets": False,
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}],
    }
    ps = pod_spec(bb.job(cfg, bench(placement=placement), 1, START, 15))
    terms = ps["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["virtual"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in ps["affinity"]["podAntiAffinity"]
    assert ps["nodeSelector"] == {"zone": "a"} and ps["tolerations"][0]["key"] == "kwok.x-k8s.io/node"
    ps = pod_spec(bb.job(cfg, bench(placement={"nodeClass": "any", "avoidTargets": False}), 1, START, 15))
    assert "nodeAffinity" not in ps["affinity"]


def test_custom_scenario_url_token_image_and_deadline(cfg: Config) -> None:
    custom = {
        "producers": {"processes": 2, "workers": 8},
        "consumers": {"processes": 1, "workers": 4},
        "observers": {"processes": 0, "workers": 0},
        "duration": 30,
        "messageSize": 512,
        "queues": 2,
        "rate": 250,
    }
    body = bench(
        scenario="custom",
        custom=custom,
        target={"url": "http://zaqar.example:8888", "project": "p1", "tokenSecretRef": {"name": "tok"}},
        image="example/bench:1",
        activeDeadlineSeconds=900,
    )
    job = bb.job(cfg, body, 1, START, 15)
    (c,) = pod_spec(job)["containers"]
    a = c["args"]
    flags = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("-")}
    assert flags["-s"] == "http://zaqar.example:8888" and flags["--project-id"] == "p1"
    assert (flags["-pp"], flags["-pw"], flags["-cp"], flags["-cw"], flags["-op"], flags["-ow"]) == (
        "2",
        "8",
        "1",
        "4",
        "0",
        "0",
    )
    assert (flags["-t"], flags["--message-size"], flags["-qno"], flags["--rate"]) == ("30", "512", "2", "250")
    assert "--verify" in a and flags["--token"] == "$(SLUICE_BENCH_TOKEN)"
    token = next(e for e in c["env"] if e["name"] == "SLUICE_BENCH_TOKEN")
    assert token["valueFrom"]["secretKeyRef"] == {"name": "tok", "key": "token"}
    assert c["image"] == "example/bench:1" and job["spec"]["activeDeadlineSeconds"] == 900
    assert bb.deadline({"scenario": "custom", "custom": custom}, 15) == 30 + 15 + bb.DEADLINE_MARGIN


def test_pool_runs_name_their_queues_and_keep_them(cfg: Config) -> None:
    body = bench(pool="metal", parallelism=2, scenario="point-to-point")
    a = pod_spec(bb.job(cfg, body, 4, START, 15))["containers"][0]["args"]
    assert "--skip_queue_reset" in a and a[a.index("-qno") + 1] == "1"
    assert bb.queue_names(body, 4) == ["bench-td-r4-p0-0", "bench-td-r4-p1-0"]
    assert len(bb.queue_names(bench(pool="metal"), 1)) == 3 * 4


def test_parameters_configmap_records_the_exact_run(cfg: Config) -> None:
    body = bench(thresholds={"maxLost": 0})
    cm = bb.parameters(cfg, body, 2, START, "sluice.dev/sluice-bench:dev")
    assert cm["metadata"]["name"] == "td-r2-params"
    data = cm["data"]
    assert json.loads(data["args.json"]) == bb.bench_args(cfg, body, 2, START)
    assert json.loads(data["spec.json"]) == body["spec"]
    assert data["command"].startswith("sluice-bench run --scenario task-distribution")
    assert data["start-at"] == START and data["image"] == "sluice.dev/sluice-bench:dev"


@pytest.mark.parametrize("name", ["x" * 63, "a-very-long-benchmark-name-that-goes-on-and-on-and-on-for-ever"])
def test_names_stay_within_kubernetes_limits(name: str) -> None:
    assert len(bb.job_name(name, 123456)) <= 52
    assert len(bb.params_name(name, 123456)) <= 63 and len(bb.report_name(name, 1)) <= 63
    assert bb.job_name(name, 1) != bb.job_name(name, 2)


def test_notifications_pods_expose_their_webhook_receiver(cfg: Config) -> None:
    """The server posts to each pod's own receiver at the pod's IP; the other
    scenarios open no port."""
    (c,) = pod_spec(bb.job(cfg, bench(scenario="notifications", pool="web"), 1, START, 15))["containers"]
    args = c["args"]
    assert args[args.index("--receiver-listen") + 1] == "0.0.0.0:9000"
    assert args[args.index("--receiver-url") + 1] == "http://$(SLUICE_BENCH_POD_IP):9000/notify"
    assert args[args.index("-qno") + 1] == "1"
    env = {e["name"]: e for e in c["env"]}
    assert env["SLUICE_BENCH_POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert c["ports"] == [{"name": "webhook", "containerPort": 9000}]
    (plain,) = pod_spec(bb.job(cfg, bench(), 1, START, 15))["containers"]
    assert "ports" not in plain and "--receiver-url" not in plain["args"]
    assert not any(e["name"] == "SLUICE_BENCH_POD_IP" for e in plain["env"])


def test_move_passes_the_pool_and_the_admin_token_only_through_the_environment(cfg: Config) -> None:
    body = bench(move={"pool": "web-1", "afterSeconds": 3, "timeoutSeconds": 40}, duration=10)
    job = bb.job(cfg, body, 2, START, 15)
    (c,) = pod_spec(job)["containers"]
    a = c["args"]
    flags = {a[i]: a[i + 1] for i in range(len(a) - 1) if a[i].startswith("-")}
    assert (flags["--move-to-pool"], flags["--move-after"], flags["--move-timeout"]) == ("web-1", "3s", "40s")
    admin = next(e for e in c["env"] if e["name"] == bb.ADMIN_TOKEN_ENV)
    assert admin["valueFrom"]["secretKeyRef"] == {"name": "sluice-server-admin", "key": "token"}
    # The token never appears in the recorded command line.
    params = bb.parameters(cfg, body, 2, START, "img")
    assert "ADMIN" not in params["data"]["command"] and "--token" not in a
    # The run's deadline leaves room for the move after the load.
    assert job["spec"]["activeDeadlineSeconds"] == 10 + 15 + bb.DEADLINE_MARGIN + 40
    own = bench(move={"pool": "p", "adminTokenSecretRef": {"name": "ops", "key": "admin"}})
    (c,) = pod_spec(bb.job(cfg, own, 1, START, 15))["containers"]
    admin = next(e for e in c["env"] if e["name"] == bb.ADMIN_TOKEN_ENV)
    assert admin["valueFrom"]["secretKeyRef"] == {"name": "ops", "key": "admin"}
    assert "--move-after" in c["args"] and c["args"][c["args"].index("--move-after") + 1] == "2s"


def test_runs_without_a_move_get_no_admin_token(cfg: Config) -> None:
    (c,) = pod_spec(bb.job(cfg, bench(), 1, START, 15))["containers"]
    assert all(e["name"] != bb.ADMIN_TOKEN_ENV for e in c["env"])
    assert "--move-to-pool" not in c["args"]
