"""Queue.spec.subscriptions reconciled through the Zaqar double: created, updated,
renewed and deleted to match the spec, an application's own subscriptions left
alone, rejections and missing Secrets reported in a condition, delivery health
in the status, and the signing secret never in status, conditions or events."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from sluice_operator import kube
from sluice_operator.config import Config
from sluice_operator.handlers import queue as queue_handler

from .kube_double import Patch, Store
from .zaqar_double import ZaqarDouble

SECRET = "s3cr3t-signing-value"


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    monkeypatch.setattr("sluice_operator.events.info", lambda body, reason, message: seen.append((reason, message)))
    monkeypatch.setattr("sluice_operator.events.warn", lambda body, reason, message: seen.append((reason, message)))
    return seen


@pytest.fixture
def server() -> Iterator[ZaqarDouble]:
    d = ZaqarDouble()
    d.state.pools["web-0"] = {"uri": "redis://x", "weight": 100, "flavor": None}
    yield d
    d.stop()


@pytest.fixture
def store(monkeypatch: pytest.MonkeyPatch, server: ZaqarDouble, events: list[tuple[str, str]]) -> Store:
    s = Store()
    monkeypatch.setattr(kube, "get", s.get)
    monkeypatch.setattr(kube, "list_objects", s.list_objects)
    monkeypatch.setattr(kube, "apply", s.apply)
    monkeypatch.setattr(queue_handler, "namespace_terminating", lambda ns: False)
    s.apply({"kind": "Secret", "metadata": {"name": "sluice-server-admin", "namespace": "shop"},
             "stringData": {"token": server.state.token}})  # fmt: skip
    s.apply({"kind": "Secret", "metadata": {"name": "hook", "namespace": "shop"}, "stringData": {"key": SECRET}})
    s.apply(
        {
            "kind": "Pool",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {},
            "status": {"shards": [{"name": "web-0", "registered": True}]},
        }
    )
    return s


def sub(subscriber: str, ttl: int = 86400, **extra: Any) -> dict[str, Any]:
    return {"subscriber": subscriber, "ttl": ttl, **extra}


def put_queue(store: Store, *subs: dict[str, Any]) -> None:
    old = store.get("Queue", "shop", "orders")
    store.objs[("Queue", "shop", "orders")] = {
        "kind": "Queue",
        "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-orders", "generation": 1},
        "spec": {"pool": "web", "subscriptions": list(subs)},
        "status": (old or {}).get("status", {}),
    }


def run(cfg: Config, store: Store) -> dict[str, Any]:
    """run reconciles the Queue once and stores the status it wrote, as the apiserver would."""
    body = store.get("Queue", "shop", "orders")
    assert body is not None
    p = Patch()
    queue_handler.reconcile(cfg, body, p)
    body.setdefault("status", {}).update(p.status)
    store.objs[("Queue", "shop", "orders")] = body
    return body


def on_server(server: ZaqarDouble) -> dict[str, dict[str, Any]]:
    return {s["subscriber"]: s for s in server.state.subs.get(("shop", "orders"), {}).values()}


def writes(server: ZaqarDouble) -> list[tuple[str, str]]:
    return [(m, p) for m, p, _, _ in server.state.requests if m in ("POST", "PATCH", "DELETE") and "subscr" in p]


def cond(body: dict[str, Any], ctype: str) -> dict[str, Any]:
    return next((c for c in body["status"].get("conditions", []) if c["type"] == ctype), {})


def test_subscriptions_created_with_secret_then_steady(
    store: Store, server: ZaqarDouble, events: list[tuple[str, str]]
) -> None:
    cfg = Config(server_url_template=server.url)
    hook = sub("https://hooks.example/a", options={"note": "a"}, secretRef={"name": "hook", "key": "key"})
    put_queue(store, hook, sub("mailto:ops@example.com", ttl=3600, options={"subject": "hi"}))
    body = run(cfg, store)
    have = on_server(server)
    assert set(have) == {"https://hooks.example/a", "mailto:ops@example.com"}
    assert have["https://hooks.example/a"]["options"] == {"note": "a", "secret": SECRET}
    assert have["mailto:ops@example.com"]["ttl"] == 3600
    assert cond(body, "Ready")["status"] == "True"
    assert cond(body, "Subscribed") | {"lastTransitionTime": None} == cond(body, "Subscribed") | {
        "status": "True",
        "reason": "Synced",
        "message": "2 subscription(s) in place",
        "lastTransitionTime": None,
    }
    ids = {s["subscriber"]: s["id"] for s in body["status"]["subscriptions"]}
    assert ids == {k: v["id"] for k, v in have.items()}
    assert [r for r, _ in events].count("SubscriptionCreated") == 2
    assert SECRET not in json.dumps(body["status"]) + json.dumps(events)
    # A second round with nothing changed writes nothing to the server.
    server.state.requests.clear()
    run(cfg, store)
    assert writes(server) == []


def test_changes_update_and_removal_deletes_only_declared(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    put_queue(store, sub("http://a.example/h"), sub("http://b.example/h", secretRef={"name": "hook", "key": "key"}))
    run(cfg, store)
    # An application subscribes through the API: not the Queue's to manage.
    server.state.subs[("shop", "orders")]["app-1"] = {"id": "app-1", "subscriber": "http://app/h", "ttl": 60}
    # ttl changes on a, the Secret rotates under b.
    store.apply({"kind": "Secret", "metadata": {"name": "hook", "namespace": "shop"}, "stringData": {"key": "new"}})
    put_queue(
        store, sub("http://a.example/h", ttl=600), sub("http://b.example/h", secretRef={"name": "hook", "key": "key"})
    )
    server.state.requests.clear()
    run(cfg, store)
    have = on_server(server)
    assert have["http://a.example/h"]["ttl"] == 600 and have["http://b.example/h"]["options"] == {"secret": "new"}
    assert sorted(m for m, _ in writes(server)) == ["PATCH", "PATCH"]
    # Removing a from the spec deletes a, keeps b and the application's own.
    put_queue(store, sub("http://b.example/h", secretRef={"name": "hook", "key": "key"}))
    body = run(cfg, store)
    assert set(on_server(server)) == {"http://b.example/h", "http://app/h"}
    assert [s["subscriber"] for s in body["status"]["subscriptions"]] == ["http://b.example/h"]
    # Removing every subscription deletes the rest of the declared ones.
    put_queue(store)
    body = run(cfg, store)
    assert set(on_server(server)) == {"http://app/h"}
    assert body["status"]["subscriptions"] == [] and cond(body, "Subscribed")["status"] == "True"


def test_rejected_subscriber_and_missing_secret_reported_others_synced(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    put_queue(
        store,
        sub("ftp://files.example/x"),
        sub("http://ok.example/h"),
        sub("http://signed.example/h", secretRef={"name": "nosuch", "key": "key"}),
        sub("http://badkey.example/h", secretRef={"name": "hook", "key": "other"}),
    )
    body = run(cfg, store)
    assert set(on_server(server)) == {"http://ok.example/h"}
    c = cond(body, "Subscribed")
    assert c["status"] == "False" and c["reason"] == "SecretNotFound"
    assert "ftp://files.example/x: The subscriber type of subscription must be supported" in c["message"]
    assert "http://signed.example/h: Secret nosuch does not exist" in c["message"]
    assert "http://badkey.example/h: Secret hook has no key other" in c["message"]
    assert cond(body, "Ready")["status"] == "True"  # the queue itself serves
    # Fixing the spec clears the condition.
    put_queue(store, sub("http://ok.example/h"))
    assert cond(run(cfg, store), "Subscribed")["status"] == "True"


def test_lapsed_subscription_subscribed_again_and_ttl_defaults_to_lasting(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    put_queue(store, {"subscriber": "http://a.example/h"}, sub("http://b.example/h", ttl=120))
    run(cfg, store)
    have = on_server(server)
    assert have["http://a.example/h"]["ttl"] == 10 * 365 * 24 * 3600 and have["http://b.example/h"]["ttl"] == 120
    old = have["http://b.example/h"]["id"]
    server.state.subs[("shop", "orders")].pop(old)  # its ttl lapsed on the server
    body = run(cfg, store)
    new = on_server(server)["http://b.example/h"]["id"]
    assert new != old and {s["id"] for s in body["status"]["subscriptions"]} >= {new}


def test_delivery_health_in_status_redacted(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    put_queue(store, sub("http://a.example/h", secretRef={"name": "hook", "key": "key"}))
    run(cfg, store)
    sid = on_server(server)["http://a.example/h"]["id"]
    assert server.state.deliveries is not None
    server.state.deliveries[("shop", "orders")] = {
        "pending": 3,
        "failed": 1,
        "delivered": 40,
        "last_error": f"POST http://a.example/h?sig={SECRET}: connection refused",
        "last_error_at": "2026-11-23T12:00:00Z",
        "subscriptions": [
            {"id": sid, "subscriber": "http://a.example/h", "pending": 3, "failed": 1, "delivered": 40,
             "last_error": "connection refused", "last_error_at": "2026-11-23T12:00:00Z"},
            {"id": "app-9", "subscriber": "http://app/h", "pending": 0, "failed": 0, "delivered": 1,
             "last_error": None, "last_error_at": None},
        ],
    }  # fmt: skip
    body = run(cfg, store)
    d = body["status"]["deliveries"]
    assert d == {
        "pending": 3,
        "failed": 1,
        "delivered": 40,
        "lastError": "POST http://a.example/h?sig=***: connection refused",
        "lastErrorAt": "2026-11-23T12:00:00Z",
    }
    assert body["status"]["subscriptions"] == [
        {"subscriber": "http://a.example/h", "id": sid, "secretVersion": "2", "pending": 3, "failed": 1,
         "delivered": 40, "lastError": "connection refused", "lastErrorAt": "2026-11-23T12:00:00Z"}
    ]  # fmt: skip
    # A server without the endpoint: no delivery health, the queue still Ready.
    server.state.deliveries = None
    store.objs[("Queue", "shop", "orders")]["status"].pop("deliveries")
    body = run(cfg, store)
    assert "deliveries" not in body["status"] and cond(body, "Ready")["status"] == "True"


def test_queue_deletion_removes_declared_subscriptions(store: Store, server: ZaqarDouble) -> None:
    cfg = Config(server_url_template=server.url)
    put_queue(store, sub("http://a.example/h"))
    run(cfg, store)
    server.state.subs[("shop", "orders")]["app-1"] = {"id": "app-1", "subscriber": "http://app/h", "ttl": 60}
    queue_handler.delete(cfg, store.get("Queue", "shop", "orders"), retry=0)
    assert set(on_server(server)) == {"http://app/h"}


@pytest.mark.parametrize("seed", range(4))
def test_generated_spec_histories_converge(store: Store, server: ZaqarDouble, seed: int) -> None:
    """Random edits of the spec (add, drop, change ttl/options/secret) and of the
    server (an expired subscription, an application's own one): after every
    reconcile the server holds exactly the declared ones, as declared, plus the
    application's, and a second reconcile writes nothing."""
    rng = random.Random(seed)
    cfg = Config(server_url_template=server.url)
    urls = [f"http://h{i}.example/n" for i in range(5)]
    spec: dict[str, dict[str, Any]] = {}
    apps: set[str] = set()
    for step in range(20):
        action = rng.choice(["add", "add", "drop", "ttl", "options", "secret", "expire", "app"])
        if action == "add":
            u = rng.choice(urls)
            spec[u] = sub(u, ttl=rng.choice([60, 300, 86400]))
            if rng.random() < 0.5:
                spec[u]["secretRef"] = {"name": "hook", "key": "key"}
        elif action == "drop" and spec:
            spec.pop(rng.choice(sorted(spec)))
        elif action == "ttl" and spec:
            spec[rng.choice(sorted(spec))]["ttl"] = rng.choice([60, 300, 86400])
        elif action == "options" and spec:
            spec[rng.choice(sorted(spec))]["options"] = {"n": rng.randrange(3)}
        elif action == "secret":
            value = f"secret-{step}"
            store.apply({"kind": "Secret", "metadata": {"name": "hook", "namespace": "shop"},
                         "stringData": {"key": value}})  # fmt: skip
        elif action == "expire":
            live = server.state.subs.get(("shop", "orders"), {})
            if live:
                live.pop(rng.choice(sorted(live)))
        elif action == "app":
            aid = f"app-{step}"
            apps.add(f"http://app{step}/h")
            server.state.subs.setdefault(("shop", "orders"), {})[aid] = {
                "id": aid, "subscriber": f"http://app{step}/h", "ttl": 60, "age": 0, "options": {}}  # fmt: skip
        put_queue(store, *spec.values())
        body = run(cfg, store)
        have = on_server(server)
        secret = base64.b64decode((store.get("Secret", "shop", "hook") or {})["data"]["key"]).decode()
        for u, want in spec.items():
            opts = dict(want.get("options") or {})
            if "secretRef" in want:
                opts["secret"] = secret
            assert have[u]["ttl"] == want["ttl"] and have[u]["options"] == opts, (step, action, u)
        live_apps = {u for u in have if u.startswith("http://app")}
        assert set(have) == set(spec) | live_apps and live_apps <= apps, (step, action)
        # A reconcile that did not finish says why in its Ready condition.
        assert "subscriptions" in body["status"], (step, action, body["status"].get("conditions"))
        assert sorted(s["subscriber"] for s in body["status"]["subscriptions"]) == sorted(spec)
        assert secret not in json.dumps(body["status"])
        server.state.requests.clear()
        run(cfg, store)
        assert writes(server) == [], (step, action)
