"""Draining a leaving shard by moving its queues to the shards that stay
(`POST /v2/queues/{q}/migrate`, docs/pooling.md "Moving a queue").

The server does the moving (batches, rate limit, resume after a crash); the
operator only decides which queue goes where and when, a few at a time, and
keeps the tally in the Pool's `status.migration`. Each call of `step` is one
look at the shard: it polls the moves in flight, records the finished and the
failed ones, and starts new moves up to the Pool's `drain.maxInFlight`.
Everything it needs next time is in the block it returns, so an operator
restart picks up where the last one stopped (asking the server for a move it
already started is harmless: same target, same move)."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from .. import kube
from ..serverapi import ServerAPI, ServerError

# A failed move is retried after BACKOFF_BASE seconds, doubling per attempt up
# to BACKOFF_MAX: a queue the server keeps refusing costs one call per backoff,
# never one per tick.
BACKOFF_BASE = 20.0
BACKOFF_MAX = 600.0
# Message counts of the queues still waiting come from their stats: at most this
# many calls per look, so a shard with thousands of queues does not cost a
# thousand calls every tick (the figure is then a lower bound, as docs/operator.md says).
STATS_CAP = 100
# What the server says about a move that is over.
FINISHED = ("done", "failed")


def stamp(t: float) -> str:
    """stamp is epoch seconds in the RFC 3339 form Kubernetes uses."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def epoch(s: str) -> float:
    """epoch reads a stamp back (0 for anything unreadable: retry now rather than never)."""
    try:
        return dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC).timestamp()
    except (TypeError, ValueError):
        return 0.0


def backoff(attempts: int) -> float:
    """backoff is how long to wait after the attempts-th failed move of a queue."""
    return float(min(BACKOFF_BASE * 2 ** max(attempts - 1, 0), BACKOFF_MAX))


def choose_target(load: dict[str, int], order: list[str]) -> str:
    """choose_target is the staying shard with the fewest queues (those already placed plus
    the moves to it in flight); ties go to the first in `order` (the shard index). The
    shards of one Pool share one weight, so this is also where the server's weighted
    choice would put new queues on average, without its randomness."""
    return min(order, key=lambda name: (load.get(name, 0), order.index(name)))


def latest(body: dict[str, Any], status: dict[str, Any], field: str = "migration") -> dict[str, Any] | None:
    """latest is the Pool's status block `field` (migration, rebalance) as last written, read from the apiserver: the
    body a timer or an update handler is given may predate the previous handler's status
    patch, and a tally continued from a stale block forgets the moves it started since.
    `status` (the reconcile's view of the old status) is brought up to date with it, so
    only real changes are written back."""
    current = kube.get("Pool", body["metadata"]["namespace"], body["metadata"]["name"]) or body
    block = (current.get("status") or {}).get(field)
    status[field] = block
    # A copy: step changes the block in place, and the old one is what the patch is diffed with.
    return copy.deepcopy(block) if block else None


def fresh(shard: str, now: float) -> dict[str, Any]:
    """fresh is the status block of a drain that starts now."""
    return {
        "shard": shard,
        "started": stamp(now),
        # Null, not absent: the status patch is a merge patch, which keeps a key it omits,
        # so the last drain's `finished` would survive into this one.
        "finished": None,
        "queuesMoved": 0,
        "queuesRemaining": 0,
        "messagesMoved": 0,
        "messagesRemaining": 0,
        "current": "",
        "inFlight": [],
        "failed": [],
    }


def _key(entry: dict[str, Any]) -> tuple[str, str]:
    return str(entry["project"]), str(entry["queue"])


def _fail(block: dict[str, Any], key: tuple[str, str], error: str, now: float) -> None:
    # One entry per queue: a new failure replaces the last one and pushes the retry further.
    old = next((f for f in block["failed"] if _key(f) == key), None)
    attempts = int(old["attempts"]) + 1 if old else 1
    block["failed"] = [f for f in block["failed"] if _key(f) != key] + [
        {
            "project": key[0],
            "queue": key[1],
            "attempts": attempts,
            "error": error[:300],
            "retryAt": stamp(now + backoff(attempts)),
        }
    ]


