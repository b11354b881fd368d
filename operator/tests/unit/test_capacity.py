"""Capacity as a state of its own: maxmemory from the shard container's memory limit
(for generated limits of every suffix), noeviction everywhere, shards whose Redis
would evict refused, and the Pool's Memory column and conditions from the server's
storage reports, 404 and 503 included."""

from __future__ import annotations

import itertools
import math
import pathlib
import random
from decimal import Decimal
from typing import Any

import pytest
import yaml

from sluice_operator import kube
from sluice_operator.builders import builtin, common, shard_settings, thirdparty
from sluice_operator.builders.shard_settings import MIB, maxmemory_bytes
from sluice_operator.config import Config
from sluice_operator.handlers import capacity, shards
from sluice_operator.serverapi import ServerAPI, Unavailable

from .conftest import make_pool
from .test_probes import redis_port  # noqa: F401  (fixture)
from .test_reconcile import cond, run_pool, server, store  # noqa: F401  (fixtures)
from .zaqar_double import ZaqarDouble

EXAMPLE = pathlib.Path(__file__).resolve().parents[3] / "examples" / "10-pool-redis.yaml"
SUFFIXES = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def generated_limits(n: int = 600, seed: int = 57) -> list[tuple[Any, int]]:
    """Memory limits as a Pool may write them (whole and decimal numbers, every binary and
    decimal suffix, exponents, YAML integers), each with its exact byte value, rounded up
    as the kubelet rounds a memory quantity."""
    rnd = random.Random(seed)
    out: list[tuple[Any, int]] = []
    while len(out) < n:
        suffix = rnd.choice(list(SUFFIXES))
        number = str(rnd.choice([rnd.randint(1, 9), rnd.randint(10, 999), rnd.randint(1000, 99999)]))
        if rnd.random() < 0.4:
            number += "." + str(rnd.randint(0, 999)).rstrip("0") if rnd.random() < 0.9 else ".5"
            number = number.rstrip(".")
        exact = math.ceil(Decimal(number) * SUFFIXES[suffix])
        if exact >= 2:
            out.append((number + suffix, exact))
    for exp in ("128e6", "1e9", "2.5e8", "3e3"):
        out.append((exp, math.ceil(Decimal(exp))))
    out += [(v, v) for v in (2, 1023, MIB - 1, MIB, 2 * MIB, 268435456)]
    return out


@pytest.mark.parametrize("limit,exact", generated_limits())
def test_maxmemory_leaves_headroom_below_every_limit(limit: Any, exact: int) -> None:
    resources = {"limits": {"memory": limit}, "requests": {"cpu": "100m"}}
    assert common.memory_limit_bytes(resources) == exact
    settings = dict(common.redis_shard_settings(resources))
    m = int(settings["maxmemory"])
    assert settings["maxmemory-policy"] == "noeviction"
    assert m == maxmemory_bytes(exact)
    # Never 0 (no limit to Redis), always under the limit with 30 % of it kept back.
    assert 0 < m < exact
    assert exact - m >= exact * (100 - shard_settings.MAXMEMORY_PERCENT) / 100
    share = exact * shard_settings.MAXMEMORY_PERCENT / 100
    if share >= MIB:
        # Whole MiB, at least one, within a MiB of the share.
        assert m % MIB == 0 and m >= MIB and m > share - MIB


