"""The Python merge of termination logs agrees with `sluice-bench merge` on real runs,
and follows its delivery rules (bitsets OR-ed, overlaps are duplicates, sums without bitsets)."""

from __future__ import annotations

import base64
import json
import pathlib
import subprocess
import zlib
from typing import Any

import pytest

from sluice_operator.handlers import benchmark_merge as bm

from ..bench_pods import BENCH, run_pods


@pytest.fixture(scope="module")
def pod_logs(tmp_path_factory: pytest.TempPathFactory) -> list[pathlib.Path]:
    """Two sluice-bench pods (own queues) against a real sluice-server, writing termination logs."""
    return run_pods(tmp_path_factory.mktemp("pods"))


def test_merge_matches_sluice_bench_merge(pod_logs: list[pathlib.Path]) -> None:
    mine = bm.merge([bm.parse(p.read_text(), p.name) for p in pod_logs])
    go = json.loads(
        subprocess.run(
            [str(BENCH), "merge", "--json", *map(str, pod_logs)], capture_output=True, text=True, check=True
        ).stdout
    )
    assert mine["pods"] == go["pods"] == 2
    assert mine["durationSeconds"] == pytest.approx(go["duration_sec"], abs=1e-3)
    assert mine["requestsPerSecond"] == pytest.approx(go["total"]["reqs_per_sec"], abs=1e-3)
    assert mine["p99Ms"] == pytest.approx(go["total"]["p99_ms"], abs=1e-3)
    assert set(mine["operations"]) == set(go["ops"]) >= {"post", "claim", "delete"}
    for name, op in mine["operations"].items():
        g = go["ops"][name]
        assert (op["requests"], op["ok"]) == (g["requests"], g["ok"])
        for k, gk in (
            ("p50Ms", "p50_ms"),
            ("p99Ms", "p99_ms"),
            ("p999Ms", "p99_9_ms"),
            ("maxMs", "max_ms"),
            ("msPerRequest", "ms_mean"),
            ("requestsPerSecond", "reqs_per_sec"),
        ):
            assert op[k] == pytest.approx(g[gk], abs=1e-3), (name, k)
    d = go["delivery"]
    assert (mine["produced"], mine["consumed"], mine["lost"], mine["duplicated"]) == (
        d["produced"],
        d["consumed"],
        d["lost"],
        d["duplicated"],
    )
    # A fast machine fills the 4 KB termination log and sheds the bitsets: both
    # merges must then say the counts are sums, and own_queues (the pods ran
    # with --pod-index) makes those sums exact.
    assert mine["produced"] > 0 and mine["exact"] is d["exact"]
    assert bm.merge([bm.parse(p.read_text(), p.name) for p in pod_logs], own_queues=True)["exact"] is True
    # Processes add up over pods, workers per process stay.
    assert mine["roles"][:4] == [go["params"]["producer"]["processes"], 5, go["params"]["consumer"]["processes"], 5]


def bits(*seq: int) -> str:
    n = 0
    for i in seq:
        n |= 1 << i
    raw = n.to_bytes(max(8, (n.bit_length() + 63) // 64 * 8), "little")
    return base64.b64encode(zlib.compress(raw)).decode()


def log(start: int, end: int, produced: dict[str, str], seen: dict[str, str], dup: int = 0, **d: Any) -> dict[str, Any]:
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


def test_a_message_claimed_by_two_pods_is_a_duplicate_and_unclaimed_ones_are_lost() -> None:
    # Origin A produced 0..4 (pod 1); pod 1 claimed 0,1; pod 2 claimed 1,2 (shared queues).
    a = log(1000, 3000, {"A": bits(0, 1, 2, 3, 4)}, {"A": bits(0, 1)}, consumed=2)
    b = log(1500, 4000, {}, {"A": bits(1, 2)}, dup=1, consumed=2)
    r = bm.merge([a, b])
    assert (r["produced"], r["consumed"], r["unique"], r["lost"], r["duplicated"]) == (5, 4, 3, 2, 2)
    assert r["exact"] is True and r["durationSeconds"] == 3.0 and r["pods"] == 2
    post = r["operations"]["post"]
    # No histogram in the logs: approximated from the percentiles, counters summed.
    assert (post["requests"], post["ok"], post["errors"], post["errorReasons"]) == (8, 6, 2, {"http_503": 2})
    assert post["requestsPerSecond"] == 2.0 and 2.0 <= post["p99Ms"] <= 5.1


def test_without_bitsets_delivery_counts_are_summed_and_inexact() -> None:
    a = log(0, 1000, {"A": bits(0)}, {"A": bits(0)}, consumed=1)
    b = log(0, 1000, {}, {}, consumed=3)
    del b["d"]["pb"]
    b["d"].update(produced=4, lost=1, unique=3)
    a["d"].update(produced=1, unique=1)
    r = bm.merge([a, b])
    assert (r["produced"], r["lost"], r["consumed"], r["exact"]) == (5, 1, 4, False)
    # With queues of their own per pod, the same sums are exact.
    r = bm.merge([a, b], own_queues=True)
    assert (r["produced"], r["lost"], r["consumed"], r["exact"]) == (5, 1, 4, True)


def test_bad_inputs_are_refused_with_the_pod_named() -> None:
    with pytest.raises(bm.MergeError, match="pod x-0"):
        bm.parse("not json", "x-0")
    with pytest.raises(bm.MergeError, match="not a sluice-bench"):
        bm.parse('{"v": 2}', "x-1")
    other = log(0, 1, {}, {})
    other["scenario"] = "flood"
    with pytest.raises(bm.MergeError, match="scenario"):
        bm.merge([log(0, 1, {}, {}), other])
    broken = log(0, 1, {"A": "!!"}, {})
    with pytest.raises(bm.MergeError, match="bitset"):
        bm.merge([broken])
    with pytest.raises(bm.MergeError):
        bm.merge([])


def test_report_renders_from_termination_logs(pod_logs: list[pathlib.Path]) -> None:
    from sluice_operator.handlers import benchmark_report as brep

    files = brep.render({p.name: p.read_text() for p in pod_logs}, str(BENCH))
    assert files["report.html"].startswith(b"<!") or b"<html" in files["report.html"][:500]
    pngs = [n for n in files if n.endswith(".png")]
    assert "cdf.png" in pngs and all(files[n][:8] == b"\x89PNG\r\n\x1a\n" for n in pngs)
    assert b"task-distribution" in files["report.html"]
