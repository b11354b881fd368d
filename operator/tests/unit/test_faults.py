"""Benchmark faults: what is due when, which pod a fault hits, and the injection
and undoing of each kind on the in-memory store."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pytest

from sluice_operator import events, kube
from sluice_operator.builders import common
from sluice_operator.config import Config
from sluice_operator.handlers import faults

from .kube_double import Store

T0 = dt.datetime(2026, 11, 23, 12, 0, 0, tzinfo=dt.UTC)
NS = "bench"


def pod(
    name: str, labels: dict[str, str], phase: str = "Running", node: str = "n1", deleting: bool = False
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": labels}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T12:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node}, "status": {"phase": phase}}


def test_due_generated() -> None:
    """Generated fault lists and clocks: due is exactly the faults whose time has
    passed and that are not recorded yet, earliest first."""
    rng = random.Random(5)
    for _ in range(300):
        spec = [
            {"at": rng.choice([0, 0.5, 1, 2.25, 7, 30]), "action": "kill", "target": "server"}
            for _ in range(rng.randint(0, 8))
        ]
        recorded = [{"index": i} for i in range(len(spec)) if rng.random() < 0.3]
        now = T0 + dt.timedelta(seconds=rng.uniform(-1, 35))
        got = faults.due(spec, recorded, T0, now)
        done = {r["index"] for r in recorded}
        want = {i for i, f in enumerate(spec) if i not in done and T0 + dt.timedelta(seconds=f["at"]) <= now}
        assert {d.index for d in got} == want
        assert [d.scheduled for d in got] == sorted(d.scheduled for d in got)
        for d in got:
            assert d.scheduled == T0 + dt.timedelta(seconds=spec[d.index]["at"])


def test_pick_pod_prefers_a_live_master() -> None:
    shard = {common.LABEL_POOL: "p", common.LABEL_SHARD: "0"}
    pods = [
        pod("p-0-0", shard, deleting=True),
        pod("p-0-1", {**shard, faults.ROLE_LABEL: "slave"}),
        pod("p-0-2", {**shard, faults.ROLE_LABEL: "master"}),
        pod("p-0-3", shard, phase="Pending"),
    ]
    assert faults.pick_pod("shard", pods)["metadata"]["name"] == "p-0-2"
    # Without roles, the first live pod by name; a terminating one is never hit again.
    assert faults.pick_pod("server", [pods[3], pods[1], pods[0]])["metadata"]["name"] == "p-0-1"
    assert faults.pick_pod("server", [pods[0], pods[3]]) is None


def test_fault_names() -> None:
    assert (
        faults.fault_name({"at": 1, "action": "kill", "target": "shard", "pool": "p", "shard": 2}) == "kill shard p/2"
    )
    assert faults.fault_name({"at": 1, "action": "scale", "target": "server", "replicas": 3}) == "scale server to 3"
    assert faults.fault_name({"name": "mine", "at": 1, "action": "delete", "target": "server"}) == "mine"


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch) -> tuple[Store, dict[str, list[Any]]]:
    s = Store()
    calls: dict[str, list[Any]] = {"deleted": [], "evicted": [], "cordon": [], "events": []}
    for fn in ("get", "list_objects", "patch"):
        monkeypatch.setattr(kube, fn, getattr(s, fn))

    def delete_pod(ns: str, name: str, grace: int | None = None) -> bool:
        calls["deleted"].append((name, grace))
        return s.delete("Pod", ns, name)

    monkeypatch.setattr(kube, "delete_pod", delete_pod)
    monkeypatch.setattr(kube, "evict", lambda ns, name: calls["evicted"].append(name) or s.delete("Pod", ns, name))
    monkeypatch.setattr(kube, "cordon", lambda node, on: calls["cordon"].append((node, on)))
    monkeypatch.setattr(events, "info", lambda b, reason, message: calls["events"].append((reason, message)))
    monkeypatch.setattr(events, "warn", lambda b, reason, message: calls["events"].append((reason, message)))
    return s, calls


def bench(spec_faults: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "b", "namespace": NS},
        "spec": {"scenario": "task-distribution", "faults": spec_faults},
    }


def test_step_injects_due_faults_and_undoes_them(store: tuple[Store, dict[str, list[Any]]]) -> None:
    s, calls = store
    server = common.labels(Config(), "server")
    for p in (
        pod("sluice-server-b", server, node="n2"),
        pod("sluice-server-a", server, node="n1"),
        pod("x-1", {}, node="n1"),
    ):
        s.apply(p)
    s.apply({"kind": "Deployment", "metadata": {"name": common.SERVER_NAME, "namespace": NS}, "spec": {"replicas": 2}})
    spec = [
        {"at": 10, "action": "kill", "target": "server"},
        {"at": 20, "action": "scale", "target": "server", "replicas": 4},
        {"at": 30, "action": "drain", "target": "server"},
        {"at": 40, "action": "delete", "target": "shard", "pool": "p", "shard": 0},
    ]
    body = bench(spec)
    status: dict[str, Any] = {"loadStart": "2026-11-23T12:00:00Z"}
    cfg = Config()

    # Before its time nothing happens; at 12 s the kill, once.
    assert faults.step(cfg, body, status, "Running", T0 + dt.timedelta(seconds=5)) == {}
    status.update(faults.step(cfg, body, status, "Running", T0 + dt.timedelta(seconds=12)))
    assert calls["deleted"] == [("sluice-server-a", 0)]
    assert [r["name"] for r in status["faults"]] == ["kill server"]
    assert faults.step(cfg, body, status, "Running", T0 + dt.timedelta(seconds=13)) == {}

    # The scale, the drain of the remaining server's node (n2) and the shard
    # fault with no shard pod, all due at once: in time order.
    status.update(faults.step(cfg, body, status, "Running", T0 + dt.timedelta(seconds=45)))
    names = [(r["name"], r["result"]) for r in status["faults"]]
    assert names == [
        ("kill server", "Injected"),
        ("scale server to 4", "Injected"),
        ("drain server", "Injected"),
        ("delete shard p/0", "Failed"),
    ]
    assert s.get("Deployment", NS, common.SERVER_NAME)["spec"]["replicas"] == 4
    assert calls["cordon"] == [("n2", True)] and calls["evicted"] == ["sluice-server-b"]
    drain = status["faults"][2]
    assert drain["node"] == "n2" and drain["injected"].endswith("Z") and "." in drain["injected"]
    assert "no running pod" in status["faults"][3]["message"]
    assert ("FaultFailed", "delete shard p/0: " + status["faults"][3]["message"]) in calls["events"]

    # The run ends: the node is uncordoned and the server scaled back.
    assert faults.step(cfg, body, status, "Succeeded", T0 + dt.timedelta(seconds=60)) == {}
    assert calls["cordon"][-1] == ("n2", False)
    assert s.get("Deployment", NS, common.SERVER_NAME)["spec"]["replicas"] == 2
    assert calls["events"][-1][0] == "FaultsUndone"


def test_step_records_faults_the_run_ended_before(store: tuple[Store, dict[str, list[Any]]]) -> None:
    """Generated fault lists and run ends: once a run ends, every fault of
    spec.faults has a record, those never injected as NotReached with a
    Warning Event saying why, and nothing is injected after the end."""
    _, calls = store
    rng = random.Random(11)
    for _ in range(200):
        spec = [
            {"at": rng.choice([0, 3, 9.5, 30, 600]), "action": "kill", "target": "server"}
            for _ in range(rng.randint(1, 6))
        ]
        recorded = [
            faults.record(faults.Due(i, f, T0), T0, "p", "Injected", "pod p killed")
            for i, f in enumerate(spec)
            if rng.random() < 0.4
        ]
        started = rng.random() < 0.8
        status: dict[str, Any] = {"faults": list(recorded)}
        if started:
            status["loadStart"] = "2026-11-23T12:00:00Z"
        phase = rng.choice(["Succeeded", "Failed"])
        calls["events"].clear()
        calls["deleted"].clear()
        out = faults.step(Config(), bench(spec), status, phase, T0 + dt.timedelta(seconds=700))
        assert calls["deleted"] == []
        got = out.get("faults", status["faults"])
        assert got[: len(recorded)] == recorded
        assert sorted(r["index"] for r in got) == list(range(len(spec)))
        missed = got[len(recorded) :]
        for r in missed:
            assert r["result"] == "NotReached" and "injected" not in r
            assert r["name"] == faults.fault_name(spec[r["index"]])
            assert phase in r["message"]
            if started:
                due_at = T0 + dt.timedelta(seconds=int(spec[r["index"]]["at"]))
                assert r["scheduled"] == due_at.strftime("%Y-%m-%dT%H:%M:%SZ")
                assert f"{spec[r['index']]['at']:g} s after the load started" in r["message"]
            else:
                assert "scheduled" not in r and "before the load started" in r["message"]
        assert [e for e in calls["events"] if e[0] == "FaultNotReached"] == [
            ("FaultNotReached", f"{r['name']}: {r['message']}") for r in missed
        ]
        # The next tick of the ended run changes nothing.
        status.update(out)
        assert faults.step(Config(), bench(spec), status, phase, T0 + dt.timedelta(seconds=701)) == {}


def test_step_without_load_start_waits(store: tuple[Store, dict[str, list[Any]]]) -> None:
    _, calls = store
    body = bench([{"at": 0, "action": "kill", "target": "server"}])
    assert faults.step(Config(), body, {}, "Pending", T0) == {}
    assert calls["deleted"] == []


def test_faults_input_keeps_what_happened() -> None:
    from sluice_operator.handlers import benchmark_report as brep

    records = [
        {"index": 0, "name": "kill server", "result": "Injected", "injected": "2026-11-23T12:00:10.250Z"},
        {"index": 1, "name": "delete shard p/0", "result": "Failed", "message": "no running pod"},
    ]
    assert brep.faults_input(records) == [{"name": "kill server", "at_unix_ms": int(T0.timestamp() * 1000) + 10_250}]


def test_report_measures_and_marks_faults(tmp_path: Any) -> None:
    """The report of two real sluice-bench pods with a fault in their run: the
    merged summary measures it and report.html lists it."""
    import json

    from sluice_operator.handlers import benchmark_report as brep

    from ..bench_pods import run_pods
    from ..support import BENCH

    logs = run_pods(tmp_path)
    start = min(json.loads(p.read_text())["start"] for p in logs)
    files = brep.render(
        {p.name: p.read_text() for p in logs}, str(BENCH), faults=[{"name": "kill server", "at_unix_ms": start + 500}]
    )
    summary = json.loads(files["summary.json"])
    assert [f["name"] for f in summary["faults"]] == ["kill server"]
    assert b"kill server" in files["report.html"] and b"<h2>Faults</h2>" in files["report.html"]


def test_fault_figures_join_by_name() -> None:
    import json

    from sluice_operator.handlers import benchmark_report as brep

    records = [
        {"index": 0, "name": "kill server", "result": "Injected", "injected": "2026-11-23T12:00:10.250Z"},
        {"index": 1, "name": "delete shard p/0", "result": "Failed"},
    ]
    summary = {
        "faults": [
            {
                "name": "kill server",
                "at_unix_ms": 1,
                "first_error_s": 0.01,
                "unavailable_s": 0.4,
                "recovery_s": None,
                "baseline_rps": 812.5,
                "errors": {"connection_refused": 3, "http_503": 5},
                "retry_after": {"http_503": {"responses": 5, "min": 2, "max": 2}},
            }
        ]
    }
    got = brep.fault_figures(records, json.dumps(summary).encode())
    assert got is not None
    assert got[0]["unavailableSeconds"] == 0.4 and got[0]["recoverySeconds"] is None
    assert got[0]["errors"] == {"connection_refused": 3, "http_503": 5} and got[0]["baselineRequestsPerSecond"] == 812.5
    assert got[0]["retryAfter"] == {"http_503": {"responses": 5, "min": 2, "max": 2}}
    assert got[1] == records[1]
    assert brep.fault_figures([], json.dumps(summary).encode()) is None


def test_fault_bounds_are_judged_by_sluice_bench(tmp_path: Any) -> None:
    """A recovery bound no fault can meet (the fault is too late in a 2 s run to
    recover within it) is missed in sluice-bench's verdict; no bound, no verdict."""
    import json

    from sluice_operator.handlers import benchmark_report as brep

    from ..bench_pods import run_pods
    from ..support import BENCH

    logs = run_pods(tmp_path)
    start = min(json.loads(p.read_text())["start"] for p in logs)
    inputs = {p.name: p.read_text() for p in logs}
    fault = [{"name": "kill server", "at_unix_ms": start + 1500}]
    files = brep.render(inputs, str(BENCH), faults=fault, thresholds={"maxRecoverySeconds": 30, "maxP99Ms": 0.001})
    missed = brep.fault_bound_failures(files["summary.json"])
    assert len(missed) == 1 and missed[0].startswith("kill server: never recovered"), missed
    files = brep.render(inputs, str(BENCH), faults=fault, thresholds={"maxLost": 0})
    assert brep.fault_bound_failures(files["summary.json"]) == []


