"""Faults that kill no process, on real pods: one Benchmark fills a shard of
a 2-shard Pool (test_capacity's: a 64Mi limit, maxmemory 44 MiB) to its
maxmemory, then partitions it, then delays its traffic, each from inside the
shard pod's own network namespace (an ephemeral container running
`sluice-bench fault`). A probe beside the load posts to a queue on each
shard every quarter second. Asserted: nothing acknowledged is lost; the
filled shard's posts answer 507 and the partitioned shard's 503, both with
Retry-After and within the storage timeout's bound; the delayed shard's
posts are slower and succeed; the other shard's queue sees no error
throughout; every fault is undone on its own time (posts succeed again, no
filler key left) and no shard container restarts. Then a notifications run
whose webhook receiver is slow and fails half its calls for a while."""

from __future__ import annotations

import datetime as dt
import http.client
import json
import pathlib
import statistics
import threading
import time
import urllib.parse
import uuid

import pytest
import yaml

from ..integration.conftest import apply, kc, wait_for
from .conftest import RELEASE_NS, client_token, operator_pods, server_url
from .test_benchmarks import benchmark, run
from .test_capacity import capacity_pool, never_oom_killed, placed, redis_cli
from .test_faults import diagnostics, figures, reported
from .test_pools import ready

ROOT = pathlib.Path(__file__).resolve().parents[3]
POOL = "nokill"
# The server's --storage-timeout (5 s) bounds a request to a cut shard; the
# probe allows the kubelet-side scheduling noise of a busy 2-core node on top.
STORAGE_TIMEOUT = 5.0
ANSWER_BOUND = STORAGE_TIMEOUT + 2.5
LATENCY_MS, JITTER_MS = 100, 20
# Each fault lasts 8 s and the next starts 10 s after it ends: SETTLE for
# the shard to be served again, then seconds in which every post must succeed.
FILL, PARTITION, DELAY = (
    {"at": 4, "action": "fill", "duration": 8},
    {"at": 22, "action": "partition", "duration": 8},
    {"at": 40, "action": "delay", "duration": 8, "latencyMs": LATENCY_MS, "jitterMs": JITTER_MS},
)
RUN_SECONDS = 58
SETTLE = 6.0
PROBE_INTERVAL = 0.25


def grant_faults(ns: str) -> None:
    """grant_faults binds, in ns, the rules of the opt-in role (deploy/rbac-faults.yaml's
    sluice-operator-faults) to the operator's ServiceAccount, as a user who allows
    these faults there does."""
    docs = yaml.safe_load_all((ROOT / "operator/deploy/rbac-faults.yaml").read_text())
    rules = next(d["rules"] for d in docs if d and d["metadata"]["name"] == "sluice-operator-faults")
    account = operator_pods()[0]["spec"]["serviceAccountName"]
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": "faults", "namespace": ns},
    }
    apply({**role, "rules": rules})
    apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "faults", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "faults"},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": RELEASE_NS}],
        }
    )


