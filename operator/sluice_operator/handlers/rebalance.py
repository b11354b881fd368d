"""Rebalancing a Pool (`spec.rebalance`): moving queues between its shards until
each shard's message count is within a bound of its share. The shards of a Pool
share one weight, so a shard's share is the Pool's messages over its shards.

One move at a time, and only a move that narrows the gap between the fullest
and the emptiest shard: with counts that stand still this ends, and it never
moves a queue back and forth (a queue that would overshoot stays). The status
block `status.rebalance` carries the move in flight between ticks."""

from __future__ import annotations

from typing import Any

from .. import conditions as cond
from ..serverapi import ServerAPI, ServerError, Unavailable
from . import migration


def plan(
    sizes: dict[str, dict[tuple[str, str], int]], tolerance: float, floor: int
) -> tuple[tuple[str, str], str, str] | None:
    """plan picks one move (queue, from, to) from per-shard queue sizes, or None when the
    shards are within the bound: every shard within `tolerance` (a fraction) of the mean,
    or the fullest and emptiest within `floor` messages of each other. The queue moved is
    the one that leaves the two shards closest, and only if it narrows their gap."""
    loads = {s: sum(q.values()) for s, q in sizes.items()}
    if len(loads) < 2:
        return None
    order = list(sizes)
    hi = max(order, key=lambda s: (loads[s], -order.index(s)))
    lo = min(order, key=lambda s: (loads[s], order.index(s)))
    mean = sum(loads.values()) / len(loads)
    gap = loads[hi] - loads[lo]
    if gap <= floor or all(abs(v - mean) <= tolerance * mean for v in loads.values()):
        return None
    best: tuple[int, tuple[str, str]] | None = None
    for key, n in sorted(sizes[hi].items()):
        if 0 < n < gap:  # n >= gap would only swap the roles of the two shards
            after = max(loads[hi] - n, loads[lo] + n) - min(loads[hi] - n, loads[lo] + n)
            if best is None or after < best[0]:
                best = (after, key)
    return (best[1], hi, lo) if best else None


def sizes_of(api: ServerAPI, shards: list[str]) -> dict[str, dict[tuple[str, str], int]] | None:
    """sizes_of reads each shard's queues and their message totals (at most STATS_CAP
    queues a shard); None when the server cannot list a shard's queues."""
    out: dict[str, dict[tuple[str, str], int]] = {}
    for s in shards:
        placed = api.pool_queues(s)
        if placed is None:
            return None
        out[s] = {k: api.queue_stats(*k)[0]["total"] for k in placed[: migration.STATS_CAP]}
    return out


def step(
    api: ServerAPI, opts: dict[str, Any], shards: list[str], block: dict[str, Any] | None, now: float
) -> tuple[dict[str, Any], tuple[bool, str, str]]:
    """step is one look: follow the move in flight, else plan and start the next one.
    Returns the status block and the Balanced condition (status, reason, message)."""
    block = dict(block or {"moves": 0, "moving": None, "failed": None})
    moving = block.get("moving")
    if moving:
        state = api.migration(moving["project"], moving["queue"]) or {"state": "done"}
        if state.get("state") not in migration.FINISHED:
            return block, (False, "Rebalancing", _moving_text(moving))
        block["moving"] = None
        if state.get("state") == "done":
            block["moves"] = int(block.get("moves") or 0) + 1
            block["failed"] = None
        else:
            _failed(block, moving, str(state.get("error") or "the move failed"), now)
    failed = block.get("failed")
    if failed and migration.epoch(failed["retryAt"]) > now:
        return block, (False, "RebalanceFailed", _failed_text(failed))
    sizes = sizes_of(api, shards)
    if sizes is None:
        return block, (False, "NotSupported", "the server cannot list a pool's queues: no queue moves")
    tolerance = int(opts.get("tolerancePercent", 20)) / 100
    move = plan(sizes, tolerance, int(opts.get("minMessages", 1000)))
    loads = ", ".join(f"{s}={sum(q.values())}" for s, q in sizes.items())
    if move is None:
        return block, (True, "WithinBound", f"messages per shard within {int(tolerance * 100)}%: {loads}")
    key, src, dst = move
    moving = {"project": key[0], "queue": key[1], "from": src, "to": dst, "messages": sizes[src][key]}
    try:
        api.migrate_queue(key[0], key[1], dst)
    except ServerError as exc:
        _failed(block, moving, f"{exc.status} {exc.title}: {exc.description}", now)
        return block, (False, "RebalanceFailed", _failed_text(block["failed"]))
    block["moving"] = moving
    return block, (False, "Rebalancing", f"{_moving_text(moving)}; {loads}")


def _failed(block: dict[str, Any], moving: dict[str, Any], error: str, now: float) -> None:
    old = block.get("failed") or {}
    attempts = int(old.get("attempts") or 0) + 1
    block["failed"] = {
        **{k: moving[k] for k in ("project", "queue", "from", "to")},
        "attempts": attempts,
        "error": error[:300],
        "retryAt": migration.stamp(now + migration.backoff(attempts)),
    }


def _moving_text(m: dict[str, Any]) -> str:
    return f"moving {m['project']}/{m['queue']} ({m['messages']} messages) from {m['from']} to {m['to']}"


def _failed_text(f: dict[str, Any]) -> str:
    return (
        f"moving {f['project']}/{f['queue']} from {f['from']} to {f['to']} failed (attempt {f['attempts']}, "
        f"next look at {f['retryAt']}): {f['error']}"
    )


def reconcile(
    api: ServerAPI,
    body: dict[str, Any],
    status: dict[str, Any],
    shards: list[str],
    settled: bool,
    conds: list[dict[str, Any]],
    now: float,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """reconcile is the Pool's rebalancing pass: (status.rebalance, conditions). It looks
    only when spec.rebalance.enabled and the Pool is `settled` (every shard ready and
    registered, no shard leaving); the Balanced condition says what it saw."""
    opts = body["spec"].get("rebalance") or {}
    gen = body["metadata"].get("generation")
    if not opts.get("enabled"):
        return status.get("rebalance"), conds
    if not settled:
        msg = "waiting for every shard to be ready and registered, and no shard leaving"
        return status.get("rebalance"), cond.set_condition(conds, "Balanced", None, "Waiting", msg, gen)
    block = migration.latest(body, status, "rebalance")
    try:
        block, balanced = step(api, opts, shards, block, now)
    except (Unavailable, ServerError) as exc:
        return block, cond.set_condition(conds, "Balanced", None, "ServerUnavailable", str(exc)[:400], gen)
    return block, cond.set_condition(conds, "Balanced", *balanced, gen)