def test_maxmemory_over_a_sweep_of_byte_limits() -> None:
    # Every power of two and its neighbours from 2 bytes to 16 TiB, and the MiB edge.
    limits = {v + d for p in range(1, 45) for d in (-1, 0, 1) if (v := 2**p) + d >= 2}
    limits |= set(range(MIB * 10 // 7 - 3, MIB * 10 // 7 + 4))
    for limit in sorted(limits):
        m = maxmemory_bytes(limit)
        assert 0 < m < limit, limit
        assert m <= limit * 0.7
        if limit * 0.7 >= MIB:
            assert m % MIB == 0 and limit * 0.7 - m < MIB, limit


def test_the_examples_256Mi_shard_gets_179MiB() -> None:
    pool = yaml.safe_load(EXAMPLE.read_text())
    assert pool["spec"]["resources"]["limits"]["memory"] == "256Mi"
    pool["metadata"]["uid"] = "u"
    cmd = builtin.statefulset(Config(), pool, 0)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert f"--maxmemory {179 * MIB} " in cmd + " " and "--maxmemory-policy noeviction" in cmd
    # Pod 0 and its replicas run the same settings.
    assert cmd.count("--maxmemory-policy noeviction") == 2


@pytest.mark.parametrize(
    "resources",
    [None, {}, {"requests": {"memory": "1Gi"}}, {"limits": {"cpu": "2"}}, {"limits": {"memory": "0"}}],
)
def test_no_memory_limit_no_maxmemory_but_noeviction(resources: dict[str, Any] | None) -> None:
    settings = dict(common.redis_shard_settings(resources))
    assert "maxmemory" not in settings and settings["maxmemory-policy"] == "noeviction"
    assert capacity.unbounded({"resources": resources}, "builtin")
    assert not capacity.unbounded({"resources": resources}, "external")


def test_redis_operator_shards_get_maxmemory_and_roll_on_a_new_limit() -> None:
    small = make_pool(provisioner="redis-operator", resources={"limits": {"memory": "256Mi"}})
    big = make_pool(provisioner="redis-operator", resources={"limits": {"memory": "1Gi"}})
    conf = thirdparty.redis_config(Config(), small, 0)["data"]["redis-additional.conf"].splitlines()
    assert f"maxmemory {179 * MIB}" in conf and "maxmemory-policy noeviction" in conf
    for replicas in (1, 3):
        a, b = (
            thirdparty.redis_objects(Config(), make_pool(**{**p["spec"], "replicas": replicas}), 0)[0]
            for p in (small, big)
        )
        key = thirdparty.CONFIG_ANNOTATION
        assert a["metadata"]["annotations"][key] != b["metadata"]["annotations"][key]
        assert key not in thirdparty.IGNORED_ANNOTATIONS  # it reaches the pods, and rolls them
        again = thirdparty.redis_objects(Config(), make_pool(**{**small["spec"], "replicas": replicas}), 0)[0]
        assert again["metadata"]["annotations"] == a["metadata"]["annotations"]
        assert kube.object_hash(a) != kube.object_hash(b)


def test_apply_patches_the_annotations_the_operator_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings that changed with nothing else must still reach a live CR: the new digest
    # is patched, annotations others wrote stay (a merge patch).
    new = thirdparty.redis_objects(Config(), make_pool(resources={"limits": {"memory": "1Gi"}}), 0)[0]
    live = {"metadata": {"annotations": {kube.HASH_ANNOTATION: "old", "theirs": "x"}, "ownerReferences": []}}
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(kube, "get", lambda *a: live)
    monkeypatch.setattr(kube, "patch", lambda kind, ns, name, body: sent.append(body) or body)
    assert kube.apply(new)[1] == "updated"
    notes = sent[0]["metadata"]["annotations"]
    assert notes[thirdparty.CONFIG_ANNOTATION] == new["metadata"]["annotations"][thirdparty.CONFIG_ANNOTATION]
    assert "theirs" not in notes


# -- eviction policies -------------------------------------------------------

EVICTING = ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random"]
EVICTING += ["volatile-ttl", "ALLKEYS-LRU"]


@pytest.mark.parametrize("policy", EVICTING)
def test_every_evicting_policy_is_refused(policy: str) -> None:
    assert capacity.refused({"evictionPolicy": policy})


@pytest.mark.parametrize("policy", [None, "", "noeviction", "NoEviction"])
def test_noeviction_or_unknown_is_not_refused(policy: str | None) -> None:
    assert not capacity.refused({"evictionPolicy": policy} if policy is not None else {})


@pytest.mark.parametrize(
    "policies", list(itertools.product([None, "", "noeviction", "allkeys-lru", "volatile-ttl"], repeat=3))
)
def test_eviction_condition_names_exactly_the_refused_shards(policies: tuple[str | None, ...]) -> None:
    entries = [{"name": f"web-{i}", **({"evictionPolicy": p} if p is not None else {})} for i, p in enumerate(policies)]
    status, reason, message = capacity.eviction_condition(entries)
    bad = [f"web-{i}" for i, p in enumerate(policies) if p in ("allkeys-lru", "volatile-ttl")]
    if bad:
        assert (status, reason) == (False, "EvictionPolicy")
        named = [e["name"] for e in entries if f"{e['name']} runs" in message]
        assert named == bad and "noeviction" in message
    elif any(policies):
        assert (status, reason) == (True, "NoEviction")
    else:
        assert (status, reason) == (None, "NotReported")


def test_register_gives_a_refused_shard_no_new_queues(server: ZaqarDouble) -> None:  # noqa: F811
    entries = [
        {"name": "web-0", "ready": True},
        {"name": "web-1", "ready": True, "evictionPolicy": "allkeys-lru"},
    ]
    uris = {"web-0": "redis://a:6379/0", "web-1": "redis://b:6379/0"}
    with ServerAPI(server.url, server.state.token) as api:
        shards.register(api, "web", entries, uris, 100)
    assert server.state.pools["web-0"]["weight"] == 100 and server.state.pools["web-1"]["weight"] == 0
    assert [e["weight"] for e in entries] == [100, 0]


def test_warnings_once_per_change() -> None:
    bad = (False, "EvictionPolicy", "web-1 runs maxmemory-policy allkeys-lru: ...")
    assert capacity.warnings(None, "NoEviction", bad) == [bad[1:]]
    same = {"status": "False", "reason": "EvictionPolicy", "message": bad[2]}
    assert capacity.warnings(same, "NoEviction", bad) == []
    assert capacity.warnings({**same, "message": "web-0 runs ..."}, "NoEviction", bad) == [bad[1:]]
    assert capacity.warnings(same, "NoEviction", (True, "NoEviction", "2 shard(s)")) == []
    full = (True, "ShardFull", "full: web-0 (179Mi of 179Mi)")
    assert capacity.warnings({"status": "False", "reason": "BelowHighWater"}, "StorageFull", full) == [full[1:]]
    # A full shard's figures move; the Event is not repeated for them.
    was = {"status": "True", "reason": "ShardFull", "message": "full: web-0 (178Mi of 179Mi)"}
    assert capacity.warnings(was, "StorageFull", full) == []
    assert capacity.warnings(None, "StorageFull", (None, "NotReported", "")) == []


# -- storage reports ---------------------------------------------------------

MAX = 179 * MIB
STATES: dict[str, dict[str, Any] | None] = {
    "unreported": None,
    "unbounded": {"used_bytes": 5 * MIB, "max_bytes": 0, "eviction_policy": "noeviction", "full": False},
    "low": {"used_bytes": 60 * MIB, "max_bytes": MAX, "eviction_policy": "noeviction", "full": False},
    "high": {"used_bytes": 165 * MIB, "max_bytes": MAX, "eviction_policy": "noeviction", "full": False},
    "full": {"used_bytes": MAX + 300, "max_bytes": MAX, "eviction_policy": "noeviction", "full": True},
}
PERCENT = {"low": 33, "high": 92, "full": 100}


@pytest.mark.parametrize("spec_unbounded", [False, True])
@pytest.mark.parametrize("states", list(itertools.product(STATES, repeat=3)))
def test_memory_column_and_storage_condition(states: tuple[str, ...], spec_unbounded: bool) -> None:
    entries = []
    for i, s in enumerate(states):
        e = {"name": f"web-{i}"}
        capacity.record(e, STATES[s])
        entries.append(e)
    column = capacity.memory_column(entries, spec_unbounded)
    status, reason, message = capacity.storage_condition(entries, spec_unbounded)
    bounded = [s for s in states if s in PERCENT]
    if bounded:
        assert column == f"{max(PERCENT[s] for s in bounded)}%"
    elif spec_unbounded or "unbounded" in states:
        assert column == "unbounded"
    else:
        assert column is None
    named = sorted(e["name"] for e in entries if f"{e['name']} (" in message)
    if "full" in states:
        assert (status, reason) == (True, "ShardFull") and "507" in message
        assert named == [f"web-{i}" for i, s in enumerate(states) if s == "full"]
    elif "high" in states:
        assert (status, reason) == (True, "HighWater") and "no new queues" in message
        assert named == [f"web-{i}" for i, s in enumerate(states) if s == "high"]
    elif bounded:
        assert (status, reason) == (False, "BelowHighWater") and "33%" in message
    elif spec_unbounded or "unbounded" in states:
        assert (status, reason) == (False, "Unbounded")
    else:
        assert (status, reason) == (None, "NotReported")
    if bounded and "unbounded" in states:
        assert "no limit on web-" in message


def test_unbounded_redis_pool_says_why() -> None:
    spec = {"backend": "redis", "resources": {"requests": {"memory": "64Mi"}}}
    conds, warned = capacity.conditions(spec, "builtin", [{"name": "web-0"}], [], 4)
    c = {x["type"]: x for x in conds}
    assert c["StorageFull"]["reason"] == "Unbounded" and "maxmemory" in c["StorageFull"]["message"]
    assert c["StorageFull"]["observedGeneration"] == 4 and c["NoEviction"]["status"] == "Unknown"
    assert warned == []
    # A MongoDB Pool has no eviction policy to speak of, nor maxmemory.
    conds, _ = capacity.conditions({"backend": "mongodb"}, "builtin", [], [], 4)
    assert [x["type"] for x in conds] == ["StorageFull"]
    assert conds[0]["message"] == "no shard reports a storage limit"


def test_record_rounds_used_memory_and_keeps_the_policy() -> None:
    e: dict[str, Any] = {"name": "web-0"}
    capacity.record(
        e, {"used_bytes": 60 * MIB + 12345, "max_bytes": MAX, "eviction_policy": "allkeys-lru", "full": False}
    )
    assert e == {"name": "web-0", "memoryUsedBytes": 60 * MIB, "memoryMaxBytes": MAX, "storageFull": False,
                 "evictionPolicy": "allkeys-lru"}  # fmt: skip
    # A report that cannot tell the policy (or none at all) leaves the refusal standing.
    capacity.record(e, {"used_bytes": 1, "max_bytes": 0, "eviction_policy": "", "full": False})
    assert e["evictionPolicy"] == "allkeys-lru"
    capacity.record(e, None)
    assert e == {"name": "web-0", "evictionPolicy": "allkeys-lru"}


def test_pool_storage_client(server: ZaqarDouble) -> None:  # noqa: F811
    server.state.pools["web-0"] = {"uri": "redis://a:6379/0", "weight": 100, "flavor": "web"}
    with ServerAPI(server.url, server.state.token) as api:
        assert api.pool_storage("web-0") is None  # a server without the endpoint
        server.state.storage = {"web-0": {"used_bytes": 7, "max_bytes": 9, "eviction_policy": "noeviction"}}
        assert api.pool_storage("web-0") == {
            "used_bytes": 7,
            "max_bytes": 9,
            "eviction_policy": "noeviction",
            "full": False,
        }
        assert api.pool_storage("web-9") is None  # not registered
        server.state.storage["web-0"] = 503
        with pytest.raises(Unavailable):
            api.pool_storage("web-0")


# -- the reconcile -----------------------------------------------------------


def external_pool(store: Any, server: ZaqarDouble, port: int) -> None:  # noqa: F811
    store.apply(
        {
            "kind": "Secret",
            "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
            "stringData": {"token": server.state.token},
        }
    )
    uris = f"redis://127.0.0.1:{port}/0\nredis://127.0.0.1:{port}/1"
    store.apply({"kind": "Secret", "metadata": {"name": "shards", "namespace": "shop"}, "stringData": {"uris": uris}})
    store.apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Pool",
            "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "generation": 1},
            "spec": {
                "backend": "redis",
                "provisioner": "external",
                "shards": 2,
                "weight": 100,
                "placement": {"nodeClass": "any"},
                "external": {"secretRef": {"name": "shards"}},
            },
        }
    )