def _moving(key: tuple[str, str], state: dict[str, Any], target: str) -> dict[str, Any]:
    return {
        "project": key[0],
        "queue": key[1],
        "to": str(state.get("to") or target),
        "state": str(state.get("state") or "sealing"),
        "messagesMoved": int(state.get("messages_moved") or 0),
        "messagesRemaining": int(state.get("messages_remaining") or 0),
    }


def _poll(
    api: ServerAPI, block: dict[str, Any], placed: set[tuple[str, str]], now: float
) -> tuple[int, set[tuple[str, str]]]:
    """_poll refreshes the moves in flight; finished ones leave inFlight. Returns the
    messages moved by the moves that finished, for the running total, and the queues
    whose moves are done."""
    settled, still, done = 0, [], set()
    for entry in block["inFlight"]:
        key = _key(entry)
        state = api.migration(*key)
        if state is None:
            # No record: the move never started, or its record is gone. A queue no longer
            # on the shard left it (moved, or deleted); one still there goes back to waiting.
            if key not in placed:
                block["queuesMoved"] += 1
            continue
        if state.get("state") == "done":
            block["queuesMoved"] += 1
            settled += int(state.get("messages_moved") or 0)
            done.add(key)
        elif state.get("state") == "failed":
            settled += int(state.get("messages_moved") or 0)
            _fail(block, key, str(state.get("error") or "the move failed"), now)
        else:
            still.append(_moving(key, state, entry["to"]))
    block["inFlight"] = still
    return settled, done


def _dead_letter_target(api: ServerAPI, key: tuple[str, str], targets: list[str]) -> str | None:
    """_dead_letter_target is where the queue's dead-letter queue went, when it went to a staying
    shard: the server keeps a queue and its dead-letter queue on one pool and refuses to move the
    queue anywhere else (docs/pooling.md, "Dead-letter queues")."""
    try:
        dlq = (api.get_queue(*key) or {}).get("_dead_letter_queue")
    except ServerError:
        return None  # gone or unreadable: the move itself will say

    if not isinstance(dlq, str) or not dlq:
        return None
    state = api.migration(key[0], dlq) or {}
    to = state.get("to")
    return to if state.get("state") != "failed" and to in targets else None


def _start(
    api: ServerAPI, block: dict[str, Any], key: tuple[str, str], load: dict[str, int], order: list[str], now: float
) -> None:
    """_start asks the server to move one queue, recording the move in flight or the failure."""
    target = _dead_letter_target(api, key, order) or choose_target(load, order)
    try:
        state = api.migrate_queue(key[0], key[1], target)
    except ServerError as exc:
        if exc.status == 409:
            # A move to another pool is already under way (an earlier operator chose
            # differently): follow that one rather than fight it.
            state = api.migration(*key) or {}
            if state.get("state") in FINISHED or not state:
                _fail(block, key, f"{exc.title}: {exc.description}", now)
                return
        else:
            # 400 (the target refused) or 404 (the shard lists a queue the server cannot
            # find): a fact about this queue; say it and try again later.
            _fail(block, key, f"{exc.status} {exc.title}: {exc.description}", now)
            return
    moving = _moving(key, state, target)
    load[moving["to"]] = load.get(moving["to"], 0) + 1
    block["inFlight"].append(moving)