class Probe:
    """Probe posts one small message to a queue every PROBE_INTERVAL on its own
    connection, recording (unix time, status, seconds, Retry-After) until stopped
    or bounded by count."""

    def __init__(self, ns: str, queue: str, limit: int) -> None:
        self.ns, self.queue, self.limit = ns, queue, limit
        self.seen: list[tuple[float, int, float, str]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _conn(self) -> http.client.HTTPConnection:
        url = urllib.parse.urlsplit(server_url(self.ns))
        return http.client.HTTPConnection(url.hostname or "", url.port, timeout=15)

    def _loop(self) -> None:
        headers = {
            "X-Auth-Token": client_token(self.ns),
            "X-Project-ID": self.ns,
            "Client-ID": str(uuid.uuid4()),
            "Content-Type": "application/json",
        }
        body = json.dumps({"messages": [{"ttl": 600, "body": {"probe": True}}]})
        conn = self._conn()
        for _ in range(self.limit):
            if self.stop.is_set():
                break
            t0, w0 = time.monotonic(), time.time()
            try:
                conn.request("POST", f"/v2/queues/{self.queue}/messages", body=body, headers=headers)
                resp = conn.getresponse()
                resp.read()
                code, retry = resp.status, resp.getheader("Retry-After") or ""
            except (OSError, http.client.HTTPException):
                code, retry = 0, ""
                conn.close()
                conn = self._conn()
            took = time.monotonic() - t0
            self.seen.append((w0, code, took, retry))
            self.stop.wait(max(0.0, PROBE_INTERVAL - took))
        conn.close()

    def between(self, start: float, end: float) -> list[tuple[float, int, float, str]]:
        return [s for s in self.seen if start <= s[0] < end]


def _unix(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def nokill(ns: str) -> str:
    apply(capacity_pool(ns, POOL))
    grant_faults(ns)
    wait_for(f"Pool {POOL} Ready", lambda: ready("pool", ns, POOL), timeout=300, interval=1)
    return ns


def test_fill_partition_and_delay_one_shard(nokill: str) -> None:
    ns = nokill
    # A probe queue on each shard: the server places them, so create until both have one.
    shard_of: dict[str, str] = {}
    for round_ in range(4):
        names = [f"probe{round_}-{i}" for i in range(4)]
        for q in names:
            apply(
                {
                    "apiVersion": "sluice.dev/v1alpha1",
                    "kind": "Queue",
                    "metadata": {"name": q, "namespace": ns},
                    "spec": {"pool": POOL},
                }
            )
        shard_of.update(placed(ns, names))
        if len(set(shard_of.values())) == 2:
            break
    by_shard = {s: q for q, s in sorted(shard_of.items())}
    hit, other = Probe(ns, by_shard[f"{POOL}-0"], 1000), Probe(ns, by_shard[f"{POOL}-1"], 1000)
    at = {"target": "shard", "pool": POOL, "shard": 0}
    spec = benchmark(
        ns, "nokill", pool=POOL, duration=RUN_SECONDS, faults=[{**f, **at} for f in (FILL, PARTITION, DELAY)]
    )
    for p in (hit, other):
        p.thread.start()
    try:
        b = run(ns, spec)
    finally:
        for p in (hit, other):
            p.stop.set()
            p.thread.join(timeout=30)
    st = b["status"]
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"), diagnostics(ns, "nokill"))
    assert st["results"]["lost"] == 0, st["results"]
    st = reported(ns, "nokill")
    fill, part, delay = st["faults"]
    for f in (fill, part, delay):
        assert f["result"] == "Injected" and f["pod"] == f"{POOL}-0-0" and f["container"], f
    print(f"\nfill: {figures(fill)}\npartition: {figures(part)}\ndelay: {figures(delay)}")
    for f in (fill, part, delay):
        print(f"{f['name']}: {f.get('outcome')}")
    windows = {
        k: (_unix(f["injected"]), _unix(f["until"])) for k, f in (("fill", fill), ("partition", part), ("delay", delay))
    }

    def codes(rows: list[tuple[float, int, float, str]]) -> dict[int, int]:
        out: dict[int, int] = {}
        for _, code, _, _ in rows:
            out[code] = out.get(code, 0) + 1
        return out

    # The other shard's queue: no error at any time, and not slowed by the delay.
    assert other.seen and all(code == 201 for _, code, _, _ in other.seen), codes(other.seen)
    # The hit shard's queue before the first fault: served.
    before = hit.between(0, windows["fill"][0])
    assert before and all(code == 201 for _, code, _, _ in before), codes(before)

    # Fill: posts refused with 507 and Retry-After while full; all answered at once.
    full = hit.between(*windows["fill"])
    refused = [s for s in full if s[1] == 507]
    assert refused, f"the filled shard never refused a post: {codes(full)}"
    assert all(s[1] in (201, 507) for s in full), codes(full)
    assert all(int(s[3] or 0) > 0 for s in refused), refused[:3]
    assert (fill.get("errors") or {}).keys() <= {"http_507"}, fill
    # Partition: posts answer 503 with Retry-After within the storage timeout's bound.
    cut = hit.between(*windows["partition"])
    failed = [s for s in cut if s[1] != 201]
    assert failed and all(s[1] == 503 and int(s[3] or 0) > 0 for s in failed), codes(cut)
    assert max(s[2] for s in cut) <= ANSWER_BOUND, max(s[2] for s in cut)
    assert (part.get("errors") or {}).keys() <= {"http_503"}, part
    retry = (part.get("retryAfter") or {}).get("http_503") or {}
    assert retry.get("responses") == (part.get("errors") or {}).get("http_503"), part
    # Delay: the shard's posts succeed, slower than the other shard's.
    slow = [s for s in hit.between(windows["delay"][0] + 1, windows["delay"][1]) if s[1] == 201]
    fast = [s for s in other.between(windows["delay"][0] + 1, windows["delay"][1])]
    assert slow and fast, (codes(hit.between(*windows["delay"])), len(fast))
    slow_p50, fast_p50 = statistics.median(s[2] for s in slow), statistics.median(s[2] for s in fast)
    print(
        f"delay {LATENCY_MS}+-{JITTER_MS} ms: posts p50 {slow_p50 * 1000:.0f} ms there, "
        f"{fast_p50 * 1000:.0f} ms on the other shard"
    )
    assert slow_p50 >= 2 * (LATENCY_MS - JITTER_MS) / 1000, slow_p50
    assert fast_p50 < slow_p50 / 2, (fast_p50, slow_p50)
    # Each fault is undone on its own time: posts succeed again after each window.
    for name, (_, end) in windows.items():
        nxt = min([w[0] for w in windows.values() if w[0] > end] + [hit.seen[-1][0]])
        back = next((s[0] for s in hit.between(end, nxt) if s[1] == 201 and s[2] < 0.1), None)
        print(f"{name}: the shard's posts fast and served again {back - end:.2f} s after it was undone" if back else "")
        after = hit.between(end + SETTLE, nxt)
        assert after and all(s[1] == 201 for s in after), (name, codes(after))
    pod = f"{POOL}-0-0"
    assert redis_cli(ns, pod, "--scan --pattern 'sluice-fault:*'") == [], "filler keys left behind"
    for i in range(2):
        never_oom_killed(ns, f"{POOL}-{i}-0")
    print(kc("get", "pods", "-n", ns, "-l", f"sluice.dev/pool={POOL}").stdout)


def test_slow_receiver(nokill: str) -> None:
    """A webhook receiver that answers late and fails half its calls for 8 s of a
    notifications run: the server delivers every message anyway (lost 0: a call
    the receiver failed is not a delivery), and the receiver's counts say the
    fault happened."""
    ns = nokill
    fault = {"at": 4, "action": "slow-receiver", "target": "receiver", "duration": 8, "latencyMs": 200}
    b = run(
        ns,
        benchmark(
            ns, "slow-recv", scenario="notifications", pool=POOL, duration=16, faults=[{**fault, "failPercent": 50}]
        ),
    )
    st = b["status"]
    assert st["phase"] == "Succeeded", (st.get("reason"), st.get("message"), diagnostics(ns, "slow-recv"))
    r = st["results"]
    assert r["lost"] == 0 and r["produced"] > 0, r
    (f,) = st["faults"]
    assert f["result"] == "Injected" and f["name"] == "slow-receiver for 8s" and f["until"], f
    counts = r["operations"]["notify"].get("counts") or {}
    print(f"\nslow-receiver: {counts}, notify p99 {r['operations']['notify'].get('p99Ms')} ms, results {r}")
    assert counts.get("receiver_fault_failed", 0) > 0, counts
    assert counts.get("receiver_fault_delayed", 0) >= counts["receiver_fault_failed"], counts