def test_runs_with_faults_claim_short_and_drain_long() -> None:
    from sluice_operator.builders import benchmark as bb

    cfg = Config()
    plain = bench([])
    plain["spec"].pop("faults")
    faulty = bench([{"at": 5, "action": "kill", "target": "server"}])
    a, b = bb.bench_args(cfg, plain, 1, "2026-11-23T12:00:00Z"), bb.bench_args(cfg, faulty, 1, "2026-11-23T12:00:00Z")
    assert "--claim-ttl" not in a and "--drain" not in a
    i = b.index("--claim-ttl")
    assert b[i + 1] == "60" and b[b.index("--drain") + 1] == f"{bb.FAULT_DRAIN_SECONDS}s"
    assert bb.deadline(faulty["spec"], 15) == bb.deadline(plain["spec"], 15) + bb.FAULT_DRAIN_SECONDS


def shard_pod(name: str, labels: dict[str, str], tls: bool = False) -> dict[str, Any]:
    p = pod(name, labels)
    args = ["--port 0 --tls-port 6379" if tls else "--port 6379"]
    password = {"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "pw", "key": "password"}}}
    p["spec"]["containers"] = [
        {"name": "redis", "args": args, "ports": [{"name": "redis", "containerPort": 6379}], "env": [password]},
    ]
    return p


@pytest.fixture
def ephemeral(store: tuple[Store, dict[str, list[Any]]], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    s, _ = store
    added: list[Any] = []

    def add(ns: str, name: str, container: dict[str, Any]) -> None:
        added.append((name, container))
        p = s.objs[("Pod", ns, name)]
        p["spec"].setdefault("ephemeralContainers", []).append(container)

    monkeypatch.setattr(kube, "add_ephemeral_container", add)
    return added


def test_container_faults_run_in_the_shard_pod(store: tuple[Store, dict[str, list[Any]]], ephemeral: list[Any]) -> None:
    """fill, delay and partition each start one ephemeral container in the
    shard's pod at their time, with the Redis container's password variable;
    only the network faults get root and CAP_NET_ADMIN. The record holds the
    container and when the fault ends; the container's termination message
    becomes its outcome once the run ends, a failed one marks it Failed."""
    s, calls = store
    shard = {common.LABEL_POOL: "p", common.LABEL_SHARD: "0"}
    s.apply(shard_pod("p-0-0", shard, tls=True))
    s.apply({"kind": "Pool", "metadata": {"name": "p", "namespace": NS}, "spec": {"backend": "redis"}})
    s.apply({"kind": "Pool", "metadata": {"name": "m", "namespace": NS}, "spec": {"backend": "mongodb"}})
    s.apply(shard_pod("m-0-0", {common.LABEL_POOL: "m", common.LABEL_SHARD: "0"}))
    at = {"target": "shard", "pool": "p", "shard": 0}
    spec = [
        {"at": 5, "action": "fill", "duration": 10, **at},
        {"at": 20, "action": "partition", "duration": 8, **at},
        {"at": 30, "action": "delay", "duration": 8, "latencyMs": 100, "jitterMs": 20, **at},
        {"at": 40, "action": "fill", "duration": 5, "target": "shard", "pool": "m", "shard": 0},
    ]
    body = bench(spec)
    status: dict[str, Any] = {"loadStart": "2026-11-23T12:00:00Z", "runGeneration": 3}
    cfg = Config()
    for t in (6, 21, 31, 41):
        status.update(faults.step(cfg, body, status, "Running", T0 + dt.timedelta(seconds=t)))
    assert [c[0] for c in ephemeral] == ["p-0-0"] * 3 and not calls["deleted"]
    names = [c["name"] for _, c in ephemeral]
    assert len(set(names)) == 3 and all(
        n.startswith("sluice-fault-") and n.endswith(f"-3-{i}") for i, n in enumerate(names)
    )
    fill, part, delay = (c for _, c in ephemeral)
    assert fill["args"] == ["fault", "fill", "--port", "6379", "--duration", "10s", "--tls"]
    assert part["args"] == ["fault", "partition", "--port", "6379", "--duration", "8s"]
    assert delay["args"] == [
        "fault",
        "delay",
        "--port",
        "6379",
        "--duration",
        "8s",
        "--delay",
        "100ms",
        "--jitter",
        "20ms",
        "--tls",
    ]
    for c in (fill, part, delay):
        assert c["image"] == cfg.bench_image and c["targetContainerName"] == "redis"
        assert [e["name"] for e in c["env"]] == ["REDIS_PASSWORD"]
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert "add" not in fill["securityContext"]["capabilities"] and "runAsUser" not in fill["securityContext"]
    for c in (part, delay):
        assert c["securityContext"]["capabilities"]["add"] == ["NET_ADMIN"] and c["securityContext"]["runAsUser"] == 0
    recs = status["faults"]
    assert [(r["name"], r["result"]) for r in recs] == [
        ("fill shard p/0 for 10s", "Injected"),
        ("partition shard p/0 for 8s", "Injected"),
        ("delay shard p/0 100ms for 8s", "Injected"),
        ("fill shard m/0 for 5s", "Failed"),
    ]
    assert "takes a Redis shard; Pool m is mongodb" in recs[3]["message"]
    for r, f in zip(recs[:3], spec, strict=False):
        start = dt.datetime.fromisoformat(r["injected"].replace("Z", "+00:00"))
        end = dt.datetime.fromisoformat(r["until"].replace("Z", "+00:00"))
        assert end - start == dt.timedelta(seconds=f["duration"]) and r["container"] in names

    # The run ends: the fill and the partition have ended, the delay failed.
    p = s.objs[("Pod", NS, "p-0-0")]
    p["status"]["ephemeralContainerStatuses"] = [
        {"name": names[0], "state": {"terminated": {"exitCode": 0, "message": "filled 600 keys, then removed them"}}},
        {"name": names[1], "state": {"terminated": {"exitCode": 0}}},
        {"name": names[2], "state": {"terminated": {"exitCode": 1, "message": "nftables: operation not permitted"}}},
    ]
    status.update(faults.step(cfg, body, status, "Succeeded", T0 + dt.timedelta(seconds=60)))
    recs = status["faults"]
    assert recs[0]["outcome"] == "filled 600 keys, then removed them" and recs[0]["result"] == "Injected"
    assert recs[1]["outcome"] == "ended with exit code 0"
    assert recs[2]["outcome"] == "nftables: operation not permitted" and recs[2]["result"] == "Failed"
    # Settled once: a later pass changes nothing.
    assert faults.step(cfg, body, status, "Succeeded", T0 + dt.timedelta(seconds=70)) == {}


def test_slow_receiver_is_recorded_and_passed_to_sluice_bench(store: tuple[Store, dict[str, list[Any]]]) -> None:
    """slow-receiver touches no pod: the operator records it at its time and
    sluice-bench's receiver performs it from its --receiver-fault flag."""
    from sluice_operator.builders import benchmark as bb

    _, calls = store
    f = {"at": 4, "action": "slow-receiver", "target": "receiver", "duration": 6, "latencyMs": 500, "failPercent": 50}
    body = bench([f])
    body["spec"]["scenario"] = "notifications"
    status: dict[str, Any] = {"loadStart": "2026-11-23T12:00:00Z"}
    status.update(faults.step(Config(), body, status, "Running", T0 + dt.timedelta(seconds=5)))
    (r,) = status["faults"]
    assert r["name"] == "slow-receiver for 6s" and r["result"] == "Injected" and r["until"]
    assert "500 ms late and fails 50 %" in r["message"] and not calls["deleted"]
    assert faults.required_access([f], NS, "sluice-system") == []
    args = bb.bench_args(Config(), body, 1, "2026-11-23T12:00:00Z")
    assert args.count("--receiver-fault") == 1
    assert args[args.index("--receiver-fault") + 1] == "at=4,duration=6,latency=500ms,fail=50"


def test_container_faults_need_the_opt_in_role() -> None:
    need = faults.required_access(
        [{"at": 1, "action": a, "target": "shard", "pool": "p", "shard": 0, "duration": 5} for a in ("fill", "delay")],
        NS,
        "sluice-system",
    )
    assert [a.describe() for a in need] == [f"patch pods/ephemeralcontainers in namespace {NS}"]
    assert "sluice-operator-faults" in need[0].grant
