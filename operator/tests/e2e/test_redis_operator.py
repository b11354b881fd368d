"""Pools provisioned by the real redis-operator v0.16.0 (the local cluster runs
its manager as a host process, its pods from the images `make images` builds):
a 2-shard Pool of single instances (Redis CRs) and a 1-shard Pool of a
3-member replication group behind Sentinel (RedisReplication + RedisSentinel)
become Ready, the server posts and claims through them, the master of the
replicated shard is killed and Sentinel's failover loses no acknowledged,
replicated message, shards scale up and drain-then-go down, the replicated
shard switches to one instance and back with only the current shape's CRs
left, and deleting the Pools completes (upstream finalizers included) while
their volumes stay. The Pools are shared between the tests, which run in
order; shard counts are the smallest that show each behaviour (the 3-shard
figures are `make bench-redis-operator`'s)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from sluice_operator.builders.shard_settings import REDIS_SHARD_SETTINGS

from ..integration.conftest import apply, condition, get, kc, status, wait_for
from .conftest import _need, client_token, server_url

HEALTH = "http://127.0.0.1:10291/healthz"
SIZE = "128Mi"


@pytest.fixture(scope="module")
def redis_operator(ns: str) -> Iterator[str]:
    crd = kc("get", "crd", "redisreplications.redis.redis.opstreelabs.in", check=False)
    _need(crd.returncode == 0, "redis-operator CRDs not installed (make cluster-up starts redis-operator)")
    try:
        with urllib.request.urlopen(HEALTH, timeout=5) as resp:
            healthy = resp.status == 200
    except OSError:
        healthy = False
    _need(healthy, f"redis-operator not answering on {HEALTH} (make redis-operator-up)")
    yield ns


def pool(ns: str, name: str, shards: int, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Pool",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "backend": "redis",
            "provisioner": "redis-operator",
            "shards": shards,
            "replicas": replicas,
            "storage": {"size": SIZE},
            "resources": {"requests": {"cpu": "20m", "memory": "16Mi"}},
            "placement": {"nodeClass": "metal", "policy": "required"},
        },
    }


def ready(ns: str, name: str) -> bool:
    return condition(get("pool", ns, name), "Ready").get("status") == "True"


def items(kind: str, ns: str, selector: str) -> list[dict[str, Any]]:
    return json.loads(kc("get", kind, "-n", ns, "-l", selector, "-o", "json").stdout)["items"]


def zaqar(ns: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """zaqar calls the namespace's server as a client of project `ns`."""
    req = urllib.request.Request(
        server_url(ns) + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={
            "Client-ID": str(uuid.uuid4()),
            "X-Auth-Token": client_token(ns),
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")
    except OSError as exc:
        return 0, str(exc)


def post(ns: str, queue: str, n: int, tag: str) -> bool:
    code, _ = zaqar(ns, "POST", f"/v2/queues/{queue}/messages", {"messages": [{"ttl": 3600, "body": {"tag": tag}}] * n})
    return code == 201


def post_settled(ns: str, queue: str, n: int, tag: str) -> None:
    """post_settled posts as a client should to a shard that just became Ready: a
    503 (nothing written, Retry-After) is retried up to 30 times a second apart;
    any other answer but 201 fails with what the server said."""
    body = {"messages": [{"ttl": 3600, "body": {"tag": tag}}] * n}
    for _ in range(30):
        code, out = zaqar(ns, "POST", f"/v2/queues/{queue}/messages", body)
        if code != 503:
            assert code == 201, (code, out)
            return
        time.sleep(1)
    raise AssertionError(f"still 503 after 30 tries: {out}")


def claim_all(ns: str, queue: str) -> list[str]:
    """claim_all claims until the queue is empty; the tags of every message claimed.
    It retries a 503 (with Retry-After, while Sentinel settles a replicated shard's
    master) as a client should, up to 30 times a second apart; any other answer but
    201 or 204 fails."""
    tags: list[str] = []
    unavailable = 0
    for _ in range(200):
        code, out = zaqar(ns, "POST", f"/v2/queues/{queue}/claims?limit=20", {"ttl": 300, "grace": 60})
        if code == 204:
            return tags
        if code == 503 and unavailable < 30:
            unavailable += 1
            time.sleep(1)
            continue
        assert code == 201, (code, out)
        tags += [m["body"]["tag"] for m in out["messages"]]
    raise AssertionError("queue never ran dry")


def make_queue(ns: str, pool_name: str, queue: str) -> str:
    apply(
        {
            "apiVersion": "sluice.dev/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": queue, "namespace": ns},
            "spec": {"pool": pool_name, "messageTTL": 3600},
        }
    )
    q = wait_for(
        f"Queue {queue} on a shard",
        lambda: (o := get("queue", ns, queue)) and status(o).get("shard") and o,
        timeout=120,
    )
    return str(q["status"]["shard"])


def redis_cli(ns: str, pod: str, *args: str) -> str:
    return kc("exec", "-n", ns, pod, "--", "redis-cli", *args, check=False).stdout


def replication(ns: str, pod: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in redis_cli(ns, pod, "info", "replication").splitlines() if ":" in line)


def assert_shard_settings(ns: str, pod: str) -> None:
    """The pod's Redis runs with sluice's shard settings: redis-operator mounted the
    ConfigMap and its image's entrypoint read it."""
    for name, value in REDIS_SHARD_SETTINGS:
        assert redis_cli(ns, pod, "config", "get", name).split() == [name, value], pod


def test_single_instance_shards(redis_operator: str) -> None:
    ns = redis_operator
    start = time.monotonic()
    apply(pool(ns, "ro1", 2, 1))
    wait_for("Pool ro1 Ready", lambda: ready(ns, "ro1"), timeout=600, interval=1)
    print(f"\nPool (2 shards, replicas 1, redis-operator) apply->Ready {time.monotonic() - start:.1f}s")
    for i in range(2):
        cr = get("redis", ns, f"ro1-{i}")
        assert cr, f"Redis ro1-{i}"
        # The upstream's own finalizer, and our retention policy for it.
        assert cr["metadata"].get("finalizers") == ["redisFinalizer"]
        assert cr["spec"]["storage"]["keepAfterDelete"] is True
    pods = items("pods", ns, "sluice.dev/pool=ro1")
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    for p in pods:
        assert "sluice.dev/applied-hash" not in (p["metadata"].get("annotations") or {})
        assert_shard_settings(ns, p["metadata"]["name"])
    shard = make_queue(ns, "ro1", "single")
    post_settled(ns, "single", 5, "a")
    assert claim_all(ns, "single") == ["a"] * 5
    print(f"queue single on {shard}")


def test_scale_up_and_down_keeps_volumes(redis_operator: str) -> None:
    ns = redis_operator
    kc("patch", "pool", "ro1", "-n", ns, "--type=merge", "-p", '{"spec": {"shards": 3}}')
    wait_for(
        "Pool ro1 Ready with 3 shards",
        lambda: (o := get("pool", ns, "ro1")) and status(o).get("readyShards") == "3/3" and ready(ns, "ro1"),
        timeout=300,
        interval=1,
    )
    kc("patch", "pool", "ro1", "-n", ns, "--type=merge", "-p", '{"spec": {"shards": 2}}')
    wait_for("shard ro1-2 removed", lambda: get("redis", ns, "ro1-2") is None, timeout=180, interval=1)
    wait_for("its StatefulSet gone", lambda: get("statefulset", ns, "ro1-2") is None, timeout=120)
    wait_for("its settings ConfigMap gone", lambda: get("configmap", ns, "ro1-2-redis-config") is None, timeout=30)
    p = wait_for(
        "ScaledDown", lambda: (o := get("pool", ns, "ro1")) and condition(o, "ScaledDown").get("status") == "True" and o
    )
    assert [s["name"] for s in p["status"]["shards"]] == ["ro1-0", "ro1-1"]
    # keepAfterDelete: the removed shard's claim stays.
    claims = items("pvc", ns, "sluice.dev/pool=ro1,sluice.dev/shard=2")
    assert [c["metadata"]["name"] for c in claims] == ["ro1-2-ro1-2-0"]


def test_replicated_shards_fail_over(redis_operator: str) -> None:
    ns = redis_operator
    start = time.monotonic()
    apply(pool(ns, "ro3", 1, 3))
    wait_for("Pool ro3 Ready", lambda: ready(ns, "ro3"), timeout=600, interval=1)
    print(f"\nPool (1 shard, replicas 3 + Sentinel, redis-operator) apply->Ready {time.monotonic() - start:.1f}s")
    assert get("redissentinel", ns, "ro3-0")
    shard = make_queue(ns, "ro3", "events")
    post_settled(ns, "events", 20, "before")
    members = [f"{shard}-{i}" for i in range(3)]
    for m in members:
        assert_shard_settings(ns, m)
    roles = {m: replication(ns, m).get("role") for m in members}
    masters = [m for m, r in roles.items() if r == "master"]
    assert len(masters) == 1, roles
    master = masters[0]

    # Acknowledged and replicated: every replica has the master's offset.
    def replicated() -> bool:
        info = replication(ns, master)
        offset = info.get("master_repl_offset")
        slaves = [v for k, v in info.items() if k.startswith("slave") and k[5:].isdigit()]
        return len(slaves) == 2 and all(f"offset={offset}," in v for v in slaves)

    wait_for("replicas caught up", replicated, timeout=30)
    killed = time.monotonic()
    kc("delete", "pod", master, "-n", ns, "--grace-period=0", "--force")
    acked = 20
    first_ok = None
    for _ in range(600):
        if post(ns, "events", 1, "after"):
            first_ok = time.monotonic() - killed
            acked += 1
            break
        time.sleep(0.2)
    assert first_ok is not None, "the server never posted through the new master"
    print(f"failover: master {master} killed -> first successful post {first_ok:.1f}s")
    for _ in range(9):
        if post(ns, "events", 1, "after"):
            acked += 1
    tags = claim_all(ns, "events")
    assert tags.count("before") == 20, tags
    assert len(tags) >= acked
    new_masters = [m for m in members if m != master and replication(ns, m).get("role") == "master"]
    assert len(new_masters) == 1, "Sentinel promoted no replica"


def shape(ns: str, shard: str) -> dict[str, bool]:
    return {kind: get(kind.lower(), ns, shard) is not None for kind in ("Redis", "RedisReplication", "RedisSentinel")}


def switch_replicas(ns: str, name: str, replicas: int) -> float:
    """switch_replicas patches a Pool's replicas across 1 and waits until it is Ready
    for that generation with only the new shape's CRs; the seconds it took."""
    start = time.monotonic()
    kc("patch", "pool", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"replicas": replicas}}))
    gen = get("pool", ns, name)["metadata"]["generation"]
    want = {"Redis": replicas == 1, "RedisReplication": replicas > 1, "RedisSentinel": replicas > 1}
    wait_for(
        f"Pool {name} Ready with replicas {replicas}",
        lambda: (
            (o := get("pool", ns, name))
            and status(o).get("observedGeneration") == gen
            and ready(ns, name)
            and shape(ns, f"{name}-0") == want
        ),
        timeout=420,
        interval=1,
    )
    return time.monotonic() - start


