"""A full shard on real pods: a builtin Redis Pool of 2 shards with a 64Mi memory
limit runs each Redis with maxmemory at 70 % of it and noeviction; posts of 1 KiB
messages fill one shard until the server answers 507 with Retry-After. Nothing
acknowledged is lost, reads, claims and deletes go on, the shard's container is
never OOM-killed, the Pool's status shows the full shard, the other shard's
queues and new queues are unaffected, and deleting messages makes room again."""

from __future__ import annotations

import functools
import http.client
import json
import time
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest

from sluice_operator.builders.server import METRICS_PORT
from sluice_operator.builders.shard_settings import MIB, maxmemory_bytes

from ..integration.conftest import apply, condition, get, kc, status, wait_for
from .conftest import client_token, server_url
from .test_pools import pool, ready

POOL = "cap"
LIMIT_MIB = 64
# 1 KiB bodies, 100 to a post (about 110 KB, well under the server's 256 KiB
# max-messages-post-size): about 400 posts fill a 44 MiB shard.
BODY = "x" * 1024
BATCH = 100
# Bounds of the fill: a shard that never refuses fails the test, not the suite's clock.
MAX_POSTS = 2000
FILL_SECONDS = 120


def capacity_pool(ns: str, name: str = POOL) -> dict[str, Any]:
    """capacity_pool is test_pools' 2-shard Pool, ephemeral, with a LIMIT_MIB memory limit."""
    p = pool(ns, name, 2)
    p["spec"]["storage"] = {"ephemeral": True}
    p["spec"]["resources"]["limits"] = {"memory": f"{LIMIT_MIB}Mi"}
    return p


def queue(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "sluice.dev/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"pool": POOL},
    }


