"""A Pool's capacity: how full each shard is and what its Redis does when full, as
the namespace's server reports it (GET /v2/pools/{shard}/storage), and the status
that follows from it: shards[].memoryUsedBytes / memoryMaxBytes / evictionPolicy,
the Memory column, and the StorageFull and NoEviction conditions.

A shard whose Redis runs an eviction policy (anything but noeviction) is refused:
when full it would delete stored messages, acknowledged ones included. It gets no
new queues (weight 0) while the policy stays, and the Pool says why."""

from __future__ import annotations

import logging
from typing import Any

from .. import conditions as cond
from ..builders import common
from ..builders.shard_settings import MIB, SAFE_EVICTION_POLICY
from ..serverapi import ServerAPI, ServerError, Unavailable

log = logging.getLogger(__name__)

# sluice-server's placement high-water mark (storage.HighWater there): a shard used
# above this share of its limit gets no new queues, so the Pool reports it.
HIGH_WATER = 0.9
# What a storage report sets in a shard's status entry (evictionPolicy apart, which
# outlives a report that cannot tell: the refusal must not lapse with a failed read).
REPORTED = ("memoryUsedBytes", "memoryMaxBytes", "storageFull")

Condition = tuple[bool | None, str, str]


def refused(entry: dict[str, Any]) -> bool:
    """refused: the shard's Redis reported an eviction policy other than noeviction."""
    policy = str(entry.get("evictionPolicy") or "")
    return bool(policy) and policy.lower() != SAFE_EVICTION_POLICY


def carry(entry: dict[str, Any], old: dict[str, Any]) -> None:
    """carry keeps a shard's last reported capacity (its entry in the previous status) in
    the entry built this pass, until a new report replaces it: registration needs the
    eviction policy before this pass reads it, and a server outage must not blank it."""
    for key in (*REPORTED, "evictionPolicy"):
        if key in old:
            entry[key] = old[key]


def record(entry: dict[str, Any], report: dict[str, Any] | None) -> None:
    """record puts one storage report (ServerAPI.pool_storage) into a shard's entry; None
    (nothing known: no such endpoint) removes the memory fields."""
    for key in REPORTED:
        entry.pop(key, None)
    if report is None:
        return
    # Used memory to the MiB below: a steady shard's figure holds still, and so does the status.
    used = report["used_bytes"] - report["used_bytes"] % MIB
    entry.update(memoryUsedBytes=used, memoryMaxBytes=report["max_bytes"], storageFull=report["full"])
    if report["eviction_policy"]:
        entry["evictionPolicy"] = report["eviction_policy"]


def observe(api: ServerAPI, entries: list[dict[str, Any]]) -> None:
    """observe reads the storage report of every registered shard into its entry. A shard
    the server cannot read now (503) keeps what was last seen; any failure leaves the
    rest of the reconcile alone."""
    for e in entries:
        if not e.get("registered"):
            continue
        try:
            record(e, api.pool_storage(e["name"]))
        except (Unavailable, ServerError) as exc:
            log.debug("storage of shard %s: %s", e["name"], exc)


def withhold(api: ServerAPI, entries: list[dict[str, Any]]) -> None:
    """withhold gives weight 0 (no new queues) to every registered shard that is refused
    and still has a weight, at once: registration keeps it there on later passes."""
    for e in entries:
        if e.get("registered") and refused(e) and e.get("weight") != 0:
            try:
                api.patch_pool(e["name"], weight=0)
                e["weight"] = 0
            except (Unavailable, ServerError) as exc:
                log.warning("could not withhold shard %s: %s", e["name"], exc)


def _mib(n: int) -> str:
    return f"{n / MIB:.0f}Mi" if n >= MIB else f"{n} bytes"


