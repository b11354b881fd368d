"""Queue subscriptions against a real sluice-server process (memory store) on
loopback: the shapes the operator reads (subscription list, deliveries) are
the server's own, its webhook POST is signed with the Secret's value, and
delivery health reaches the status."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import requests

from sluice_operator import kube
from sluice_operator.handlers import subscriptions
from sluice_operator.serverapi import ServerAPI

from ..support import QUICK_STOP, SERVER, free_port, need_file
from .kube_double import Store

TOKEN = "optoken"
SECRET = "whsec-unit"


@pytest.fixture
def api() -> Iterator[ServerAPI]:
    need_file(SERVER, "make build-server")
    port = free_port()
    proc = subprocess.Popen(
        [
            str(SERVER),
            "--listen",
            f"127.0.0.1:{port}",
            "--store",
            "memory",
            "--admin-token",
            TOKEN,
            *QUICK_STOP,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                requests.get(base + "/", timeout=1)
                break
            except requests.RequestException:
                time.sleep(0.1)
        yield ServerAPI(base, TOKEN)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def hooks() -> Iterator[tuple[str, list[tuple[dict[str, str], bytes]]]]:
    got: list[tuple[dict[str, str], bytes]] = []

    class H(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            pass

        def do_POST(self) -> None:
            got.append((dict(self.headers), self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self.send_response(204)
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", got
    httpd.shutdown()
    httpd.server_close()


def wait(what: str, fn: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if v := fn():
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_sync_against_the_real_server(
    monkeypatch: pytest.MonkeyPatch, api: ServerAPI, hooks: tuple[str, list[tuple[dict[str, str], bytes]]]
) -> None:
    url, got = hooks
    store = Store()
    monkeypatch.setattr(kube, "get", store.get)
    monkeypatch.setattr("sluice_operator.events.info", lambda *a, **k: None)
    store.apply({"kind": "Secret", "metadata": {"name": "hook", "namespace": "shop"}, "stringData": {"key": SECRET}})
    api.put_queue("shop", "orders", {})
    body: dict[str, Any] = {
        "metadata": {"name": "orders", "namespace": "shop"},
        "spec": {
            "pool": "web",
            "subscriptions": [
                {"subscriber": url, "options": {"note": "a"}, "secretRef": {"name": "hook", "key": "key"}},
                {"subscriber": "mailto:ops@example.com", "ttl": 3600},
                {"subscriber": "ftp://files.example/x"},  # the schema would refuse it; the server does too
            ],
        },
        "status": {},
    }
    out = subscriptions.sync(api, body, "shop", "orders")
    assert set(out.managed) == {url, "mailto:ops@example.com"}
    assert [r for r, _ in out.problems] == ["SubscriptionRejected"] and "ftp://files.example/x" in out.problems[0][1]
    listed = {s["subscriber"]: s for s in api.list_subscriptions("shop", "orders")}
    # The server never shows a secret back; the webhook's signature below proves it has it.
    assert listed[url]["options"] == {"note": "a", "secret": "<redacted>"}
    assert listed[url]["ttl"] == subscriptions.LASTING_TTL and listed["mailto:ops@example.com"]["ttl"] == 3600

    # Steady: a second sync against the server's own answers changes nothing.
    body["status"] = subscriptions.status_fields(out, None, [], 1, 3)
    assert SECRET not in json.dumps(body["status"])
    updates: list[str] = []
    real_update = api.update_subscription
    monkeypatch.setattr(
        api, "update_subscription", lambda p, q, sid, *a: (updates.append(sid), real_update(p, q, sid, *a))
    )
    again = subscriptions.sync(api, body, "shop", "orders")
    assert again.managed == out.managed and updates == []
    assert {s["subscriber"]: s["id"] for s in api.list_subscriptions("shop", "orders")} == out.managed

    resp = requests.post(
        api.base + "/v2/queues/orders/messages",
        json={"messages": [{"ttl": 300, "body": {"n": 1}}]},
        headers={"Client-ID": "3381af92-2b9e-11e3-b191-71861300734c", "X-Project-ID": "shop"},
        timeout=5,
    )
    assert resp.status_code == 201, resp.text
    headers, raw = wait("webhook", lambda: got and got[0])
    assert json.loads(raw)["body"] == {"n": 1}
    assert headers["X-Sluice-Signature"] == "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()

    def delivered() -> dict[str, Any] | None:
        d = api.deliveries("shop", "orders")
        return d if d and d["delivered"] >= 1 else None

    health = wait("delivered count", delivered)
    fields = subscriptions.status_fields(again, health, [], 1, 3)
    mine = next(s for s in fields["subscriptions"] if s["subscriber"] == url)
    assert mine["delivered"] == 1 and fields["deliveries"]["delivered"] >= 1
    assert SECRET not in json.dumps(fields)

    # A rotated Secret (new resourceVersion) is sent again and signs from then on.
    store.apply({"kind": "Secret", "metadata": {"name": "hook", "namespace": "shop"}, "stringData": {"key": "rotated"}})
    body["status"] = subscriptions.status_fields(again, None, [], 1, 3)
    rotated = subscriptions.sync(api, body, "shop", "orders")
    assert updates == [out.managed[url]]
    body["status"] = subscriptions.status_fields(rotated, None, [], 1, 3)
    assert subscriptions.sync(api, body, "shop", "orders").managed == out.managed and len(updates) == 1
    time.sleep(1.2)  # the delivery engine sees a subscription change within a second (its cache)
    requests.post(
        api.base + "/v2/queues/orders/messages",
        json={"messages": [{"ttl": 300, "body": {"n": 2}}]},
        headers={"Client-ID": "3381af92-2b9e-11e3-b191-71861300734c", "X-Project-ID": "shop"},
        timeout=5,
    )
    headers, raw = wait("second webhook", lambda: len(got) > 1 and got[-1])
    assert headers["X-Sluice-Signature"] == "sha256=" + hmac.new(b"rotated", raw, hashlib.sha256).hexdigest()

    # Removing the mailto subscriber from the spec deletes it; the webhook stays.
    body["spec"]["subscriptions"] = body["spec"]["subscriptions"][:1]
    subscriptions.sync(api, body, "shop", "orders")
    assert [s["subscriber"] for s in api.list_subscriptions("shop", "orders")] == [url]
