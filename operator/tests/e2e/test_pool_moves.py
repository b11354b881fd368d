"""Queues moving under load with real pods: a Pool of 3 builtin Redis shards is
scaled to 2 while a task-distribution Benchmark runs on it (the operator drains
the leaving shard by moving its queues live), and a Benchmark moves its own
queues to another Pool's shard with spec.move. Both runs must lose and duplicate
nothing."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from ..integration.conftest import apply, condition, get, kc, status, wait_for
from .conftest import server_url
from .test_benchmarks import FINAL, benchmark, run
from .test_pools import names, pool, ready

# Enough queues that the leaving shard holds some whatever the server's
# weighted random placement does: (2/3)^20 < 0.1 %.
QUEUES = 20
LOAD_SECONDS = 30


def admin(ns: str, project: str, path: str) -> Any:
    """admin calls the server's admin API in a project, with the token the operator keeps."""
    secret = json.loads(kc("get", "secret", "sluice-server-admin", "-n", ns, "-o", "json").stdout)
    token = base64.b64decode(secret["data"]["token"]).decode()
    req = urllib.request.Request(
        server_url(ns) + path,
        headers={"Authorization": f"Bearer {token}", "X-Project-ID": project, "Client-ID": str(uuid.uuid4())},
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read() or b"null")


def _seconds(ts: str) -> float:
    return dt.datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def pools(ns: str) -> str:
    """Pool shrink (3 shards, every move of a drain at once) and Pool spare (1 shard), brought up together."""
    shrink = pool(ns, "shrink", 3)
    shrink["spec"]["drain"] = {"maxInFlight": 16}
    apply(shrink)
    apply(pool(ns, "spare", 1))
    wait_for("Pools shrink and spare Ready", lambda: ready("pool", ns, "shrink") and ready("pool", ns, "spare"), 300)
    return ns


def test_pool_scaled_down_under_load_loses_nothing(pools: str) -> None:
    ns = pools
    t0 = time.monotonic()
    custom = {
        "producers": {"processes": 1, "workers": 4},
        "consumers": {"processes": 1, "workers": 4},
        "observers": {"processes": 0, "workers": 0},
        "duration": LOAD_SECONDS,
        "queues": QUEUES,
        "messageSize": 256,
    }
    apply(benchmark(ns, "shrink-td", scenario="custom", custom=custom, pool="shrink", duration=LOAD_SECONDS))
    b = wait_for(
        "load started",
        lambda: (o := get("benchmark", ns, "shrink-td")) and (o.get("status") or {}).get("loadStart") and o,
        timeout=300,
    )
    load_start = _seconds(b["status"]["loadStart"])
    wait_for("3 s of load", lambda: time.time() >= load_start + 3, timeout=LOAD_SECONDS)
    leaving = admin(ns, ns, "/v2/pools/shrink-2/queues?limit=100")["queues"]
    assert leaving, "the leaving shard holds none of the run's queues: nothing would move"
    kc("patch", "pool", "shrink", "-n", ns, "--type=merge", "-p", '{"spec":{"shards":2}}')

    done = wait_for(
        "shrink-td finished",
        lambda: (o := get("benchmark", ns, "shrink-td")) and status(o).get("phase") in FINAL and o,
        timeout=600,
    )
    st = done["status"]
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"))
    r = st["results"]
    assert r["produced"] > 0 and r["consumed"] == r["produced"], r
    assert r["lost"] == 0 and r["duplicated"] == 0 and r["redelivered"] == 0 and r["exact"] is True, r

    p = wait_for(
        "Pool shrink scaled down",
        lambda: (o := get("pool", ns, "shrink")) and condition(o, "ScaledDown").get("reason") == "Done" and o,
        timeout=300,
    )
    mig = p["status"]["migration"]
    assert mig["shard"] == "shrink-2" and mig["queuesMoved"] >= len(leaving) and mig["queuesRemaining"] == 0, mig
    assert not mig.get("failed"), mig
    # The drain ran while the load did.
    assert _seconds(mig["started"]) < load_start + LOAD_SECONDS, (mig["started"], st["loadStart"])
    for q in leaving:
        m = admin(ns, q["project"], f"/v2/queues/{q['name']}/migrate")
        assert m["state"] == "done" and m["from"] == "shrink-2" and m["to"] in ("shrink-0", "shrink-1"), m
    # The removed shard's workload is gone, and the server no longer knows it.
    assert names("statefulset", ns, "sluice.dev/pool=shrink") == ["shrink-0", "shrink-1"]
    wait_for("shard 2's pod gone", lambda: "shrink-2-0" not in names("pod", ns, "sluice.dev/pool=shrink"), 120)
    with pytest.raises(urllib.error.HTTPError) as gone:
        admin(ns, ns, "/v2/pools/shrink-2")
    assert gone.value.code == 404, gone.value
    print(
        f"\nPool 3->2 under load: {mig['queuesMoved']} queues, {mig.get('messagesMoved')} messages moved; "
        f"{r['produced']} produced, lost 0; test {time.monotonic() - t0:.0f}s"
    )


def test_benchmark_moves_its_queues_to_another_pool(pools: str) -> None:
    ns = pools
    t0 = time.monotonic()
    move = {"pool": "spare-0", "afterSeconds": 3, "timeoutSeconds": 90}
    b = run(ns, benchmark(ns, "moving-td", pool="shrink", duration=10, move=move, thresholds={"maxLost": 0}))
    st = b["status"]
    assert st["phase"] == "Succeeded" and st["verdict"] == "Pass", (st.get("verdictReasons"), st.get("message"))
    r = st["results"]
    m = r["move"]
    assert m["pool"] == "spare-0" and m["state"] == "done" and m["queues"] == 4, m
    assert m["durationSeconds"] > 0 and m["p99BeforeMs"] > 0, m
    assert r["produced"] > 0 and r["lost"] == 0 and r["duplicated"] == 0 and r["redelivered"] == 0, r
    on_spare = {q["name"] for q in admin(ns, ns, "/v2/pools/spare-0/queues?limit=100")["queues"]}
    assert {f"bench-moving-td-r1-p0-{i}" for i in range(4)} <= on_spare, on_spare
    print(f"\nBenchmark spec.move: {m}; test {time.monotonic() - t0:.0f}s")
