"""The operator's calls to sluice-bench on real runs: `merge --status` gives status.results,
the verdict in sluice-bench's words and the thresholds as spec.thresholds spells them;
`compare --status` the comparison; the report renders. The merge rules themselves are
tested in bench-job/internal/result."""

from __future__ import annotations

import json
import pathlib

import pytest

from sluice_operator.handlers import benchmark_report as brep
from sluice_operator.handlers import benchmark_results as br

from ..bench_pods import run_pods


@pytest.fixture(scope="module")
def pod_logs(tmp_path_factory: pytest.TempPathFactory) -> list[pathlib.Path]:
    """Two sluice-bench pods (own queues) against a real sluice-server, writing termination logs."""
    return run_pods(tmp_path_factory.mktemp("pods"))


def messages(paths: list[pathlib.Path]) -> list[tuple[str, str]]:
    return [(f"td-r1-{i}-x", p.read_text()) for i, p in enumerate(paths)]


def test_merged_status_of_real_pods(pod_logs: list[pathlib.Path], bench_exe: str) -> None:
    st = br.merge(bench_exe, messages(pod_logs), {"maxLost": 0})
    r = st["results"]
    assert r["pods"] == 2 and r["produced"] > 0 and r["lost"] == 0 and r["duplicated"] == 0
    # A fast machine fills the 4 KB termination log and sheds the bitsets: the pods ran
    # with --pod-index (queues of their own), so the summed counts are still exact.
    assert r["exact"] is True
    assert {"post", "claim", "delete"} <= set(r["operations"]) and r["requestsPerSecond"] > 0
    assert set(r["operations"]["post"]) == {
        "requestsPerSecond",
        "msPerRequest",
        "p50Ms",
        "p90Ms",
        "p99Ms",
        "p999Ms",
        "maxMs",
        "requests",
        "errors",
    }
    assert r["p99Ms"] == max(op["p99Ms"] for op in r["operations"].values())
    assert (st["verdict"], st["verdictReasons"]) == ("Pass", ["all thresholds met"])
    assert st["message"].startswith(f"{r['requestsPerSecond']:.1f} req/s, p99 {r['p99Ms']:.3f} ms")


def test_every_threshold_reaches_sluice_bench(pod_logs: list[pathlib.Path], bench_exe: str) -> None:
    assert br.merge(bench_exe, messages(pod_logs), None)["verdictReasons"] == ["no thresholds set"]
    st = br.merge(bench_exe, messages(pod_logs), {"minRequestsPerSecond": 1e9, "maxP99Ms": 0.0001, "maxLost": 0})
    r = st["results"]
    assert st["verdict"] == "Fail"
    assert st["verdictReasons"] == [
        f"requests/s {r['requestsPerSecond']:.1f} < minimum 1000000000.0",
        f"p99 {r['p99Ms']:.3f} ms > maximum 0.000 ms",
    ]


def test_a_bad_termination_message_is_refused_naming_the_pod(pod_logs: list[pathlib.Path], bench_exe: str) -> None:
    good = messages(pod_logs)[0]
    with pytest.raises(br.ResultsError, match=r"td-r1-7-x.*not a sluice-bench summary"):
        br.merge(bench_exe, [good, ("td-r1-7-x", "not json")], None)
    with pytest.raises(br.ResultsError, match=r"td-r1-8-x.*not a sluice-bench v1 summary"):
        br.merge(bench_exe, [good, ("td-r1-8-x", '{"v": 2, "ops": {}}')], None)
    with pytest.raises(br.ResultsError, match="scenario"):
        br.merge(bench_exe, [good, ("td-r1-9-x", good[1].replace("task-distribution", "flood"))], None)


def test_comparison_by_sluice_bench(bench_exe: str) -> None:
    mine = {"requestsPerSecond": 1000.0, "p99Ms": 20.0, "operations": {"post": {"requestsPerSecond": 600.0}}}
    other = {
        "spec": {"scenario": "task-distribution"},
        "status": {"results": {"requestsPerSecond": 500.0, "p99Ms": 40.0, "operations": {}}},
    }
    c = br.comparison(bench_exe, "virtual", mine, other)
    assert c["operations"]["total"]["requestsPerSecondRatio"] == 2.0 and c["operations"]["total"]["p99MsRatio"] == 0.5
    assert c["message"] == "vs virtual (task-distribution): req/s x2.0, p99 x0.5"
    assert br.comparison(bench_exe, "nope", mine, None) == {
        "benchmark": "nope",
        "message": "Benchmark nope does not exist",
    }
    assert "no results yet" in br.comparison(bench_exe, "virtual", mine, {"status": {}})["message"]
    assert br.comparison(None, "virtual", mine, other)["message"] == brep.MISSING


def test_report_renders_from_termination_logs(pod_logs: list[pathlib.Path], bench_exe: str) -> None:
    files = brep.render({p.name: p.read_text() for p in pod_logs}, bench_exe)
    assert files["report.html"].startswith(b"<!") or b"<html" in files["report.html"][:500]
    pngs = [n for n in files if n.endswith(".png")]
    assert "cdf.png" in pngs and all(files[n][:8] == b"\x89PNG\r\n\x1a\n" for n in pngs)
    assert b"task-distribution" in files["report.html"]


def test_a_move_reaches_status_and_fails_the_verdict_when_unfinished(
    pod_logs: list[pathlib.Path], bench_exe: str
) -> None:
    """status.results.move is sluice-bench's merge of the pods' moves, every field declared
    in the CRD (the apiserver would prune the rest), and a pod's failed move fails the run."""
    from .test_crds import load
    from .test_crds_moves import pruned

    def with_move(p: pathlib.Path, state: str, error: str = "") -> str:
        doc = json.loads(p.read_text())
        doc["move"] = {
            "pool": "web-1",
            "queues": 4,
            "state": state,
            "messages_moved": 120,
            "start_unix_ms": 1_800_000_000_000,
            "end_unix_ms": 1_800_000_001_500,
            "duration_s": 1.5,
            "p99_before_ms": 3.0,
            "p99_during_ms": 7.5,
            "error": error,
        }
        return json.dumps(doc)

    done = [(f"td-r1-{i}-x", with_move(p, "done")) for i, p in enumerate(pod_logs)]
    st = br.merge(bench_exe, done, {"maxLost": 0})
    move = st["results"]["move"]
    assert move == {
        "pool": "web-1",
        "state": "done",
        "queues": 8,
        "messagesMoved": 240,
        "durationSeconds": 1.5,
        "p99BeforeMs": 3.0,
        "p99DuringMs": 7.5,
    }
    assert st["verdict"] == "Pass"
    schema = load("benchmarks")["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert pruned(schema["properties"]["results"]["properties"]["move"], move) == []

    failed = [done[0], ("td-r1-1-x", with_move(pod_logs[1], "failed", "web-1 does not answer"))]
    st = br.merge(bench_exe, failed, {"maxLost": 0})
    assert st["verdict"] == "Fail" and st["results"]["move"]["state"] == "failed"
    assert st["verdictReasons"] == ["queue move to pool web-1 did not finish (state failed: web-1 does not answer)"]
