"""Draining a leaving shard by moving its queues (handlers/migration.py), against the
Zaqar double's model of the move API (the contract of a queue move): target choice,
the in-flight bound, failures retried with backoff, progress figures, and the
shard removed once empty. Generated runs drive random completions and failures."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from sluice_operator.handlers import migration, shards
from sluice_operator.serverapi import ServerAPI, ServerError, Unavailable

from .zaqar_double import ZaqarDouble

TARGETS = ["web-0", "web-1"]
T0 = 1_800_000_000.0


@pytest.fixture
def server() -> Iterator[ZaqarDouble]:
    d = ZaqarDouble()
    d.state.moves = {}
    yield d
    d.stop()


@pytest.fixture
def api(server: ZaqarDouble) -> ServerAPI:
    return ServerAPI(server.url, token=server.state.token, timeout=5)


def shards_with_queues(server: ZaqarDouble, on_leaving: list[tuple[str, str]], elsewhere: int = 0) -> dict:
    """Three registered shards, web-2 leaving; queues placed as given."""
    for i in range(3):
        server.state.pools[f"web-{i}"] = {"uri": f"redis://h{i}:6379/0", "weight": 100, "flavor": "web"}
    for key in on_leaving:
        server.state.queues[key] = {}
        server.state.placement[key] = "web-2"
    for n in range(elsewhere):
        server.state.queues[("other", f"q{n}")] = {}
        server.state.placement[("other", f"q{n}")] = TARGETS[n % 2]
    return {"index": 2, "name": "web-2", "ready": True, "registered": True}


def posts(server: ZaqarDouble, since: int) -> list[tuple[str, str, str]]:
    """The moves asked for since request number `since`: (project, queue, target)."""
    out = []
    for method, path, headers, body in server.state.requests[since:]:
        if method == "POST" and path.endswith("/migrate"):
            out.append((headers["X-Project-ID"], path.split("/")[3], body["pool"]))
    return out


def test_backoff_doubles_and_caps() -> None:
    assert [migration.backoff(n) for n in (1, 2, 3, 4)] == [20.0, 40.0, 80.0, 160.0]
    assert migration.backoff(9) == migration.BACKOFF_MAX == migration.backoff(50)


def test_choose_target_fewest_queues_then_index() -> None:
    assert migration.choose_target({"web-0": 3, "web-1": 1}, TARGETS) == "web-1"
    assert migration.choose_target({"web-0": 2, "web-1": 2}, TARGETS) == "web-0"
    assert migration.choose_target({}, ["web-3", "web-1"]) == "web-3"


def test_stamp_round_trips_and_bad_stamps_mean_now() -> None:
    assert migration.epoch(migration.stamp(T0)) == T0
    assert migration.epoch("garbage") == 0.0


def test_pool_queues_pages_and_none_without_moves(server: ZaqarDouble, api: ServerAPI) -> None:
    keys = [("shop", f"q{i}") for i in range(5)] + [("acme", "a")]
    shards_with_queues(server, keys, elsewhere=2)
    assert api.pool_queues("web-2", limit=2) == sorted(keys)
    assert [p for m, p, *_ in server.state.requests if "/queues" in p and "marker=" in p], "paged by marker"
    assert api.pool_queues("nosuch") is None
    server.state.moves = None
    assert api.pool_queues("web-2") is None


def test_migrate_queue_contract_answers(server: ZaqarDouble, api: ServerAPI) -> None:
    shards_with_queues(server, [("shop", "orders")])
    assert api.migration("shop", "orders") is None
    st = api.migrate_queue("shop", "orders", "web-0")
    assert st["state"] == "moving" and st["to"] == "web-0" and st["from"] == "web-2"
    assert api.migrate_queue("shop", "orders", "web-0")["to"] == "web-0"  # same target: idempotent
    with pytest.raises(ServerError) as err:
        api.migrate_queue("shop", "orders", "web-1")
    assert err.value.status == 409
    with pytest.raises(ServerError) as err:
        api.migrate_queue("shop", "nosuch", "web-0")
    assert err.value.status == 404
    assert api.migration("shop", "orders")["state"] == "moving"  # type: ignore[index]


def test_step_moves_at_most_limit_to_the_emptiest_shard(server: ZaqarDouble, api: ServerAPI) -> None:
    keys = [("shop", f"q{i}") for i in range(5)]
    shard = shards_with_queues(server, keys, elsewhere=3)  # web-0 holds 2, web-1 holds 1
    removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    assert not removed and block is not None
    assert server.state.pools["web-2"]["weight"] == 0 and shard["draining"] is True
    # web-1 (1 queue) gets the first, then both hold 2 and web-0 wins the tie.
    assert [(m["queue"], m["to"]) for m in block["inFlight"]] == [("q0", "web-1"), ("q1", "web-0")]
    assert block["queuesRemaining"] == 5 and block["queuesMoved"] == 0
    # Two moves in flight (3 messages each in the double) and three queues waiting (3 each).
    assert block["messagesRemaining"] == 15 and block["messagesMoved"] == 0
    assert block["current"] == "shop/q0 -> web-1, shop/q1 -> web-0"
    reason, msg = migration.summary(block, TARGETS)
    assert reason == "MigratingQueues" and "0/5 queue(s) moved" in msg and "shop/q0 -> web-1" in msg
    # Nothing finished: the next look starts nothing new.
    n = len(server.state.requests)
    removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 10)
    assert posts(server, n) == [] and len(block["inFlight"]) == 2  # type: ignore[index]


def test_failed_move_is_reported_and_retried_only_after_backoff(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "stuck")])
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    server.state.finish_move(("shop", "stuck"), error="target unreachable")
    n = len(server.state.requests)
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 10)
    assert block is not None and block["inFlight"] == [] and posts(server, n) == []
    (f,) = block["failed"]
    assert f["attempts"] == 1 and f["error"] == "target unreachable"
    assert f["retryAt"] == migration.stamp(T0 + 10 + migration.BACKOFF_BASE)
    reason, msg = migration.summary(block, TARGETS)
    assert reason == "MigrationFailed" and "shop/stuck (attempt 1" in msg and "target unreachable" in msg
    # Before retryAt nothing is asked; after it, the move is asked again.
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 20)
    assert posts(server, n) == []
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 31)
    assert posts(server, n) == [("shop", "stuck", "web-0")]
    # In flight again: the condition speaks of the move, not of the old failure.
    assert migration.summary(block, TARGETS)[0] == "MigratingQueues"  # type: ignore[arg-type]


def test_a_queue_that_always_fails_costs_a_few_calls_an_hour(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "stuck")])
    block, n, now = None, len(server.state.requests), T0
    for _ in range(360):  # one hour of 10 s ticks
        _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, now)
        if server.state.moves and server.state.moves[("shop", "stuck")]["state"] == "moving":
            server.state.finish_move(("shop", "stuck"), error="refused")
        now += 10
    # 20+40+80+160+320 s, then every 600 s: about a dozen attempts, never one per tick.
    assert 5 <= len(posts(server, n)) <= 12
    assert block is not None and block["failed"][0]["attempts"] == len(posts(server, n))


def test_move_already_under_way_elsewhere_is_followed(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "orders")], elsewhere=0)
    api.migrate_queue("shop", "orders", "web-1")  # started by an earlier operator
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)  # would choose web-0
    assert block is not None and [m["to"] for m in block["inFlight"]] == ["web-1"] and block["failed"] == []


def test_a_queue_follows_its_dead_letter_queue(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "orders")], elsewhere=1)  # web-0 holds one: web-1 is emptier
    server.state.queues[("shop", "orders")] = {"_dead_letter_queue": "orders-dead"}
    server.state.queues[("shop", "orders-dead")] = {}
    server.state.placement[("shop", "orders-dead")] = "web-2"
    api.migrate_queue("shop", "orders-dead", "web-0")  # moved first (by its queue's earlier move, or by hand)
    n = len(server.state.requests)
    shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    assert ("shop", "orders", "web-0") in posts(server, n)


def test_deleted_queue_leaves_the_tally(server: ZaqarDouble, api: ServerAPI) -> None:
    keys = [("shop", "a"), ("shop", "b")]
    shard = shards_with_queues(server, keys)
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 1, T0)
    server.state.finish_move(("shop", "a"), error="boom")
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 1, T0 + 10)
    assert block is not None and [f["queue"] for f in block["failed"]] == ["a"]
    del server.state.queues[("shop", "a")], server.state.placement[("shop", "a")]
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 1, T0 + 20)
    assert block is not None and block["failed"] == [] and block["queuesRemaining"] == 1


def test_no_staying_shard_starts_nothing(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "a")])
    n = len(server.state.requests)
    _, block = shards.drain_by_moves(api, "web", shard, [], None, 2, T0)
    assert posts(server, n) == [] and block is not None and block["queuesRemaining"] == 1
    assert "no staying shard" in migration.summary(block, [])[1]


def test_server_without_moves_falls_back(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "a")])
    server.state.moves = None
    removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    assert (removed, block) == (False, None) and "web-2" in server.state.pools


@pytest.mark.parametrize("seed", range(12))
def test_generated_drains_move_everything_and_remove_the_shard(server: ZaqarDouble, api: ServerAPI, seed: int) -> None:
    rnd = random.Random(seed)
    keys = [(rnd.choice(["shop", "acme"]), f"q{i}") for i in range(rnd.randint(0, 14))]
    keys = sorted(set(keys))
    shard = shards_with_queues(server, keys, elsewhere=rnd.randint(0, 4))
    limit = rnd.randint(1, 4)
    block: dict[str, Any] | None = None
    now, removed = T0, False
    failures = 0
    off_the_shard: list[tuple[tuple[str, str], str | None]] = []

    def server_work(method: str, path: str) -> None:
        # The server's movers run while the operator looks: a move may finish between
        # the look's listing of the shard and its poll of the move.
        parts = path.strip("/").split("/")
        if method == "POST" and parts[-1] == "migrate":
            key = (server.state.requests[-1][2]["X-Project-ID"], parts[2])
            if server.state.placement.get(key) != "web-2":
                off_the_shard.append((key, server.state.placement.get(key)))
        moving = [k for k, m in (server.state.moves or {}).items() if m["state"] == "moving"]
        if moving and rnd.random() < 0.15:
            server.state.finish_move(rnd.choice(sorted(moving)))

    server.state.before = server_work
    for _tick in range(400):
        n = len(server.state.requests)
        held_back = {
            (f["project"], f["queue"]) for f in (block or {}).get("failed", []) if migration.epoch(f["retryAt"]) > now
        }
        removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, limit, now)
        if removed and not keys:
            break  # nothing to move: removed at the first look
        assert block is not None
        asked = posts(server, n)
        assert not {(p, q) for p, q, _ in asked} & held_back, "retried before its backoff"
        assert all(t in TARGETS for *_, t in asked)
        assert not off_the_shard, f"asked to move queues that had left the shard: {off_the_shard}"
        if removed:
            break
        assert len(block["inFlight"]) <= limit
        assert block["queuesMoved"] + block["queuesRemaining"] == len(keys)
        for m in block["inFlight"]:
            if server.state.moves[(m["project"], m["queue"])]["state"] != "moving":  # type: ignore[index]
                continue  # finished since the look polled it
            roll = rnd.random()
            if roll < 0.5:
                server.state.finish_move((m["project"], m["queue"]))
            elif roll < 0.6:
                failures += 1
                server.state.finish_move((m["project"], m["queue"]), error="injected")
        now += 10
    assert removed, f"not drained after 400 ticks: {block}"
    assert "web-2" not in server.state.pools
    assert all(server.state.placement[k] in TARGETS for k in keys)
    if not keys:
        return
    assert block is not None
    assert block["queuesMoved"] == len(keys) and block["messagesMoved"] == 3 * len(keys)
    assert block["queuesRemaining"] == 0 and block["inFlight"] == [] and block["finished"]


def test_what_a_look_learned_survives_a_server_failure(
    server: ZaqarDouble, api: ServerAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = shards_with_queues(server, [("shop", "a"), ("shop", "b")])
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 1, T0)
    server.state.finish_move(("shop", "a"))

    def down(*_: Any) -> dict[str, Any]:
        raise Unavailable("POST /v2/queues/b/migrate: 503")

    monkeypatch.setattr(api, "migrate_queue", down)
    with pytest.raises(Unavailable):
        shards.drain_by_moves(api, "web", shard, TARGETS, block, 1, T0 + 10)
    # The block is updated in place: the finished move is counted, with its messages.
    assert block is not None and block["queuesMoved"] == 1 and block["messagesMoved"] == 3
    assert block["inFlight"] == []


def test_a_second_drain_of_the_same_shard_name_starts_a_new_tally(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "a")])
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    server.state.finish_move(("shop", "a"))
    removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 10)
    assert removed and block is not None and block["finished"] and block["queuesMoved"] == 1
    # Scaled up again later: web-2 is back, gets a queue, and leaves again.
    shard = shards_with_queues(server, [("shop", "b")])
    removed, again = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 100)
    assert not removed and again is not None and again["finished"] is None
    assert again["started"] == migration.stamp(T0 + 100) and again["queuesMoved"] == 0
    assert [m["queue"] for m in again["inFlight"]] == ["b"]


def test_an_empty_shard_leaving_again_keeps_the_last_record(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "a")])
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    server.state.finish_move(("shop", "a"))
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 10)
    assert block is not None
    last = dict(block)
    shard = shards_with_queues(server, [])  # back, and empty when it leaves again
    removed, again = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 100)
    assert removed and again == last  # nothing moved: the record of the last drain stands


def test_a_refused_move_quotes_the_server_and_waits(server: ZaqarDouble, api: ServerAPI) -> None:
    shard = shards_with_queues(server, [("shop", "paired"), ("shop", "ghost")])
    server.state.refuse[("shop", "paired")] = (409, "queue paired sends dead letters to queue dlq on the same pool")
    server.state.refuse[("shop", "ghost")] = (404, "queue ghost does not exist")
    removed, block = shards.drain_by_moves(api, "web", shard, TARGETS, None, 2, T0)
    assert not removed and block is not None and block["inFlight"] == []
    errors = {f["queue"]: f["error"] for f in block["failed"]}
    assert "dead letters to queue dlq" in errors["paired"] and errors["ghost"].startswith("404")
    reason, msg = migration.summary(block, TARGETS)
    assert reason == "MigrationFailed" and "2 move(s) failed" in msg
    # The user fixes the queue; the next retry after the backoff moves it.
    del server.state.refuse[("shop", "paired")]
    n = len(server.state.requests)
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 10)
    assert posts(server, n) == []
    _, block = shards.drain_by_moves(api, "web", shard, TARGETS, block, 2, T0 + 21)
    assert [q for _, q, _ in posts(server, n) if q == "paired"] == ["paired"]