class Client:
    """Client calls the namespace's server as a pod of it would, with the default
    ServiceAccount's token, over one kept-alive connection (a fill is hundreds of posts)."""

    def __init__(self, ns: str) -> None:
        url = urllib.parse.urlsplit(server_url(ns))
        self.conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=15)
        self.headers = {
            "X-Auth-Token": client_token(ns),
            "X-Project-ID": ns,
            "Client-ID": str(uuid.uuid4()),
            "Content-Type": "application/json",
        }

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        data = None if body is None else json.dumps(body)
        self.conn.request(method, path, body=data, headers=self.headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, json.loads(raw) if raw else None

    def post(self, q: str, n: int = BATCH) -> tuple[int, dict[str, str], Any]:
        msgs = [{"ttl": 3600, "body": {"pad": BODY}} for _ in range(n)]
        return self.call("POST", f"/v2/queues/{q}/messages", {"messages": msgs})

    def total(self, q: str) -> int:
        code, _, body = self.call("GET", f"/v2/queues/{q}/stats")
        assert code == 200, (code, body)
        return int(body["messages"]["total"])


def redis_cli(ns: str, pod: str, *args: str) -> list[str]:
    cli = 'redis-cli -a "$REDIS_PASSWORD" --no-auth-warning ' + " ".join(args)
    out = kc("exec", "-n", ns, pod, "-c", "redis", "--", "sh", "-c", cli, check=False)
    assert out.returncode == 0, (pod, args, out.stderr)
    return out.stdout.split()


def redis_container(ns: str, pod: str) -> dict[str, Any]:
    p = get("pod", ns, pod)
    assert p, f"pod {ns}/{pod} gone"
    return next(c for c in p["status"]["containerStatuses"] if c["name"] == "redis")


def never_oom_killed(ns: str, pod: str) -> None:
    """never_oom_killed: the shard's Redis container is the first one, never restarted,
    and did not end as OOMKilled."""
    c = redis_container(ns, pod)
    last = (c.get("lastState") or {}).get("terminated") or {}
    assert c["restartCount"] == 0 and last.get("reason") != "OOMKilled", (pod, c)
    assert c.get("state", {}).get("running"), (pod, c)


def placed(ns: str, names: list[str], timeout: float = 120) -> dict[str, str]:
    """placed waits for the Queues to be Ready and returns queue -> the shard holding it."""

    def shard(q: str) -> str | None:
        return status(get("queue", ns, q)).get("shard") if ready("queue", ns, q) else None

    return {q: wait_for(f"Queue {q} Ready with a shard", functools.partial(shard, q), timeout=timeout) for q in names}


@pytest.fixture(scope="module")
def capacity(ns: str) -> str:
    """capacity is the module's namespace with the Pool Ready (the namespace's deletion
    takes the Pool, its Queues and the shards' emptyDirs with it)."""
    apply(capacity_pool(ns))
    wait_for(f"Pool {POOL} Ready", lambda: ready("pool", ns, POOL), timeout=300, interval=1)
    return ns


def test_full_shard(capacity: str) -> None:
    ns = capacity
    t0 = time.monotonic()
    pods = [f"{POOL}-{i}-0" for i in range(2)]
    want = maxmemory_bytes(LIMIT_MIB * MIB)
    assert want == 44 * MIB
    for pod in pods:
        assert redis_cli(ns, pod, "config get maxmemory") == ["maxmemory", str(want)], pod
        assert redis_cli(ns, pod, "config get maxmemory-policy") == ["maxmemory-policy", "noeviction"], pod

    # One queue on each shard: the server places them, so create until both have one.
    shard_of: dict[str, str] = {}
    for round_ in range(4):
        names = [f"q{round_}-{i}" for i in range(4)]
        for q in names:
            apply(queue(ns, q))
        shard_of.update(placed(ns, names))
        if len(set(shard_of.values())) == 2:
            break
    by_shard = {s: q for q, s in sorted(shard_of.items())}
    assert sorted(by_shard) == [f"{POOL}-0", f"{POOL}-1"], shard_of
    full_shard, other_shard = f"{POOL}-0", f"{POOL}-1"
    full_q, other_q = by_shard[full_shard], by_shard[other_shard]
    full_pod = f"{full_shard}-0"
    ready_s = time.monotonic() - t0

    # Fill: batches until the server refuses one; every other answer fails the test.
    c = Client(ns)
    acked, refused, first_id = 0, None, ""
    t1 = time.monotonic()
    for _ in range(MAX_POSTS):
        code, hdr, body = c.post(full_q)
        if code == 507:
            refused = (hdr, body)
            break
        assert code == 201, f"post {acked // BATCH + 1}: {code} {hdr} {body}"
        assert len(body["resources"]) == BATCH, body
        first_id = first_id or body["resources"][0].rsplit("/", 1)[-1]
        acked += BATCH
        assert time.monotonic() - t1 < FILL_SECONDS, f"{acked} acknowledged in {FILL_SECONDS}s and no 507"
    fill_s = time.monotonic() - t1
    assert refused, f"{acked} messages acknowledged and the shard never refused one"
    hdr, body = refused
    assert int(hdr.get("retry-after", "0")) > 0, hdr
    assert body["title"] == "Insufficient storage" and "storage is full" in body["description"], body
    used = int(_info(ns, full_pod)["used_memory"])
    print(
        f"\n{acked} messages acknowledged in {fill_s:.1f}s, then 507 (Retry-After {hdr['retry-after']}); "
        f"used_memory {used / MIB:.1f} MiB of {want / MIB:.0f} MiB"
    )

    # Nothing acknowledged is lost; reads work on the full shard.
    assert c.total(full_q) == acked
    code, _, got = c.call("GET", f"/v2/queues/{full_q}/messages/{first_id}")
    assert code == 200 and got["body"]["pad"] == BODY, (code, got)
    code, _, page = c.call("GET", f"/v2/queues/{full_q}/messages?echo=true&limit=5")
    assert code == 200 and len(page["messages"]) == 5, (code, page)
    # A claim works, the shard still refuses posts, and a delete with the claim works.
    code, _, claim = c.call("POST", f"/v2/queues/{full_q}/claims?limit=5", {"ttl": 60, "grace": 60})
    assert code == 201 and len(claim["messages"]) == 5, (code, claim)
    code, hdr, body = c.post(full_q)
    assert code == 507 and hdr.get("retry-after"), (code, hdr, body)
    code, _, _ = c.call("DELETE", claim["messages"][0]["href"])
    assert code == 204, code
    never_oom_killed(ns, full_pod)
    # The other shard's queue is unaffected.
    code, _, body = c.post(other_q, 10)
    assert code == 201, (code, body)

    # The Pool's status shows the full shard, and the Queues there stay Ready with
    # their messages counted (the operator PUTs every queue on each pass).
    t2 = time.monotonic()
    p = wait_for("Pool status showing the full shard", lambda: shows_full(ns, full_shard, want), timeout=60)
    status_s = time.monotonic() - t2
    entry = next(s for s in p["status"]["shards"] if s["name"] == full_shard)
    print(f"Pool status after {status_s:.1f}s: {entry}\n{condition(p, 'StorageFull')}")
    print(kc("get", "pool", POOL, "-n", ns).stdout)
    assert entry["evictionPolicy"] == "noeviction", entry
    assert int(p["status"]["memory"].rstrip("%")) >= 90, p["status"]["memory"]
    assert condition(p, "NoEviction").get("status") == "True", condition(p, "NoEviction")

    def counted() -> bool:
        st = status(get("queue", ns, full_q))
        return (st.get("messages") or {}).get("total") == acked - 1 and ready("queue", ns, full_q)

    wait_for(f"Queue {full_q} Ready counting {acked - 1} messages", counted, timeout=60, interval=1)
    for q, shard in shard_of.items():
        assert ready("queue", ns, q), (q, shard, condition(get("queue", ns, q), "Ready"))

    # Every server replica has read the shard's capacity (its gauges), so a new queue
    # goes to the other shard.
    for replica, gauges in server_gauges(ns, full_shard).items():
        assert gauges.get("sluice_pool_memory_max_bytes") == want, (replica, gauges)
        assert gauges.get("sluice_pool_memory_used_bytes", 0) >= 0.9 * want, (replica, gauges)
    late = ["late-0", "late-1"]
    for q in late:
        apply(queue(ns, q))
    late_on = placed(ns, late)
    assert set(late_on.values()) == {other_shard}, f"a new queue was placed on the full shard: {late_on}"

    # Deleting messages makes room: pops of 20 (a few MiB), then posts are accepted again.
    popped = 0
    for _ in range(100):
        code, _, body = c.call("DELETE", f"/v2/queues/{full_q}/messages?pop=20")
        assert code == 200, (code, body)
        popped += len(body["messages"])
    code, _, body = c.post(full_q)
    assert code == 201, (code, body)
    assert c.total(full_q) == acked - 1 - popped + BATCH
    for pod in pods:
        never_oom_killed(ns, pod)
    print(
        f"queues placed {ready_s:.1f}s, fill {fill_s:.1f}s, status {status_s:.1f}s, test {time.monotonic() - t0:.1f}s"
    )


def shows_full(ns: str, shard: str, want: int) -> dict[str, Any] | None:
    """shows_full is the Pool when its status shows shard at its limit (want bytes):
    the shard's entry above the high-water mark and the StorageFull condition naming it."""
    p = get("pool", ns, POOL)
    entry: dict[str, Any] = next((s for s in status(p).get("shards") or [] if s.get("name") == shard), {})
    full = condition(p, "StorageFull")
    ok = entry.get("memoryMaxBytes") == want and entry.get("memoryUsedBytes", 0) >= 0.9 * want
    return p if ok and full.get("status") == "True" and shard in full.get("message", "") else None


def server_gauges(ns: str, shard: str) -> dict[str, dict[str, float]]:
    """server_gauges are each sluice-server pod's sluice_pool_* gauges of shard, scraped
    from the pod itself (the Service would pick one replica)."""
    out = kc("get", "pods", "-n", ns, "-l", "app.kubernetes.io/component=server", "-o", "json")
    pods = [
        p
        for p in json.loads(out.stdout)["items"]
        if p["status"].get("podIP") and not p["metadata"].get("deletionTimestamp")
    ]
    assert pods, "no sluice-server pod"
    got: dict[str, dict[str, float]] = {}
    for pod in pods:
        url = f"http://{pod['status']['podIP']}:{METRICS_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            lines = resp.read().decode().splitlines()
        label = f'{{pool="{shard}"}} '
        got[pod["metadata"]["name"]] = {
            ln.split("{")[0]: float(ln.split()[-1]) for ln in lines if ln.startswith("sluice_pool_") and label in ln
        }
    return got


def _info(ns: str, pod: str) -> dict[str, str]:
    out = redis_cli(ns, pod, "info memory")
    return dict(line.split(":", 1) for line in out if ":" in line)
