"""Pool reconciliation scaling down by moving queues: the in-memory Kubernetes
store, the Zaqar double with its model of the move API, and real redis-server
shards (external provisioner) for the probes."""
# The fixtures come from test_reconcile and test_probes: pytest passes them by name.
# ruff: noqa: F811

from __future__ import annotations

import copy
from typing import Any

from sluice_operator.config import Config
from sluice_operator.handlers import pool as pool_handler

from .kube_double import Patch, Store
from .test_probes import redis_port  # noqa: F401  (fixture)
from .test_reconcile import cond, server, store  # noqa: F401  (fixtures)
from .zaqar_double import ZaqarDouble


def run_pool(cfg: Config, store: Store, body: dict[str, Any] | None = None) -> dict[str, Any]:
    """run_pool reconciles the stored Pool (or the given, possibly stale, body) and stores
    only what the status patch carries over the stored status, as the apiserver does: a
    change made in place but left out of the patch is lost, as it would be."""
    body = body or store.get("Pool", "shop", "web")
    assert body is not None
    p = Patch()
    pool_handler.reconcile(cfg, copy.deepcopy(body), p)
    stored = store.objs[("Pool", "shop", "web")]
    stored["status"] = merge_patch(stored.get("status") or {}, p.status)
    return copy.deepcopy(stored)