def test_pool_status_follows_the_storage_reports(
    store: Any,  # noqa: F811
    server: ZaqarDouble,  # noqa: F811
    redis_port: int,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    warned: list[tuple[str, str]] = []
    monkeypatch.setattr("sluice_operator.events.warn", lambda body, reason, message: warned.append((reason, message)))
    cfg = Config(server_url_template=server.url, probe_timeout=1.0)
    external_pool(store, server, redis_port)

    # An older server (no storage endpoint): the Pool is Ready all the same, and says it cannot tell.
    p = run_pool(cfg, store)
    assert cond(p, "Ready")["status"] == "True" and cond(p, "Registered")["status"] == "True"
    assert cond(p, "StorageFull")["status"] == "Unknown" and cond(p, "NoEviction")["status"] == "Unknown"
    assert "memory" not in p["status"] and all("memoryMaxBytes" not in s for s in p["status"]["shards"])

    # One shard reports, the other cannot be read (503): the rest of the reconcile goes on.
    server.state.storage = {
        "web-0": {"used_bytes": 60 * MIB + 5, "max_bytes": MAX, "eviction_policy": "noeviction"},
        "web-1": 503,
    }
    p = run_pool(cfg, store)
    assert cond(p, "Ready")["status"] == "True" and server.connections_closed()
    s0, s1 = p["status"]["shards"]
    assert (s0["memoryUsedBytes"], s0["memoryMaxBytes"], s0["evictionPolicy"]) == (60 * MIB, MAX, "noeviction")
    assert "memoryUsedBytes" not in s1
    assert p["status"]["memory"] == "33%"
    assert cond(p, "StorageFull")["reason"] == "BelowHighWater" and cond(p, "NoEviction")["status"] == "True"

    # web-1 turns out to evict: refused at once (weight 0), one Event, the condition says why.
    server.state.storage["web-1"] = {"used_bytes": MIB, "max_bytes": 0, "eviction_policy": "allkeys-lru"}
    p = run_pool(cfg, store)
    c = cond(p, "NoEviction")
    assert (c["status"], c["reason"]) == ("False", "EvictionPolicy") and "web-1 runs maxmemory-policy allkeys-lru" in c[
        "message"
    ]
    assert server.state.pools["web-1"]["weight"] == 0 and server.state.pools["web-0"]["weight"] == 100
    assert [w[0] for w in warned] == ["EvictionPolicy"]
    assert "no limit on web-1" in cond(p, "StorageFull")["message"]
    # Later passes keep it there, without repeating the Event; then a 503 does not lift it.
    p = run_pool(cfg, store)
    server.state.storage["web-1"] = 503
    p = run_pool(cfg, store)
    assert server.state.pools["web-1"]["weight"] == 0 and len(warned) == 1
    assert cond(p, "NoEviction")["reason"] == "EvictionPolicy"

    # Its policy mended: the condition clears, and the next registration gives the weight back.
    server.state.storage["web-1"] = {"used_bytes": MIB, "max_bytes": MAX, "eviction_policy": "noeviction"}
    p = run_pool(cfg, store)
    assert cond(p, "NoEviction")["status"] == "True"
    p = run_pool(cfg, store)
    assert server.state.pools["web-1"]["weight"] == 100

    # web-0 fills up: StorageFull names it, the column shows it, one Event.
    server.state.storage["web-0"] = {"used_bytes": MAX, "max_bytes": MAX, "eviction_policy": "noeviction"}
    p = run_pool(cfg, store)
    c = cond(p, "StorageFull")
    assert (c["status"], c["reason"]) == ("True", "ShardFull") and "web-0 (179Mi of 179Mi)" in c["message"]
    assert p["status"]["memory"] == "100%" and p["status"]["shards"][0]["storageFull"] is True
    assert [w[0] for w in warned] == ["EvictionPolicy", "ShardFull"]
    assert cond(p, "Ready")["status"] == "True"
