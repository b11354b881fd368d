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