def test_replicas_crossing_one_leaves_one_shape(redis_operator: str) -> None:
    """R3: replicas 3 -> 1 -> 3 on the shard the failover test used; each switch ends
    with only the current kind's CRs, one StatefulSet owned by it, and a working shard."""
    ns = redis_operator
    for replicas, owner_kind in ((1, "Redis"), (3, "RedisReplication")):
        took = switch_replicas(ns, "ro3", replicas)
        print(f"\nro3 replicas -> {replicas}: Ready in {took:.1f}s")
        sts = get("statefulset", ns, "ro3-0")
        assert sts and [o["kind"] for o in sts["metadata"]["ownerReferences"]] == [owner_kind]
        assert sts["spec"]["replicas"] == replicas
        sentinels = get("statefulset", ns, "ro3-0-sentinel")
        if replicas == 1:
            wait_for("the sentinels' StatefulSet gone", lambda: get("statefulset", ns, "ro3-0-sentinel") is None)
        else:
            assert sentinels and [o["kind"] for o in sentinels["metadata"]["ownerReferences"]] == ["RedisSentinel"]
        tag = f"r{replicas}"
        wait_for(f"post through replicas {replicas}", lambda t=tag: post(ns, "events", 3, t), timeout=60, interval=1)
        assert claim_all(ns, "events").count(tag) == 3


def test_pool_deletion_completes_and_keeps_volumes(redis_operator: str) -> None:
    ns = redis_operator
    for q in ("single", "events"):
        kc("delete", "queue", q, "-n", ns, "--timeout=120s", check=False)
    for name in ("ro1", "ro3"):
        kc("delete", "pool", name, "-n", ns, "--wait=false")
    for name in ("ro1", "ro3"):
        wait_for(f"Pool {name} deleted", lambda n=name: get("pool", ns, n) is None, timeout=120, interval=1)
    # The upstream finalizers ran or were lifted: its CRs are gone, and their claims stay.
    for kind in ("redis", "redisreplication", "redissentinel"):
        wait_for(
            f"{kind} gone",
            lambda k=kind: not json.loads(kc("get", k, "-n", ns, "-o", "json").stdout)["items"],
            timeout=120,
            interval=1,
        )
    left = {c["metadata"]["name"] for c in items("pvc", ns, "app.kubernetes.io/managed-by=sluice-operator")}
    assert {"ro1-0-ro1-0-0", "ro3-0-ro3-0-0", "ro3-0-ro3-0-2"} <= left, left