def _percent(e: dict[str, Any]) -> int:
    return int(e["memoryUsedBytes"] * 100 // e["memoryMaxBytes"])


def _bounded(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if int(e.get("memoryMaxBytes") or 0) > 0 and "memoryUsedBytes" in e]


def memory_column(entries: list[dict[str, Any]], unbounded: bool) -> str | None:
    """memory_column is the Pool's Memory column: the fullest shard's used share of its
    limit ("37%"), "unbounded" when no shard has one (reported, or known from the spec:
    `unbounded`), None when nothing is known."""
    bounded = _bounded(entries)
    if bounded:
        return f"{max(_percent(e) for e in bounded)}%"
    if unbounded or any("memoryMaxBytes" in e for e in entries):
        return "unbounded"
    return None


def storage_condition(entries: list[dict[str, Any]], unbounded: bool, redis: bool = True) -> Condition:
    """storage_condition is the StorageFull condition: True when a shard is full or above
    HIGH_WATER, naming it; False with the fullest shard's share, or Unbounded when no shard
    has a limit (reported, or `unbounded`: the spec gives no memory limit); Unknown when
    the server reports nothing (an older server, or none reachable yet)."""
    bounded = _bounded(entries)
    full = [e for e in bounded if e.get("storageFull") or e["memoryUsedBytes"] >= e["memoryMaxBytes"]]
    high = [e for e in bounded if e not in full and e["memoryUsedBytes"] >= HIGH_WATER * e["memoryMaxBytes"]]
    limitless = [e["name"] for e in entries if "memoryMaxBytes" in e and not e["memoryMaxBytes"]]
    note = f"; no limit on {', '.join(limitless)}" if bounded and limitless else ""

    def shares(es: list[dict[str, Any]]) -> str:
        return ", ".join(f"{e['name']} ({_mib(e['memoryUsedBytes'])} of {_mib(e['memoryMaxBytes'])})" for e in es)

    if full:
        return (
            True,
            "ShardFull",
            f"full: {shares(full)}. Posts to the queues there are refused (507) until consumers "
            f"delete messages; reads, claims and deletes go on{note}",
        )
    if high:
        return (
            True,
            "HighWater",
            f"above {HIGH_WATER:.0%} of the limit, so no new queues go there: {shares(high)}{note}",
        )
    if bounded:
        top = max(bounded, key=_percent)
        return False, "BelowHighWater", f"fullest shard {top['name']} at {_percent(top)}% of its limit{note}"
    if (limitless or unbounded) and not redis:
        return False, "Unbounded", "no shard reports a storage limit"
    if limitless or unbounded:
        why = (
            "no memory limit (spec.resources.limits.memory), so Redis runs without maxmemory"
            if unbounded
            else "no shard reports a limit (maxmemory 0)"
        )
        return False, "Unbounded", f"{why}: a shard grows until its container or node runs out of memory"
    return None, "NotReported", "the server does not report its shards' storage"


def eviction_condition(entries: list[dict[str, Any]]) -> Condition:
    """eviction_condition is the NoEviction condition of a Redis Pool: False (reason
    EvictionPolicy) naming every refused shard and what to do, True when every shard that
    reported runs noeviction, Unknown when none reported."""
    bad = [e for e in entries if refused(e)]
    if bad:
        which = ", ".join(f"{e['name']} runs maxmemory-policy {e['evictionPolicy']}" for e in bad)
        return (
            False,
            "EvictionPolicy",
            f"{which}: a Redis that evicts deletes stored messages, acknowledged ones included, when it "
            "is full, so the shard gets no new queues. Set maxmemory-policy noeviction on it "
            "(CONFIG SET and its configuration file)",
        )
    known = [e for e in entries if e.get("evictionPolicy")]
    if known:
        return True, "NoEviction", f"{len(known)} shard(s) run maxmemory-policy noeviction"
    return None, "NotReported", "the server does not report the shards' maxmemory-policy"


def warnings(old: dict[str, Any] | None, ctype: str, new: Condition) -> list[tuple[str, str]]:
    """warnings are the Events to post for condition ctype: when it turns bad (StorageFull
    True, NoEviction False) or changes its reason while bad, and for NoEviction also when
    it names other shards; once per change, not every pass (a full shard's figures move)."""
    status, reason, message = new
    bad = status is True if ctype == "StorageFull" else status is False
    if not bad:
        return []
    was = old or {}
    same = was.get("status") == ("True" if status else "False") and was.get("reason") == reason
    if same and (ctype == "StorageFull" or was.get("message") == message):
        return []
    return [(reason, message)]


def unbounded(spec: dict[str, Any], prov: str) -> bool:
    """unbounded: the Pool's shards run without maxmemory, for want of a memory limit in
    the spec (what external shards are given is not the Pool's to know)."""
    return prov != "external" and common.memory_limit_bytes(spec.get("resources")) is None


def conditions(
    spec: dict[str, Any], prov: str, entries: list[dict[str, Any]], conds: list[dict[str, Any]], gen: int | None
) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """conditions sets StorageFull, and NoEviction for a Redis Pool, from the shards'
    entries; it returns the conditions and the Warning Events (reason, message) to post."""
    redis = spec["backend"] == "redis"
    found = {"StorageFull": storage_condition(entries, unbounded(spec, prov), redis)}
    if redis:
        found["NoEviction"] = eviction_condition(entries)
    out: list[tuple[str, str]] = []
    for ctype, new in found.items():
        out += warnings(cond.get_condition(conds, ctype), ctype, new)
        conds = cond.set_condition(conds, ctype, *new, gen)
    return conds, out
