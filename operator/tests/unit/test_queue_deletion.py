"""Deleting a Queue: its dead-letter queue's reservation is released when nothing
else uses it, and a status tick racing the deletion never re-creates the queue."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from sluice_operator import kube
from sluice_operator.config import Config
from sluice_operator.handlers import queue as queue_handler
from sluice_operator.handlers import server

from .kube_double import Patch


class FakeAPI:
    """The calls queue.py makes, recorded; queues hold message counts."""

    def __init__(self, queues: dict[str, int] | None = None, slow_put: threading.Event | None = None) -> None:
        self.queues = dict(queues or {})
        self.calls: list[tuple[str, str]] = []
        self.slow_put = slow_put
        self.put_started = threading.Event()
        self.closed = 0  # times a handler closed this client after using it

    def __enter__(self) -> FakeAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed += 1

    def put_flavor(self, name: str, pools: list[str], project: str = "") -> None:
        pass

    def put_queue(self, project: str, name: str, md: dict[str, Any]) -> bool:
        self.put_started.set()
        if self.slow_put:
            self.slow_put.wait(5)
        self.calls.append(("put", name))
        new = name not in self.queues
        self.queues.setdefault(name, 0)
        return new

    def get_queue(self, project: str, name: str) -> dict[str, Any]:
        return {}

    def patch_queue(self, *a: Any) -> None:
        pass

    def queue_stats(self, project: str, name: str) -> tuple[dict[str, int], float]:
        n = self.queues.get(name, 0)
        return {"free": n, "claimed": 0, "total": n}, 0.0

    def deliveries(self, project: str, name: str) -> None:
        return None  # a server without the deliveries endpoint

    def delete_queue(self, project: str, name: str) -> None:
        self.calls.append(("delete", name))
        self.queues.pop(name, None)


def queue(name: str, dlq: str | None = None, uid: str | None = None, **meta: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"pool": "web"}
    if dlq:
        spec["deadLetter"] = {"queue": dlq, "maxClaimCount": 3}
    return {
        "kind": "Queue",
        "metadata": {"name": name, "namespace": "shop", "uid": uid or f"uid-{name}", **meta},
        "spec": spec,
    }


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    state: dict[str, Any] = {"queues": [], "api": FakeAPI(), "applied": []}
    pool = {
        "kind": "Pool",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-web"},
        "spec": {},
        "status": {"shards": [{"name": "web-0", "registered": True}]},
    }
    monkeypatch.setattr(kube, "get", lambda kind, ns, name: pool if kind == "Pool" else None)
    monkeypatch.setattr(
        kube, "list_objects", lambda kind, ns, sel=None: [pool] if kind == "Pool" else list(state["queues"])
    )
    monkeypatch.setattr(kube, "apply", lambda obj: (state["applied"].append(obj), (obj, "created"))[1])
    monkeypatch.setattr(server, "api", lambda cfg, ns: state["api"])
    monkeypatch.setattr(queue_handler, "namespace_terminating", lambda ns: False)
    monkeypatch.setattr("sluice_operator.events.info", lambda *a, **k: None)
    monkeypatch.setattr("sluice_operator.events.warn", lambda *a, **k: None)
    return state


def test_dead_letter_in_use_by_other_live_queues() -> None:
    q = queue("orders", dlq="orders-dlq")
    assert not queue_handler.dead_letter_in_use(q, [q])
    assert queue_handler.dead_letter_in_use(q, [q, queue("orders-dlq")])
    assert queue_handler.dead_letter_in_use(q, [q, queue("returns", dlq="orders-dlq")])
    # Being deleted, or in another project, does not count.
    assert not queue_handler.dead_letter_in_use(q, [queue("orders-dlq", deletionTimestamp="2026-01-01T00:00:00Z")])
    other = queue("orders-dlq")
    other["spec"]["project"] = "elsewhere"
    assert not queue_handler.dead_letter_in_use(q, [other])


def test_empty_unused_dead_letter_queue_goes_with_its_queue(env: dict[str, Any]) -> None:
    env["api"] = FakeAPI({"orders": 0})
    env["queues"] = [queue("orders", dlq="orders-dlq")]
    queue_handler.delete(Config(), queue("orders", dlq="orders-dlq"), retry=0)
    assert env["api"].calls == [("delete", "orders"), ("delete", "orders-dlq")]
    assert env["api"].closed == 1


def test_dead_letter_queue_kept_with_messages_or_other_users(env: dict[str, Any]) -> None:
    env["api"] = FakeAPI({"orders": 0, "orders-dlq": 2})
    queue_handler.delete(Config(), queue("orders", dlq="orders-dlq"), retry=0)
    assert env["api"].calls == [("delete", "orders")]

    env["api"] = FakeAPI({"a": 0})
    env["queues"] = [queue("a", dlq="shared-dlq"), queue("b", dlq="shared-dlq")]
    queue_handler.delete(Config(), queue("a", dlq="shared-dlq"), retry=0)
    assert env["api"].calls == [("delete", "a")]


def test_retained_queue_keeps_its_dead_letter_queue(env: dict[str, Any]) -> None:
    q = queue("orders", dlq="orders-dlq")
    q["spec"]["deletionPolicy"] = "Retain"
    queue_handler.delete(Config(), q, retry=0)
    assert env["api"].calls == []


def test_tick_racing_deletion_does_not_recreate_the_queue(env: dict[str, Any]) -> None:
    release = threading.Event()
    env["api"] = FakeAPI({"orders": 0}, slow_put=release)
    q = queue("orders", uid="uid-race")

    tick = threading.Thread(target=queue_handler.reconcile, args=(Config(), q, Patch()))
    tick.start()
    assert env["api"].put_started.wait(5)
    deleter = threading.Thread(target=queue_handler.delete, args=(Config(), q, 0))
    deleter.start()
    time.sleep(0.2)
    assert env["api"].calls == []  # the deletion waits for the tick's server calls
    release.set()
    tick.join(5)
    deleter.join(5)
    assert env["api"].calls == [("put", "orders"), ("delete", "orders")]
    # A tick that read the Queue before its deletion and runs only now does nothing.
    queue_handler.reconcile(Config(), q, Patch())
    assert env["api"].calls == [("put", "orders"), ("delete", "orders")]
    assert "orders" not in env["api"].queues


def test_queues_sharing_a_server_queue_generated(env: dict[str, Any]) -> None:
    """Generated histories of Queues that name a few server-side queues (several
    Queues per name), created, reconciled and deleted in random order, with the
    claims an index of every live Queue gives: the server queue is created by its
    owner (the oldest live Queue naming it) alone, each other Queue is Ready False
    (Conflict) naming that owner, and the queue goes only with the last Queue
    naming it."""
    import random

    rng = random.Random(19)
    for case in range(60):
        api = env["api"] = FakeAPI()
        live: list[dict[str, Any]] = []
        made = 0
        for _ in range(rng.randint(3, 14)):
            if live and rng.random() < 0.35:
                q = live.pop(rng.randrange(len(live)))
                gone = {**q, "metadata": {**q["metadata"], "deletionTimestamp": "2026-11-29T00:00:00Z"}}
                claims = [
                    queue_handler.claim(o)
                    for o in [*live, gone]
                    if queue_handler.identity(o) == queue_handler.identity(q)
                ]
                queue_handler.delete(Config(), gone, retry=0, claims=claims)
                sname = queue_handler.identity(q)[1]
                still = [o for o in live if queue_handler.identity(o)[1] == sname]
                assert (sname in api.queues) == bool(still), (case, still, api.calls)
                continue
            made += 1
            q = queue(f"q{made}", uid=f"u{case}-{made}", creationTimestamp=f"2026-11-29T00:00:{made:02d}Z")
            q["spec"]["name"] = rng.choice(["orders", "invoices"])
            live.append(q)
            for o in rng.sample(live, len(live)):
                claims = [
                    queue_handler.claim(x) for x in live if queue_handler.identity(x) == queue_handler.identity(o)
                ]
                patch = Patch()
                before = list(api.calls)
                queue_handler.reconcile(Config(), o, patch, claims=claims)
                first = min(
                    (x for x in live if queue_handler.identity(x) == queue_handler.identity(o)),
                    key=lambda x: x["metadata"]["creationTimestamp"],
                )
                ready = next(c for c in patch.status["conditions"] if c["type"] == "Ready")
                if first is o:
                    assert ready["status"] == "True", (case, ready)
                else:
                    assert ready["reason"] == "Conflict" and f"Queue {first['metadata']['name']}" in ready["message"]
                    assert api.calls == before, (case, "a Queue that is not the owner reached the server")
