"""Rebalancing a Pool's shards by moving queues (handlers/rebalance.py): the plan on
generated loads, and the pass against the Zaqar double's move API."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from sluice_operator.handlers import migration, rebalance
from sluice_operator.serverapi import ServerAPI

from .zaqar_double import ZaqarDouble

T0 = 1_800_000_000.0
OPTS = {"enabled": True, "tolerancePercent": 20, "minMessages": 10}


def loads(sizes: dict[str, dict[tuple[str, str], int]]) -> dict[str, int]:
    return {s: sum(q.values()) for s, q in sizes.items()}


def within(sizes: dict[str, dict[tuple[str, str], int]], tolerance: float, floor: int) -> bool:
    ld = loads(sizes)
    mean = sum(ld.values()) / len(ld)
    return max(ld.values()) - min(ld.values()) <= floor or all(abs(v - mean) <= tolerance * mean for v in ld.values())


def test_plan_moves_the_queue_that_evens_the_two_shards() -> None:
    sizes = {"w-0": {("p", "big"): 900, ("p", "mid"): 400, ("p", "small"): 50}, "w-1": {("p", "x"): 100}}
    # Gap 1250: moving mid (400) leaves 950/500, big (900) 450/1000, small 1300/150.
    assert rebalance.plan(sizes, 0.2, 10) == (("p", "mid"), "w-0", "w-1")


def test_plan_leaves_balanced_or_small_gaps_alone() -> None:
    assert rebalance.plan({"a": {("p", "q"): 110}, "b": {("p", "r"): 100}}, 0.2, 0) is None  # within 20%
    assert rebalance.plan({"a": {("p", "q"): 50}, "b": {}}, 0.2, 100) is None  # gap under minMessages
    assert rebalance.plan({"a": {("p", "q"): 500}, "b": {}}, 0.2, 10) is None  # one queue: moving it only swaps
    assert rebalance.plan({"a": {("p", "q"): 500}}, 0.2, 10) is None  # one shard


@pytest.mark.parametrize("seed", range(40))
def test_generated_plans_narrow_the_gap_and_end(seed: int) -> None:
    rnd = random.Random(seed)
    sizes = {
        f"w-{s}": {("p", f"q{s}-{i}"): rnd.choice([0, 1, 5, 50, 400, 3000]) for i in range(rnd.randint(0, 8))}
        for s in range(rnd.randint(2, 4))
    }
    tolerance, floor = rnd.choice([0.05, 0.2, 0.5]), rnd.choice([0, 10, 1000])
    total = sum(loads(sizes).values())
    for _ in range(500):
        move = rebalance.plan(sizes, tolerance, floor)
        if move is None:
            break
        key, src, dst = move
        before = loads(sizes)
        assert key in sizes[src] and src != dst
        n = sizes[src].pop(key)
        sizes[dst][key] = n
        after = loads(sizes)
        # The two shards end closer than they were, and no message appears or vanishes.
        assert abs(after[src] - after[dst]) < before[src] - before[dst]
        assert sum(after.values()) == total
    else:
        pytest.fail(f"no end after 500 moves: {loads(sizes)}")
    ld = loads(sizes)
    hi, lo = max(ld, key=ld.__getitem__), min(ld, key=ld.__getitem__)
    gap = ld[hi] - ld[lo]
    # Either within the bound, or no queue of the fullest shard can narrow the gap.
    assert within(sizes, tolerance, floor) or all(n == 0 or n >= gap for n in sizes[hi].values())


@pytest.fixture
def server() -> Iterator[ZaqarDouble]:
    d = ZaqarDouble()
    d.state.moves = {}
    for i in range(2):
        d.state.pools[f"web-{i}"] = {"uri": f"redis://h{i}:6379/0", "weight": 100, "flavor": "web"}
    yield d
    d.stop()


@pytest.fixture
def api(server: ZaqarDouble) -> ServerAPI:
    return ServerAPI(server.url, token=server.state.token, timeout=5)


def put(server: ZaqarDouble, name: str, shard: str, total: int) -> None:
    key = ("shop", name)
    server.state.queues[key], server.state.placement[key], server.state.totals[key] = {}, shard, total


def test_step_moves_one_queue_at_a_time_until_within_bound(server: ZaqarDouble, api: ServerAPI) -> None:
    put(server, "a", "web-0", 600)
    put(server, "b", "web-0", 500)
    put(server, "c", "web-0", 100)
    put(server, "d", "web-1", 0)
    shards = ["web-0", "web-1"]
    block, (ok, reason, msg) = rebalance.step(api, OPTS, shards, None, T0)
    assert (ok, reason) == (False, "Rebalancing") and "web-0=1200, web-1=0" in msg
    assert block["moving"]["queue"] == "a" and block["moving"]["to"] == "web-1"  # 600/600
    # In flight: the next look only follows it.
    n = len(server.state.requests)
    block, (ok, reason, _) = rebalance.step(api, OPTS, shards, block, T0 + 10)
    assert reason == "Rebalancing" and not [r for r in server.state.requests[n:] if r[0] == "POST"]
    server.state.finish_move(("shop", "a"))
    block, (ok, reason, msg) = rebalance.step(api, OPTS, shards, block, T0 + 20)
    assert (ok, reason) == (True, "WithinBound") and block["moves"] == 1 and block["moving"] is None, msg


def test_step_failure_backs_off(server: ZaqarDouble, api: ServerAPI) -> None:
    put(server, "a", "web-0", 600)
    put(server, "b", "web-0", 500)
    shards = ["web-0", "web-1"]
    block, _ = rebalance.step(api, OPTS, shards, None, T0)
    server.state.finish_move(("shop", block["moving"]["queue"]), error="target full")
    block, (ok, reason, msg) = rebalance.step(api, OPTS, shards, block, T0 + 10)
    assert (ok, reason) == (False, "RebalanceFailed") and "target full" in msg and "attempt 1" in msg
    assert block["failed"]["retryAt"] == migration.stamp(T0 + 10 + migration.BACKOFF_BASE)
    n = len(server.state.requests)
    block, (_, reason, _) = rebalance.step(api, OPTS, shards, block, T0 + 20)
    assert reason == "RebalanceFailed" and len(server.state.requests) == n  # waits, asks nothing
    block, (_, reason, _) = rebalance.step(api, OPTS, shards, block, T0 + 31)
    assert reason == "Rebalancing" and block["moving"]


def test_step_without_moves_says_so(server: ZaqarDouble, api: ServerAPI) -> None:
    server.state.moves = None
    _, (ok, reason, _) = rebalance.step(api, OPTS, ["web-0", "web-1"], None, T0)
    assert (ok, reason) == (False, "NotSupported")