def step(
    api: ServerAPI, shard: str, targets: list[str], block: dict[str, Any] | None, limit: int, now: float
) -> dict[str, Any] | None:
    """step looks at one leaving shard once and returns its updated status block, or None
    when the server cannot list the shard's queues (a server without moves: the caller
    falls back to waiting for the queues to be deleted). `targets` are the staying shards
    in index order; with none, nothing new starts. `block` is updated in place (so what
    was learned before a server failure is kept) and returned."""
    placed_list = api.pool_queues(shard)
    if placed_list is None:
        return None
    if block is None or block.get("shard") != shard or block.get("finished"):
        # A new drain (another shard, or the same name again after a scale-up): a new tally.
        block = fresh(shard, now)
    moved_before = int(block["messagesMoved"]) - sum(int(m["messagesMoved"]) for m in block["inFlight"])
    settled, done = _poll(api, block, set(placed_list), now)
    moved_before += settled
    # The listing came first: a move that finished between it and the poll still shows its
    # queue here. It has left; moving it again would take it off a staying shard.
    placed_list = [k for k in placed_list if k not in done]
    placed = set(placed_list)
    # Kept right away: a server failure later in this look must not lose what finished.
    block["messagesMoved"] = moved_before + sum(int(m["messagesMoved"]) for m in block["inFlight"])
    # Failures of queues that are gone (deleted, or moved by someone else) are history.
    block["failed"] = [f for f in block["failed"] if _key(f) in placed]
    busy = {_key(m) for m in block["inFlight"]}
    waiting_retry = {_key(f) for f in block["failed"] if epoch(str(f.get("retryAt"))) > now}
    ready = [k for k in placed_list if k not in busy and k not in waiting_retry]
    if targets and ready and len(block["inFlight"]) < limit:
        load = {t: int((api.get_pool(t) or {}).get("queues") or 0) for t in targets}
        for m in block["inFlight"]:
            load[m["to"]] = load.get(m["to"], 0) + 1
        for key in ready[: max(limit - len(block["inFlight"]), 0)]:
            _start(api, block, key, load, targets, now)
    busy = {_key(m) for m in block["inFlight"]}
    waiting = [k for k in placed_list if k not in busy]
    block["messagesMoved"] = moved_before + sum(int(m["messagesMoved"]) for m in block["inFlight"])
    block["messagesRemaining"] = sum(int(m["messagesRemaining"]) for m in block["inFlight"]) + sum(
        api.queue_stats(*k)[0]["total"] for k in waiting[:STATS_CAP]
    )
    block["queuesRemaining"] = len(placed | busy)
    block["current"] = ", ".join(f"{m['project']}/{m['queue']} -> {m['to']}" for m in block["inFlight"])
    return block


def finish(block: dict[str, Any], now: float) -> dict[str, Any]:
    """finish marks the block of a shard that is now empty and removed."""
    done = {"queuesRemaining": 0, "messagesRemaining": 0, "current": "", "inFlight": [], "failed": []}
    return {**block, **done, "finished": stamp(now)}


def idle(block: dict[str, Any]) -> bool:
    """idle: nothing is left on the shard and nothing is in flight."""
    return not block["inFlight"] and not block["queuesRemaining"]


def summary(block: dict[str, Any], targets: list[str]) -> tuple[str, str]:
    """summary is the ScaledDown condition's (reason, message) while a shard drains by moves."""
    total = int(block["queuesMoved"]) + int(block["queuesRemaining"])
    msg = (
        f"moving the queues of {block['shard']} to {', '.join(targets) or 'no staying shard (none answers)'}: "
        f"{block['queuesMoved']}/{total} queue(s) moved, {block['messagesMoved']} message(s) moved, "
        f"{block['messagesRemaining']} remaining"
    )
    if block["current"]:
        msg += f"; in flight: {block['current']}"
    busy = {_key(m) for m in block["inFlight"]}
    failed = [f for f in block["failed"] if _key(f) not in busy]
    if failed:
        worst = failed[0]
        msg += (
            f"; {len(failed)} move(s) failed, retried with backoff: {worst['project']}/{worst['queue']}"
            f" (attempt {worst['attempts']}, next at {worst['retryAt']}): {worst['error']}"
        )
        return "MigrationFailed", msg
    return "MigratingQueues", msg
