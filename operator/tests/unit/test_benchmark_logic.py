"""Run phases from Job and pods, history and the report's size budget (verdicts and
comparisons are sluice-bench's: test_benchmark_results.py and bench-job/internal/result)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sluice_operator.handlers import benchmark_pods as bp
from sluice_operator.handlers import benchmark_report as brep
from sluice_operator.handlers import benchmark_results as br

NOW = dt.datetime(2026, 11, 22, 8, 0, 0, tzinfo=dt.UTC)


def job(*conds: tuple[str, str], deadline: int = 200, failed: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "td-r1", "creationTimestamp": "2026-11-22T07:59:00Z"},
        "spec": {"activeDeadlineSeconds": deadline},
        "status": {"failed": failed, "conditions": [{"type": t, "status": "True", "reason": r} for t, r in conds]},
    }


def pod(
    name: str,
    phase: str = "Pending",
    node: str | None = "n1",
    state: dict[str, Any] | None = None,
    conds: list[dict[str, Any]] | None = None,
    **status: Any,
) -> dict[str, Any]:
    cs = [{"name": "sluice-bench", "image": "sluice.dev/sluice-bench:dev", "state": state}] if state else []
    return {
        "metadata": {"name": name},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase, "containerStatuses": cs, "conditions": conds or [], **status},
    }


def unsched(since: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "lastTransitionTime": since,
            "message": "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector.",
        }
    ]


def test_pending_then_running_then_succeeded() -> None:
    o = bp.observe(job(), [pod("td-r1-0")], 2, NOW, 60)
    assert (o.phase, o.reason) == ("Pending", "Starting")
    running = {"running": {"startedAt": "2026-11-22T07:59:30Z"}}
    o = bp.observe(job(), [pod("td-r1-0", "Running", state=running), pod("td-r1-1")], 2, NOW, 60)
    assert (o.phase, o.started) == ("Running", "2026-11-22T07:59:30Z")
    done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": "2026-11-22T07:59:30Z", "message": "{}"}}
    o = bp.observe(job(("Complete", "")), [pod("td-r1-0", "Succeeded", state=done)], 1, NOW, 60)
    assert o.phase == "Succeeded"


def test_unschedulable_waits_its_grace_then_fails_with_the_schedulers_words() -> None:
    p = pod("td-r1-0", node=None, conds=unsched("2026-11-22T07:59:50Z"))
    assert bp.observe(job(), [p], 1, NOW, 60).phase == "Pending"
    o = bp.observe(job(), [p], 1, NOW, 5)
    assert (o.phase, o.reason) == ("Failed", "Unschedulable")
    assert "didn't match Pod's node affinity" in o.message and "10 s" in o.message


def test_image_pull_failure_fails_at_once() -> None:
    p = pod("td-r1-0", state={"waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}})
    o = bp.observe(job(), [p], 1, NOW, 60)
    assert (o.phase, o.reason) == ("Failed", "ImagePullFailed")
    assert "sluice.dev/sluice-bench:dev" in o.message and "ImagePullBackOff" in o.message


def test_deadline_and_killed_pods() -> None:
    o = bp.observe(job(("Failed", "DeadlineExceeded"), deadline=90), [], 1, NOW, 60)
    assert (o.phase, o.reason) == ("Failed", "DeadlineExceeded") and "90 s" in o.message
    # Kubernetes >= 1.31 says FailureTarget first, while the pods still terminate.
    o = bp.observe(job(("FailureTarget", "DeadlineExceeded"), deadline=90), [], 1, NOW, 60)
    assert (o.phase, o.reason) == ("Failed", "DeadlineExceeded")
    killed = pod("td-r1-0", "Failed", state={"terminated": {"exitCode": 137, "reason": "Error"}})
    o = bp.observe(job(), [killed], 1, NOW, 60)
    assert (o.phase, o.reason) == ("Failed", "PodKilled") and "signal 9" in o.message
    oom = pod("td-r1-0", "Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
    assert "out of memory" in bp.observe(job(), [oom], 1, NOW, 60).message
    crash = pod("td-r1-0", "Failed", state={"terminated": {"exitCode": 2, "reason": "Error", "message": "bad flag"}})
    o = bp.observe(job(), [crash], 1, NOW, 60)
    assert (o.reason, "exit 2" in o.message, "bad flag" in o.message) == ("PodFailed", True, True)
    evicted = pod("td-r1-0", "Failed", reason="Evicted", message="node pressure")
    assert bp.observe(job(), [evicted], 1, NOW, 60).reason == "PodKilled"
    # The failed pod is gone: the Job controller's verdict is all that is left.
    o = bp.observe(job(("Failed", "BackoffLimitExceeded"), failed=1), [], 1, NOW, 60)
    assert (o.phase, o.reason) == ("Failed", "PodKilled")
    assert bp.observe(None, [], 1, NOW, 60).reason == "JobDeleted"
    # A missed threshold (exit 99) still carries a summary: not a failure.
    missed = pod("td-r1-0", "Failed", state={"terminated": {"exitCode": 99, "message": "{}"}})
    assert bp.pod_failure(missed) is None


def test_termination_messages_name_pods_without_one() -> None:
    ok = pod("a-0", "Succeeded", state={"terminated": {"exitCode": 0, "message": '{"v":1}'}})
    empty = pod("a-1", "Succeeded", state={"terminated": {"exitCode": 0}})
    assert bp.termination_messages([empty, ok]) == ([("a-0", '{"v":1}')], ["a-1"])


RESULTS = {
    "requestsPerSecond": 1000.0,
    "p99Ms": 20.0,
    "lost": 0,
    "operations": {"post": {"requestsPerSecond": 600.0, "p50Ms": 2.0, "p99Ms": 20.0, "p999Ms": 30.0}},
}


def test_history_is_bounded_and_keeps_the_summary() -> None:
    h: list[dict[str, Any]] = []
    for gen in range(1, 15):
        st = {"runGeneration": gen, "phase": "Succeeded", "verdict": "Pass", "results": RESULTS, "jobName": f"j{gen}"}
        h = br.push_history(h, br.history_entry(st))
    assert len(h) == br.HISTORY_LIMIT and h[0]["runGeneration"] == 5 and h[-1]["runGeneration"] == 14
    assert h[-1]["requestsPerSecond"] == 1000.0 and h[-1]["jobName"] == "j14"
    assert br.history_entry({}) is None


def test_report_fits_a_configmap_html_first() -> None:
    files = {
        "report.html": b"h" * 100,
        "a.png": b"p" * 600_000,
        "b.png": b"p" * 10,
        "post.csv": b"c" * 200_000,
        "summary.json": b"s" * 100,
    }
    kept, dropped = brep.fit(files)
    assert "report.html" in kept and "b.png" in kept and dropped == ["post.csv"]
    payload = brep.configmap_payload(kept)
    assert set(payload["binaryData"]) == {"a.png", "b.png"} and set(payload["data"]) == {"report.html", "summary.json"}


def test_summary_is_found_in_a_log_with_stderr_lines_first() -> None:
    assert brep.summary_from_log('warning: x\n{\n  "ops": {}, "v": 1\n}\n') == {"ops": {}, "v": 1}
    assert brep.summary_from_log("no json here") is None