def merge_patch(target: Any, patch: Any) -> Any:
    """merge_patch is RFC 7386, what the apiserver does with the operator's status patch:
    objects merge key by key, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def external_pool(
    store: Store, server: ZaqarDouble, port: int, drain: dict[str, Any] | None = None, **extra: Any
) -> Config:
    cfg = Config(server_url_template=server.url, probe_timeout=1.0)
    token = {"token": server.state.token}
    store.apply(
        {"kind": "Secret", "metadata": {"name": "sluice-server-admin", "namespace": "shop"}, "stringData": token}
    )
    uris = "\n".join(f"redis://127.0.0.1:{port}/{i}" for i in range(3))
    store.apply({"kind": "Secret", "metadata": {"name": "shards", "namespace": "shop"}, "stringData": {"uris": uris}})
    spec: dict[str, Any] = {
        "backend": "redis",
        "provisioner": "external",
        "shards": 3,
        "placement": {"nodeClass": "any"},
        "external": {"secretRef": {"name": "shards"}},
    }
    if drain is not None:
        spec["drain"] = drain
    spec.update(extra)
    store.apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 1},
            "spec": spec,
        }
    )
    p = run_pool(cfg, store)
    assert cond(p, "Ready")["status"] == "True", p["status"]
    return cfg


def place_on_last_shard(server: ZaqarDouble, names: list[str]) -> None:
    for n in names:
        server.state.queues[("shop", n)] = {}
        server.state.placement[("shop", n)] = "web-2"


def test_scale_down_moves_queues_then_removes_the_shard(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,
) -> None:
    server.state.moves = {}
    cfg = external_pool(store, server, redis_port, {"maxInFlight": 2})
    place_on_last_shard(server, ["a", "b", "c"])
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 2
    p = run_pool(cfg, store)
    st = p["status"]
    assert st["phase"] == "Draining" and server.state.pools["web-2"]["weight"] == 0
    c = cond(p, "ScaledDown")
    assert c["status"] == "False" and c["reason"] == "MigratingQueues", c
    assert "moving the queues of web-2 to web-0, web-1: 0/3 queue(s) moved" in c["message"]
    m = st["migration"]
    assert m["shard"] == "web-2" and m["queuesRemaining"] == 3 and len(m["inFlight"]) == 2
    assert {x["to"] for x in m["inFlight"]} == {"web-0", "web-1"}
    # Two moves finish; the third starts; it finishes; the shard goes.
    for x in m["inFlight"]:
        server.state.finish_move((x["project"], x["queue"]))
    p = run_pool(cfg, store)
    m = p["status"]["migration"]
    assert m["queuesMoved"] == 2 and m["messagesMoved"] == 6 and [x["queue"] for x in m["inFlight"]] == ["c"]
    assert "2/3 queue(s) moved" in cond(p, "ScaledDown")["message"]
    server.state.finish_move(("shop", "c"))
    p = run_pool(cfg, store)
    st = p["status"]
    assert "web-2" not in server.state.pools
    assert [s["name"] for s in st["shards"]] == ["web-0", "web-1"]
    assert cond(p, "ScaledDown")["status"] == "True" and st["phase"] == "Ready"
    m = st["migration"]
    assert (m["queuesMoved"], m["queuesRemaining"], m["messagesMoved"], m["messagesRemaining"]) == (3, 0, 9, 0)
    assert m["finished"] and m["inFlight"] == []
    assert {server.state.placement[("shop", n)] for n in "abc"} == {"web-0", "web-1"}

    # Scaled up and down again: web-2 is drained anew, with a new tally and no `finished`.
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 3
    p = run_pool(cfg, store)
    assert "web-2" in server.state.pools and p["status"]["migration"]["finished"]
    place_on_last_shard(server, ["d"])
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 2
    p = run_pool(cfg, store)
    m = p["status"]["migration"]
    assert "finished" not in m and m["queuesMoved"] == 0 and [x["queue"] for x in m["inFlight"]] == ["d"], m


def test_a_stale_body_does_not_lose_the_tally(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,
) -> None:
    # A timer may be handed the Pool as it was before the last status patch: the tally
    # continues from what was last written, not from the stale copy.
    server.state.moves = {}
    cfg = external_pool(store, server, redis_port, {"maxInFlight": 1})
    place_on_last_shard(server, ["a", "b"])
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 2
    stale = store.get("Pool", "shop", "web")
    p = run_pool(cfg, store)
    server.state.finish_move(("shop", "a"))
    p = run_pool(cfg, store)
    assert p["status"]["migration"]["queuesMoved"] == 1
    server.state.finish_move(("shop", "b"))
    p = run_pool(cfg, store, body=stale)
    m = p["status"]["migration"]
    assert (m["queuesMoved"], m["messagesMoved"], m["queuesRemaining"]) == (2, 6, 0), m
    assert "web-2" not in server.state.pools


def test_failed_move_shows_in_the_condition(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,
) -> None:
    server.state.moves = {}
    cfg = external_pool(store, server, redis_port)
    place_on_last_shard(server, ["a"])
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 2
    run_pool(cfg, store)
    server.state.finish_move(("shop", "a"), error="web-0 refused the import")
    p = run_pool(cfg, store)
    c = cond(p, "ScaledDown")
    assert c["status"] == "False" and c["reason"] == "MigrationFailed"
    assert "web-0 refused the import" in c["message"] and "attempt 1" in c["message"]
    assert p["status"]["migration"]["failed"][0]["queue"] == "a"
    assert "web-2" in server.state.pools


def test_migrate_queues_false_waits_for_deletion(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,
) -> None:
    server.state.moves = {}
    cfg = external_pool(store, server, redis_port, {"migrateQueues": False})
    place_on_last_shard(server, ["a"])
    store.objs[("Pool", "shop", "web")]["spec"]["shards"] = 2
    p = run_pool(cfg, store)
    c = cond(p, "ScaledDown")
    assert c["reason"] == "ShardsHoldQueues" and "web-2 holds 1 queue(s)" in c["message"]
    assert not server.state.moves and "migration" not in p["status"]
    assert not [r for r in server.state.requests if r[1].endswith("/migrate")]


def test_rebalance_moves_messages_toward_the_emptier_shards(
    store: Store,
    server: ZaqarDouble,
    redis_port: int,
) -> None:
    server.state.moves = {}
    cfg = external_pool(store, server, redis_port)
    p = run_pool(cfg, store)
    assert not cond(p, "Balanced") and "rebalance" not in p["status"]  # off by default
    for name, total in [("a", 900), ("b", 800), ("c", 700)]:
        server.state.queues[("shop", name)] = {}
        server.state.placement[("shop", name)] = "web-0"
        server.state.totals[("shop", name)] = total
    store.objs[("Pool", "shop", "web")]["spec"]["rebalance"] = {"enabled": True, "tolerancePercent": 20}
    p = run_pool(cfg, store)
    c = cond(p, "Balanced")
    assert (c["status"], c["reason"]) == ("False", "Rebalancing") and "web-0=2400, web-1=0, web-2=0" in c["message"]
    first = p["status"]["rebalance"]["moving"]
    assert first["from"] == "web-0" and first["to"] == "web-1"
    for _ in range(4):
        if moving := p["status"]["rebalance"].get("moving"):
            server.state.finish_move((moving["project"], moving["queue"]))
        p = run_pool(cfg, store)
    c = cond(p, "Balanced")
    assert (c["status"], c["reason"]) == ("True", "WithinBound"), c
    assert sorted(server.state.placement[("shop", n)] for n in "abc") == ["web-0", "web-1", "web-2"]
    assert p["status"]["rebalance"]["moves"] == 2
